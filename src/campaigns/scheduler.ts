// The campaign scheduler: one per node that runs the dispatcher (server.ts starts it). Every
// CAMPAIGN_TICK_INTERVAL_MS, or at once when a campaign is started or resumed on this node, it
// leases the campaigns with work left (store/statements/campaign-statements.ts, claimCampaigns: SKIP LOCKED
// on PostgreSQL, so two nodes never work one campaign at once) and, for each:
//
// 1. Settle: in-progress contacts whose run has ended become `reached` (completed), `pending`
//    again for a retry `delay_seconds` after the end (a state in `retry.on`, attempts left), or
//    `exhausted` (settings.ts's `settle`).
// 2. Circuit breaker: when at least `min_calls` attempts ended in the last `window_seconds` and the
//    share that ended `failed` reaches `failure_ratio`, pause (reason circuit_breaker).
// 3. `ends_at` passed: pause (reason ends_at). Nothing pending or in progress: `completed`.
// 4. Create due attempts, lazily: at most max_concurrent_calls in progress at once, at most what
//    calls_per_second allows since the last tick (the dispatcher then spaces the dials themselves
//    at calls_per_second, dispatch/claim-runs.ts), at most CAMPAIGN_BATCH_SIZE a tick, and none
//    outside the schedule's windows or before starts_at. Attempts still queued when a window
//    closes end canceled undialed (reason outside_campaign_schedule), given back to their contacts.
//    Each attempt is admitted like a direct call (admission/, docs/design.md, "Check order"): the
//    agent, the route and its readiness once per tick, then each contact's variables and the
//    calling policy, a batch at once (the suppression list in one statement). What a refusal makes
//    of the contact is ATTEMPT_REFUSALS below.
//
// An attempt is created in ONE durable transaction: the campaign still running (share-locked on
// PostgreSQL), the contact's compare-and-set `pending → in_progress` on its attempt count, the
// per-number cap's exact count, and the run's insert (runs/create-run.ts) with its unique
// (contact_id, attempt). A crash before the commit leaves nothing; a second node or tick that read
// the same contact loses the compare-and-set. The dispatcher then dials the run like any other,
// with its at-most-once claim. The queue thus never holds more than max_concurrent_calls of a
// campaign's runs, and memory holds one batch, whatever the list's length.
import type { Deps } from '../deps.js';
import { DialtoneError, type ErrorCode } from '../errors.js';
import { admitBatch, admitRoute, admitTarget, type AdmittedRoute, type ResolvedTarget } from '../admission/admission.js';
import type { PolicySettings, PolicyVerdict } from '../admission/policy.js';
import { decodeCallingHours, showOrganization } from '../orgs/organizations.js';
import { createRun } from '../runs/create-run.js';
import { transitionRunInTransaction, type AppliedTransition } from '../runs/transition-run.js';
import { TERMINAL_STATES, type TerminalState } from '../runs/states.js';
import {
  beginAttempt,
  cancelPendingContacts,
  claimCampaigns,
  countContactsInStatus,
  countEndedCampaignRuns,
  releaseCampaignLease,
  selectCampaign,
  selectDueContacts,
  selectEndedAttempts,
  setContactRun,
  settleContact,
  updateCampaignColumns,
  updatePendingContact,
  lockRunningCampaign,
} from '../store/statements/campaign-statements.js';
import type { CampaignContactRow, CampaignRow } from '../store/schema/schema.js';
import { campaignTarget, moveCampaign, rulesOf, stopQueuedAttempts, type CampaignRules } from './campaigns.js';
import { breakerTrips, insideSchedule, pacingAllowance, settle, CANCEL_REASON, PAUSE_REASON, SCHEDULE_REASON } from './settings.js';

/** Ended attempts settled per campaign per tick: bounds one tick's work; the rest wait for the next. */
const SETTLE_BATCH = 1_000;
/** Campaigns one node leases per tick. */
const CAMPAIGNS_PER_TICK = 50;

/** The breaker ignores canceled runs: a cancel says nothing about the route's health. */
const BREAKER_COUNTED = TERMINAL_STATES.filter((s) => s !== 'canceled');

/** What one tick did (for tests and logs). */
export interface TickReport {
  campaigns: number;
  created: number;
  settled: number;
}

/** One pass over the campaigns this node can lease. */
export async function runCampaignTick(deps: Deps): Promise<TickReport> {
  const now = deps.clock.now();
  const report: TickReport = { campaigns: 0, created: 0, settled: 0 };
  const leased = await claimCampaigns(deps.store, deps.nodeId, now, now + deps.config.CAMPAIGN_LEASE_MS, CAMPAIGNS_PER_TICK);
  for (const campaign of leased) {
    report.campaigns++;
    try {
      const done = await workCampaign(deps, campaign);
      report.created += done.created;
      report.settled += done.settled;
    } catch (error) {
      deps.logger.error({ err: error, campaignId: campaign.id }, 'campaign tick failed');
    } finally {
      await releaseCampaignLease(deps.store, campaign.id, deps.nodeId, deps.clock.now()).catch((error: unknown) => deps.logger.warn({ err: error, campaignId: campaign.id }, 'could not release a campaign lease; it expires on its own'));
    }
  }
  return report;
}

