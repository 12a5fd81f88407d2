// The statements that change a run after its creation (its insert is insert-run.ts). runs/ decides
// what changes and when (runs/lifecycle.ts); these say how, in SQL, so the lifecycle's code holds
// no query builder and one file lists every way a run's row is written.
import { sql } from '../engine/kysely.js';
import type { Kysely, Updateable } from 'kysely';
import { runMessageId, webhookTypeForState } from '../../webhooks/event-types.js';
import { executeCompiled } from '../engine/compiled-statements.js';
import { appendRunEvents, subscribedEndpoints } from './run-event-outbox.js';
import { explainQuery } from '../engine/query-plans.js';
import { lockingFreeRows } from '../engine/row-locks.js';
import type { Database, RunState, WorkflowRunRow, WorkflowRunsTable } from '../schema/schema.js';
import { atomically, queryable, type Connection, type DialectName } from '../engine/store.js';

export type RunColumns = Updateable<WorkflowRunsTable>;

export interface StateGuard {
  /** The states the run may be in (the target's predecessors). */
  from: readonly RunState[];
  /** And exactly this one, when the caller decided on what it read. */
  onlyFrom?: RunState | undefined;
  /** And its deadline still before this time (the reaper's guard). */
  deadlineBefore?: number | undefined;
  /** And who answered not decided yet (a verdict is recorded once). */
  answeredByUnset?: boolean | undefined;
  /** And a transfer under way (`pending`: its outcome is applied once), or none (`not_pending`: one at a time). */
  transfer?: 'pending' | 'not_pending' | undefined;
}

/** The compare-and-set update of a run: `columns` and the next event seq, only if the guard holds. */
function guardedRunUpdate(trx: Kysely<Database>, runId: number, columns: RunColumns, guard: StateGuard) {
  return trx
    .updateTable('workflow_runs')
    .set((eb) => ({ ...columns, last_event_seq: eb('last_event_seq', '+', 1) }))
    .where('id', '=', runId)
    .where('state', 'in', guard.from)
    .$if(guard.onlyFrom !== undefined, (q) => q.where('state', '=', guard.onlyFrom as RunState))
    .$if(guard.deadlineBefore !== undefined, (q) => q.where('deadline_at', '<', guard.deadlineBefore as number))
    .$if(guard.answeredByUnset === true, (q) => q.where('answered_by', 'is', null))
    .$if(guard.transfer === 'pending', (q) => q.where('transfer_status', '=', 'pending'))
    .$if(guard.transfer === 'not_pending', (q) => q.where((eb) => eb.or([eb('transfer_status', 'is', null), eb('transfer_status', '!=', 'pending')])));
}

/**
 * guardedRunUpdate returning the run's row, from a compiled template per shape (its columns and
 * guard), as every transition of a call on SQLite writes it. A column whose value is not a plain
 * value (an expression) is built as it comes.
 */
async function guardedRunUpdateReturningRow(trx: Kysely<Database>, dialect: DialectName, runId: number, columns: RunColumns, guard: StateGuard): Promise<WorkflowRunRow | undefined> {
  const entries = Object.entries(columns).filter(([, value]) => value !== undefined);
  const plain = entries.every(([, value]) => value === null || typeof value === 'number' || typeof value === 'string');
  const names = entries.map(([name]) => name);
  const shape = plain ? JSON.stringify(['run-writes:guarded-update', names, guard.from, guard.onlyFrom ?? null, guard.deadlineBefore !== undefined, guard.answeredByUnset === true, guard.transfer ?? null]) : undefined;
  const values: Record<string, unknown> = { runId, deadlineBefore: guard.deadlineBefore };
  for (const [name, value] of entries) values[`set:${name}`] = value;
  const { rows } = await executeCompiled(trx, dialect, shape, values, (p) => {
    const set = Object.fromEntries(names.map((name) => [name, p(`set:${name}`)])) as RunColumns;
    const deadlineBefore = guard.deadlineBefore === undefined ? undefined : (p('deadlineBefore') as number);
    return guardedRunUpdate(trx, p('runId') as number, set, { ...guard, deadlineBefore }).returningAll();
  });
  return rows[0];
}

