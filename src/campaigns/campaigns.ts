// Campaigns as organizations create, read and steer them. The state machine:
//
//   draft ──start──► running ──pause──► paused ──resume──► running
//     │                 │ ▲                │
//     │                 │ └────────────────┘
//     │                 ├──(nothing left)──► completed
//     └──cancel──► canceled ◄──cancel──────┘ (also from running)
//
// Every move is a compare-and-set on the state (store/statements/campaign-statements.ts), so a move that lost
// a race, or is not allowed, answers 409 campaign_state_conflict and changes nothing. Creation and
// every move are journalled for the event stream and written to the webhook outbox
// (campaign.created, started, paused, resumed, completed, canceled) in their own transaction
// (recordChange). The scheduler
// (scheduler.ts) also pauses a campaign (circuit breaker, ends_at) and completes it.
//
// Pause stops new dials at once: attempts created but not yet claimed by a dispatcher are canceled
// (reason campaign_paused) and their contacts get the attempt back (settings.ts's `settle`), so the
// dispatcher never dials a paused campaign's queued run. Runs already claimed or live finish.
import type { Deps } from '../deps.js';
import { DialtoneError, validationFailed, type FieldError } from '../errors.js';
import { admitAgentAndRoute, admitTarget, type Target } from '../admission/admission.js';
import { refuseUndetectableRoute } from '../admission/machine-detection.js';
import { iso, toRunView, type RunView } from '../runs/read-run.js';
import { TERMINAL_STATES, type TerminalState } from '../runs/states.js';
import {
  cancelPendingContacts,
  countOpenCampaigns,
  insertCampaign,
  selectCampaign,
  selectCampaignWithCounts,
  selectCampaignPage,
  selectCampaignRunPage,
  selectQueuedCampaignRuns,
  updateCampaignAnsweringMachine,
  updateCampaignState,
} from '../store/statements/campaign-statements.js';
import { selectRunConfiguration } from '../store/statements/run-reads.js';
import { ANSWERED_BY, type AnsweredBy, type CampaignRow, type CampaignState, type CampaignStreamEvent, type ContactStatus, type PausedReason, type RunMode } from '../store/schema/schema.js';
import type { CampaignChange } from '../store/statements/campaign-statements.js';
import { insertCampaignEvent } from '../store/statements/event-stream-statements.js';
import { lockOrganization } from '../store/statements/run-reads.js';
import { decodeJson, type StoreTransaction } from '../store/engine/store.js';
import { insertOrganizationDeliveries } from '../store/statements/webhook-statements.js';
import { campaignMessageId, isWebhookEventType } from '../webhooks/event-types.js';
import { campaignMessageBody } from '../webhooks/message.js';
import { selectWorkflowUuid } from '../store/statements/workflow-statements.js';
import { answeringMachineProblems, type AnsweringMachine } from '../workflows/answering-machine.js';
import { cachedProgress, remember, type Counted } from './progress-cache.js';
import { breakerOf, CANCEL_REASON, limitProblems, PAUSE_REASON, retryRule, scheduleOf, type BreakerInput, type CampaignSchedule, type CircuitBreaker, type RetryInput, type RetryRule } from './settings.js';

export interface CreateCampaignBody {
  name: string;
  agent_uuid?: string;
  workflow_uuid?: string;
  mode: RunMode;
  telephony_configuration_id?: number | null;
  max_concurrent_calls?: number;
  calls_per_second?: number;
  starts_at?: string;
  ends_at?: string;
  schedule?: { timezone: string; windows: Record<string, unknown> };
  retry?: RetryInput;
  circuit_breaker?: BreakerInput;
  /** The campaign's own answering-machine settings, in place of its agent's; null or absent: the agent's. */
  answering_machine?: unknown;
}

