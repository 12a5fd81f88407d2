// The statements that change a run after its creation (its insert is insert-run.ts). runs/ decides
// what changes and when (runs/lifecycle.ts); these say how, in SQL, so the lifecycle's code holds
// no query builder and one file lists every way a run's row is written.
import { sql } from './kysely.js';
import type { Transaction, Updateable } from 'kysely';
import { runMessageId } from '../webhooks/event-types.js';
import { appendRunEvents } from './run-event-outbox.js';
import { explainQuery } from './query-plans.js';
import { lockingFreeRows } from './row-locks.js';
import type { Database, RunState, WorkflowRunRow, WorkflowRunsTable } from './schema.js';
import type { DialectName, Store } from './store.js';

export type RunColumns = Updateable<WorkflowRunsTable>;

export interface StateGuard {
  /** The states the run may be in (the target's predecessors). */
  from: readonly RunState[];
  /** And exactly this one, when the caller decided on what it read. */
  onlyFrom?: RunState | undefined;
  /** And its deadline still before this time (the reaper's guard). */
  deadlineBefore?: number | undefined;
}

/** The compare-and-set update of a run: `columns` and the next event seq, only if the guard holds. */
function guardedRunUpdate(trx: Transaction<Database>, runId: number, columns: RunColumns, guard: StateGuard) {
  return trx
    .updateTable('workflow_runs')
    .set((eb) => ({ ...columns, last_event_seq: eb('last_event_seq', '+', 1) }))
    .where('id', '=', runId)
    .where('state', 'in', guard.from)
    .$if(guard.onlyFrom !== undefined, (q) => q.where('state', '=', guard.onlyFrom as RunState))
    .$if(guard.deadlineBefore !== undefined, (q) => q.where('deadline_at', '<', guard.deadlineBefore as number));
}

export type ClaimedRow = Pick<WorkflowRunRow, 'id' | 'created_at' | 'phone_number' | 'caller_id' | 'telephony_configuration_id' | 'mode'>;

export interface ClaimValues {
  nodeId: string;
  now: number;
  leaseExpiresAt: number;
}

/** A queued run a claim may take, with what the calling-hours check needs. */
export interface ClaimCandidate {
  id: number;
  org_id: number;
  phone_number: string;
  /** The organization's calling hours as stored (null: off), read with the run, without locking the organization. */
  calling_hours: unknown;
}

/**
 * Up to `limit` queued runs of a configuration that are due at `now`, locked for the claim: first
 * deferred runs whose scheduled_for has come (they have waited longest), then runs due at once,
 * oldest first. Each part reads its own partial index (migration 007), so deferred runs that are
 * not due yet are never scanned; the first is skipped when the caller knows none is due.
 */
export async function selectClaimCandidates(
  store: Pick<Store, 'dialect'>,
  trx: Transaction<Database>,
  claim: { configurationId: number; limit: number; now: number; deferredDue: boolean },
): Promise<ClaimCandidate[]> {
  const base = () =>
    trx
      .selectFrom('workflow_runs')
      .select(['id', 'org_id', 'phone_number', (eb) => eb.selectFrom('organizations').select('calling_hours').whereRef('organizations.id', '=', 'workflow_runs.org_id').as('calling_hours')])
      .where('telephony_configuration_id', '=', claim.configurationId)
      .where('state', '=', 'queued');
  const due = !claim.deferredDue ? [] : await lockingFreeRows(store, base().where('scheduled_for', 'is not', null).where('scheduled_for', '<=', claim.now).orderBy('scheduled_for').orderBy('id').limit(claim.limit)).execute();
  if (due.length >= claim.limit) return due;
  const immediate = await lockingFreeRows(store, base().where('scheduled_for', 'is', null).orderBy('id').limit(claim.limit - due.length)).execute();
  return [...due, ...immediate];
}

/** Moves the given queued runs of a claim to `dialing` under a lease; returns their rows as changed, in id order. */
export async function setQueuedRunsDialing(trx: Transaction<Database>, ids: readonly number[], claim: ClaimValues): Promise<WorkflowRunRow[]> {
  if (ids.length === 0) return [];
  const rows = await trx
    .updateTable('workflow_runs')
    .set((eb) => ({
      state: 'dialing',
      lease_owner: claim.nodeId,
      lease_expires_at: claim.leaseExpiresAt,
      deadline_at: claim.leaseExpiresAt,
      claimed_at: claim.now,
      updated_at: claim.now,
      last_event_seq: eb('last_event_seq', '+', 1),
    }))
    .where('id', 'in', ids)
    .where('state', '=', 'queued')
    .returningAll()
    .execute();
  return rows.sort((a, b) => a.id - b.id);
}

/** Ends these queued runs (selected by selectClaimCandidates) `canceled` with `reason`, never dialed; returns their rows as changed, in id order. */
export async function setQueuedRunsCanceled(trx: Transaction<Database>, ids: readonly number[], now: number, reason: string): Promise<WorkflowRunRow[]> {
  if (ids.length === 0) return [];
  const rows = await trx
    .updateTable('workflow_runs')
    .set((eb) => ({
      state: 'canceled',
      outcome_reason: reason,
      ended_at: now,
      updated_at: now,
      last_event_seq: eb('last_event_seq', '+', 1),
    }))
    .where('id', 'in', ids)
    .where('state', '=', 'queued')
    .returningAll()
    .execute();
  return rows.sort((a, b) => a.id - b.id);
}

export interface DialValues {
  providerCallId: string;
  sentAt: number;
  /** The reaper's deadline while the run is still `dialing`. */
  dialingDeadlineAt: number;
}