/** A run the claim moved to dialing, as the statement returns it (the claim adds its campaign's pace). */
export type DialingRow = Pick<WorkflowRunRow, 'id' | 'created_at' | 'phone_number' | 'caller_id' | 'telephony_configuration_id' | 'mode'>;

export type ClaimedRow = DialingRow & Pick<WorkflowRunRow, 'campaign_id' | 'definition_id'> & {
  /** The calls_per_second of the run's campaign (null: a direct run, or a campaign paced only by its route). */
  campaign_calls_per_second: number | null;
};

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
  /** The run's campaign (null: a direct run) and its calls_per_second (null: paced only by the route), read without locking the campaign. */
  campaign_id: number | null;
  campaign_calls_per_second: number | null;
  /** The definition the run pins (what it asks of answering-machine detection is read from it once per node). */
  definition_id: number;
}

/**
 * Up to `limit` queued runs of a configuration that are due at `now`, locked for the claim: first
 * deferred runs whose scheduled_for has come (they have waited longest), then runs due at once,
 * oldest first. Each part reads its own partial index (migration 007), so deferred runs that are
 * not due yet are never scanned; the first is skipped when the caller knows none is due. Runs of
 * the campaigns in `excludeCampaigns` (no dial slot of theirs within the claim's reach) are passed over.
 */
export async function selectClaimCandidates(
  on: Connection,
  claim: { configurationId: number; limit: number; now: number; deferredDue: boolean; excludeCampaigns?: readonly number[] },
): Promise<ClaimCandidate[]> {
  const trx = queryable(on);
  const exclude = claim.excludeCampaigns ?? [];
  const base = () =>
    trx
      .selectFrom('workflow_runs')
      .select([
        'id',
        'org_id',
        'phone_number',
        'campaign_id',
        'definition_id',
        (eb) => eb.selectFrom('organizations').select('calling_hours').whereRef('organizations.id', '=', 'workflow_runs.org_id').as('calling_hours'),
        (eb) => eb.selectFrom('campaigns').select('calls_per_second').whereRef('campaigns.id', '=', 'workflow_runs.campaign_id').as('campaign_calls_per_second'),
      ])
      .where('telephony_configuration_id', '=', claim.configurationId)
      .where('state', '=', 'queued')
      // Runs of campaigns with no dial slot within the claim's reach wait, and leave their place to others.
      .$if(exclude.length > 0, (q) => q.where((eb) => eb.or([eb('campaign_id', 'is', null), eb('campaign_id', 'not in', exclude)])));
  const due = !claim.deferredDue ? [] : await lockingFreeRows(on, base().where('scheduled_for', 'is not', null).where('scheduled_for', '<=', claim.now).orderBy('scheduled_for').orderBy('id').limit(claim.limit)).execute();
  if (due.length >= claim.limit) return due;
  const immediate = await lockingFreeRows(on, base().where('scheduled_for', 'is', null).orderBy('id').limit(claim.limit - due.length)).execute();
  return [...due, ...immediate];
}

/**
 * Moves the given queued runs of a claim to `dialing` under a lease, each with its `dialing` event
 * (data: the claiming node) and that event's webhook deliveries. Returns the runs as claimed, in id
 * order, and the deliveries to announce once committed. On PostgreSQL one statement: the update,
 * and the events' insert (whose outbox trigger, migration 005, writes the deliveries; the statement
 * counts them) in the same round trip; on SQLite the update, then run-event-outbox.ts.
 */
