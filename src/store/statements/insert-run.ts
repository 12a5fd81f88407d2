// Inserting a queued run and its first event, with the calling policy's exact checks (the
// suppression list, the per-number cap): the one write the request path makes, so the dialects
// part ways here. On
// PostgreSQL it is one statement, one round trip (insertOnPostgres); on SQLite, in-process, the
// run's insert (which checks the suppression list itself, unless a per-number cap is counted too)
// and its event's, in the caller's transaction.
import { sql, type Kysely } from '../engine/kysely.js';
import { runMessageId } from '../../webhooks/event-types.js';
import { executeCompiled } from '../engine/compiled-statements.js';
import { appendRunEvents, subscribedEndpoints } from './run-event-outbox.js';
import { selectActiveSuppression, selectCapOpening } from './suppression-statements.js';
import type { Database, RunMode } from '../schema/schema.js';
import { atomically, queryable, type Connection } from '../engine/store.js';

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
  /** A campaign's attempt (the unique (contact_id, attempt) index refuses a second one); absent for a direct run. */
  campaignAttempt?: CampaignAttempt | undefined;
}

export interface CampaignAttempt {
  campaignId: number;
  contactId: number;
  attempt: number;
}

export interface QueuedRunValues extends NewRunRow {
  at: number;
  /** The `queued` event's data, serialized. */
  eventDataJson: string;
  /** The run's name is this prefix followed by its id (`WR-API-` → `WR-API-42`). */
  namePrefix: string;
}

/** The new run's id and name, and how many webhook deliveries report its creation. */
export interface InsertedRun {
  id: number;
  name: string;
  deliveries: number;
}

/**
 * The per-number cap, checked by the insert itself: at most `maxCalls` runs of the organization to
 * the run's number created after `since`.
 */
export interface CapGuard {
  maxCalls: number;
  since: number;
}

/**
 * The calling policy's checks that only the insert can make exactly (admission/policy.ts):
 * the number is not on the organization's suppression list at `suppressedAt`, and the per-number
 * cap has room. On PostgreSQL both are part of the inserting statement, one round trip: the cap
 * takes the number's transaction-scoped lock (migration 006's dialtone_number_cap_opening) and the
 * lock is held past the insert; on SQLite the single writer serializes check and insert already.
 */
export interface InsertGuards {
  suppressedAt?: number;
  cap?: CapGuard;
}

/** Why a guarded insert inserted nothing: the number is suppressed (until `expiresAt`, null: for good), or the cap is reached until the run created at `capOpening` leaves the window. */
export type InsertRefused = { refused: 'suppressed'; expiresAt: number | null } | { refused: 'capped'; capOpening: number };

/** The sequence number of a run's first event (`workflow_runs.last_event_seq` starts there). */
const FIRST_EVENT_SEQ = 1;

