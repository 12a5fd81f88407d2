// Claims queued runs of one telephony configuration for this node: `queued → dialing`, committed
// before any provider is called (so a run is dialed at most once), within the configuration's
// limits, which hold across every node sharing the store:
//
// - concurrency: runs dialing, ringing or in progress never exceed `max_concurrent_calls`;
// - pacing: dials are spaced 1/`calls_per_second` apart. The configuration row carries the time of
//   the next free slot (`pacing_next_at`); each claim takes consecutive slots and moves it on. Evenly
//   spaced slots keep any one-second window at or under `calls_per_second` dials, which a token
//   bucket with a burst would not; a small headroom in the spacing absorbs timer jitter.
//
// On PostgreSQL the configuration row is locked (`FOR UPDATE`) for the claim, so concurrent claims
// for one configuration from several nodes take turns, and the queued rows are taken with
// `FOR UPDATE SKIP LOCKED`. SQLite has one writer at a time, which gives the same guarantee.
//
// Calling hours are checked again here, with the organization's current setting: a run whose
// callee is outside a window now or by the end of the lookahead (when its pacing slot may come) is
// deferred to the next window rather than claimed, and takes no pacing slot; one whose zones'
// windows never meet any more is canceled (`outside_calling_hours`). Deferred runs that are not
// due yet are never candidates (store/run-writes.ts's selectClaimCandidates).
//
// The calling policy's screen (policy/claim-screen.ts) cancels, in one statement per batch, runs
// whose number was suppressed after they were queued.
import { countLiveRuns, selectConfigurationForClaim, selectPacingForUpdate, setPacingNextAt } from '../store/dispatch-statements.js';
import type { Store } from '../store/store.js';
import type { TelephonyConfigurationRow } from '../store/schema.js';
import { claimQueuedRuns, type ClaimCandidate, type ClaimedRow, type HoldDecision, type ClaimScreen } from '../runs/claim.js';
import { decodeCallingHours } from '../orgs/organizations.js';
import { claimCallingHoursVerdict, storedDestination } from '../policy/calling-hours-check.js';
import type { CallingHours } from '../policy/calling-hours.js';
import { LIVE_STATES } from '../runs/states.js';

export interface ClaimOptions {
  nodeId: string;
  now: number;
  leaseMs: number;
  lookaheadMs: number;
  batchSize: number;
  /** Fraction added to the spacing between dials (see DISPATCH_PACING_HEADROOM). */
  pacingHeadroom: number;
  /** False when the caller knows no deferred run of the configuration is due (one query less); default true. */
  deferredDue?: boolean;
  /** The calling policy's check of the batch (policy/claim-screen.ts): runs it names end canceled, never dialed. */
  screen?: ClaimScreen;
}

export interface ClaimedRun {
  run: ClaimedRow;
  configuration: TelephonyConfigurationRow;
  /** The pacing slot: when this run may be dialed. */
  dialAt: number;
  /** The claim's lease: after it the run is no longer this node's to dial. */
  leaseExpiresAt: number;
}

export interface ClaimResult {
  claimed: ClaimedRun[];
  /** Webhook deliveries the claim wrote (`run.dialing`, and the messages of runs deferred or canceled instead). */
  webhookDeliveries?: number;
  /** When another claim could succeed for this configuration (next pacing slot), if work remains. */
  retryAt: number | undefined;
  /** Runs put off to their calling hours; runs canceled (suppressed since queued, or never inside their calling hours). */
  deferred?: number;
  canceled?: number;
}

/**
 * The claim-time calling-hours decision for each candidate of one batch, at `now` and at the end of
 * the lookahead. A batch's runs share their organization's setting: it is decoded once per
 * organization and batch (and its weekly windows parsed once), not for every run.
 */
export function callingHoursHold(now: number, lookaheadMs: number) {
  const settings = new Map<number, CallingHours | null>();
  return (candidate: ClaimCandidate): HoldDecision => {
    let hours = settings.get(candidate.org_id);
    if (hours === undefined) {
      hours = decodeCallingHours(candidate.calling_hours);
      settings.set(candidate.org_id, hours);
    }
    if (!hours) return { kind: 'dial' };
    const verdict = claimCallingHoursVerdict(hours, storedDestination(candidate.phone_number), now, lookaheadMs);
    if (verdict.kind === 'now') return { kind: 'dial' };
    return verdict.at === null ? { kind: 'cancel', reason: 'outside_calling_hours' } : { kind: 'defer', until: verdict.at, reason: 'outside_calling_hours' };
  };
}

export async function claimRuns(store: Store, configurationId: number, options: ClaimOptions): Promise<ClaimResult> {
  // Durable: a claim is what allows a dial, and must not be forgotten once the dial may have happened.
  return store.transaction('durable', async (trx) => {
    const configuration = await selectConfigurationForClaim(store, trx, configurationId);
    if (!configuration) return { claimed: [], retryAt: undefined };

    const spacingMs = (1000 * (1 + options.pacingHeadroom)) / configuration.calls_per_second;
    const firstSlot = Math.max(configuration.pacing_next_at ?? 0, options.now);
    if (firstSlot > options.now + options.lookaheadMs) return { claimed: [], retryAt: firstSlot - options.lookaheadMs };

    const free = configuration.max_concurrent_calls - (await countLiveRuns(trx, configurationId, LIVE_STATES));
    if (free <= 0) return { claimed: [], retryAt: undefined };

    const slotsInWindow = Math.floor((options.now + options.lookaheadMs - firstSlot) / spacingMs) + 1;
    const wanted = Math.min(free, options.batchSize, slotsInWindow);
    const { rows, webhookDeliveries, deferred, canceled } = await claimQueuedRuns(store, trx, {
      configurationId,
      limit: wanted,
      nodeId: options.nodeId,
      now: options.now,
      leaseMs: options.leaseMs,
      hold: callingHoursHold(options.now, options.lookaheadMs),
      deferredDue: options.deferredDue ?? true,
      ...(options.screen ? { screen: options.screen } : {}),
    });
    // Every candidate taken one way or another: more may be queued behind them.
    const more = rows.length + deferred + canceled === wanted;
    if (rows.length === 0) return { claimed: [], retryAt: more ? options.now : undefined, webhookDeliveries, deferred, canceled };
    const deadline = options.now + options.leaseMs;

    const nextSlot = firstSlot + rows.length * spacingMs;
    await setPacingNextAt(trx, configurationId, Math.ceil(nextSlot));

    return {
      claimed: rows.map((run, i) => ({ run, configuration, dialAt: firstSlot + i * spacingMs, leaseExpiresAt: deadline })),
      retryAt: more ? nextSlot - options.lookaheadMs : undefined,
      webhookDeliveries,
      deferred,
      canceled,
    };
  });
}

/**
 * Takes `count` consecutive fresh pacing slots of a configuration for runs whose slots passed unused
 * (their node was too busy to dial in time; route-pacer.ts): late dials would otherwise bunch up
 * with punctual ones. Returns the first; the others follow at the configuration's spacing.
 */
export async function takePacingSlots(store: Store, configurationId: number, count: number, now: number, pacingHeadroom: number): Promise<number> {
  return store.transaction('relaxed', async (trx) => {
    const configuration = await selectPacingForUpdate(store, trx, configurationId);
    const slot = Math.max(configuration.pacing_next_at ?? 0, now);
    const spacingMs = (1000 * (1 + pacingHeadroom)) / configuration.calls_per_second;
    await setPacingNextAt(trx, configurationId, Math.ceil(slot + count * spacingMs));
    return slot;
  });
}