export async function setQueuedRunsDialing(
  on: Connection,
  ids: readonly number[],
  claim: ClaimValues,
): Promise<{ rows: DialingRow[]; webhookDeliveries: number }> {
  const trx = queryable(on);
  if (ids.length === 0) return { rows: [], webhookDeliveries: 0 };
  const data = { node: claim.nodeId };
  if (on.dialect === 'postgres') {
    // The events' insert fires the outbox trigger (migration 005): each row also says how many
    // deliveries it wrote for its run's event, for the caller to announce once committed.
    const result = await sql<DialingRow & { deliveries: number }>`
      with run as (
        update workflow_runs set state = 'dialing', lease_owner = ${claim.nodeId}, lease_expires_at = ${claim.leaseExpiresAt}::bigint,
          deadline_at = ${claim.leaseExpiresAt}::bigint, claimed_at = ${claim.now}::bigint, updated_at = ${claim.now}::bigint, last_event_seq = last_event_seq + 1
        where id = any(${[...ids]}::bigint[]) and state = 'queued'
        returning id, created_at, phone_number, caller_id, telephony_configuration_id, mode, last_event_seq, org_id
      ),
      event as (
        insert into run_events (run_id, seq, type, at, data)
        select id, last_event_seq, 'dialing', ${claim.now}::bigint, ${JSON.stringify(data)}::jsonb from run
      )
      select id, created_at, phone_number, caller_id, telephony_configuration_id, mode, ${subscribedEndpoints(sql`run.org_id`, webhookTypeForState('dialing'))} as deliveries
      from run order by id`.execute(trx);
    const rows = result.rows.map(({ deliveries: _, ...row }) => row);
    return { rows, webhookDeliveries: result.rows.reduce((sum, row) => sum + Number(row.deliveries), 0) };
  }
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
  rows.sort((a, b) => a.id - b.id);
  const webhookDeliveries = await appendRunEvents(
    on,
    rows.map((run) => ({ run, type: 'dialing', at: claim.now, data, webhookType: webhookTypeForState('dialing'), messageId: runMessageId(run.id, run.last_event_seq) })),
  );
  const claimed = rows.map((r) => ({ id: r.id, created_at: r.created_at, phone_number: r.phone_number, caller_id: r.caller_id, telephony_configuration_id: r.telephony_configuration_id, mode: r.mode }));
  return { rows: claimed, webhookDeliveries };
}

