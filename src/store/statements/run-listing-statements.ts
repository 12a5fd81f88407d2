// The statements behind the console's reads: a page of an organization's runs (newest first,
// filtered), the counts of its runs since a time, and what is queued and live on each of its routes.
import { sql } from '../engine/kysely.js';
import { explainQuery, notIndexed } from '../engine/query-plans.js';
import type { AnsweredBy, RunState } from '../schema/schema.js';
import { runDetailsQuery, type RunDetailsRow } from './run-reads.js';
import { queryable, type Connection } from '../engine/store.js';
import { COUNT_PAGE_ROWS, windowRunPages } from './run-window-pages.js';

export interface RunPageFilter {
  state?: RunState;
  /** The outcome a run ended with: a filter on the organization's page, like the state (no index of its own). */
  outcomeReason?: string;
  /** Who answered: a filter on the organization's page (no index of its own; most runs have none). */
  answeredBy?: AnsweredBy;
  workflowId?: number;
  phoneNumber?: string;
  /** Only the attempts of this campaign (served by migration 010's workflow_runs_campaign_idx). */
  campaignId?: number;
  /** Epoch ms, inclusive. */
  createdAfter?: number;
  /** Epoch ms, exclusive. */
  createdBefore?: number;
  /** Only runs with a smaller id (the previous page's cursor). */
  beforeId?: number;
}

/**
 * The ids of a page: the matching runs' ids, newest first. Only the ids, so that where an index
 * holds every column the conditions name, the page is found in the index alone: a time range
 * finds the window's entries in (org_id, created_at), and sorting them by id is a sort of
 * integers (SQLite's indexes end with the rowid), where reading each run of the window whole to
 * sort it cost 49 ms for a day of 50,000 runs (docs/benchmarks.md, "Growth: reads at 50,000 and 5,000,000 runs").
 */
/** A number, a workflow or a campaign to match: each has an index of its own, more specific than a time range. */
function hasOwnIndex(filter: RunPageFilter): boolean {
  return filter.phoneNumber !== undefined || filter.workflowId !== undefined || filter.campaignId !== undefined;
}

const hasTimeRange = (filter: RunPageFilter): boolean => filter.createdAfter !== undefined || filter.createdBefore !== undefined;

function pageIdsQuery(on: Connection, orgId: number, filter: RunPageFilter, limit: number) {
  // With a number, a workflow or a campaign to match, the time bounds are only filters (notIndexed):
  // SQLite's planner, which has no statistics, would otherwise prefer the (org_id, created_at) range
  // to the more specific equality index and sort the organization's whole window to find a page.
  const specific = hasOwnIndex(filter);
  const createdAt = specific ? notIndexed('r.created_at') : sql.ref<number>('r.created_at');
  // Within a time range the cursor only filters: walking (org_id, id) down from it to find a
  // window's runs reads every older run of the organization once the window runs out (its last
  // page), where the (org_id, created_at) range reads the window's entries and no more.
  const timeRange = !specific && hasTimeRange(filter);
  const id = timeRange ? notIndexed('r.id') : sql.ref<number>('r.id');
  return queryable(on)
    .selectFrom('workflow_runs as r')
    .select('r.id')
    .where('r.org_id', '=', orgId)
    .$if(filter.state !== undefined, (q) => q.where('r.state', '=', filter.state as RunState))
    .$if(filter.outcomeReason !== undefined, (q) => q.where('r.outcome_reason', '=', filter.outcomeReason as string))
    .$if(filter.answeredBy !== undefined, (q) => q.where('r.answered_by', '=', filter.answeredBy as AnsweredBy))
    .$if(filter.workflowId !== undefined, (q) => q.where('r.workflow_id', '=', filter.workflowId as number))
    .$if(filter.phoneNumber !== undefined, (q) => q.where('r.phone_number', '=', filter.phoneNumber as string))
    // Kept beside the org_id condition, so another organization's campaign id matches no run.
    .$if(filter.campaignId !== undefined, (q) => q.where('r.campaign_id', '=', filter.campaignId as number))
    .$if(filter.createdAfter !== undefined, (q) => q.where(createdAt, '>=', filter.createdAfter as number))
    .$if(filter.createdBefore !== undefined, (q) => q.where(createdAt, '<', filter.createdBefore as number))
    .$if(filter.beforeId !== undefined, (q) => q.where(id, '<', filter.beforeId as number))
    .orderBy('r.id', 'desc')
    .limit(limit);
}