async function workCampaign(deps: Deps, campaign: CampaignRow): Promise<{ created: number; settled: number }> {
  const rules = rulesOf(campaign);
  const settled = await settleEnded(deps, campaign, rules);
  // Re-read: a pause or cancel may have come while this node settled.
  const row = (await selectCampaign(deps.store, campaign.id)) ?? campaign;
  const now = deps.clock.now();
  // The API stops a paused or canceled campaign's queued attempts after committing the move; if
  // that node died in between, or the sweep failed, the tick finishes it, so no attempt of a
  // campaign that is not running is ever left to be dialed.
  if (row.state === 'canceled') {
    await stopQueuedAttempts(deps, row.id, CANCEL_REASON);
    await cancelPendingContacts(deps.store, row.id, now);
    if ((await countContactsInStatus(deps.store, row.id, 'in_progress')) === 0) await updateCampaignColumns(deps.store, row.id, { finished_at: now });
    return { created: 0, settled };
  }
  if (row.state === 'paused') await stopQueuedAttempts(deps, row.id, PAUSE_REASON);
  if (row.state !== 'running') return { created: 0, settled };

  const since = Math.max(row.breaker_since ?? 0, now - rules.breaker.windowSeconds * 1000);
  if (breakerTrips(rules.breaker, await countEndedCampaignRuns(deps.store, row.id, since, BREAKER_COUNTED))) {
    await pauseBy(deps, row, 'circuit_breaker');
    return { created: 0, settled };
  }
  if (row.ends_at !== null && row.ends_at <= now) {
    await pauseBy(deps, row, 'ends_at');
    return { created: 0, settled };
  }
  const inProgress = await countContactsInStatus(deps.store, row.id, 'in_progress');
  if (inProgress === 0 && (await countContactsInStatus(deps.store, row.id, 'pending')) === 0) {
    // Compare-and-set on contacts_version: an import committed since the counts keeps it running.
    const completed = await moveCampaign(deps, row.id, { from: ['running'], to: 'completed', at: now, contactsVersion: row.contacts_version }, { finished_at: now }, 'campaign.completed');
    if (completed) deps.logger.info({ campaignId: row.id }, 'campaign completed');
    return { created: 0, settled };
  }
  const created = await createDueAttempts(deps, row, rules, inProgress, now);
  return { created, settled };
}

async function pauseBy(deps: Deps, row: CampaignRow, reason: 'circuit_breaker' | 'ends_at'): Promise<void> {
  const paused = await moveCampaign(deps, row.id, { from: ['running'], to: 'paused', at: deps.clock.now() }, { paused_reason: reason }, 'campaign.paused');
  if (!paused) return;
  deps.logger.warn({ campaignId: row.id, reason }, 'campaign paused');
  await stopQueuedAttempts(deps, row.id, PAUSE_REASON);
}

/** Step 1: the in-progress contacts whose run has ended. */
export async function settleEnded(deps: Pick<Deps, 'store' | 'clock'>, campaign: CampaignRow, rules: CampaignRules): Promise<number> {
  const ended = await selectEndedAttempts(deps.store, campaign.id, TERMINAL_STATES, SETTLE_BATCH);
  let settled = 0;
  for (const attempt of ended) {
    const now = deps.clock.now();
    const outcome = settle(
      { state: attempt.run_state as TerminalState, reason: attempt.outcome_reason, endedAt: attempt.ended_at ?? now, attempts: attempt.attempts, refunded: attempt.refunded, answeredBy: attempt.answered_by },
      rules.retry,
      campaign.state === 'canceled',
      now,
    );
    const change = outcome.status === 'pending' ? { status: outcome.status, nextAttemptAt: outcome.nextAttemptAt, refund: outcome.refund } : { status: outcome.status };
    if (await settleContact(deps.store, attempt.id, attempt.last_run_id, change, now)) settled++;
  }
  return settled;
}

/** What every attempt of one tick shares: the definition run, the route (or why it refuses), the organization's policy. */
interface AttemptContext {
  target: ResolvedTarget;
  /** The admitted route, or the refusal every attempt of the tick ends with (see ATTEMPT_REFUSALS). */
  route: { admitted: true; route: AdmittedRoute } | { admitted: false; refusal: DialtoneError };
  policy: PolicySettings;
}