/** Ends these queued runs (selected by selectClaimCandidates) `canceled` with `reason`, never dialed; returns their rows as changed, in id order. */
export async function setQueuedRunsCanceled(on: Connection, ids: readonly number[], now: number, reason: string): Promise<WorkflowRunRow[]> {
  const trx = queryable(on);
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
export async function setDialRecorded(on: Connection, runId: number, dial: DialValues) {
  const trx = queryable(on);
  const { rows } = await executeCompiled(trx, on.dialect, 'run-writes:dial-recorded', { runId, ...dial }, (p) =>
    trx
      .updateTable('workflow_runs')
      .set((eb) => ({
        provider_call_id: p('providerCallId'),
        dial_sent_at: p('sentAt'),
        lease_expires_at: null,
        // eb.val: a number given to then() as it is would be written into the SQL text, a new text
        // (and a new prepared statement) for every dial.
        deadline_at: eb.case().when('state', '=', 'dialing').then(eb.val(p('dialingDeadlineAt'))).else(eb.ref('deadline_at')).end(),
      }))
      .where('id', '=', p('runId'))
      .returning(['state', 'cancel_requested_at']),
  );
  return rows[0];
}

/**
 * Gives a stopping node's undialed claims back to the queue (`dialing → queued`), each with its
 * `queued` event (data: why, and the node) and that event's webhook deliveries. Only runs still
 * `dialing` under that node's lease with no dial recorded (no provider call id, no dial sent): the
 * node names only runs whose dial request it never sent, and the guard leaves any the store says
 * moved on. Returns the runs given back, in id order, and the deliveries to announce once committed.
 */
export async function setUndialedRunsQueued(
  on: Connection,
  ids: readonly number[],
  requeue: { nodeId: string; now: number; reason: string; from: readonly RunState[] },
): Promise<{ ids: number[]; webhookDeliveries: number }> {
  if (ids.length === 0) return { ids: [], webhookDeliveries: 0 };
  // One transaction for the update and its events: the one handed, or one of its own (atomically).
  return atomically(on, 'durable', async (trx) => {
    const rows = await trx
      .updateTable('workflow_runs')
      .set((eb) => ({
        state: 'queued',
        lease_owner: null,
        lease_expires_at: null,
        deadline_at: null,
        claimed_at: null,
        updated_at: requeue.now,
        last_event_seq: eb('last_event_seq', '+', 1),
      }))
      .where('id', 'in', ids)
      .where('state', 'in', requeue.from)
      .where('lease_owner', '=', requeue.nodeId)
      .where('provider_call_id', 'is', null)
      .where('dial_sent_at', 'is', null)
      .returningAll()
      .execute();
    rows.sort((a, b) => a.id - b.id);
    const data = { reason: requeue.reason, node: requeue.nodeId };
    const webhookDeliveries = await appendRunEvents(
      trx,
      rows.map((run) => ({ run, type: 'queued' as const, at: requeue.now, data, webhookType: webhookTypeForState('queued'), messageId: runMessageId(run.id, run.last_event_seq) })),
    );
    return { ids: rows.map((r) => r.id), webhookDeliveries };
  });
}

/** Extends a node's lease on a run it claimed and has not dialed; false when that is no longer the case. */
export async function extendUndialedClaim(on: Connection, runId: number, nodeId: string, until: number): Promise<boolean> {
  const trx = queryable(on);
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
export async function markReconciled(on: Connection, runId: number, previous: number | null, now: number, live: readonly RunState[]): Promise<boolean> {
  const result = await queryable(on)
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
export async function setFoundCall(on: Connection, runId: number, found: { providerCallId: string; sentAt: number; deadlineAt: number }): Promise<boolean> {
  const trx = queryable(on);
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
export async function releaseNodeCalls(on: Connection, nodeId: string): Promise<void> {
  await releaseNodeCallsQuery(on, nodeId).execute();
}

function releaseNodeCallsQuery(on: Connection, nodeId: string) {
  return queryable(on).updateTable('workflow_runs').set({ lease_owner: null }).where('deadline_at', 'is not', null).where('lease_owner', '=', nodeId).where('provider_call_id', 'is not', null);
}

/** The plan of releaseNodeCalls's statement, as text (a test checks that it reads the live runs' index). */
export function explainReleaseNodeCalls(on: Connection, nodeId: string): Promise<string> {
  return explainQuery(on, releaseNodeCallsQuery(on, nodeId));
}

/** Marks a live run's cancel request, once; false when the run is not live or was already marked. */
export async function markCancelRequested(on: Connection, runId: number, at: number, live: readonly RunState[]): Promise<boolean> {
  const result = await queryable(on)
    .updateTable('workflow_runs')
    .set({ cancel_requested_at: at })
    .where('id', '=', runId)
    .where('state', 'in', live)
    .where('cancel_requested_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export interface TransitionEvent {
  /**
   * The state entered, or `deferred` (a queued run put off to its calling hours; it stays queued),
   * or `answered_by` (who answered was decided; the state is unchanged), or an event the agent
   * runtime reported on a run that has not ended (its `result`, its own `agent.*` events).
   */
  type: RunState | 'deferred' | 'answered_by' | 'result' | `agent.${string}` | 'transfer' | 'dtmf';
  at: number;
  data: Record<string, unknown>;
  /** The webhook message type it is reported as. */
  webhookType: string;
}

/** One transition's writes, as runs/transition-run.ts builds them and the write queue (run-write-queue.ts) holds them. */
export interface TransitionWrite {
  runId: number;
  columns: RunColumns;
  guard: StateGuard;
  event: TransitionEvent;
}

/** A transition written: the event's seq, and the webhook deliveries to announce once committed. */
export interface TransitionWritten {
  seq: number;
  webhookDeliveries: number;
}

/**
 * A transition's writes: the compare-and-set update, its event and the event's webhook deliveries.
 * On PostgreSQL one statement (one round trip; the outbox trigger writes the deliveries); on
 * SQLite, in-process, the update and then run-event-outbox.ts. Undefined when the guard did not
 * hold (nothing written). `webhookDeliveries` counts those to announce once committed.
 */
export async function writeTransition(
  on: Connection,
  runId: number,
  columns: RunColumns,
  guard: StateGuard,
  event: TransitionEvent,
): Promise<TransitionWritten | undefined> {
  const trx = queryable(on);
  if (on.dialect === 'postgres') {
    const update = guardedRunUpdate(trx, runId, columns, guard)
      .returning(['id', 'last_event_seq', 'org_id']);
    // The event's insert fires the outbox trigger (migration 005), which writes its deliveries:
    // the statement says how many, for the caller to announce once committed.
    const result = await sql<{ seq: number; deliveries: number }>`
      with run as (${update})
      insert into run_events (run_id, seq, type, at, data)
      select id, last_event_seq, ${event.type}, ${event.at}, ${JSON.stringify(event.data)}::jsonb from run
      returning seq, ${subscribedEndpoints(sql`(select org_id from run)`, event.webhookType)} as deliveries`.execute(trx);
    const row = result.rows[0];
    return row ? { seq: Number(row.seq), webhookDeliveries: Number(row.deliveries) } : undefined;
  }
  const run = await guardedRunUpdateReturningRow(trx, on.dialect, runId, columns, guard);
  if (run === undefined) return undefined;
  const webhookDeliveries = await appendRunEvents(on, [
    { run, type: event.type, at: event.at, data: event.data, webhookType: event.webhookType, messageId: runMessageId(runId, run.last_event_seq) },
  ]);
  return { seq: run.last_event_seq, webhookDeliveries };
}

/**
 * The columns a set-based transition (writeTransitionsOnPostgres) may write, with their PostgreSQL
 * types: the rows arrive as one JSON array, typed by jsonb_to_recordset.
 */
const SET_BASED_COLUMNS = {
  state: 'text',
  updated_at: 'bigint',
  outcome_reason: 'text',
  raw_provider_status: 'text',
  provider_call_id: 'text',
  deadline_at: 'bigint',
  cancel_requested_at: 'bigint',
  ringing_at: 'bigint',
  answered_at: 'bigint',
  ended_at: 'bigint',
  lease_owner: 'text',
  lease_expires_at: 'bigint',
  scheduled_for: 'bigint',
} as const;

type SetBasedColumn = keyof typeof SET_BASED_COLUMNS;

/**
 * Which transitions one set-based statement can write together: the same event type, the same
 * columns and the same guard (values may differ per run). Undefined when a write cannot be part
 * of one (a column or value it does not know): it is written alone, by writeTransition.
 */
export function transitionShape(write: TransitionWrite): string | undefined {
  const names = Object.keys(write.columns).sort();
  for (const name of names) {
    if (!Object.hasOwn(SET_BASED_COLUMNS, name)) return undefined;
    const value: unknown = (write.columns as Record<string, unknown>)[name];
    if (value !== null && typeof value !== 'number' && typeof value !== 'string') return undefined;
  }
  const { from, onlyFrom, deadlineBefore, answeredByUnset, transfer } = write.guard;
  // The set-based statement knows no verdict or transfer guard: such a write goes alone.
  if (answeredByUnset === true || transfer !== undefined) return undefined;
  return JSON.stringify([write.event.type, names, from, onlyFrom ?? null, deadlineBefore !== undefined]);
}

/**
 * Locks these runs in id order (PostgreSQL), before a batch's set-based statements: those lock rows
 * in whatever order their join reads them, so two nodes' batches holding the same runs (provider
 * callbacks reach any node) could each wait for the other until deadlock_timeout. In one order,
 * the later batch simply waits.
 */
export async function lockRunsInIdOrder(on: Connection, runIds: readonly number[]): Promise<void> {
  const trx = queryable(on);
  if (runIds.length < 2) return;
  await sql`select id from workflow_runs where id = any(${[...new Set(runIds)].sort((a, b) => a - b)}::bigint[]) order by id for update`.execute(trx);
}

/**
 * Transitions of several runs that share one shape (transitionShape), at most one per run, in one
 * PostgreSQL statement: the compare-and-set update of every run, joined to its values, and the
 * insert of the events of those it moved (whose statement-level outbox trigger, migration 005,
 * writes their deliveries once for all; each row counts its own). Returns, in the order given, each
 * write's result: undefined where the guard did not hold.
 */
export async function writeTransitionsOnPostgres(on: Connection, writes: readonly TransitionWrite[]): Promise<(TransitionWritten | undefined)[]> {
  const trx = queryable(on);
  const first = writes[0];
  if (!first) return [];
  const names = Object.keys(first.columns).sort() as SetBasedColumn[];
  const rows = writes.map((w) => {
    const row: Record<string, unknown> = { id: w.runId, event_at: w.event.at, event_data: w.event.data, deadline_before: w.guard.deadlineBefore ?? null };
    for (const name of names) row[name] = w.columns[name];
    return row;
  });
  const recordType = sql.join([sql`id bigint, event_at bigint, event_data jsonb, deadline_before bigint`, ...names.map((n) => sql`${sql.id(n)} ${sql.raw(SET_BASED_COLUMNS[n])}`)]);
  const assignments = sql.join([...names.map((n) => sql`${sql.id(n)} = ${sql.id('i', n)}`), sql`last_event_seq = r.last_event_seq + 1`]);
  const { from, onlyFrom, deadlineBefore } = first.guard;
  // The events' insert fires the outbox trigger (migration 005): each row says how many deliveries
  // it wrote for its event, for the caller to announce once committed.
  const result = await sql<{ run_id: number; seq: number; deliveries: number }>`
    with i as (select * from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as i(${recordType})),
    run as (
      update workflow_runs r set ${assignments} from i
      where r.id = i.id and r.state = any(${[...from]}::text[])
        ${onlyFrom !== undefined ? sql`and r.state = ${onlyFrom}` : sql``}
        ${deadlineBefore !== undefined ? sql`and r.deadline_at < i.deadline_before` : sql``}
      returning r.id, r.last_event_seq, r.org_id
    )
    insert into run_events (run_id, seq, type, at, data)
    select run.id, run.last_event_seq, ${first.event.type}, i.event_at, i.event_data from run join i on i.id = run.id
    returning run_id, seq, ${subscribedEndpoints(sql`(select org_id from run where run.id = run_events.run_id)`, first.event.webhookType)} as deliveries`.execute(trx);
  const written = new Map(result.rows.map((row) => [Number(row.run_id), { seq: Number(row.seq), webhookDeliveries: Number(row.deliveries) }]));
  return writes.map((w) => written.get(w.runId));
}

/** A dial recorded for one run: its state and cancel request after the write. */
export type DialRecordedRow = Pick<WorkflowRunRow, 'state' | 'cancel_requested_at'>;

/**
 * The dials of several runs (at most one per run) recorded in one PostgreSQL statement, as
 * setDialRecorded records one. Returns, in the order given, each run's row after the write
 * (undefined for a run that no longer exists).
 */
export async function setDialsRecordedOnPostgres(on: Connection, dials: readonly { runId: number; dial: DialValues }[]): Promise<(DialRecordedRow | undefined)[]> {
  const trx = queryable(on);
  if (dials.length === 0) return [];
  const rows = dials.map(({ runId, dial }) => ({ id: runId, provider_call_id: dial.providerCallId, sent_at: dial.sentAt, dialing_deadline_at: dial.dialingDeadlineAt }));
  const result = await sql<{ id: number } & DialRecordedRow>`
    update workflow_runs r set provider_call_id = i.provider_call_id, dial_sent_at = i.sent_at, lease_expires_at = null,
      deadline_at = case when r.state = 'dialing' then i.dialing_deadline_at else r.deadline_at end
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as i(id bigint, provider_call_id text, sent_at bigint, dialing_deadline_at bigint)
    where r.id = i.id
    returning r.id, r.state, r.cancel_requested_at`.execute(trx);
  const byId = new Map(result.rows.map((row) => [Number(row.id), { state: row.state, cancel_requested_at: row.cancel_requested_at }]));
  return dials.map(({ runId }) => byId.get(runId));
}
