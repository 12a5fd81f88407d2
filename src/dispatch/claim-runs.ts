// Claims queued runs of one telephony configuration for this node: `queued → dialing`, committed
// before any provider is called (so a run is dialed at most once), within the configuration's
// limits, which hold across every node sharing the store:
//
// - concurrency: runs dialing, ringing or in progress never exceed `max_concurrent_calls`;
// - pacing: dials are spaced 1/`calls_per_second` apart. The configuration row carries the time of
//   the next free slot (`pacing_next_at`); each claim takes consecutive slots and moves it on. Evenly
//   spaced slots keep any one-second window at or under `calls_per_second` dials, which a token
//   bucket with a burst would not; a small headroom in the spacing absorbs timer jitter;
// - a campaign's pacing inside its route's: a campaign with its own `calls_per_second` has its own
//   next free slot (migration 014's `campaign_dial_pacing`), and its run's slot is the later of the
//   route's and the campaign's, both moved on past it (pacing-slots.ts: direct runs and other
//   campaigns take the route's slots in between). The campaign's row is taken under the
//   configuration's lock, like the route's own slot, so its spacing holds across nodes too. A
//   campaign with no slot within the lookahead has its runs passed over by the claim, which takes
//   the others; the claim comes back when that campaign's slot is within reach. A campaign's
//   `max_concurrent_calls` needs nothing here: the scheduler never has more of its attempts queued
//   or live than that (campaigns/scheduler.ts), and the route's cap applies on top;
//
// On PostgreSQL the configuration row is locked (`FOR UPDATE`) for the claim, so concurrent claims
// for one configuration from several nodes take turns, and the queued rows are taken with
// `FOR UPDATE SKIP LOCKED`. SQLite has one writer at a time, which gives the same guarantee.
//
// Admission's claim-time questions (admission/claim.ts) are asked of each batch: calling hours, with
// the organization's current setting (a run whose callee is outside a window now or by the end of
// the lookahead is deferred to the next window rather than claimed, and takes no pacing slot; one
// whose zones' windows never meet any more is canceled, `outside_calling_hours`), and the
// suppression list (the screen the dispatcher passes: runs whose number was suppressed after they
// were queued are canceled, one statement per batch). Deferred runs that are not due yet are never
// candidates (store/statements/run-writes.ts's selectClaimCandidates).
import { countLiveRuns, selectCampaignDialPacing, selectConfigurationForClaim, selectPacingForUpdate, setCampaignDialPacing, setPacingNextAt } from '../store/statements/dispatch-statements.js';
import type { Store } from '../store/engine/store.js';
import type { TelephonyConfigurationRow } from '../store/schema/schema.js';
import { claimQueuedRuns, renewUndialedClaims, type ClaimedRow, type ClaimScreen } from '../runs/claim.js';
import { callingHoursHold } from '../admission/claim.js';
import { LIVE_STATES } from '../runs/states.js';
import { planSlots, type SlotPlan, type SlotRequest } from './pacing-slots.js';

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
  /** Admission's suppression screen of the batch (admission/claim.ts): runs it names end canceled, never dialed. */
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