export interface CampaignProgress {
  total: number;
  pending: number;
  in_progress: number;
  reached: number;
  exhausted: number;
  suppressed: number;
  invalid: number;
  canceled: number;
  attempts: number;
  outcomes: Partial<Record<TerminalState, number>>;
  /** Attempts by who answered (answering-machine detection; every verdict listed, zero included): machines apart from people. */
  answered_by: Record<AnsweredBy, number>;
}

export interface CampaignView {
  id: number;
  name: string;
  state: CampaignState;
  paused_reason: PausedReason | null;
  mode: RunMode;
  agent_uuid: string | null;
  workflow_uuid: string;
  telephony_configuration_id: number;
  max_concurrent_calls: number;
  calls_per_second: number | null;
  starts_at: string | null;
  ends_at: string | null;
  schedule: CampaignSchedule | null;
  retry: { max_attempts: number; delay_seconds: number; on: string[] };
  circuit_breaker: { failure_ratio: number; window_seconds: number; min_calls: number };
  /** The campaign's own answering-machine settings; null: its agent's apply. */
  answering_machine: AnsweringMachine | null;
  progress: CampaignProgress;
  created_at: string;
  updated_at: string;
  started_at: string | null;
}

/** The decoded rules of a campaign row. */
export interface CampaignRules {
  retry: RetryRule;
  breaker: CircuitBreaker;
  schedule: CampaignSchedule | null;
}

export function rulesOf(row: CampaignRow): CampaignRules {
  return {
    retry: decodeJson<RetryRule>(row.retry),
    breaker: decodeJson<CircuitBreaker>(row.circuit_breaker),
    schedule: row.schedule === null ? null : decodeJson<CampaignSchedule>(row.schedule),
  };
}

/** What a campaign's attempts run: its agent (trigger) UUID, else its workflow's UUID. */
export async function campaignTarget(deps: Pick<Deps, 'store'>, row: CampaignRow): Promise<Target> {
  if (row.trigger_uuid !== null) return { kind: 'agent', uuid: row.trigger_uuid };
  // An archived workflow's UUID resolves to nothing: admission answers workflow_not_found.
  return { kind: 'workflow', uuid: (await selectWorkflowUuid(deps.store, row.workflow_id)) ?? '' };
}

function parseTime(value: string | undefined, pointer: string, problems: FieldError[]): number | null {
  if (value === undefined) return null;
  const at = Date.parse(value);
  if (Number.isNaN(at)) {
    problems.push({ pointer, detail: 'An RFC 3339 date-time, e.g. "2026-03-02T09:00:00Z".' });
    return null;
  }
  return at;
}