/** Admission's stages 1 to 3 for the tick (docs/design.md, "Check order"), and the organization's policy settings. */
async function attemptContext(deps: Deps, row: CampaignRow): Promise<AttemptContext | undefined> {
  let target: ResolvedTarget;
  try {
    target = await admitTarget(deps, row.org_id, await campaignTarget(deps, row), row.mode);
  } catch (error) {
    // The agent was disabled or unpublished: there is no definition to pin an attempt to, so
    // nothing is created until it is back.
    if (error instanceof DialtoneError) {
      deps.logger.warn({ campaignId: row.id, code: error.code }, 'campaign cannot create attempts: its agent is not runnable');
      return undefined;
    }
    throw error;
  }
  let route: AttemptContext['route'];
  try {
    route = { admitted: true, route: await admitRoute(deps, row.org_id, row.telephony_configuration_id) };
  } catch (error) {
    if (!(error instanceof DialtoneError)) throw error;
    deps.logger.warn({ campaignId: row.id, code: error.code }, 'campaign attempts refused: its route cannot place calls');
    route = { admitted: false, refusal: error };
  }
  const org = await showOrganization(deps.store, row.org_id);
  return {
    target,
    route,
    policy: {
      numberCap: org?.number_max_calls != null && org.number_window_seconds != null ? { maxCalls: org.number_max_calls, windowSeconds: org.number_window_seconds } : null,
      callingHours: org ? decodeCallingHours(org.calling_hours) : null,
    },
  };
}

/** Step 4. */
async function createDueAttempts(deps: Deps, row: CampaignRow, rules: CampaignRules, inProgress: number, now: number): Promise<number> {
  if (row.starts_at !== null && now < row.starts_at) return 0;
  if (!insideSchedule(rules.schedule, now)) {
    // The window closed with attempts still queued (their route busy): none is dialed outside it.
    await stopQueuedAttempts(deps, row.id, SCHEDULE_REASON);
    return 0;
  }
  const pacing = pacingAllowance(row.calls_per_second, row.pacing_next_at, now);
  const room = Math.min(row.max_concurrent_calls - inProgress, pacing.allowed, deps.config.CAMPAIGN_BATCH_SIZE);
  if (room <= 0) return 0;
  const context = await attemptContext(deps, row);
  if (!context) return 0;

  let created = 0;
  // Read a little more than the room: contacts deferred by the policy leave their place to the next.
  const due = await selectDueContacts(deps.store, row.id, now, room * 2);
  // Attempts are created in waves of concurrent transactions, never more than the room left: each
  // is durable, and one at a time each would wait for its own flush (on SQLite the writes of a
  // wave share one; on PostgreSQL they use the pool's connections), so a busy node fell behind a
  // campaign's calls_per_second. How many at once is the store's to say (Store.transactionsAtOnce).
  const atOnce = deps.store.transactionsAtOnce;
  let failure: { error: unknown } | undefined;
  while (created < room && due.length > 0 && !failure) {
    const wave = due.splice(0, Math.min(room - created, atOnce));
    // Stages 4 and 5 for the wave at once; a refused route answers before them (its stage comes first).
    const verdicts: readonly (PolicyVerdict | undefined)[] = context.route.admitted
      ? await admitBatch(deps, row.org_id, context.target.graph, context.policy, wave.map((c) => ({ phoneNumber: c.phone_number, initialContextJson: c.initial_context, timezone: c.timezone })), now)
      : [];
    const outcomes = await Promise.allSettled(wave.map((contact, i) => createAttempt(deps, row, context, contact, verdicts[i])));
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') failure ??= { error: outcome.reason };
      else if (outcome.value) created++;
    }
    if (created > 0) deps.signals.work();
  }
  // The attempts that committed take their pacing slots even when another of the wave failed.
  if (row.calls_per_second !== null) await updateCampaignColumns(deps.store, row.id, { pacing_next_at: pacing.after(created) });
  if (failure) throw failure.error;
  return created;
}

class AttemptLost extends Error {}

/**
 * What an attempt makes of admission's refusals, by problem code: the direct call's answer, as the
 * contact's recorded outcome (docs/design.md, "Check order").
 *
 * - A refused route (disabled since the campaign was created, or not ready: `telephony_not_ready`)
 *   refuses every attempt of the tick: each is created and ended at once `failed` with the code as
 *   its `outcome_reason`, never dialed. It is counted like any failed attempt (the contact's retry
 *   rule, the campaign's progress and circuit breaker, which pauses the campaign when they pile up),
 *   and its `run.failed` message says why.
 * - The callee's refusals settle the contact without a run, as this table says.
 */
