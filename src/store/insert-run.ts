// Inserting a queued run and its first event, with the per-number cap's exact check when the
// organization has one: the one write the request path makes, so the dialects part ways here. On
// PostgreSQL it is one statement, one round trip (insertOnPostgres); on SQLite, in-process, the same
// work is a few statements in the caller's transaction.
import { sql, type Kysely } from 'kysely';
import { runMessageId } from '../webhooks/event-types.js';
import { appendRunEvents } from './run-event-outbox.js';
import { selectCapOpening } from './suppression-statements.js';
import type { Database, RunMode } from './schema.js';
import type { DialectName, Store } from './store.js';

/** What a new run's row holds besides its id, name, state and times. */
export interface NewRunRow {
  orgId: number;
  workflowId: number;
  definitionId: number;
  mode: RunMode;
  triggerUuid: string | null;
  phoneNumber: string;
  callerId: string | null;
  telephonyConfigurationId: number;
  /** The caller's initial_context exactly as received (serialized JSON), or null. */
  initialContextJson: string | null;
  /** When the run becomes due (queued outside calling hours); null when due at once. */
  scheduledFor: number | null;
}

export interface QueuedRunValues extends NewRunRow {
  at: number;
  /** The `queued` event's data, serialized. */
  eventDataJson: string;
  /** The run's name is this prefix followed by its id (`WR-API-` → `WR-API-42`). */
  namePrefix: string;
  /** Channel announcing new queued runs to other nodes. */
  wakeChannel: string;
}

/** The new run's id and name, and how many webhook deliveries report its creation. */
export interface InsertedRun {
  id: number;
  name: string;
  deliveries: number;
}

/**
 * The per-number cap, checked by the insert itself: at most `maxCalls` runs of the organization to
 * the run's number created after `since`. On PostgreSQL the check takes the number's
 * transaction-scoped lock (migration 006's dialtone_number_cap_opening) in the inserting statement,
 * so the check and the insert it allows are one round trip and one step; on SQLite the single
 * writer serializes them already.
 */
export interface CapGuard {
  maxCalls: number;
  since: number;
}

/** The cap was reached: nothing was inserted, and a place opens when the run created at `capOpening` leaves the window. */
export interface CapReached {
  capOpening: number;
}

export async function insertQueuedRun(db: Kysely<Database>, dialect: DialectName, run: QueuedRunValues, cap?: CapGuard): Promise<InsertedRun | CapReached> {
  if (dialect === 'postgres') return insertOnPostgres(db, run, cap);
  if (cap) {
    const opening = await selectCapOpening({ db }, run.orgId, run.phoneNumber, cap.since, cap.maxCalls);
    if (opening !== null) return { capOpening: opening };
  }
  const inserted = await db
    .insertInto('workflow_runs')
    .values({
      name: null,
      org_id: run.orgId,
      workflow_id: run.workflowId,
      definition_id: run.definitionId,
      mode: run.mode,
      trigger_uuid: run.triggerUuid,
      phone_number: run.phoneNumber,
      caller_id: run.callerId,
      telephony_configuration_id: run.telephonyConfigurationId,
      initial_context: run.initialContextJson,
      scheduled_for: run.scheduledFor,
      state: 'queued',
      outcome_reason: null,
      provider_call_id: null,
      created_at: run.at,
      updated_at: run.at,
      ended_at: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  const name = `${run.namePrefix}${inserted.id}`;
  await db.updateTable('workflow_runs').set({ name }).where('id', '=', inserted.id).execute();
  const deliveries = await appendRunEvents(db, 'sqlite', [
    {
      run: { ...inserted, name },
      type: 'queued',
      at: run.at,
      data: JSON.parse(run.eventDataJson) as Record<string, unknown>,
      webhookType: 'run.queued',
      messageId: runMessageId(inserted.id, inserted.last_event_seq),
    },
  ]);
  return { id: inserted.id, name, deliveries };
}

/**
 * A queued run with nothing else to commit beside it. On PostgreSQL the insert is one statement,
 * and a statement outside a transaction commits durably on its own, in one round trip; SQLite
 * needs its durable transaction to fsync.
 */
export async function insertQueuedRunDurably(store: Store, run: QueuedRunValues, cap?: CapGuard): Promise<InsertedRun | CapReached> {
  if (store.dialect === 'postgres') return insertQueuedRun(store.db, store.dialect, run, cap);
  return store.transaction('durable', (trx) => insertQueuedRun(trx, store.dialect, run, cap));
}

/**
 * One statement: the id is drawn from the table's sequence first so the name (which embeds it) is
 * written with the row, the first event is inserted by the same statement (its insert fires the
 * outbox trigger of migration 005), and dispatchers on other nodes are woken (pg_notify, delivered
 * at commit). With a cap, the statement first takes the number's lock and counts (a VOLATILE
 * function, whose count sees every run committed before the lock was granted: migration 006 says
 * why), and inserts only when there is room; the lock is held until the statement's transaction
 * ends, past the insert.
 */
async function insertOnPostgres(db: Kysely<Database>, run: QueuedRunValues, cap: CapGuard | undefined): Promise<InsertedRun | CapReached> {
  const opening = cap
    ? sql`select dialtone_number_cap_opening(${run.orgId}::bigint, ${run.phoneNumber}::text, ${cap.since}::bigint, ${cap.maxCalls}::integer) as at`
    : sql`select null::bigint as at`;
  const result = await sql<{ id: number | null; name: string | null; cap_opening: number | null }>`
    with opening as materialized (${opening}),
    next as (select nextval(pg_get_serial_sequence('workflow_runs', 'id')) as id from opening where opening.at is null),
    run as (
      insert into workflow_runs (id, name, org_id, workflow_id, definition_id, mode, trigger_uuid, phone_number, caller_id,
        telephony_configuration_id, initial_context, scheduled_for, state, created_at, updated_at)
      select id, ${run.namePrefix} || id, ${run.orgId}, ${run.workflowId}, ${run.definitionId}, ${run.mode}, ${run.triggerUuid}, ${run.phoneNumber},
        ${run.callerId}, ${run.telephonyConfigurationId}, ${run.initialContextJson}, ${run.scheduledFor}::bigint, 'queued', ${run.at}, ${run.at}
      from next
      returning id, name
    ),
    event as (
      insert into run_events (run_id, seq, type, at, data)
      select id, 1, 'queued', ${run.at}, ${run.eventDataJson}::jsonb from run
    )
    select run.id, run.name, opening.at as cap_opening, case when run.id is not null then pg_notify(${run.wakeChannel}, '') end as woken
    from opening left join run on true`.execute(db);
  const row = result.rows[0];
  if (!row) throw new Error('inserting a run returned no row');
  if (row.id === null || row.name === null) {
    if (row.cap_opening === null) throw new Error('inserting a run inserted nothing and reported no cap');
    return { capOpening: Number(row.cap_opening) };
  }
  // The event's insert fired the outbox trigger (migration 005): its deliveries are written and announced.
  return { id: Number(row.id), name: row.name, deliveries: 0 };
}
