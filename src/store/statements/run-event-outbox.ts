// A run's events and the webhook deliveries that report them, written together in the caller's
// transaction (the outbox): an event is never reported without having happened, nor happened
// without being reported to every endpoint subscribed at that moment. One delivery row is written
// per subscribed, enabled endpoint of the run's organization; its payload (the run's row and the
// event, as JSON text) is fixed now, so every attempt sends the same message. On SQLite that is
// done here; on PostgreSQL by a trigger on run_events (migration 005), in the inserting statement.
import { executeCompiled } from '../engine/compiled-statements.js';
import { sql, type Kysely } from '../engine/kysely.js';
import type { Database, WorkflowRunRow } from '../schema/schema.js';
import { queryable, type Connection, type DialectName } from '../engine/store.js';

/** What an event's insert needs of its run: its id, its organization and the event's sequence number. */
export type RunEventKey = Pick<WorkflowRunRow, 'id' | 'org_id' | 'last_event_seq'>;

interface RunEventFields {
  type: string;
  at: number;
  data: Record<string, unknown>;
  /** The webhook message type this event is reported as (`run.ended` for every terminal state). */
  webhookType: string;
  messageId: string;
}

/**
 * An event to write, with its run: the row as the change left it, or only the run's key and a way
 * to read that row, which is then read only if a delivery's payload needs it (a creation on
 * SQLite returns just the new id rather than the whole row from RETURNING *).
 */
export type RunEventWrite = RunEventFields & ({ run: WorkflowRunRow } | { run: RunEventKey; readRun: () => Promise<WorkflowRunRow> });

/** An event as the SQLite statement reads it, with its message's payload: the run's row and the event, fixed now. */
async function outboxRecord(e: RunEventWrite) {
  const seq = e.run.last_event_seq;
  const run = 'readRun' in e ? await e.readRun() : e.run;
  return {
    org_id: e.run.org_id,
    run_id: e.run.id,
    seq,
    webhook_type: e.webhookType,
    message_id: e.messageId,
    at: e.at,
    payload: JSON.stringify({ run, event: { seq, type: e.type, at: e.at, data: e.data } }),
  };
}

/**
 * How many deliveries PostgreSQL's outbox trigger (migration 005) writes for one event of an
 * organization's run, reported type `webhookType`: its enabled endpoints subscribed to that type,
 * matched as the trigger matches them. The statements that insert events on PostgreSQL return it,
 * so that the node announces the deliveries once they are committed (migration 015 says why the
 * trigger no longer does). The count reads the statement's snapshot and the trigger takes a fresh
 * one when it fires, so an endpoint enabled (and committed) between the two is written to but not
 * counted: that delivery waits for the workers' poll (WEBHOOK_POLL_INTERVAL_MS), never lost.
 */
export function subscribedEndpoints(orgId: unknown, webhookType: unknown) {
  return sql<number>`(select count(*) from webhook_endpoints e where e.org_id = ${orgId} and e.enabled = 1
    and (e.event_filter = '' or strpos(e.event_filter, ',' || ${webhookType}::text || ',') > 0))`;
}

/** The events' row as run_events stores it. */
const eventRow = (e: RunEventWrite) => ({ run_id: e.run.id, seq: e.run.last_event_seq, type: e.type, at: e.at, data: JSON.stringify(e.data) });

/**
 * One event's insert (a transition, a creation), from its compiled template. It also says whether
 * the run's organization has an enabled webhook endpoint (a subquery in RETURNING): every
 * transition and every creation writes one event, and asking in the same statement spares each a
 * second one.
 */
async function insertEvent(trx: Kysely<Database>, dialect: DialectName, event: RunEventWrite): Promise<boolean> {
  const values = { ...eventRow(event), org_id: event.run.org_id };
  const { rows } = await executeCompiled(trx, dialect, 'run-event-outbox:event', values, (p) =>
    trx
      .insertInto('run_events')
      .values({ run_id: p('run_id'), seq: p('seq'), type: p('type'), at: p('at'), data: p('data') })
      .returning((eb) => eb.exists(eb.selectFrom('webhook_endpoints').select('org_id').where('org_id', '=', p('org_id')).where('enabled', '=', 1)).as('subscribed')),
  );
  const subscribed = rows[0]?.subscribed;
  return subscribed === true || Number(subscribed ?? 0) === 1;
}

/** Whether any of these organizations has an enabled webhook endpoint. */
async function anySubscribed(trx: Kysely<Database>, orgIds: readonly number[]): Promise<boolean> {
  const rows = await trx.selectFrom('webhook_endpoints').select('org_id').where('org_id', 'in', orgIds).where('enabled', '=', 1).limit(1).execute();
  return rows.length > 0;
}

/**
 * Writes the events and their deliveries. Returns how many deliveries this node should announce
 * (signals.outbox, which on PostgreSQL also wakes the other nodes once this commits). On
 * PostgreSQL the outbox trigger writes them, and this says 1 when the organization has an enabled
 * endpoint, whatever the types it subscribes to (at worst a wake-up with nothing to send; one
 * announcement covers them all).
 */
export async function appendRunEvents(on: Connection, events: readonly RunEventWrite[]): Promise<number> {
  const trx = queryable(on);
  if (events.length === 0) return 0;
  const [only] = events;
  let subscribed: boolean | undefined;
  if (events.length === 1 && only) subscribed = await insertEvent(trx, on.dialect, only);
  // Several events (a claim's): one statement, built as they come, since their number varies.
  else await trx.insertInto('run_events').values(events.map(eventRow)).execute();
  // Asking first is cheaper than building payloads nobody is subscribed to.
  if (!(subscribed ?? (await anySubscribed(trx, [...new Set(events.map((e) => e.run.org_id))])))) return 0;
  // PostgreSQL: the outbox trigger (migration 005) wrote the deliveries in the inserting statement.
  if (on.dialect === 'postgres') return 1;
  const records = JSON.stringify(await Promise.all(events.map(outboxRecord)));
  const result = await executeCompiled(trx, on.dialect, 'run-event-outbox:deliveries', { records }, (p) => sql`
    insert into webhook_deliveries (endpoint_id, message_id, event_type, run_id, seq, payload, status, attempt_count, next_attempt_at, created_at, updated_at)
    select e.id, i.value ->> '$.message_id', i.value ->> '$.webhook_type', i.value ->> '$.run_id', i.value ->> '$.seq', i.value ->> '$.payload',
      'pending', 0, i.value ->> '$.at', i.value ->> '$.at', i.value ->> '$.at'
    from json_each(${p('records')}) i join webhook_endpoints e on e.org_id = i.value ->> '$.org_id' and e.enabled = 1
      and (e.event_filter = '' or instr(e.event_filter, ',' || (i.value ->> '$.webhook_type') || ',') > 0)`);
  return Number(result.numAffectedRows ?? 0);
}