/** Records a dial the provider took; returns the run's state and cancel request, or undefined when it no longer exists. */
export function setDialRecorded(trx: Transaction<Database>, runId: number, dial: DialValues) {
  return trx
    .updateTable('workflow_runs')
    .set((eb) => ({
      provider_call_id: dial.providerCallId,
      dial_sent_at: dial.sentAt,
      lease_expires_at: null,
      deadline_at: eb.case().when('state', '=', 'dialing').then(dial.dialingDeadlineAt).else(eb.ref('deadline_at')).end(),
    }))
    .where('id', '=', runId)
    .returning(['state', 'cancel_requested_at'])
    .executeTakeFirst();
}

/** Extends a node's lease on a run it claimed and has not dialed; false when that is no longer the case. */
export async function extendUndialedClaim(trx: Transaction<Database>, runId: number, nodeId: string, until: number): Promise<boolean> {
  const row = await trx
    .updateTable('workflow_runs')
    .set({ lease_expires_at: until, deadline_at: until })
    .where('id', '=', runId)
    .where('state', '=', 'dialing')
    .where('lease_owner', '=', nodeId)
    .where('provider_call_id', 'is', null)
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Takes the turn to ask a run's provider about it (reconciliation): moves `reconciled_at` from what
 * the caller read to `now`; false when another node took it first or the run is no longer live.
 */
export async function markReconciled(store: Store, runId: number, previous: number | null, now: number, live: readonly RunState[]): Promise<boolean> {
  const result = await store.db
    .updateTable('workflow_runs')
    .set({ reconciled_at: now })
    .where('id', '=', runId)
    .where('state', 'in', live)
    .where('reconciled_at', previous === null ? 'is' : '=', previous)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * Records the call the provider placed for a run whose call id was never recorded (its node stopped
 * mid-dial), found by asking the provider; only while the run is still dialing without one.
 */
export async function setFoundCall(trx: Transaction<Database>, runId: number, found: { providerCallId: string; sentAt: number; deadlineAt: number }): Promise<boolean> {
  const row = await trx
    .updateTable('workflow_runs')
    .set({ provider_call_id: found.providerCallId, dial_sent_at: found.sentAt, deadline_at: found.deadlineAt, lease_owner: null, lease_expires_at: null })
    .where('id', '=', runId)
    .where('state', '=', 'dialing')
    .where('provider_call_id', 'is', null)
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * A node lets go of the live calls it holds. Live runs are exactly those with a deadline, so the
 * statement reads migration 002's partial index of them instead of every run ever made.
 */
export async function releaseNodeCalls(store: Store, nodeId: string): Promise<void> {
  await releaseNodeCallsQuery(store, nodeId).execute();
}

function releaseNodeCallsQuery(store: Store, nodeId: string) {
  return store.db.updateTable('workflow_runs').set({ lease_owner: null }).where('deadline_at', 'is not', null).where('lease_owner', '=', nodeId).where('provider_call_id', 'is not', null);
}

/** The plan of releaseNodeCalls's statement, as text (a test checks that it reads the live runs' index). */
export function explainReleaseNodeCalls(store: Store, nodeId: string): Promise<string> {
  return explainQuery(store, releaseNodeCallsQuery(store, nodeId));
}

/** Marks a live run's cancel request, once; false when the run is not live or was already marked. */
export async function markCancelRequested(store: Store, runId: number, at: number, live: readonly RunState[]): Promise<boolean> {
  const result = await store.db
    .updateTable('workflow_runs')
    .set({ cancel_requested_at: at })
    .where('id', '=', runId)
    .where('state', 'in', live)
    .where('cancel_requested_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export interface TransitionEvent {
  /** The state entered, or `deferred` (a queued run put off to its calling hours; it stays queued). */
  type: RunState | 'deferred';
  at: number;
  data: Record<string, unknown>;
  /** The webhook message type it is reported as. */
  webhookType: string;
}

/**
 * A transition's writes: the compare-and-set update, its event and the event's webhook deliveries.
 * On PostgreSQL one statement (one round trip; the outbox trigger writes the deliveries); on
 * SQLite, in-process, the update and then run-event-outbox.ts. Undefined when the guard did not
 * hold (nothing written). `webhookDeliveries` counts those to announce in-process (SQLite only).
 */
export async function writeTransition(
  trx: Transaction<Database>,
  dialect: DialectName,
  runId: number,
  columns: RunColumns,
  guard: StateGuard,
  event: TransitionEvent,
): Promise<{ seq: number; webhookDeliveries: number } | undefined> {
  if (dialect === 'postgres') {
    const update = guardedRunUpdate(trx, runId, columns, guard)
      .returning(['id', 'last_event_seq']);
    // The event's insert fires the outbox trigger (migration 005), which writes its deliveries.
    const result = await sql<{ seq: number }>`
      with run as (${update})
      insert into run_events (run_id, seq, type, at, data)
      select id, last_event_seq, ${event.type}, ${event.at}, ${JSON.stringify(event.data)}::jsonb from run
      returning seq`.execute(trx);
    const row = result.rows[0];
    return row ? { seq: Number(row.seq), webhookDeliveries: 0 } : undefined;
  }
  const run = await guardedRunUpdate(trx, runId, columns, guard).returningAll().executeTakeFirst();
  if (run === undefined) return undefined;
  const webhookDeliveries = await appendRunEvents(trx, dialect, [
    { run, type: event.type, at: event.at, data: event.data, webhookType: event.webhookType, messageId: runMessageId(runId, run.last_event_seq) },
  ]);
  return { seq: run.last_event_seq, webhookDeliveries };
}