export async function insertQueuedRun(on: Connection, run: QueuedRunValues, guards: InsertGuards = {}): Promise<InsertedRun | InsertRefused> {
  const db = queryable(on);
  if (on.dialect === 'postgres') return insertOnPostgres(db, run, guards);
  // The suppression check rides in the inserting statement, one statement fewer per creation,
  // unless the cap is checked too: a suppression's refusal comes before the cap's, and the cap is
  // counted before the insert, so then both are read first.
  const suppressedAt = guards.cap ? undefined : guards.suppressedAt;
  if (guards.cap && guards.suppressedAt !== undefined) {
    const suppression = await selectActiveSuppression(on, run.orgId, run.phoneNumber, guards.suppressedAt);
    if (suppression) return { refused: 'suppressed', expiresAt: suppression.expires_at };
  }
  if (guards.cap) {
    const opening = await selectCapOpening(on, run.orgId, run.phoneNumber, guards.cap.since, guards.cap.maxCalls);
    if (opening !== null) return { refused: 'capped', capOpening: opening };
  }
  const campaign = run.campaignAttempt;
  const values = { ...run, suppressedAt: suppressedAt ?? null, campaignId: campaign?.campaignId ?? null, contactId: campaign?.contactId ?? null, attempt: campaign?.attempt ?? null };
  // Every column is written, campaign ones as null for a direct run, so one compiled statement
  // (compiled-statements.ts) per guard serves every run.
  const shape = `insert-run:sqlite:${suppressedAt !== undefined ? 'suppression' : 'no-suppression'}`;
  const result = await executeCompiled(db, 'sqlite', shape, values, (p) => {
    const unsuppressed =
      suppressedAt !== undefined
        ? sql`not exists (select 1 from suppressions where org_id = ${p('orgId')} and phone_number = ${p('phoneNumber')} and (expires_at is null or expires_at > ${p('suppressedAt')}))`
        : sql`1`;
    // The id is drawn the way AUTOINCREMENT draws it (one past the larger of the largest ever, kept
    // in sqlite_sequence, and the largest now in the table), so the name that embeds it is written
    // with the row instead of by a second statement. SQLite has one writer: nothing else can take
    // the id between this read and the insert.
    // Only the new id comes back: the whole row is needed only for a webhook delivery's payload,
    // and is read again then, rather than built by RETURNING * for every creation.
    return sql<{ id: number }>`insert into workflow_runs (id, name, org_id, workflow_id, definition_id, mode, trigger_uuid, phone_number, caller_id,
        telephony_configuration_id, initial_context, scheduled_for, state, outcome_reason, provider_call_id, created_at, updated_at, ended_at,
        campaign_id, contact_id, attempt)
      select next.id, ${p('namePrefix')} || next.id, ${p('orgId')}, ${p('workflowId')}, ${p('definitionId')}, ${p('mode')}, ${p('triggerUuid')},
        ${p('phoneNumber')}, ${p('callerId')}, ${p('telephonyConfigurationId')}, ${p('initialContextJson')}, ${p('scheduledFor')}, 'queued', null, null,
        ${p('at')}, ${p('at')}, null, ${p('campaignId')}, ${p('contactId')}, ${p('attempt')}
      from (select max(coalesce((select seq from sqlite_sequence where name = 'workflow_runs'), 0), coalesce((select max(id) from workflow_runs), 0)) + 1 as id) next
      where ${unsuppressed}
      returning id`;
  });
  const inserted = result.rows[0];
  if (!inserted) {
    // Only the suppression can have refused it: read it for the refusal's expiry.
    const suppression = suppressedAt === undefined ? undefined : await selectActiveSuppression(on, run.orgId, run.phoneNumber, suppressedAt);
    if (!suppression) throw new Error('inserting a run inserted nothing and no suppression refuses it');
    return { refused: 'suppressed', expiresAt: suppression.expires_at };
  }
  const { id } = inserted;
  const deliveries = await appendRunEvents(on, [
    {
      // A new run's first event is its first (the column's default).
      run: { id, org_id: run.orgId, last_event_seq: FIRST_EVENT_SEQ },
      readRun: () => db.selectFrom('workflow_runs').selectAll().where('id', '=', id).executeTakeFirstOrThrow(),
      type: 'queued',
      at: run.at,
      data: JSON.parse(run.eventDataJson) as Record<string, unknown>,
      webhookType: 'run.queued',
      messageId: runMessageId(id, FIRST_EVENT_SEQ),
    },
  ]);
  return { id, name: `${run.namePrefix}${id}`, deliveries };
}

/**
 * A queued run with nothing else to commit beside it. On PostgreSQL the insert is one statement,
 * and a statement outside a transaction commits durably on its own, in one round trip; SQLite
 * needs its durable transaction to fsync.
 */
export async function insertQueuedRunDurably(on: Connection, run: QueuedRunValues, guards: InsertGuards = {}): Promise<InsertedRun | InsertRefused> {
  if (on.dialect === 'postgres') return insertQueuedRun(on, run, guards);
  return atomically(on, 'durable', (trx) => insertQueuedRun(trx, run, guards));
}

/**
 * One statement: the id is drawn from the table's sequence first so the name (which embeds it) is
 * written with the row, and the first event is inserted by the same statement (its insert fires the
 * outbox trigger of migration 005, and the statement returns how many deliveries that writes).
 * Dispatchers and delivery workers on other nodes are woken after the commit, not by this
 * statement (runs/create-run.ts; store/engine/coalescing-notifier.ts and migration 015 say why). The guards come first: the number's active suppression, and the cap, which takes the
 * number's lock and then counts (a VOLATILE function, whose count sees every run committed before
 * the lock was granted: migration 006 says why); the row is inserted only when neither refuses, and
 * the lock is held until the statement's transaction ends, past the insert.
 */