export async function createCampaign(deps: Deps, orgId: number, body: CreateCampaignBody): Promise<CampaignView> {
  const problems: FieldError[] = [];
  if ((body.agent_uuid === undefined) === (body.workflow_uuid === undefined)) {
    problems.push({ pointer: '', detail: 'Name exactly one of agent_uuid and workflow_uuid.' });
  }
  const startsAt = parseTime(body.starts_at, '/starts_at', problems);
  const endsAt = parseTime(body.ends_at, '/ends_at', problems);
  if (startsAt !== null && endsAt !== null && endsAt <= startsAt) problems.push({ pointer: '/ends_at', detail: 'ends_at must come after starts_at.' });
  if (endsAt !== null && endsAt <= deps.clock.now()) problems.push({ pointer: '/ends_at', detail: 'ends_at is in the past.' });
  const schedule = scheduleOf(body.schedule, problems);
  const retry = retryRule(body.retry, problems);
  const breaker = breakerOf(body.circuit_breaker);
  limitProblems(body, problems);
  const answeringMachine = answeringMachineOf(body.answering_machine, problems);
  if (problems.length > 0) throw validationFailed(problems);

  const target: Target = body.agent_uuid !== undefined ? { kind: 'agent', uuid: body.agent_uuid } : { kind: 'workflow', uuid: body.workflow_uuid ?? '' };
  // Admission's stages 1 to 3 (docs/design.md, "Check order"), as a direct call through the same
  // agent and route would be checked: a route that cannot place calls now refuses the campaign
  // (422 telephony_not_ready) rather than each of its attempts later.
  const { target: resolved, route: admitted } = await admitAgentAndRoute(deps, { orgId, target, mode: body.mode, routeId: body.telephony_configuration_id, answeringMachine });
  const route = admitted.row;
  const now = deps.clock.now();
  const { row, deliveries } = await deps.store.transaction('durable', async (trx) => {
    // The count and the insert share the transaction, under the organization's row lock on
    // PostgreSQL (SQLite's one writer runs them in turn already), so creations racing at the cap
    // cannot all see room for one more.
    await lockOrganization(trx, orgId);
    const max = deps.config.CAMPAIGN_MAX_OPEN_PER_ORGANIZATION;
    if ((await countOpenCampaigns(trx, orgId)) >= max) {
      throw new DialtoneError('campaign_limit', `An organization may have at most ${max} campaigns open (draft, running or paused; CAMPAIGN_MAX_OPEN_PER_ORGANIZATION); complete or cancel one first.`);
    }
    const inserted = await insertCampaign(trx, {
      orgId,
      name: body.name,
      workflowId: resolved.workflow.id,
      triggerUuid: resolved.triggerUuid,
      mode: body.mode,
      telephonyConfigurationId: route.id,
      // Without its own cap a campaign may fill its route, and no more: the route's cap holds anyway.
      maxConcurrentCalls: body.max_concurrent_calls ?? route.max_concurrent_calls,
      callsPerSecond: body.calls_per_second ?? null,
      startsAt,
      endsAt,
      scheduleJson: schedule === null ? null : JSON.stringify(schedule),
      retryJson: JSON.stringify(retry),
      circuitBreakerJson: JSON.stringify(breaker),
      answeringMachineJson: answeringMachine === null ? null : JSON.stringify(answeringMachine),
      at: now,
    });
    return { row: inserted, deliveries: await recordChange(trx, 'campaign.created', inserted, now) };
  });
  deps.signals.journal();
  if (deliveries > 0) deps.signals.outbox();
  return viewOf(deps, row, 'fresh', resolved.workflow.workflow_uuid);
}

/**
 * A campaign's own answering_machine from a request: null when absent or null (its agent's apply),
 * else the object, validated like the definition's (every problem with its JSON Pointer, into
 * `problems`).
 */
function answeringMachineOf(input: unknown, problems: FieldError[]): AnsweringMachine | null {
  if (input === undefined || input === null) return null;
  const found = answeringMachineProblems(input, '/answering_machine');
  problems.push(...found);
  return found.length === 0 ? (input as AnsweringMachine) : null;
}

/** The states in which a campaign's answering_machine may change: until it has ended. */
const SETTINGS_CHANGE_FROM: readonly CampaignState[] = ['draft', 'running', 'paused'];

/**
 * Replaces a campaign's own answering_machine settings (null: its agent's again), until the
 * campaign ends. Checked as at creation, with the route's detection capability: its attempts
 * dialed from now on ask the provider what the new settings ask (dispatch reads them per dial);
 * calls already placed keep what they were dialed with.
 */
export async function updateCampaign(deps: Deps, orgId: number | undefined, campaignId: number, body: { answering_machine?: unknown }): Promise<CampaignView> {
  const problems: FieldError[] = [];
  if (!('answering_machine' in body)) problems.push({ pointer: '/answering_machine', detail: 'Required: the settings (an object), or null for the agent\'s.' });
  const answeringMachine = answeringMachineOf(body.answering_machine, problems);
  if (problems.length > 0) throw validationFailed(problems);
  const row = await findCampaign(deps, orgId, campaignId);
  if (!SETTINGS_CHANGE_FROM.includes(row.state)) throw conflict(row, 'change its settings');
  // What the attempts will ask of the route: the new settings, else the agent's (stage 1 resolves it as an attempt would).
  const asked = answeringMachine ?? (await admitTarget(deps, row.org_id, await campaignTarget(deps, row), row.mode)).graph.answering_machine;
  refuseUndetectableRoute(deps, await selectRunConfiguration(deps.store, row.telephony_configuration_id), asked);
  const updated = await updateCampaignAnsweringMachine(deps.store, campaignId, orgId, {
    answeringMachineJson: answeringMachine === null ? null : JSON.stringify(answeringMachine),
    states: SETTINGS_CHANGE_FROM,
    at: deps.clock.now(),
  });
  // Ended between the read and the write.
  if (!updated) throw conflict(await findCampaign(deps, orgId, campaignId), 'change its settings');
  return viewOf(deps, updated, 'fresh');
}

