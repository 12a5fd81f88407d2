// The statements of campaigns (campaigns/): the campaigns themselves (their state machine as
// compare-and-set updates, the scheduler's lease), their contacts (import, the due ones, each
// step of an attempt as a compare-and-set on status and attempts) and the reads of a campaign's
// runs. Run state is never written here: attempts are created by runs/create-run.ts and ended by
// runs/lifecycle.ts; these only read it.
import { sql } from '../engine/kysely.js';
import { explainQuery } from '../engine/query-plans.js';
import { lockingFreeRows } from '../engine/row-locks.js';
import { runDetailsQuery, type RunDetailsRow } from './run-reads.js';
import type { AnsweredBy, CampaignContactRow, CampaignRow, CampaignState, CampaignsTable, ContactStatus, RunMode, RunState } from '../schema/schema.js';
import { atomically, inTransaction, queryable, storeTransaction, type Connection, type StoreTransaction } from '../engine/store.js';

/** How many campaigns the organization has open (draft, running or paused); inside the creating transaction, after lockOrganization, the count is exact. */
export async function countOpenCampaigns(on: Connection, orgId: number): Promise<number> {
  const { n } = await queryable(on)
    .selectFrom('campaigns')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('org_id', '=', orgId)
    .where('state', 'in', ['draft', 'running', 'paused'])
    .executeTakeFirstOrThrow();
  return Number(n);
}

export interface NewCampaignValues {
  orgId: number;
  name: string;
  workflowId: number;
  triggerUuid: string | null;
  mode: RunMode;
  telephonyConfigurationId: number;
  maxConcurrentCalls: number;
  callsPerSecond: number | null;
  startsAt: number | null;
  endsAt: number | null;
  scheduleJson: string | null;
  retryJson: string;
  circuitBreakerJson: string;
  /** The campaign's own answering_machine settings (JSON text); null: its agent's. */
  answeringMachineJson: string | null;
  at: number;
}

