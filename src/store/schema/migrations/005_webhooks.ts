// Webhooks: the organization's endpoints, the outbox of deliveries (one row per message and
// endpoint, written in the transaction of the run event it reports) and each delivery's attempts.
// On PostgreSQL the outbox is written by a trigger on run_events (see WEBHOOK_OUTBOX_TRIGGER).
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';
import { column } from './columns.js';

/**
 * PostgreSQL writes every run event's deliveries itself, in the statement that inserts the events:
 * one statement-level trigger, whose plan the server keeps per session, so the run-creating and
 * transition statements stay as small as without webhooks (planning a larger statement on every
 * request cost a tenth of the creation throughput). It builds each payload from the run's row as
 * the statement left it, for the enabled, subscribed endpoints of the run's organization, and
 * notifies the delivery workers. The message id is webhooks/event-types.ts's runMessageId, and
 * the type its webhookTypeForState (every terminal state is `run.ended`): a migration is a
 * snapshot, so they are written out here rather than imported.
 */
const WEBHOOK_OUTBOX_TRIGGER = [
  `create function dialtone_webhook_outbox() returns trigger language plpgsql as $$
declare
  written bigint;
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
  get diagnostics written = row_count;
  if written > 0 then
    perform pg_notify('dialtone_webhooks', ''); -- store/statements/webhook-statements.ts's WEBHOOK_CHANNEL
  end if;
  return null;
end
$$`,
  `create trigger run_events_webhook_outbox after insert on run_events
  referencing new table as new_events for each statement execute function dialtone_webhook_outbox()`,
];

export function up005(dialect: DialectName) {
  const c = column(dialect);
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema
      .createTable('webhook_endpoints')
      .addColumn('id', c.idType, c.id)
      .addColumn('org_id', c.refType, (col) => col.notNull().references('organizations.id'))
      .addColumn('url', 'text', (col) => col.notNull())
      .addColumn('description', 'text')
      // The subscribed types as `,run.queued,run.ended,` (so one `position`/`instr` test matches a
      // type in both stores); empty means every type.
      .addColumn('event_filter', 'text', (col) => col.notNull())
      .addColumn('enabled', 'integer', (col) => col.notNull().check(sql`enabled in (0, 1)`))
      .addColumn('disabled_reason', 'text')
      .addColumn('secret_encrypted', 'text', (col) => col.notNull())
      // After a rotation the old secret signs beside the new one until it expires.
      .addColumn('previous_secret_encrypted', 'text')
      .addColumn('previous_secret_expires_at', 'bigint')
      // Start of the current run of failures (null while the last attempt succeeded).
      .addColumn('failing_since', 'bigint')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .execute();
    await db.schema.createIndex('webhook_endpoints_org_idx').on('webhook_endpoints').columns(['org_id', 'id']).execute();

    await db.schema
      .createTable('webhook_deliveries')
      .addColumn('id', c.idType, c.id)
      .addColumn('endpoint_id', c.refType, (col) => col.notNull().references('webhook_endpoints.id').onDelete('cascade'))
      .addColumn('message_id', 'text', (col) => col.notNull())
      .addColumn('event_type', 'text', (col) => col.notNull())
      // The run and event it reports; null for `webhook.test`.
      .addColumn('run_id', c.refType)
      .addColumn('seq', 'integer')
      // What the message says, fixed when it was written: the run's row and the event (JSON text).
      .addColumn('payload', 'text', (col) => col.notNull())
      .addColumn('status', 'text', (col) => col.notNull().check(sql`status in ('pending', 'succeeded', 'failed')`))
      // Attempts made since the delivery was (re)queued: the position in the retry schedule.
      .addColumn('attempt_count', 'integer', (col) => col.notNull())
      .addColumn('next_attempt_at', 'bigint')
      // The node sending it now, until when (a node that dies mid-send lets it go at this time).
      .addColumn('locked_by', 'text')
      .addColumn('locked_until', 'bigint')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .execute();
    // The delivery worker's queue, per endpoint: its pending deliveries by when they fall due (and
    // the skip scan that finds the endpoints with pending deliveries).
    await db.schema
      .createIndex('webhook_deliveries_pending_idx')
      .on('webhook_deliveries')
      .columns(['endpoint_id', 'next_attempt_at', 'id'])
      .where(sql.ref('status'), '=', 'pending')
      .execute();
    // Per-run order: is an earlier message of the same run still pending for this endpoint?
    await db.schema
      .createIndex('webhook_deliveries_run_order_idx')
      .on('webhook_deliveries')
      .columns(['endpoint_id', 'run_id', 'seq'])
      .where(sql.ref('status'), '=', 'pending')
      .execute();
    // Deliveries in flight (claimed by a node), counted against each endpoint's concurrency.
    await db.schema
      .createIndex('webhook_deliveries_in_flight_idx')
      .on('webhook_deliveries')
      .columns(['endpoint_id', 'locked_until'])
      .where(sql.ref('locked_until'), 'is not', null)
      .execute();
    await db.schema.createIndex('webhook_deliveries_endpoint_idx').on('webhook_deliveries').columns(['endpoint_id', 'id']).execute();

    await db.schema
      .createTable('webhook_attempts')
      .addColumn('id', c.idType, c.id)
      .addColumn('delivery_id', c.refType, (col) => col.notNull().references('webhook_deliveries.id').onDelete('cascade'))
      .addColumn('at', 'bigint', (col) => col.notNull())
      .addColumn('http_status', 'integer')
      .addColumn('error', 'text')
      .addColumn('duration_ms', 'integer', (col) => col.notNull())
      .addColumn('response_body', 'text')
      .execute();
    await db.schema.createIndex('webhook_attempts_delivery_idx').on('webhook_attempts').columns(['delivery_id', 'id']).execute();

    if (dialect === 'postgres') for (const statement of WEBHOOK_OUTBOX_TRIGGER) await sql.raw(statement).execute(db);
  };
}