/** A campaign of the organization; another organization's is "not found", never "forbidden". */
export async function findCampaign(deps: Pick<Deps, 'store'>, orgId: number | undefined, campaignId: number): Promise<CampaignRow> {
  const row = await selectCampaign(deps.store, campaignId, orgId);
  if (!row) throw new DialtoneError('campaign_not_found', `No campaign ${campaignId}.`);
  return row;
}

/** `progress` 'fresh' for a lone reader that polls at its own pace (the CLI's --watch): no cache helps it. */
export async function getCampaign(deps: Deps, orgId: number | undefined, campaignId: number, progress: 'fresh' | 'cached' = 'cached'): Promise<CampaignView> {
  return viewOf(deps, await findCampaign(deps, orgId, campaignId), progress);
}

export async function listCampaigns(deps: Deps, orgId: number, page: { after?: number | undefined; limit: number }): Promise<{ data: CampaignView[]; next_after: number | null }> {
  const rows = await selectCampaignPage(deps.store, orgId, page.after, page.limit + 1);
  const data = await Promise.all(rows.slice(0, page.limit).map((row) => viewOf(deps, row, 'cached')));
  return { data, next_after: rows.length > page.limit ? (data[data.length - 1]?.id ?? null) : null };
}

/** The campaign's runs (attempts), newest first, as the workflow runs API shows them. */
export async function listCampaignRuns(deps: Deps, orgId: number, campaignId: number, page: { after?: number | undefined; limit: number }): Promise<{ data: RunView[]; next_after: number | null }> {
  await findCampaign(deps, orgId, campaignId);
  const rows = await selectCampaignRunPage(deps.store, campaignId, page.after, page.limit + 1);
  const data = rows.slice(0, page.limit).map(toRunView);
  return { data, next_after: rows.length > page.limit ? (data[data.length - 1]?.id ?? null) : null };
}

/** The progress shown for a campaign's contacts (by status) and runs (by state), as one read counted them. */
export function progressFrom(contacts: Partial<Record<ContactStatus, number>>, runs: Partial<Record<string, number>>, answeredBy: Partial<Record<AnsweredBy, number>> = {}): CampaignProgress {
  const count = (status: ContactStatus) => contacts[status] ?? 0;
  const outcomes: Partial<Record<TerminalState, number>> = {};
  for (const state of TERMINAL_STATES) if (runs[state]) outcomes[state] = runs[state];
  return {
    // Every contact is in exactly one status: the buckets below add up to the total in every state of the campaign.
    total: Object.values(contacts).reduce((sum, n) => sum + n, 0),
    pending: count('pending'),
    in_progress: count('in_progress'),
    reached: count('reached'),
    exhausted: count('exhausted'),
    suppressed: count('suppressed'),
    invalid: count('invalid'),
    canceled: count('canceled'),
    attempts: Object.values(runs).reduce((sum: number, n) => sum + (n ?? 0), 0),
    outcomes,
    answered_by: Object.fromEntries(ANSWERED_BY.map((verdict) => [verdict, answeredBy[verdict] ?? 0])) as Record<AnsweredBy, number>,
  };
}

/** The campaign's row and progress counted now, from one snapshot (selectCampaignWithCounts). */
async function countNow(deps: Pick<Deps, 'store'>, campaignId: number): Promise<Counted<CampaignProgress>> {
  const read = await selectCampaignWithCounts(deps.store, campaignId);
  if (!read) throw new DialtoneError('campaign_not_found', `No campaign ${campaignId}.`);
  return { row: read.row, progress: progressFrom(read.contacts, read.runs, read.answeredBy) };
}