const ATTEMPT_REFUSALS: Partial<Record<ErrorCode, (verdict: Extract<PolicyVerdict, { admitted: false }>) => ContactChange>> = {
  missing_template_variables: () => ({ status: 'invalid' }),
  number_suppressed: () => ({ status: 'suppressed' }),
  // Deferred, not refused: the contact waits for a place under the cap.
  number_frequency_capped: (v) => (v.retryAt === null ? { status: 'exhausted' } : { nextAttemptAt: v.retryAt }),
  // Deferred to the next window in the contact's zones; never inside (the windows never meet): it cannot be called.
  outside_calling_hours: (v) => (v.retryAt === null ? { status: 'exhausted' } : { nextAttemptAt: v.retryAt }),
};

type ContactChange = Parameters<typeof updatePendingContact>[3];

/** Creates one contact's next attempt, or defers or ends the contact; true when a run was created. */
async function createAttempt(deps: Deps, row: CampaignRow, context: AttemptContext, contact: CampaignContactRow, verdict: PolicyVerdict | undefined): Promise<boolean> {
  const now = deps.clock.now();
  const orgId = row.org_id;
  if (verdict && !verdict.admitted) {
    const change = ATTEMPT_REFUSALS[verdict.refusal.code];
    if (!change) throw verdict.refusal;
    await updatePendingContact(deps.store, contact.id, contact.attempts, change(verdict), now);
    return false;
  }
  // The organization defers calls outside its hours: the contact waits for the window instead.
  if (verdict && verdict.scheduledFor !== null) {
    await updatePendingContact(deps.store, contact.id, contact.attempts, { nextAttemptAt: verdict.scheduledFor }, now);
    return false;
  }
  const refusedRoute = context.route.admitted ? undefined : context.route.refusal;
  const attempt = contact.attempts + 1;
  let ended: AppliedTransition | undefined;
  try {
    const run = await createRun(
      deps.store,
      {
        orgId,
        workflowId: context.target.workflow.id,
        definitionId: context.target.definition.id,
        definitionVersion: context.target.definition.version,
        mode: row.mode,
        triggerUuid: context.target.triggerUuid,
        phoneNumber: contact.phone_number,
        callerId: context.route.admitted ? context.route.route.callerId : null,
        telephonyConfigurationId: row.telephony_configuration_id,
        initialContextJson: contact.initial_context,
        scheduledFor: null,
        campaignAttempt: { campaignId: row.id, contactId: contact.id, attempt },
      },
      now,
      {
        beforeInsert: async (trx) => {
          if (!(await lockRunningCampaign(trx, row.id))) throw new AttemptLost('campaign no longer running');
          if (!(await beginAttempt(trx, contact.id, contact.attempts, now))) throw new AttemptLost('contact moved on');
        },
        // What admission left to the insert (the per-number cap, counted under the number's lock).
        ...(verdict?.atInsert ? { checks: verdict.atInsert } : {}),
        onCreated: async (trx, created) => {
          await setContactRun(trx, contact.id, created.id);
          // A refused route: the attempt ends here, in the transaction that made it, so no dispatcher ever claims it.
          if (refusedRoute) ended = await transitionRunInTransaction(trx, created.id, 'failed', { at: now, reason: refusedRoute.code, data: { detail: refusedRoute.message } });
        },
      },
    );
    deps.metrics.runsCreated.inc({ mode: row.mode });
    if (ended) deps.lifecycle.applied(ended);
    if (run.webhookDeliveries > 0) deps.signals.outbox();
    return true;
  } catch (error) {
    if (error instanceof AttemptLost) return false;
    if (error instanceof DialtoneError && error.code === 'number_frequency_capped') {
      // The cap is deferred, not refused: the contact waits until a place opens.
      await updatePendingContact(deps.store, contact.id, contact.attempts, { nextAttemptAt: now + (error.retryAfterSeconds ?? 60) * 1000 }, now);
      return false;
    }
    throw error;
  }
}

/**
 * The per-node loop around runCampaignTick: every CAMPAIGN_TICK_INTERVAL_MS of the injected
 * clock's timers, or at once when signalled; ticks never overlap.
 */
export class CampaignScheduler {
  private stopping = false;
  private ticking: Promise<void> | undefined;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly deps: Deps) {}

  start(): void {
    this.unsubscribe = this.deps.signals.onCampaigns(() => this.wake());
    this.wake();
  }

  wake(): void {
    if (this.stopping) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (this.stopping) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.ticking = this.tick().finally(() => {
        this.ticking = undefined;
      });
    }, delayMs);
  }

  private async tick(): Promise<void> {
    try {
      await runCampaignTick(this.deps);
    } catch (error) {
      this.deps.logger.error({ err: error }, 'campaign tick failed');
    }
    const again = this.again;
    this.again = false;
    this.schedule(again ? 0 : this.deps.config.CAMPAIGN_TICK_INTERVAL_MS);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.unsubscribe?.();
    if (this.timer) clearTimeout(this.timer);
    await this.ticking;
  }
}