/** The page's runs whole: its ids found first (pageIdsQuery), then only those runs read. */
function runPageQuery(on: Connection, orgId: number, filter: RunPageFilter, limit: number) {
  return runDetailsQuery(on).where('r.id', 'in', pageIdsQuery(on, orgId, filter, limit)).orderBy('r.id', 'desc');
}

/**
 * Runs the newest-first walk of a time range's page looks at before it leaves the page to the
 * range (selectRunPage): a few hundred index steps, a fraction of a millisecond, where a day's
 * range at 50,000 runs a day is 50,000 index entries to sort (9 ms, docs/benchmarks.md, "Growth: reads at 50,000 and 5,000,000 runs").
 */
export const RECENT_WALK_ROWS = 200;

/**
 * A time range's page found by walking the organization's newest runs (below the cursor) in id
 * order: of the `walkRows` runs the walk reads, those in the range, in order. That is the page
 * whenever it holds `limit` runs, or the walk read every run there is, whatever the order of
 * creation times: every run not read has a smaller id than every run read. So a range of recent
 * runs, the usual one, is found in `walkRows` steps, whatever its size; otherwise undefined, and
 * the range is read instead. Only for a time range alone (and the cursor): any other filter has
 * an index of its own, or, for the state and the outcome, would make the walk miss more often.
 */
async function recentPageIds(on: Connection, orgId: number, filter: RunPageFilter, limit: number, walkRows: number): Promise<number[] | undefined> {
  const timeOnly = hasTimeRange(filter) && !hasOwnIndex(filter) && filter.state === undefined && filter.outcomeReason === undefined && filter.answeredBy === undefined;
  if (!timeOnly) return undefined;
  const walked = await queryable(on)
    .selectFrom('workflow_runs')
    .select(['id', 'created_at'])
    .where('org_id', '=', orgId)
    .$if(filter.beforeId !== undefined, (q) => q.where('id', '<', filter.beforeId as number))
    .orderBy('id', 'desc')
    .limit(walkRows)
    .execute();
  const inRange = walked.filter((r) => (filter.createdAfter === undefined || r.created_at >= filter.createdAfter) && (filter.createdBefore === undefined || r.created_at < filter.createdBefore));
  return inRange.length >= limit || walked.length < walkRows ? inRange.slice(0, limit).map((r) => r.id) : undefined;
}

/** Up to `limit` of an organization's runs matching the filter, newest (highest id) first. */
export async function selectRunPage(on: Connection, orgId: number, filter: RunPageFilter, limit: number, walkRows = RECENT_WALK_ROWS): Promise<RunDetailsRow[]> {
  const recent = await recentPageIds(on, orgId, filter, limit, walkRows);
  if (recent === undefined) return runPageQuery(on, orgId, filter, limit).execute();
  if (recent.length === 0) return [];
  return runDetailsQuery(on).where('r.id', 'in', recent).orderBy('r.id', 'desc').execute();
}

/** The plan the store would use for selectRunPage's page when no walk finds it, as text (tests check that an index serves it). */
export function explainRunPage(on: Connection, orgId: number, filter: RunPageFilter, limit: number): Promise<string> {
  return explainQuery(on, runPageQuery(on, orgId, filter, limit));
}

export interface RunCountRow {
  state: RunState;
  outcome_reason: string | null;
  answered_by: AnsweredBy | null;
  count: number;
}