/**
 * The campaign as the API shows it: its state and its progress always from the same read, so they
 * agree (a completed campaign shows no contact in progress). `progress` 'fresh' counts now (an
 * action's answer, kept for the reads after it); 'cached' may serve a count up to
 * CAMPAIGN_PROGRESS_CACHE_MS old, made while the campaign was as `row` shows it (progress-cache.ts).
 */
async function viewOf(deps: Pick<Deps, 'store' | 'clock' | 'config'>, row: CampaignRow, progress: 'fresh' | 'cached', workflowUuid?: string): Promise<CampaignView> {
  const counted = await (progress === 'fresh' ? remember(deps, row.id, countNow(deps, row.id)) : cachedProgress(deps, row, () => countNow(deps, row.id)));
  return view(counted.row, counted.progress, workflowUuid ?? (await selectWorkflowUuid(deps.store, row.workflow_id)) ?? '');
}

function view(row: CampaignRow, progress: CampaignProgress, workflowUuid: string): CampaignView {
  const rules = rulesOf(row);
  return {
    id: row.id,
    name: row.name,
    state: row.state,
    paused_reason: row.paused_reason,
    mode: row.mode,
    agent_uuid: row.trigger_uuid,
    workflow_uuid: workflowUuid,
    telephony_configuration_id: row.telephony_configuration_id,
    max_concurrent_calls: row.max_concurrent_calls,
    calls_per_second: row.calls_per_second,
    starts_at: row.starts_at === null ? null : iso(row.starts_at),
    ends_at: row.ends_at === null ? null : iso(row.ends_at),
    schedule: rules.schedule,
    retry: { max_attempts: rules.retry.maxAttempts, delay_seconds: rules.retry.delaySeconds, on: rules.retry.on },
    circuit_breaker: { failure_ratio: rules.breaker.failureRatio, window_seconds: rules.breaker.windowSeconds, min_calls: rules.breaker.minCalls },
    answering_machine: row.answering_machine === null ? null : decodeJson<AnsweringMachine>(row.answering_machine),
    progress,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
    started_at: row.started_at === null ? null : iso(row.started_at),
  };
}

function conflict(row: CampaignRow, action: string): DialtoneError {
  return new DialtoneError('campaign_state_conflict', `Campaign ${row.id} is ${row.state}; it cannot ${action}.`, { extra: { state: row.state } });
}

export type CampaignAction = 'start' | 'pause' | 'resume' | 'cancel';

/** The states each action moves a campaign from. */
const ACTION_FROM: Record<CampaignAction, readonly CampaignState[]> = {
  start: ['draft'],
  pause: ['running'],
  resume: ['paused'],
  cancel: ['draft', 'running', 'paused'],
};

/** `orgId` undefined: the administration CLI, which names campaigns across organizations. */
export async function actOnCampaign(deps: Deps, orgId: number | undefined, campaignId: number, action: CampaignAction): Promise<CampaignView> {
  const row = await findCampaign(deps, orgId, campaignId);
  const now = deps.clock.now();
  const from = ACTION_FROM[action];
  if (!from.includes(row.state)) throw conflict(row, action);
  if (action === 'resume' && row.ends_at !== null && row.ends_at <= now) {
    throw new DialtoneError('campaign_state_conflict', `Campaign ${row.id} passed its ends_at (${iso(row.ends_at)}); it cannot resume.`, { extra: { state: row.state } });
  }
  const moved =
    action === 'start'
      ? await moveCampaign(deps, campaignId, { from, to: 'running', at: now }, { started_at: now, breaker_since: now }, 'campaign.started')
      : action === 'pause'
        ? await moveCampaign(deps, campaignId, { from, to: 'paused', at: now }, { paused_reason: 'request' }, 'campaign.paused')
        : action === 'resume'
          ? await moveCampaign(deps, campaignId, { from, to: 'running', at: now }, { paused_reason: null, breaker_since: now }, 'campaign.resumed')
          : await moveCampaign(deps, campaignId, { from, to: 'canceled', at: now }, { paused_reason: null }, 'campaign.canceled');
  // Moved by someone else between the read and the write.
  if (!moved) throw conflict(await findCampaign(deps, orgId, campaignId), action);
  if (action === 'pause') await stopQueuedAttempts(deps, campaignId, PAUSE_REASON);
  if (action === 'cancel') {
    await stopQueuedAttempts(deps, campaignId, CANCEL_REASON);
    await cancelPendingContacts(deps.store, campaignId, now);
  }
  if (action === 'start' || action === 'resume' || action === 'cancel') deps.signals.campaigns();
  return viewOf(deps, moved, 'fresh');
}