export async function claimRuns(store: Store, configurationId: number, options: ClaimOptions): Promise<ClaimResult> {
  // Durable: a claim is what allows a dial, and must not be forgotten once the dial may have happened.
  return store.transaction('durable', async (trx) => {
    const configuration = await selectConfigurationForClaim(trx, configurationId);
    if (!configuration) return { claimed: [], retryAt: undefined };

    const spacingMs = (1000 * (1 + options.pacingHeadroom)) / configuration.calls_per_second;
    const firstSlot = Math.max(configuration.pacing_next_at ?? 0, options.now);
    const horizon = options.now + options.lookaheadMs;
    if (firstSlot > horizon) return { claimed: [], retryAt: firstSlot - options.lookaheadMs };

    const free = configuration.max_concurrent_calls - (await countLiveRuns(trx, configurationId, LIVE_STATES));
    if (free <= 0) return { claimed: [], retryAt: undefined };

    // The route's paced campaigns whose next dial slot is still ahead (under the route's lock, like
    // its own slot). Those with none within reach are passed over: their runs wait, others go first.
    const campaigns = await selectCampaignDialPacing(trx, configurationId, options.now);
    const campaignNextAt = new Map(campaigns.map((c) => [c.campaign_id, c.next_at]));
    const waiting = campaigns.filter((c) => c.next_at > horizon);
    // When a waiting campaign's slot comes within half the lookahead, a claim takes its runs: a few
    // slots at a time, still ahead of the first (not one claim per slot, as at the lookahead's edge).
    const campaignRetry = (nextAt: number) => nextAt - options.lookaheadMs / 2;
    const campaignRetryAt = waiting.length > 0 ? campaignRetry(Math.min(...waiting.map((c) => c.next_at))) : undefined;

    const slotsInWindow = Math.floor((horizon - firstSlot) / spacingMs) + 1;
    const wanted = Math.min(free, options.batchSize, slotsInWindow);
    let plan: SlotPlan | undefined;
    const slotOf = new Map<number, number>();
    const { rows, webhookDeliveries, deferred, canceled, passed } = await claimQueuedRuns(trx, {
      configurationId,
      limit: wanted,
      nodeId: options.nodeId,
      now: options.now,
      leaseMs: options.leaseMs,
      hold: callingHoursHold(options.now, options.lookaheadMs),
      deferredDue: options.deferredDue ?? true,
      ...(options.screen ? { screen: options.screen } : {}),
      ...(waiting.length > 0 ? { excludeCampaigns: waiting.map((c) => c.campaign_id) } : {}),
      // Each dialable run's slot: the route's, and its campaign's too; runs without one by the
      // horizon (their campaign's pace allows no more now) stay queued.
      pick: (dialable) => {
        const requests = dialable.map((c) => ({ campaignId: c.campaign_id, campaignCallsPerSecond: c.campaign_calls_per_second }));
        plan = planSlots(requests, { firstAt: firstSlot, spacingMs }, campaignNextAt, options.pacingHeadroom, horizon);
        const slots = plan.slots;
        dialable.forEach((c, i) => {
          const slot = slots[i];
          if (slot !== undefined) slotOf.set(c.id, slot);
        });
        return dialable.filter((c) => slotOf.has(c.id));
      },
    });
    const earliest = (a: number | undefined, b: number | undefined) => (a === undefined ? b : b === undefined ? a : Math.min(a, b));
    // Every candidate taken one way or another: more may be queued behind them.
    const more = rows.length + deferred + canceled + passed === wanted;
    if (rows.length === 0 || !plan) return { claimed: [], retryAt: earliest(more ? options.now : undefined, campaignRetryAt), webhookDeliveries, deferred, canceled };
    const deadline = options.now + options.leaseMs;

    const { routeNextAt, campaignNextAt: campaignsAfter } = plan;
    await setPacingNextAt(trx, configurationId, Math.ceil(routeNextAt));
    await setCampaignDialPacing(
      trx,
      configurationId,
      [...campaignsAfter].map(([campaignId, nextAt]) => ({ campaignId, nextAt: Math.ceil(nextAt) })),
    );
    // A campaign whose pace left runs behind: a claim may take them once its next slot is within reach.
    const pacedRetryAt = [...campaignsAfter.values()].reduce<number | undefined>((at, nextAt) => earliest(at, nextAt > horizon ? campaignRetry(nextAt) : undefined), campaignRetryAt);

    return {
      claimed: rows
        .map((run) => ({ run, configuration, dialAt: slotOf.get(run.id) as number, leaseExpiresAt: deadline }))
        .sort((a, b) => a.dialAt - b.dialAt),
      retryAt: earliest(more ? routeNextAt - options.lookaheadMs : undefined, pacedRetryAt),
      webhookDeliveries,
      deferred,
      canceled,
    };
  });
}