/** An organization's runs created at or after `since`, counted by state, outcome and who answered. */
export async function countRunsSince(on: Connection, orgId: number, since: number, pageRows = COUNT_PAGE_ROWS): Promise<RunCountRow[]> {
  // PostgreSQL aggregates the few groups in a hash table (and spills past work_mem): one statement.
  if (on.dialect === 'sqlite') return countRunsSincePaged(on, orgId, since, pageRows);
  const rows = await queryable(on)
    .selectFrom('workflow_runs')
    .select(['state', 'outcome_reason', 'answered_by', (eb) => eb.fn.countAll<number | string>().as('count')])
    .where('org_id', '=', orgId)
    .where('created_at', '>=', since)
    .groupBy(['state', 'outcome_reason', 'answered_by'])
    .execute();
  return rows.map((r) => ({ state: r.state, outcome_reason: r.outcome_reason, answered_by: r.answered_by, count: Number(r.count) }));
}

/** SQLite's count: the window a page at a time (run-window-pages.ts, COUNT_PAGE_ROWS), its memory a page's. */
async function countRunsSincePaged(on: Connection, orgId: number, since: number, pageRows: number): Promise<RunCountRow[]> {
  const groups = new Map<string, RunCountRow>();
  for await (const rows of windowRunPages(on, orgId, { start: since }, pageRows)) {
    for (const r of rows) {
      const key = JSON.stringify([r.state, r.outcome_reason, r.answered_by]);
      const known = groups.get(key);
      if (known) known.count += 1;
      else groups.set(key, { state: r.state, outcome_reason: r.outcome_reason, answered_by: r.answered_by, count: 1 });
    }
  }
  return [...groups.values()];
}

export interface RouteLoadRow {
  telephony_configuration_id: number;
  count: number;
}

/**
 * Queued runs per route, for the given routes: those due at once and those deferred to their
 * calling hours, each counted through its own partial index (migration 007), since no single
 * index holds every queued run and a count over `state = 'queued'` alone would read the whole table.
 */
export async function countQueuedPerRoute(on: Connection, configurationIds: readonly number[]): Promise<RouteLoadRow[]> {
  if (configurationIds.length === 0) return [];
  const [due, deferred] = await Promise.all([queuedPerRouteQuery(on, configurationIds, 'due').execute(), queuedPerRouteQuery(on, configurationIds, 'deferred').execute()]);
  const counts = new Map<number, number>();
  for (const r of [...due, ...deferred]) counts.set(r.telephony_configuration_id, (counts.get(r.telephony_configuration_id) ?? 0) + Number(r.count));
  return [...counts].map(([id, count]) => ({ telephony_configuration_id: id, count }));
}

function queuedPerRouteQuery(on: Connection, configurationIds: readonly number[], part: 'due' | 'deferred') {
  return queryable(on)
    .selectFrom('workflow_runs')
    .select(['telephony_configuration_id', (eb) => eb.fn.countAll<number | string>().as('count')])
    .where('state', '=', 'queued')
    .where('scheduled_for', part === 'due' ? 'is' : 'is not', null)
    .where('telephony_configuration_id', 'in', configurationIds)
    .groupBy('telephony_configuration_id');
}

/** The plans of countQueuedPerRoute's two statements, as text (a test checks that their partial indexes serve them). */
export async function explainQueuedPerRoute(on: Connection, configurationIds: readonly number[]): Promise<string> {
  return `${await explainQuery(on, queuedPerRouteQuery(on, configurationIds, 'due'))}\n${await explainQuery(on, queuedPerRouteQuery(on, configurationIds, 'deferred'))}`;
}

/** Live runs (dialing, ringing, in progress: exactly those with a deadline) per route. */
export async function countLivePerRoute(on: Connection, configurationIds: readonly number[]): Promise<RouteLoadRow[]> {
  if (configurationIds.length === 0) return [];
  const rows = await queryable(on)
    .selectFrom('workflow_runs')
    .select(['telephony_configuration_id', (eb) => eb.fn.countAll<number | string>().as('count')])
    .where('deadline_at', 'is not', null)
    .where('telephony_configuration_id', 'in', configurationIds)
    .groupBy('telephony_configuration_id')
    .execute();
  return rows.map((r) => ({ telephony_configuration_id: r.telephony_configuration_id, count: Number(r.count) }));
}