/**
 * Records a campaign's change in the change's transaction: journalled for the event stream, and
 * the webhook message written to the organization's subscribed endpoints (an outbox, like run
 * events': the event is streamed and the message sent if and only if the change committed).
 * Returns how many deliveries it wrote.
 */
async function recordChange(trx: StoreTransaction, event: CampaignStreamEvent, row: CampaignRow, at: number): Promise<number> {
  await insertCampaignEvent(trx, { org_id: row.org_id, campaign_id: row.id, type: event, name: row.name, state: row.state, paused_reason: row.paused_reason, at });
  if (!isWebhookEventType(event)) return 0;
  return insertOrganizationDeliveries(trx, row.org_id, {
    messageId: campaignMessageId(row.id, event, at),
    eventType: event,
    payload: campaignMessageBody(event, at, row),
    at,
  });
}

/**
 * Moves a campaign (compare-and-set, updateCampaignState) and, in the same durable transaction,
 * records the change (`event`) for the event stream and the webhooks (recordChange). Undefined
 * when the campaign was not in a state the move starts from.
 */
export async function moveCampaign(
  deps: Pick<Deps, 'store' | 'signals'>,
  campaignId: number,
  move: Parameters<typeof updateCampaignState>[2],
  change: CampaignChange,
  event: CampaignStreamEvent,
): Promise<CampaignRow | undefined> {
  const { moved, deliveries } = await deps.store.transaction('durable', async (trx) => {
    const row = await updateCampaignState(trx, campaignId, move, change);
    if (!row) return { moved: row, deliveries: 0 };
    return { moved: row, deliveries: await recordChange(trx, event, row, move.at) };
  });
  if (moved) deps.signals.journal();
  // Committed: this node's delivery worker looks at once, and the other nodes' (PostgreSQL) through
  // the announcement signals.outbox makes (deps.ts).
  if (deliveries > 0) deps.signals.outbox();
  return moved;
}

/**
 * Ends a campaign's attempts still queued (not claimed by a dispatcher) `canceled` through the run
 * lifecycle, so none of them is dialed; their contacts settle on the scheduler's next tick.
 * The campaign's state was changed first, and attempts are created only while it is running
 * (store/statements/campaign-statements.ts, lockRunningCampaign), so no new one appears behind this sweep.
 */
export async function stopQueuedAttempts(deps: Pick<Deps, 'store' | 'lifecycle' | 'clock'>, campaignId: number, reason: string): Promise<number> {
  let stopped = 0;
  for (;;) {
    const ids = await selectQueuedCampaignRuns(deps.store, campaignId, 500);
    if (ids.length === 0) return stopped;
    let moved = 0;
    for (const runId of ids) {
      const now = deps.clock.now();
      if (await deps.lifecycle.transition(runId, 'canceled', { at: now, reason, requestedAt: now, onlyFrom: 'queued', durable: true })) moved++;
    }
    stopped += moved;
    // Every run of the batch was claimed meanwhile (none left queued to stop): done.
    if (moved === 0) return stopped;
  }
}


