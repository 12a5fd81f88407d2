// The statements that read runs and their events, with the rows they return. Callers turn rows
// into what they show (runs/read-run.ts renders the API's view) or act on (dispatch/ picks runs
// to end); JSON columns come back decoded.
import type { ProviderName, RunState } from '../schema/schema.js';
import { explainQuery } from '../engine/query-plans.js';
import { lockingRows } from '../engine/row-locks.js';
import { decodeJson, queryable, type Connection } from '../engine/store.js';

export function runDetailsQuery(on: Connection) {
  return queryable(on)
    .selectFrom('workflow_runs as r')
    .innerJoin('workflows as w', 'w.id', 'r.workflow_id')
    .innerJoin('workflow_definitions as d', 'd.id', 'r.definition_id')
    .select([
      'r.id', 'r.name', 'r.state', 'r.mode', 'r.trigger_uuid', 'r.definition_id', 'r.phone_number', 'r.caller_id',
      'r.telephony_configuration_id', 'r.initial_context', 'r.outcome_reason', 'r.provider_call_id',
      'r.created_at', 'r.updated_at', 'r.ended_at', 'r.org_id', 'r.raw_provider_status',
      'r.claimed_at', 'r.dial_sent_at', 'r.ringing_at', 'r.answered_at', 'r.cancel_requested_at', 'r.scheduled_for',
      'r.campaign_id', 'r.contact_id', 'r.attempt', 'r.answered_by', 'r.raw_answered_by',
      'r.campaign_id', 'r.contact_id', 'r.attempt', 'r.result',
      'w.workflow_uuid', 'd.version as definition_version',
    ]);
}

/** A run with its workflow's UUID and its definition's version. */
export type RunDetailsRow = NonNullable<Awaited<ReturnType<ReturnType<typeof runDetailsQuery>['executeTakeFirst']>>>;

/** One run, of this organization when one is given. */
export function selectRunDetails(on: Connection, runId: number, orgId?: number): Promise<RunDetailsRow | undefined> {
  return runDetailsQuery(on)
    .where('r.id', '=', runId)
    .$if(orgId !== undefined, (q) => q.where('r.org_id', '=', orgId as number))
    .executeTakeFirst();
}

/** An organization's most recent runs, newest first. */
export function selectRecentRuns(on: Connection, orgId: number, limit: number): Promise<RunDetailsRow[]> {
  return runDetailsQuery(on).where('r.org_id', '=', orgId).orderBy('r.id', 'desc').limit(limit).execute();
}

export interface RunEventRow {
  seq: number;
  type: string;
  at: number;
  data: Record<string, unknown>;
}

/** Up to `limit` events of a run after `after`, in order. */
export async function selectRunEvents(on: Connection, runId: number, after: number, limit: number): Promise<RunEventRow[]> {
  const rows = await queryable(on).selectFrom('run_events').select(['seq', 'type', 'at', 'data']).where('run_id', '=', runId).where('seq', '>', after).orderBy('seq').limit(limit).execute();
  return rows.map((r) => ({ seq: r.seq, type: r.type, at: r.at, data: decodeJson<Record<string, unknown>>(r.data) }));
}

/** A run with its pinned definition's graph and version and its workflow's UUID. */
export function selectRunWithDefinition(on: Connection, runId: number) {
  return queryable(on)
    .selectFrom('workflow_runs as r')
    .innerJoin('workflow_definitions as d', 'd.id', 'r.definition_id')
    .innerJoin('workflows as w', 'w.id', 'r.workflow_id')
    .select(['r.id', 'r.name', 'r.org_id', 'r.state', 'r.mode', 'r.provider_call_id', 'r.created_at', 'r.initial_context', 'r.telephony_configuration_id', 'd.version', 'd.graph', 'w.workflow_uuid'])
    .where('r.id', '=', runId)
    .executeTakeFirst();
}

/**
 * What answering-machine detection needs of a run: its pinned graph (the agent's settings), its
 * campaign's own settings (JSON text; null: none, or a direct run) and its initial_context.
 */
export async function selectRunAnsweringMachine(on: Connection, runId: number) {
  const row = await queryable(on)
    .selectFrom('workflow_runs as r')
    .innerJoin('workflow_definitions as d', 'd.id', 'r.definition_id')
    .leftJoin('campaigns as c', 'c.id', 'r.campaign_id')
    .select(['r.initial_context', 'd.graph', 'c.answering_machine as campaign_answering_machine'])
    .where('r.id', '=', runId)
    .executeTakeFirst();
  return row && { initialContext: row.initial_context, graph: row.graph, campaignAnsweringMachine: row.campaign_answering_machine ?? null };
}