/** A run to re-slot: its campaign's pace and, when it is claimed, its claim (renewed if need be). */
export interface ReslotRequest extends SlotRequest {
  claim?: { runId: number; leaseExpiresAt: number };
}

/** The claims a re-slot renews: this node's, when a fresh slot leaves less than `renewBeforeMs` of the lease. */
export interface ReslotLease {
  nodeId: string;
  /** A renewed lease runs this long past the run's fresh slot, as a claim made then would. */
  leaseMs: number;
  /** What the dial needs of the lease after the slot (the dial timeout and the margin to record its call id). */
  renewBeforeMs: number;
}

export interface Reslot {
  dialAt: number;
  /** The claim's lease after the re-slot: renewed, or as it was (also when the run is no longer this node's). */
  leaseExpiresAt: number | undefined;
}

/**
 * Takes fresh pacing slots of a configuration for runs whose slots passed unused (their node was
 * too busy to dial in time; route-pacer.ts, which re-slots only those: the others keep the slots
 * their claim reserved): late dials would otherwise bunch up with punctual ones. Every run gets a
 * slot, in the order given, from `now` at the earliest; a campaign run's slot also keeps its
 * campaign's spacing (pacing-slots.ts), so a catch-up never bunches a campaign's dials either.
 *
 * A slow campaign's fresh slot can be a full campaign spacing away (its next slot comes after the
 * one it missed), past the claim's lease: the reaper would end the run `failed`
 * (dispatch_interrupted) before its node dialed it. So a claimed run whose fresh slot leaves less
 * than `renewBeforeMs` of its lease has its claim renewed, in this transaction, to `leaseMs` past
 * the slot (runs/claim.ts, the statement the dispatcher renews with before a late dial). Renewing
 * is the simpler of the two safe answers: handing the run back to the queue would need a move
 * from `dialing` back to `queued`, which the lifecycle has no transition for, after the claim's
 * `dialing` event (and webhook) went out. A claim the node no longer holds (canceled, reaped) is
 * not renewed; its dial finds that out (dispatcher.ts) and does not happen.
 */
export async function takePacingSlots(
  store: Store,
  configurationId: number,
  runs: readonly ReslotRequest[],
  now: number,
  pacingHeadroom: number,
  lease?: ReslotLease,
): Promise<Reslot[]> {
  return store.transaction('relaxed', async (trx) => {
    const configuration = await selectPacingForUpdate(trx, configurationId);
    const spacingMs = (1000 * (1 + pacingHeadroom)) / configuration.calls_per_second;
    const firstAt = Math.max(configuration.pacing_next_at ?? 0, now);
    const campaigns = runs.some((r) => r.campaignId !== null) ? await selectCampaignDialPacing(trx, configurationId, now) : [];
    const plan = planSlots(runs, { firstAt, spacingMs }, new Map(campaigns.map((c) => [c.campaign_id, c.next_at])), pacingHeadroom, Number.POSITIVE_INFINITY);
    await setPacingNextAt(trx, configurationId, Math.ceil(plan.routeNextAt));
    await setCampaignDialPacing(
      trx,
      configurationId,
      [...plan.campaignNextAt].map(([campaignId, nextAt]) => ({ campaignId, nextAt: Math.ceil(nextAt) })),
    );
    const reslots: Reslot[] = runs.map((run, i) => ({ dialAt: plan.slots[i] as number, leaseExpiresAt: run.claim?.leaseExpiresAt }));
    if (lease) {
      const renewals = runs.flatMap((run, i) => {
        const { dialAt } = reslots[i] as Reslot;
        return run.claim && dialAt > run.claim.leaseExpiresAt - lease.renewBeforeMs ? [{ index: i, runId: run.claim.runId, until: Math.ceil(dialAt) + lease.leaseMs }] : [];
      });
      const renewed = await renewUndialedClaims(trx, lease.nodeId, renewals);
      for (const { index, runId, until } of renewals) if (renewed.has(runId)) (reslots[index] as Reslot).leaseExpiresAt = until;
    }
    return reslots;
  });
}
