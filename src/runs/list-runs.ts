// An organization's runs as the console lists them: a filtered page, newest first, with the cursor
// to the next (older) page; and the counts the overview shows.
import { parseDestination } from '../shared/phone-number.js';
import { ANSWERED_BY, type AnsweredBy, type RunState } from '../store/schema/schema.js';
import { countLivePerRoute, countQueuedPerRoute, countRunsSince, selectRunPage, type RunPageFilter } from '../store/statements/run-listing-statements.js';
import { selectConfigurationsOfOrganization } from '../store/statements/configuration-statements.js';
import { selectWorkflowByUuid } from '../store/statements/workflow-statements.js';
import type { Store } from '../store/engine/store.js';
import { iso, toRunView, type RunView } from './read-run.js';
import { RUN_STATES } from './states.js';

export interface RunListQuery {
  state?: RunState;
  /** The normalized outcome_reason the run ended with (`hangup`, `ring_timeout`, …). */
  outcomeReason?: string;
  answeredBy?: AnsweredBy;
  workflowUuid?: string;
  phoneNumber?: string;
  /** A campaign's id; matched together with the organization, so another's campaign gives an empty page. */
  campaignId?: number;
  createdAfter?: number;
  createdBefore?: number;
  /** The `next_after` of the previous page: runs older than this id. */
  after?: number;
  limit: number;
}

export interface RunPage {
  data: RunView[];
  /** Pass as `after` for the next (older) page; null when this page is the last. */
  next_after: number | null;
}

export async function listRunPage(store: Store, orgId: number, query: RunListQuery): Promise<RunPage> {
  const filter: RunPageFilter = {};
  if (query.state !== undefined) filter.state = query.state;
  if (query.outcomeReason !== undefined) filter.outcomeReason = query.outcomeReason;
  if (query.answeredBy !== undefined) filter.answeredBy = query.answeredBy;
  if (query.workflowUuid !== undefined) {
    // Another organization's or an unknown workflow matches no run: an empty page, nothing revealed.
    const workflow = await selectWorkflowByUuid(store, query.workflowUuid);
    if (!workflow || workflow.org_id !== orgId) return { data: [], next_after: null };
    filter.workflowId = workflow.id;
  }
  if (query.phoneNumber !== undefined) {
    // Runs store E.164 (or a SIP URI as given); "+1 (202) 555-0123" finds the same runs as "+12025550123".
    const parsed = parseDestination(query.phoneNumber);
    filter.phoneNumber = parsed.ok ? parsed.destination.value : query.phoneNumber;
  }
  if (query.campaignId !== undefined) filter.campaignId = query.campaignId;
  if (query.createdAfter !== undefined) filter.createdAfter = query.createdAfter;
  if (query.createdBefore !== undefined) filter.createdBefore = query.createdBefore;
  if (query.after !== undefined) filter.beforeId = query.after;
  // One more than the page: whether an older page exists.
  const rows = await selectRunPage(store, orgId, filter, query.limit + 1);
  const page = rows.slice(0, query.limit).map(toRunView);
  const more = rows.length > query.limit;
  return { data: page, next_after: more ? (page[page.length - 1]?.id ?? null) : null };
}

export interface RunStats {
  since: string;
  /** Runs created since `since`, by state (every state listed, zero included). */
  by_state: Record<RunState, number>;
  /** The same runs by state and normalized outcome reason (only combinations that occur). */
  by_outcome: { state: RunState; outcome_reason: string | null; count: number }[];
  total: number;
  /** The same runs by who answered (answering-machine detection's verdict); `none`: no verdict (nobody asked, or not answered). */
  answered_by: Record<AnsweredBy | 'none', number>;
  /** Each verdict's share of the runs that have one (0 to 1, null when none has): the answer rate by human and by machine. */
  answer_rates: Record<AnsweredBy, number | null>;
  /** Every route of the organization with what is queued and live on it now. */
  routes: { telephony_configuration_id: number; name: string; provider: string; status: string; queued: number; live: number }[];
}

export async function runStats(store: Store, orgId: number, since: number): Promise<RunStats> {
  const [counts, configurations] = await Promise.all([countRunsSince(store, orgId, since), selectConfigurationsOfOrganization(store, orgId)]);
  const ids = configurations.map((c) => c.id);
  const [queued, live] = await Promise.all([countQueuedPerRoute(store, ids), countLivePerRoute(store, ids)]);
  const byState = Object.fromEntries(RUN_STATES.map((s) => [s, 0])) as Record<RunState, number>;
  for (const row of counts) byState[row.state] += row.count;
  const answeredBy = Object.fromEntries([...ANSWERED_BY, 'none'].map((v) => [v, 0])) as Record<AnsweredBy | 'none', number>;
  for (const row of counts) answeredBy[row.answered_by ?? 'none'] += row.count;
  const decided = ANSWERED_BY.reduce((sum, v) => sum + answeredBy[v], 0);
  // The grouping by verdict splits a state's and outcome's count: merged back for by_outcome.
  const byOutcome = new Map<string, { state: RunState; outcome_reason: string | null; count: number }>();
  for (const row of counts) {
    const key = JSON.stringify([row.state, row.outcome_reason]);
    const known = byOutcome.get(key);
    if (known) known.count += row.count;
    else byOutcome.set(key, { state: row.state, outcome_reason: row.outcome_reason, count: row.count });
  }
  const countOf = (rows: { telephony_configuration_id: number; count: number }[], id: number) => rows.find((r) => r.telephony_configuration_id === id)?.count ?? 0;
  return {
    since: iso(since),
    by_state: byState,
    by_outcome: [...byOutcome.values()].sort((a, b) => b.count - a.count),
    total: counts.reduce((sum, r) => sum + r.count, 0),
    answered_by: answeredBy,
    answer_rates: Object.fromEntries(ANSWERED_BY.map((v) => [v, decided === 0 ? null : answeredBy[v] / decided])) as Record<AnsweredBy, number | null>,
    routes: configurations.map((c) => ({
      telephony_configuration_id: c.id,
      name: c.name,
      provider: c.provider,
      status: c.status,
      queued: countOf(queued, c.id),
      live: countOf(live, c.id),
    })),
  };
}