/** A definition's graph as stored (JSON text), for what it asks of a dial. */
export async function selectDefinitionGraph(on: Connection, definitionId: number): Promise<unknown> {
  const row = await queryable(on).selectFrom('workflow_definitions').select('graph').where('id', '=', definitionId).executeTakeFirst();
  return row?.graph;
}

/** The telephony configuration a run dials through (whatever its status now). */
export function selectRunConfiguration(on: Connection, configurationId: number) {
  return queryable(on).selectFrom('telephony_configurations').selectAll().where('id', '=', configurationId).executeTakeFirstOrThrow();
}

export async function selectRunState(on: Connection, runId: number): Promise<RunState | undefined> {
  const row = await queryable(on).selectFrom('workflow_runs').select('state').where('id', '=', runId).executeTakeFirst();
  return row?.state;
}

/** Locks an organization's row until the transaction ends (PostgreSQL), so its creations near the queue cap take turns. */
export async function lockOrganization(on: Connection, orgId: number): Promise<void> {
  const trx = queryable(on);
  await lockingRows(on, trx.selectFrom('organizations').select('id').where('id', '=', orgId)).execute();
}

/**
 * How many runs an organization has queued (inside a transaction when the count must be exact):
 * those due at once, or (`scheduled`) those deferred to their calling hours, each counted on its
 * own partial index (migration 007).
 */
export async function countQueuedRuns(on: Connection, orgId: number, scheduled = false): Promise<number> {
  const { queued } = await queryable(on)
    .selectFrom('workflow_runs')
    .select((eb) => eb.fn.countAll<number | string>().as('queued'))
    .where('org_id', '=', orgId)
    .where('state', '=', 'queued')
    .where('scheduled_for', scheduled ? 'is not' : 'is', null)
    .executeTakeFirstOrThrow();
  return Number(queued);
}

/** Ids of a node's live runs whose cancel was requested. */
export async function selectCancelRequested(on: Connection, nodeId: string, live: readonly RunState[]): Promise<number[]> {
  const rows = await queryable(on).selectFrom('workflow_runs').select('id').where('lease_owner', '=', nodeId).where('cancel_requested_at', 'is not', null).where('state', 'in', live).execute();
  return rows.map((r) => r.id);
}

/** Which of these runs have ended (a node's held calls whose runs another node ended). */
export async function selectEndedRuns(on: Connection, runIds: readonly number[]): Promise<{ id: number; outcome_reason: string | null }[]> {
  if (runIds.length === 0) return [];
  return queryable(on).selectFrom('workflow_runs').select(['id', 'outcome_reason']).where('id', 'in', runIds).where('ended_at', 'is not', null).execute();
}

/**
 * Ids of runs queued since before `queuedBefore`, oldest first: a run due at once counts from its
 * creation, a deferred one from its scheduled_for (each read on its own partial index).
 */
export async function selectStaleQueuedRuns(on: Connection, queuedBefore: number, limit: number): Promise<number[]> {
  const due = await queryable(on).selectFrom('workflow_runs').select('id').where('state', '=', 'queued').where('scheduled_for', 'is', null).where('created_at', '<', queuedBefore).orderBy('created_at').limit(limit).execute();
  const deferred =
    due.length < limit
      ? await queryable(on).selectFrom('workflow_runs').select('id').where('state', '=', 'queued').where('scheduled_for', 'is not', null).where('scheduled_for', '<', queuedBefore).orderBy('scheduled_for').limit(limit - due.length).execute()
      : [];
  return [...due, ...deferred].map((r) => r.id);
}

/**
 * Live runs whose deadline passed before `now`, most overdue first; those of the providers in
 * `excludingProviders` are left out (reconciliation asks their provider before they end).
 */
export function selectOverdueRuns(on: Connection, now: number, live: readonly RunState[], limit: number, excludingProviders: readonly ProviderName[] = []) {
  let query = queryable(on)
    .selectFrom('workflow_runs as r')
    .select(['r.id', 'r.provider_call_id', 'r.state'])
    .where('r.state', 'in', live)
    .where('r.deadline_at', '<', now);
  if (excludingProviders.length > 0) {
    query = query.innerJoin('telephony_configurations as c', 'c.id', 'r.telephony_configuration_id').where('c.provider', 'not in', excludingProviders);
  }
  return query.orderBy('r.deadline_at').limit(limit).execute();
}

