// What the agent runtime reports of its call (docs/design.md, "Agent runtime hand-off"): the run's
// structured result, kept as the JSON text the runtime sent (TEXT in both stores, as
// initial_context is), and the outbox trigger taught the two new kinds of run event. A `result`
// event is reported as `run.result` (the rule `run.<type>` already gives it); an `agent.*` event,
// whatever its name, as `run.agent_event`, so an endpoint subscribes to one type for all of them.
// A migration is a snapshot: the function is written out again whole (after migration 015's).
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';

const OUTBOX_WITH_AGENT_EVENTS = `create or replace function dialtone_webhook_outbox() returns trigger language plpgsql as $$
begin
  insert into webhook_deliveries (endpoint_id, message_id, event_type, run_id, seq, payload, status, attempt_count, next_attempt_at, created_at, updated_at)
  select e.id, 'msg_run' || ev.run_id || '_' || ev.seq, m.webhook_type, ev.run_id, ev.seq,
    jsonb_build_object('run', to_jsonb(r), 'event', jsonb_build_object('seq', ev.seq, 'type', ev.type, 'at', ev.at, 'data', ev.data))::text,
    'pending', 0, ev.at, ev.at, ev.at
  from new_events ev
    cross join lateral (select case
      when ev.type in ('completed', 'busy', 'no_answer', 'rejected', 'failed', 'canceled', 'expired') then 'run.ended'
      when ev.type like 'agent.%' then 'run.agent_event'
      else 'run.' || ev.type end as webhook_type) m
    join workflow_runs r on r.id = ev.run_id
    join webhook_endpoints e on e.org_id = r.org_id and e.enabled = 1
      and (e.event_filter = '' or strpos(e.event_filter, ',' || m.webhook_type || ',') > 0);
  return null;
end
$$`;

export function up020(dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema.alterTable('workflow_runs').addColumn('result', 'text').execute();
    if (dialect === 'postgres') await sql.raw(OUTBOX_WITH_AGENT_EVENTS).execute(db);
  };
}
