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
//    closes end canceled undialed (reason outside_campaign_schedule), given back to their contacts. Each contact passes the calling policy
//    first (policy/): suppressed → contact `suppressed`; per-number cap → deferred; outside the
//    callee's calling hours (the contact's own time zone when it has one) → deferred.
//
// An attempt is created in ONE durable transaction: the campaign still running (share-locked on
// PostgreSQL), the contact's compare-and-set `pending → in_progress` on its attempt count, the
// per-number cap's exact count, and the run's insert (runs/create-run.ts) with its unique
// (contact_id, attempt). A crash before the commit leaves nothing; a second node or tick that read
// the same contact loses the compare-and-set. The dispatcher then dials the run like any other,
// with its at-most-once claim. The queue thus never holds more than max_concurrent_calls of a
// campaign's runs, and memory holds one batch, whatever the list's length.
import type { Deps } from '../deps.js';
import { DialtoneError } from '../errors.js';
import { resolveTarget, type ResolvedTarget } from '../calls/resolve-target.js';
import { decodeCallingHours, showOrganization } from '../orgs/organizations.js';
import { nextCallingInstant, type CallingHours } from '../policy/calling-hours.js';
import { callingHoursVerdict } from '../policy/calling-hours-check.js';
import { numberCapChecks, type NumberCap } from '../policy/number-cap.js';
import { isSuppressed } from '../policy/suppressions.js';
import { createRun } from '../runs/create-run.js';
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
import type { CampaignContactRow, CampaignRow, TelephonyConfigurationRow } from '../store/schema/schema.js';
import { decodeJson } from '../store/engine/store.js';
import { selectTelephonyConfiguration } from '../telephony/configurations.js';
import { missingRequiredVariables, templateContext } from '../workflows/definition.js';
import { campaignTarget, moveCampaign, rulesOf, stopQueuedAttempts, type CampaignRules } from './campaigns.js';
import { breakerTrips, insideSchedule, pacingAllowance, settle, CANCEL_REASON, PAUSE_REASON, SCHEDULE_REASON } from './settings.js';

/** Ended attempts settled per campaign per tick: bounds one tick's work; the rest wait for the next. */
const SETTLE_BATCH = 1_000;
/**
 * Attempts of one campaign created at once on SQLite (concurrent transactions sharing a flush). On
 * PostgreSQL half the pool, so API requests keep connections while a wave runs.
 */
const ATTEMPTS_AT_ONCE = 32;
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

/** What every attempt of one tick shares: the definition run, the route, the organization's policy. */
interface AttemptContext {
  resolved: ResolvedTarget;
  route: TelephonyConfigurationRow;
  callerId: string | null;
  numberCap: NumberCap | null;
  callingHours: CallingHours | null;
}

async function attemptContext(deps: Deps, row: CampaignRow): Promise<AttemptContext | undefined> {
  try {
    const resolved = await resolveTarget(deps.store, row.org_id, await campaignTarget(deps, row), row.mode, deps.lookups);
    const route = await selectTelephonyConfiguration(deps.store, row.org_id, row.telephony_configuration_id, deps.lookups);
    const org = await showOrganization(deps.store, row.org_id);
    return {
      resolved,
      route,
      callerId: decodeJson<string[]>(route.caller_ids)[0] ?? null,
      numberCap: org?.number_max_calls != null && org.number_window_seconds != null ? { maxCalls: org.number_max_calls, windowSeconds: org.number_window_seconds } : null,
      callingHours: org ? decodeCallingHours(org.calling_hours) : null,
    };
  } catch (error) {
    // The agent was disabled or unpublished, or the route deactivated: nothing is created until it is back.
    if (error instanceof DialtoneError) {
      deps.logger.warn({ campaignId: row.id, code: error.code }, 'campaign cannot create attempts: its agent or route is not usable');
      return undefined;
    }
    throw error;
  }
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
  // campaign's calls_per_second.
  const atOnce = deps.store.dialect === 'postgres' ? Math.max(1, Math.floor(deps.config.DATABASE_POOL_SIZE / 2)) : ATTEMPTS_AT_ONCE;
  let failure: { error: unknown } | undefined;
  while (created < room && due.length > 0 && !failure) {
    const wave = due.splice(0, Math.min(room - created, atOnce));
    const outcomes = await Promise.allSettled(wave.map((contact) => createAttempt(deps, row, context, contact)));
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

/** The contact's zones for calling hours: its own time zone when given, else the number's (policy/). */
function callingHoursDecision(hours: CallingHours | null, contact: CampaignContactRow, now: number): { kind: 'now' } | { kind: 'later'; at: number | null } {
  if (!hours) return { kind: 'now' };
  if (contact.timezone !== null) {
    const next = nextCallingInstant(hours, [contact.timezone], now);
    return next === now ? { kind: 'now' } : { kind: 'later', at: next };
  }
  return callingHoursVerdict(hours, { kind: 'e164', value: contact.phone_number }, now);
}

class AttemptLost extends Error {}

/** Creates one contact's next attempt, or defers or ends the contact; true when a run was created. */
async function createAttempt(deps: Deps, row: CampaignRow, context: AttemptContext, contact: CampaignContactRow): Promise<boolean> {
  const now = deps.clock.now();
  const orgId = row.org_id;
  if (await isSuppressed(deps.store, orgId, contact.phone_number, now)) {
    await updatePendingContact(deps.store, contact.id, contact.attempts, { status: 'suppressed' }, now);
    return false;
  }
  const hours = callingHoursDecision(context.callingHours, contact, now);
  if (hours.kind === 'later') {
    // Never inside (the zones' windows never meet): the contact cannot be called at all.
    await updatePendingContact(deps.store, contact.id, contact.attempts, hours.at === null ? { status: 'exhausted' } : { nextAttemptAt: hours.at }, now);
    return false;
  }
  const initialContext = contact.initial_context === null ? null : (JSON.parse(contact.initial_context) as Record<string, unknown>);
  if (missingRequiredVariables(context.resolved.graph, templateContext(context.resolved.graph, initialContext)).length > 0) {
    // The agent now requires a variable this contact does not give.
    await updatePendingContact(deps.store, contact.id, contact.attempts, { status: 'invalid' }, now);
    return false;
  }
  const attempt = contact.attempts + 1;
  try {
    const run = await createRun(
      deps.store,
      {
        orgId,
        workflowId: context.resolved.workflow.id,
        definitionId: context.resolved.definition.id,
        definitionVersion: context.resolved.definition.version,
        mode: row.mode,
        triggerUuid: context.resolved.triggerUuid,
        phoneNumber: contact.phone_number,
        callerId: context.callerId,
        telephonyConfigurationId: context.route.id,
        initialContextJson: contact.initial_context,
        scheduledFor: null,
        campaignAttempt: { campaignId: row.id, contactId: contact.id, attempt },
      },
      now,
      {
        beforeInsert: async (trx) => {
          if (!(await lockRunningCampaign(deps.store, trx, row.id))) throw new AttemptLost('campaign no longer running');
          if (!(await beginAttempt(trx, contact.id, contact.attempts, now))) throw new AttemptLost('contact moved on');
        },
        // The per-number cap is counted by the insert itself, under the number's lock.
        ...(context.numberCap ? { checks: numberCapChecks(context.numberCap, now) } : {}),
        onCreated: (trx, created) => setContactRun(trx, contact.id, created.id),
      },
    );
    deps.metrics.runsCreated.inc({ mode: row.mode });
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