async function insertOnPostgres(db: Kysely<Database>, run: QueuedRunValues, guards: InsertGuards): Promise<InsertedRun | InsertRefused> {
  const { cap, suppressedAt } = guards;
  const campaign = run.campaignAttempt;
  const values = {
    ...run,
    capSince: cap?.since ?? null,
    capMaxCalls: cap?.maxCalls ?? null,
    suppressedAt: suppressedAt ?? null,
    campaignId: campaign?.campaignId ?? null,
    contactId: campaign?.contactId ?? null,
    attempt: campaign?.attempt ?? null,
  };
  // Built once per pair of guards (compiled-statements.ts), so each run sends only its values; the
  // statement is also prepared once per connection (prepared-statements.ts).
  const shape = `insert-run:postgres:${cap ? 'cap' : 'no-cap'}:${suppressedAt !== undefined ? 'suppression' : 'no-suppression'}`;
  const result = await executeCompiled(db, 'postgres', shape, values, (p) => {
    const opening = cap
      ? sql`select dialtone_number_cap_opening(${p('orgId')}::bigint, ${p('phoneNumber')}::text, ${p('capSince')}::bigint, ${p('capMaxCalls')}::integer) as at`
      : sql`select null::bigint as at`;
    const suppression =
      suppressedAt !== undefined
        ? sql`select expires_at from suppressions where org_id = ${p('orgId')} and phone_number = ${p('phoneNumber')} and (expires_at is null or expires_at > ${p('suppressedAt')}::bigint) limit 1`
        : sql`select null::bigint as expires_at where false`;
    return sql<{ id: number | null; name: string | null; suppressed: boolean; suppression_expires_at: number | null; cap_opening: number | null; deliveries: number | null }>`
    with suppression as materialized (${suppression}),
    opening as materialized (${opening}),
    next as (
      select nextval(pg_get_serial_sequence('workflow_runs', 'id')) as id from opening
      where opening.at is null and not exists (select 1 from suppression)
    ),
    run as (
      insert into workflow_runs (id, name, org_id, workflow_id, definition_id, mode, trigger_uuid, phone_number, caller_id,
        telephony_configuration_id, initial_context, scheduled_for, state, created_at, updated_at, campaign_id, contact_id, attempt)
      select id, ${p('namePrefix')} || id, ${p('orgId')}, ${p('workflowId')}, ${p('definitionId')}, ${p('mode')}, ${p('triggerUuid')}, ${p('phoneNumber')},
        ${p('callerId')}, ${p('telephonyConfigurationId')}, ${p('initialContextJson')}, ${p('scheduledFor')}::bigint, 'queued', ${p('at')}, ${p('at')},
        ${p('campaignId')}::bigint, ${p('contactId')}::bigint, ${p('attempt')}::integer
      from next
      returning id, name
    ),
    event as (
      insert into run_events (run_id, seq, type, at, data)
      select id, ${sql.lit(FIRST_EVENT_SEQ)}, 'queued', ${p('at')}, ${p('eventDataJson')}::jsonb from run
    )
    select run.id, run.name, opening.at as cap_opening,
      exists (select 1 from suppression) as suppressed, (select expires_at from suppression) as suppression_expires_at,
      case when run.id is null then 0 else ${subscribedEndpoints(p('orgId'), 'run.queued')} end as deliveries
    from opening left join run on true`;
  });
  const row = result.rows[0];
  if (!row) throw new Error('inserting a run returned no row');
  if (row.suppressed) return { refused: 'suppressed', expiresAt: row.suppression_expires_at === null ? null : Number(row.suppression_expires_at) };
  if (row.id === null || row.name === null) {
    if (row.cap_opening === null) throw new Error('inserting a run inserted nothing and reported no refusal');
    return { refused: 'capped', capOpening: Number(row.cap_opening) };
  }
  // The event's insert fired the outbox trigger (migration 005), which wrote these deliveries; the
  // caller announces them once this has committed.
  return { id: Number(row.id), name: row.name, deliveries: Number(row.deliveries ?? 0) };
}