/**
 * Live runs of the given providers to ask about: every overdue one, and those with a recorded call
 * that had no news (no write to the run, no question asked) since `quietSince`. Most overdue first.
 */
/**
 * Live runs of the given providers that are overdue or quiet, at most `perRoute` per telephony
 * configuration (its earliest deadlines) and `limit` in all. The per-route cap is taken in SQL, not
 * from the `limit` earliest across routes: one route with `limit` overdue runs (an outage) would
 * otherwise keep every other route's out of reconciliation, and so out of the reaper, until it
 * drained. The result lists every route's first run before any route's second, so `limit` too
 * leaves no route out while there are fewer routes than `limit`.
 */
type ReconcileCandidatesOptions = { providers: readonly ProviderName[]; live: readonly RunState[]; now: number; quietSince: number; perRoute: number; limit: number };

export function selectReconcileCandidates(on: Connection, options: ReconcileCandidatesOptions) {
  return reconcileCandidatesQuery(on, options).execute();
}

/** The plan of selectReconcileCandidates's statement, as text (a test checks it reads only live runs). */
export function explainReconcileCandidates(on: Connection, options: ReconcileCandidatesOptions): Promise<string> {
  return explainQuery(on, reconcileCandidatesQuery(on, options));
}

function reconcileCandidatesQuery(on: Connection, options: ReconcileCandidatesOptions) {
  const ranked = queryable(on)
    .selectFrom('workflow_runs as r')
    .innerJoin('telephony_configurations as c', 'c.id', 'r.telephony_configuration_id')
    .select((eb) => [
      'r.id', 'r.state', 'r.provider_call_id', 'r.telephony_configuration_id', 'r.phone_number', 'r.caller_id',
      'r.claimed_at', 'r.deadline_at', 'r.reconciled_at',
      eb.fn.agg<number>('row_number').over((ob) => ob.partitionBy('r.telephony_configuration_id').orderBy('r.deadline_at').orderBy('r.id')).as('route_rank'),
    ])
    .where('c.provider', 'in', options.providers)
    // Live runs are exactly those with a deadline: this reads migration 002's partial index of them,
    // never the runs that ended.
    .where('r.deadline_at', 'is not', null)
    .where('r.state', 'in', options.live)
    .where((eb) =>
      eb.or([
        eb('r.deadline_at', '<', options.now),
        eb.and([
          eb('r.provider_call_id', 'is not', null),
          eb('r.updated_at', '<', options.quietSince),
          eb.or([eb('r.reconciled_at', 'is', null), eb('r.reconciled_at', '<', options.quietSince)]),
        ]),
      ]),
    );
  return queryable(on)
    .selectFrom(ranked.as('ranked'))
    .select(['id', 'state', 'provider_call_id', 'telephony_configuration_id', 'phone_number', 'caller_id', 'claimed_at', 'deadline_at', 'reconciled_at'])
    .where('route_rank', '<=', options.perRoute)
    .orderBy('route_rank')
    .orderBy('deadline_at')
    .orderBy('id')
    .limit(options.limit);
}

export type ReconcileCandidate = Awaited<ReturnType<typeof selectReconcileCandidates>>[number];

/** Call ids recorded for runs of a route to one number claimed since `since`: calls that are not another run's. */
export async function selectRecordedCallIds(on: Connection, configurationId: number, phoneNumber: string, since: number): Promise<string[]> {
  const rows = await recordedCallIdsQuery(on, configurationId, phoneNumber, since).execute();
  return rows.flatMap((r) => (r.provider_call_id === null ? [] : [r.provider_call_id]));
}

/** The plan of selectRecordedCallIds's statement, as text (a test checks the number's index serves it). */
export function explainRecordedCallIds(on: Connection, configurationId: number, phoneNumber: string, since: number): Promise<string> {
  return explainQuery(on, recordedCallIdsQuery(on, configurationId, phoneNumber, since));
}

function recordedCallIdsQuery(on: Connection, configurationId: number, phoneNumber: string, since: number) {
  return queryable(on)
    .selectFrom('workflow_runs')
    .select('provider_call_id')
    // A route belongs to one organization: naming it lets the number's (org_id, phone_number, id)
    // index serve the read instead of every run of every route.
    .where('org_id', '=', (eb) => eb.selectFrom('telephony_configurations').select('org_id').where('id', '=', configurationId))
    .where('telephony_configuration_id', '=', configurationId)
    .where('phone_number', '=', phoneNumber)
    .where('claimed_at', '>=', since)
    .where('provider_call_id', 'is not', null);
}