export function insertCampaign(on: Connection, values: NewCampaignValues): Promise<CampaignRow> {
  return queryable(on)
    .insertInto('campaigns')
    .values({
      org_id: values.orgId,
      name: values.name,
      workflow_id: values.workflowId,
      trigger_uuid: values.triggerUuid,
      mode: values.mode,
      telephony_configuration_id: values.telephonyConfigurationId,
      max_concurrent_calls: values.maxConcurrentCalls,
      calls_per_second: values.callsPerSecond,
      starts_at: values.startsAt,
      ends_at: values.endsAt,
      schedule: values.scheduleJson,
      retry: values.retryJson,
      circuit_breaker: values.circuitBreakerJson,
      // Named only when set: a campaign without settings of its own writes what it always wrote.
      ...(values.answeringMachineJson !== null ? { answering_machine: values.answeringMachineJson } : {}),
      state: 'draft',
      paused_reason: null,
      breaker_since: null,
      pacing_next_at: null,
      lease_owner: null,
      lease_expires_at: null,
      created_at: values.at,
      updated_at: values.at,
      started_at: null,
      finished_at: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** One campaign, of this organization when one is given. */
export function selectCampaign(on: Connection, campaignId: number, orgId?: number): Promise<CampaignRow | undefined> {
  return queryable(on)
    .selectFrom('campaigns')
    .selectAll()
    .where('id', '=', campaignId)
    .$if(orgId !== undefined, (q) => q.where('org_id', '=', orgId as number))
    .executeTakeFirst();
}

/** Up to `limit` of an organization's campaigns, newest first, older than `beforeId` when given. */
export function selectCampaignPage(on: Connection, orgId: number, beforeId: number | undefined, limit: number): Promise<CampaignRow[]> {
  return queryable(on)
    .selectFrom('campaigns')
    .selectAll()
    .where('org_id', '=', orgId)
    .$if(beforeId !== undefined, (q) => q.where('id', '<', beforeId as number))
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
}

export type CampaignChange = Partial<Pick<CampaignsTable, 'paused_reason' | 'breaker_since' | 'started_at' | 'finished_at' | 'pacing_next_at'>>;

/**
 * Moves a campaign to `to` only from one of `from` (compare-and-set), with the columns that go
 * with the move; `contactsVersion` also requires that no import committed since it was read.
 * The row, or undefined when the campaign was not in one of those states.
 */
export function updateCampaignState(
  on: Connection,
  campaignId: number,
  move: { from: readonly CampaignState[]; to: CampaignState; at: number; contactsVersion?: number },
  change: CampaignChange = {},
): Promise<CampaignRow | undefined> {
  return queryable(on)
    .updateTable('campaigns')
    .set({ state: move.to, updated_at: move.at, ...change })
    .where('id', '=', campaignId)
    .where('state', 'in', move.from)
    .$if(move.contactsVersion !== undefined, (q) => q.where('contacts_version', '=', move.contactsVersion as number))
    .returningAll()
    .executeTakeFirst();
}

/**
 * Replaces a campaign's own answering_machine settings (JSON text; null: its agent's again) while it
 * is in one of `states`; the campaign's next dials use them (dispatch reads them per dial).
 * Undefined when the campaign was in none of them (or is another organization's).
 */
export function updateCampaignAnsweringMachine(
  on: Connection,
  campaignId: number,
  orgId: number | undefined,
  change: { answeringMachineJson: string | null; states: readonly CampaignState[]; at: number },
): Promise<CampaignRow | undefined> {
  return queryable(on)
    .updateTable('campaigns')
    .set({ answering_machine: change.answeringMachineJson, updated_at: change.at })
    .where('id', '=', campaignId)
    .$if(orgId !== undefined, (q) => q.where('org_id', '=', orgId as number))
    .where('state', 'in', change.states)
    .returningAll()
    .executeTakeFirst();
}

/** Columns the scheduler keeps on a campaign it holds (pacing, finished). */
export async function updateCampaignColumns(on: Connection, campaignId: number, change: CampaignChange): Promise<void> {
  await queryable(on).updateTable('campaigns').set(change).where('id', '=', campaignId).execute();
}

/**
 * The scheduler's claim: up to `limit` campaigns with work left (running, paused or canceled, not
 * finished) that no node holds, leased to `nodeId` until `until`. On PostgreSQL the rows are
 * locked and those another node is claiming skipped, so two nodes never take one campaign.
 */
export async function claimCampaigns(on: Connection, nodeId: string, now: number, until: number, limit: number): Promise<CampaignRow[]> {
  return atomically(on, 'durable', async (trx) => {
    const free = await lockingFreeRows(
      on,
      trx
        .selectFrom('campaigns')
        .select('id')
        .where('finished_at', 'is', null)
        .where('state', 'in', ['running', 'paused', 'canceled'])
        .where((eb) => eb.or([eb('lease_owner', 'is', null), eb('lease_expires_at', '<=', now), eb('lease_owner', '=', nodeId)]))
        // Least recently worked first (a released campaign keeps the time it was let go): every
        // campaign gets its turn however many there are, paused ones included.
        .orderBy(sql`coalesce(lease_expires_at, 0)`)
        .orderBy('id')
        .limit(limit),
    ).execute();
    if (free.length === 0) return [];
    return trx
      .updateTable('campaigns')
      .set({ lease_owner: nodeId, lease_expires_at: until })
      .where('id', 'in', free.map((row) => row.id))
      .returningAll()
      .execute();
  });
}

/** Lets go of a campaign this node held; `lease_expires_at` keeps when, for the claim's turn order. */
export async function releaseCampaignLease(on: Connection, campaignId: number, nodeId: string, now: number): Promise<void> {
  await queryable(on).updateTable('campaigns').set({ lease_owner: null, lease_expires_at: now }).where('id', '=', campaignId).where('lease_owner', '=', nodeId).execute();
}

/**
 * Inside an attempt's creating transaction: true while the campaign is running. On PostgreSQL the
 * row is share-locked, so a pause or cancel (which updates it) waits for the attempt to commit
 * and then sees its run, or the attempt sees the pause and creates nothing.
 */
export async function lockRunningCampaign(on: Connection, campaignId: number): Promise<boolean> {
  const trx = queryable(on);
  const query = trx.selectFrom('campaigns').select('id').where('id', '=', campaignId).where('state', '=', 'running');
  const row = await (on.dialect === 'postgres' ? query.forShare() : query).executeTakeFirst();
  return row !== undefined;
}

/**
 * Inside an import's transaction: counts one more import on the campaign while it may still take
 * contacts (draft, running, paused). False when it has completed or been canceled.
 */
export async function bumpContactsVersion(on: Connection, campaignId: number, at: number): Promise<boolean> {
  const trx = queryable(on);
  const row = await trx
    .updateTable('campaigns')
    .set((eb) => ({ contacts_version: eb('contacts_version', '+', 1), updated_at: at }))
    .where('id', '=', campaignId)
    .where('state', 'in', ['draft', 'running', 'paused'])
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

export interface NewContactValues {
  phoneNumber: string;
  initialContextJson: string | null;
  timezone: string | null;
}

/** Rows per insert statement: well below SQLite's bound-parameter limit. */
const CONTACT_INSERT_CHUNK = 500;

/** Inserts contacts, skipping numbers the campaign already has; how many were new. */
export async function insertContacts(on: Connection, campaignId: number, contacts: readonly NewContactValues[], at: number): Promise<number> {
  const trx = queryable(on);
  let inserted = 0;
  for (let start = 0; start < contacts.length; start += CONTACT_INSERT_CHUNK) {
    const rows = contacts.slice(start, start + CONTACT_INSERT_CHUNK).map((c) => ({
      campaign_id: campaignId,
      phone_number: c.phoneNumber,
      initial_context: c.initialContextJson,
      timezone: c.timezone,
      status: 'pending' as const,
      next_attempt_at: at,
      last_run_id: null,
      created_at: at,
      updated_at: at,
    }));
    const written = await trx
      .insertInto('campaign_contacts')
      .values(rows)
      .onConflict((oc) => oc.columns(['campaign_id', 'phone_number']).doNothing())
      .returning('id')
      .execute();
    inserted += written.length;
  }
  return inserted;
}

/** Pending contacts due at `now`, soonest first (campaign_contacts_due_idx). */
export function selectDueContacts(on: Connection, campaignId: number, now: number, limit: number): Promise<CampaignContactRow[]> {
  return queryable(on)
    .selectFrom('campaign_contacts')
    .selectAll()
    .where('campaign_id', '=', campaignId)
    .where('status', '=', 'pending')
    .where('next_attempt_at', '<=', now)
    .orderBy('next_attempt_at')
    .orderBy('id')
    .limit(limit)
    .execute();
}

/** How many of a campaign's contacts are in each status. */
export async function countContactsByStatus(on: Connection, campaignId: number): Promise<Partial<Record<ContactStatus, number>>> {
  const rows = await queryable(on)
    .selectFrom('campaign_contacts')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .where('campaign_id', '=', campaignId)
    .groupBy('status')
    .execute();
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
}

/** How many of a campaign's contacts are in one status. */
export async function countContactsInStatus(on: Connection, campaignId: number, status: ContactStatus): Promise<number> {
  const row = await queryable(on)
    .selectFrom('campaign_contacts')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('campaign_id', '=', campaignId)
    .where('status', '=', status)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** An in-progress contact whose latest run has ended, with how it ended. */
export interface EndedAttemptRow {
  id: number;
  attempts: number;
  refunded: number;
  last_run_id: number;
  run_state: RunState;
  outcome_reason: string | null;
  ended_at: number | null;
  /** Who answered (answering-machine detection), null when nobody asked. */
  answered_by: AnsweredBy | null;
}

/** Up to `limit` in-progress contacts of a campaign whose latest run is in one of `terminal`. */
export async function selectEndedAttempts(on: Connection, campaignId: number, terminal: readonly RunState[], limit: number): Promise<EndedAttemptRow[]> {
  const rows = await queryable(on)
    .selectFrom('campaign_contacts as c')
    .innerJoin('workflow_runs as r', 'r.id', 'c.last_run_id')
    .select(['c.id', 'c.attempts', 'c.refunded', 'c.last_run_id', 'r.state as run_state', 'r.outcome_reason', 'r.ended_at', 'r.answered_by'])
    .where('c.campaign_id', '=', campaignId)
    .where('c.status', '=', 'in_progress')
    .where('r.state', 'in', terminal)
    .limit(limit)
    .execute();
  return rows.map((r) => ({ ...r, last_run_id: r.last_run_id ?? 0 }));
}

/** Settles an in-progress contact whose run `runId` ended (compare-and-set on status and run). */
export async function settleContact(
  on: Connection,
  contactId: number,
  runId: number,
  change: { status: ContactStatus; nextAttemptAt?: number; refund?: boolean },
  at: number,
): Promise<boolean> {
  const result = await queryable(on)
    .updateTable('campaign_contacts')
    .set((eb) => ({
      status: change.status,
      updated_at: at,
      ...(change.nextAttemptAt !== undefined ? { next_attempt_at: change.nextAttemptAt } : {}),
      ...(change.refund ? { refunded: eb('refunded', '+', 1) } : {}),
    }))
    .where('id', '=', contactId)
    .where('status', '=', 'in_progress')
    .where('last_run_id', '=', runId)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/**
 * Inside an attempt's creating transaction: the contact goes `pending → in_progress` with one more
 * attempt, only if it is still pending with `attempts` attempts (compare-and-set): of two nodes or
 * two ticks that read it, one alone creates the attempt.
 */
export async function beginAttempt(on: Connection, contactId: number, attempts: number, at: number): Promise<boolean> {
  const trx = queryable(on);
  const result = await trx
    .updateTable('campaign_contacts')
    .set({ status: 'in_progress', attempts: attempts + 1, updated_at: at })
    .where('id', '=', contactId)
    .where('status', '=', 'pending')
    .where('attempts', '=', attempts)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Records the run of the attempt begun in the same transaction. */
export async function setContactRun(on: Connection, contactId: number, runId: number): Promise<void> {
  const trx = queryable(on);
  await trx.updateTable('campaign_contacts').set({ last_run_id: runId }).where('id', '=', contactId).execute();
}

/** A pending contact not dialed now: deferred to `nextAttemptAt`, or ended in `status` (compare-and-set on attempts). */
export async function updatePendingContact(on: Connection, contactId: number, attempts: number, change: { nextAttemptAt?: number; status?: ContactStatus }, at: number): Promise<boolean> {
  const result = await queryable(on)
    .updateTable('campaign_contacts')
    .set({
      updated_at: at,
      ...(change.nextAttemptAt !== undefined ? { next_attempt_at: change.nextAttemptAt } : {}),
      ...(change.status !== undefined ? { status: change.status } : {}),
    })
    .where('id', '=', contactId)
    .where('status', '=', 'pending')
    .where('attempts', '=', attempts)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Every pending contact of a campaign ends `canceled` (the campaign was canceled). */
export async function cancelPendingContacts(on: Connection, campaignId: number, at: number): Promise<number> {
  const result = await queryable(on)
    .updateTable('campaign_contacts')
    .set({ status: 'canceled', updated_at: at })
    .where('campaign_id', '=', campaignId)
    .where('status', '=', 'pending')
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** A page of a campaign's contacts in id order, after `afterId`, optionally in one status. */
export function selectContactPage(on: Connection, campaignId: number, filter: { status?: ContactStatus; afterId?: number }, limit: number): Promise<CampaignContactRow[]> {
  return queryable(on)
    .selectFrom('campaign_contacts')
    .selectAll()
    .where('campaign_id', '=', campaignId)
    .$if(filter.status !== undefined, (q) => q.where('status', '=', filter.status as ContactStatus))
    .$if(filter.afterId !== undefined, (q) => q.where('id', '>', filter.afterId as number))
    .orderBy('id')
    .limit(limit)
    .execute();
}

/** The attempts (runs) of some contacts, in attempt order. */
export async function selectContactAttempts(on: Connection, contactIds: readonly number[]): Promise<{ contact_id: number; attempt: number; run_id: number; state: RunState }[]> {
  if (contactIds.length === 0) return [];
  const rows = await queryable(on)
    .selectFrom('workflow_runs')
    .select(['contact_id', 'attempt', 'id as run_id', 'state'])
    .where('contact_id', 'in', contactIds)
    .orderBy('contact_id')
    .orderBy('attempt')
    .execute();
  return rows.map((r) => ({ contact_id: r.contact_id ?? 0, attempt: r.attempt ?? 0, run_id: r.run_id, state: r.state }));
}

/** Ids of a campaign's runs still queued (not claimed), up to `limit`. */
export async function selectQueuedCampaignRuns(on: Connection, campaignId: number, limit: number): Promise<number[]> {
  const rows = await queuedCampaignRunsQuery(on, campaignId, limit).execute();
  return rows.map((r) => r.id);
}

/**
 * A queued attempt's contact is in progress with the attempt as its last run (set in the attempt's
 * creating transaction), so the campaign's queued runs are found through its contacts in progress
 * (migration 010's (campaign_id, status, …) index: at most max_concurrent_calls of them), never
 * by reading every run the campaign ever made, which a tick outside the window would do all night.
 */
function queuedCampaignRunsQuery(on: Connection, campaignId: number, limit: number) {
  return queryable(on)
    .selectFrom('campaign_contacts as c')
    .innerJoin('workflow_runs as r', 'r.id', 'c.last_run_id')
    .select('r.id')
    .where('c.campaign_id', '=', campaignId)
    .where('c.status', '=', 'in_progress')
    .where('r.state', '=', 'queued')
    .limit(limit);
}

/** The plan of selectQueuedCampaignRuns's statement, as text (a test checks it reads the queue, not the campaign's history). */
export function explainQueuedCampaignRuns(on: Connection, campaignId: number, limit: number): Promise<string> {
  return explainQuery(on, queuedCampaignRunsQuery(on, campaignId, limit));
}

function campaignRunStatesQuery(on: Connection, campaignId: number) {
  return queryable(on)
    .selectFrom('workflow_runs')
    .select(['state', (eb) => eb.fn.countAll<number>().as('n')])
    .where('campaign_id', '=', campaignId)
    .groupBy('state');
}

/** How many of a campaign's runs are in each state (index-only: workflow_runs_campaign_state_idx). */
export async function countCampaignRunsByState(on: Connection, campaignId: number): Promise<Partial<Record<RunState, number>>> {
  const rows = await campaignRunStatesQuery(on, campaignId).execute();
  return Object.fromEntries(rows.map((r) => [r.state, Number(r.n)]));
}

export function explainCampaignRunStates(on: Connection, campaignId: number): Promise<string> {
  return explainQuery(on, campaignRunStatesQuery(on, campaignId));
}

/** The circuit breaker's counts: a campaign's runs that ended at or after `since` in one of `counted`, and how many of them `failed`. */
export async function countEndedCampaignRuns(on: Connection, campaignId: number, since: number, counted: readonly RunState[]): Promise<{ ended: number; failed: number }> {
  const row = await queryable(on)
    .selectFrom('workflow_runs')
    .select([(eb) => eb.fn.countAll<number>().as('ended'), sql<number>`coalesce(sum(case when state = 'failed' then 1 else 0 end), 0)`.as('failed')])
    .where('campaign_id', '=', campaignId)
    .where('ended_at', '>=', since)
    .where('state', 'in', counted)
    .executeTakeFirstOrThrow();
  return { ended: Number(row.ended), failed: Number(row.failed) };
}

/** A page of a campaign's runs as the API shows runs, newest first, older than `beforeId` when given. */
export function selectCampaignRunPage(on: Connection, campaignId: number, beforeId: number | undefined, limit: number): Promise<RunDetailsRow[]> {
  return runDetailsQuery(on)
    .where('r.campaign_id', '=', campaignId)
    .$if(beforeId !== undefined, (q) => q.where('r.id', '<', beforeId as number))
    .orderBy('r.id', 'desc')
    .limit(limit)
    .execute();
}

function campaignAnsweredByQuery(on: Connection, campaignId: number) {
  return queryable(on)
    .selectFrom('workflow_runs')
    .select(['answered_by', (eb) => eb.fn.countAll<number>().as('n')])
    .where('campaign_id', '=', campaignId)
    .where('answered_by', 'is not', null)
    .groupBy('answered_by');
}

/** How many of a campaign's runs each verdict was recorded for (index-only: workflow_runs_campaign_answered_by_idx, migration 021). */
export async function countCampaignRunsByAnsweredBy(on: Connection, campaignId: number): Promise<Partial<Record<AnsweredBy, number>>> {
  const rows = await campaignAnsweredByQuery(on, campaignId).execute();
  return Object.fromEntries(rows.flatMap((r) => (r.answered_by === null ? [] : [[r.answered_by, Number(r.n)]])));
}

export function explainCampaignAnsweredBy(on: Connection, campaignId: number): Promise<string> {
  return explainQuery(on, campaignAnsweredByQuery(on, campaignId));
}

/** A campaign with its contacts counted by status and its runs by state and by who answered, as one read saw them. */
export interface CampaignCounts {
  row: CampaignRow;
  contacts: Partial<Record<ContactStatus, number>>;
  runs: Partial<Record<RunState, number>>;
  answeredBy: Partial<Record<AnsweredBy, number>>;
}

/**
 * A campaign and its counts from one snapshot, so its state and its progress agree (a completed
 * campaign never shows a contact in progress, a count never misses a contact another count saw):
 * a read-only REPEATABLE READ transaction on PostgreSQL, whose statements share the snapshot of its
 * first; a transaction on SQLite, whose reads in WAL mode all see the database as of the first.
 * Undefined when there is no such campaign (of that organization, when given).
 */
export function selectCampaignWithCounts(on: Connection, campaignId: number, orgId?: number): Promise<CampaignCounts | undefined> {
  const read = async (trx: StoreTransaction): Promise<CampaignCounts | undefined> => {
    const row = await selectCampaign(trx, campaignId, orgId);
    if (!row) return undefined;
    return { row, contacts: await countContactsByStatus(trx, campaignId), runs: await countCampaignRunsByState(trx, campaignId), answeredBy: await countCampaignRunsByAnsweredBy(trx, campaignId) };
  };
  if (inTransaction(on)) return read(on);
  const transaction = on.db.transaction();
  return (on.dialect === 'postgres' ? transaction.setIsolationLevel('repeatable read').setAccessMode('read only') : transaction).execute((trx) => read(storeTransaction(trx, on.dialect)));
}
