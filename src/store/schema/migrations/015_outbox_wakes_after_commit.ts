// The outbox trigger (migration 005) stops notifying. A NOTIFY is queued at commit under one
// database-wide lock that is held through the commit's flush, so every transaction that wrote a
// delivery flushed one at a time, across every organization of the database. The statements that
// insert run events now report the deliveries the trigger writes (the same endpoints it matches),
// and the node announces them once committed, coalesced (store/engine/coalescing-notifier.ts), as it
// does new runs. The trigger still writes every delivery in the events' statement: nothing is
// reported without having happened. A migration is a snapshot: the function is written out again.
// Upgrading: a node still running code from before this migration reports no deliveries on
// PostgreSQL and so announces none; until it is replaced, the deliveries it writes wait for the
// workers' poll (WEBHOOK_POLL_INTERVAL_MS). Nothing is lost either way.
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';

const OUTBOX_WITHOUT_NOTIFY = `create or replace function dialtone_webhook_outbox() returns trigger language plpgsql as $$
begin
  insert into webhook_deliveries (endpoint_id, message_id, event_type, run_id, seq, payload, status, attempt_count, next_attempt_at, created_at, updated_at)
  select e.id, 'msg_run' || ev.run_id || '_' || ev.seq, m.webhook_type, ev.run_id, ev.seq,
    jsonb_build_object('run', to_jsonb(r), 'event', jsonb_build_object('seq', ev.seq, 'type', ev.type, 'at', ev.at, 'data', ev.data))::text,
    'pending', 0, ev.at, ev.at, ev.at
  from new_events ev
    cross join lateral (select case when ev.type in ('completed', 'busy', 'no_answer', 'rejected', 'failed', 'canceled', 'expired')
      then 'run.ended' else 'run.' || ev.type end as webhook_type) m
    join workflow_runs r on r.id = ev.run_id
    join webhook_endpoints e on e.org_id = r.org_id and e.enabled = 1
      and (e.event_filter = '' or strpos(e.event_filter, ',' || m.webhook_type || ',') > 0);
  return null;
end
$$`;

export function up015(dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    if (dialect === 'postgres') await sql.raw(OUTBOX_WITHOUT_NOTIFY).execute(db);
  };
}
