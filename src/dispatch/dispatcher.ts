// The dispatcher of one node. Its life, in order:
//
// 1. Claim: for each telephony configuration with queued runs, claim what its pacing slots and
//    free concurrency allow (claim-runs.ts). The claim commits `queued → dialing` before any dial.
// 2. Dial: each configuration's pacer (route-pacer.ts) dials its claimed runs at their pacing
//    slots, one at a time. The provider's call id is recorded; a refused or timed-out dial ends the
//    run (never retried: a timed-out dial may have rung).
// 3. Track: the node holds the live calls it placed, with a ring timeout (→ `no_answer`) and a
//    maximum duration (→ `completed`, hung up). Provider events move runs through
//    provider-events.ts; cancel requests for its calls are picked up on every tick.
// 4. Maintain: every REAPER_INTERVAL_MS, expire stale queued runs and end live runs past their
//    deadline (end-runs.ts), including runs of nodes that died mid-dial.
//
// A tick runs when work is signalled on this node (no polling delay) or announced by another node
// through the store (PostgreSQL NOTIFY), when a pacing slot opens, or every
// DISPATCH_POLL_INTERVAL_MS as a safety net. Ticks never overlap.
import type { Deps } from '../deps.js';
import { LIVE_STATES, isTerminal } from '../runs/states.js';
import type { AppliedTransition } from '../runs/transition-run.js';
import type { ProviderName, RunState, TelephonyConfigurationRow } from '../store/schema.js';
import { DialRefusedError, type ProviderEvent } from '../telephony/provider.js';
import { WORK_CHANNEL } from '../runs/create-run.js';
import { claimRuns, configurationsWithQueuedRuns, takePacingSlots, type ClaimedRun } from './claim-runs.js';
import { RoutePacer, type PacedDial, type PacerSettings } from './route-pacer.js';
import { expireQueuedRuns, reapSilentRuns } from './end-runs.js';
import { purgeExpiredIdempotencyKeys } from '../calls/idempotency.js';
import { endLostNodeCalls, heartbeat, leave } from './nodes.js';
import { applyProviderEvent, ringTimeoutOf } from './provider-events.js';

interface TrackedCall {
  runId: number;
  providerCallId: string;
  configuration: TelephonyConfigurationRow;
  timer: NodeJS.Timeout | undefined;
  /** Set once the maximum-duration timer replaced the ring timer. */
  answered: boolean;
}

class DialTimeoutError extends Error {}

/** A claimed run waiting in its configuration's pacer. */
interface PendingDial extends PacedDial {
  claimed: ClaimedRun;
}

const MAX_RESLOTS = 20;
/** Time kept in hand, beyond the dial timeout, for recording the call id before a lease runs out. */
const LEASE_MARGIN_MS = 2_000;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new DialTimeoutError(`no answer from the provider within ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

export class Dispatcher {
  private stopping = false;
  private ticking: Promise<void> | undefined;
  private tickAgain = false;
  private nextTick: NodeJS.Timeout | undefined;
  private nextMaintenanceAt = 0;
  private readonly calls = new Map<number, TrackedCall>();
  /** One pacer per telephony configuration this node has claimed runs of. */
  private readonly pacers = new Map<number, RoutePacer<PendingDial>>();
  private readonly inFlight = new Set<Promise<void>>();
  /** Per-run chains, so one call's events are applied in the order the provider sent them. */
  private readonly eventChains = new Map<number, Promise<void>>();
  private readonly unsubscribe: (() => void)[] = [];
  private listening: Promise<(() => Promise<void>) | undefined> | undefined;

  constructor(private readonly deps: Deps) {}

  start(): void {
    // Runs created on other nodes: a store notification wakes this node at once (PostgreSQL
    // LISTEN/NOTIFY); the poll stays as the safety net for a lost notification or connection.
    this.listening = this.deps.store
      .listen(WORK_CHANNEL, () => this.wake(), (error) => this.deps.logger.warn({ err: error }, 'work notifications lost; polling continues'))
      .catch((error: unknown) => {
        this.deps.logger.warn({ err: error }, 'cannot listen for work notifications; polling only');
        return undefined;
      });
    this.unsubscribe.push(
      // First: stop() keeps this one until live calls have drained.
      this.deps.signals.onProviderEvent((event) => this.track(this.inOrder(event.runId, () => this.handleProviderEvent(event)))),
      this.deps.signals.onWork(() => this.wake()),
      this.deps.signals.onCancel(async (runId) => {
        const call = this.calls.get(runId);
        if (call) await this.cancelLocally(call);
      }),
    );
    this.wake();
  }

  /** Runs a tick as soon as possible (coalescing with one in progress). */
  wake(): void {
    if (this.stopping) return;
    if (this.ticking) {
      this.tickAgain = true;
      return;
    }
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (this.stopping) return;
    if (this.nextTick) clearTimeout(this.nextTick);
    this.nextTick = setTimeout(() => {
      this.nextTick = undefined;
      this.ticking = this.tick().finally(() => {
        this.ticking = undefined;
      });
    }, Math.max(0, delayMs));
  }

  private async tick(): Promise<void> {
    const { deps } = this;
    let nextAt = deps.clock.now() + deps.config.DISPATCH_POLL_INTERVAL_MS;
    try {
      const now = deps.clock.now();
      if (now >= this.nextMaintenanceAt) {
        this.nextMaintenanceAt = now + deps.config.REAPER_INTERVAL_MS;
        await this.maintain(now);
      }
      await this.cancelRequested();
      for (const configurationId of await configurationsWithQueuedRuns(deps.store, 100)) {
        if (this.stopping) break;
        // A node still behind on this configuration's slots claims no more of them; its pacer wakes
        // the dispatcher when it has caught up.
        if (!(this.pacers.get(configurationId)?.canTakeMore(deps.clock.now(), deps.config.DISPATCH_LOOKAHEAD_MS) ?? true)) continue;
        const result = await claimRuns(deps.store, configurationId, {
          nodeId: deps.nodeId,
          now: deps.clock.now(),
          leaseMs: deps.config.DISPATCH_LEASE_MS,
          lookaheadMs: deps.config.DISPATCH_LOOKAHEAD_MS,
          pacingHeadroom: deps.config.DISPATCH_PACING_HEADROOM,
          batchSize: deps.config.DISPATCH_BATCH_SIZE,
        });
        this.pace(configurationId, result.claimed);
        deps.lifecycle.claimed(result.claimed.length);
        if (result.retryAt !== undefined) nextAt = Math.min(nextAt, result.retryAt);
      }
    } catch (error) {
      deps.logger.error({ err: error }, 'dispatch tick failed');
    }
    if (this.tickAgain) {
      this.tickAgain = false;
      nextAt = deps.clock.now();
    }
    this.schedule(nextAt - deps.clock.now());
  }

  private async maintain(now: number): Promise<void> {
    await heartbeat(this.deps.store, this.deps.nodeId, now);
    const lost = await endLostNodeCalls(this.deps.store, this.deps.lifecycle, now, this.deps.config.NODE_HEARTBEAT_TIMEOUT_MS, this.inProcessProviders());
    for (const t of lost) {
      this.deps.logger.warn({ runId: t.runId }, 'ended a live call of a node that stopped beating (node_lost)');
    }
    await expireQueuedRuns(this.deps.store, this.deps.lifecycle, now, this.deps.config.QUEUE_TTL_MS);
    for (const { run, providerCallId } of await reapSilentRuns(this.deps.store, this.deps.lifecycle, now)) {
      this.deps.logger.warn({ runId: run.runId, providerCallId }, 'reaped a run that stopped hearing from its provider or node');
      const tracked = this.calls.get(run.runId);
      if (tracked) await this.hangUp(tracked);
    }
    // Housekeeping only: an expired record is already treated as absent when its key is used again.
    await purgeExpiredIdempotencyKeys(this.deps.store, now);
  }

  /** Hands claimed runs to their configuration's pacer, which dials them in their slots. */
  private pace(configurationId: number, claimed: ClaimedRun[]): void {
    const first = claimed[0];
    if (!first) return;
    const { deps } = this;
    const settings: PacerSettings = {
      spacingMs: (1000 * (1 + deps.config.DISPATCH_PACING_HEADROOM)) / first.configuration.calls_per_second,
      // Late by more than most of the headroom, a dial would bunch with the next slots.
      toleranceMs: 800 * deps.config.DISPATCH_PACING_HEADROOM,
      maxReslots: MAX_RESLOTS,
    };
    let pacer = this.pacers.get(configurationId);
    if (!pacer) {
      pacer = new RoutePacer<PendingDial>(settings, {
        now: () => deps.clock.now(),
        sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
        takeSlots: (count, now) => takePacingSlots(deps.store, configurationId, count, now, deps.config.DISPATCH_PACING_HEADROOM),
        dial: (pending) => this.track(this.dialClaimed(pending.claimed)),
        onReslot: () => deps.metrics.pacingReslots.inc(),
        onGaveUp: (pending, lateness) => deps.logger.warn({ runId: pending.runId, lateness }, 'dialing late: this node keeps missing its pacing slots'),
        onIdle: () => this.wake(),
      });
      this.pacers.set(configurationId, pacer);
    }
    // Tracked from now, not from their slots, so shutdown waits for them: they were claimed and must be dialed.
    this.track(pacer.add(claimed.map((c) => ({ runId: c.run.id, dialAt: c.dialAt, claimed: c })), settings));
  }

  /**
   * The dial and the recording of its call id must finish inside the claim's lease, or another
   * node's reaper may end the run as interrupted while it rings. Near the end, the lease is renewed;
   * a run that is no longer ours (reaped, canceled) is not dialed at all.
   */
  private async dialClaimed(claimed: ClaimedRun): Promise<void> {
    const { deps } = this;
    if (claimed.leaseExpiresAt - deps.clock.now() < deps.config.DIAL_TIMEOUT_MS + LEASE_MARGIN_MS) {
      const until = deps.clock.now() + deps.config.DISPATCH_LEASE_MS;
      if (!(await deps.lifecycle.renewClaim(claimed.run.id, deps.nodeId, until))) {
        deps.logger.warn({ runId: claimed.run.id }, 'claim lost before dialing; not dialed');
        return;
      }
    }
    await this.dial(claimed);
  }

  private track(work: Promise<void>): void {
    const guarded = work.catch((error: unknown) => this.deps.logger.error({ err: error }, 'dispatch work failed'));
    this.inFlight.add(guarded);
    void guarded.finally(() => this.inFlight.delete(guarded));
  }

  private async dial({ run, configuration }: ClaimedRun): Promise<void> {
    const { deps } = this;
    const provider = deps.providers[configuration.provider];
    const ringTimeoutMs = ringTimeoutOf(deps, configuration);
    const sentAt = deps.clock.now();
    deps.metrics.dialLatency.observe((sentAt - run.created_at) / 1000);
    const attempt = provider.dial({ runId: run.id, to: run.phone_number, from: run.caller_id, ringTimeoutMs, configuration });
    let providerCallId: string;
    try {
      ({ providerCallId } = await withTimeout(attempt, deps.config.DIAL_TIMEOUT_MS));
    } catch (error) {
      await this.dialFailed(run.id, error, sentAt);
      if (error instanceof DialTimeoutError) {
        // The provider may still place the call after we gave up on it: hang it up if it does.
        attempt.then((late) => provider.hangUp({ runId: run.id, providerCallId: late.providerCallId, configuration }), () => undefined);
      }
      return;
    }

    const call: TrackedCall = { runId: run.id, providerCallId, configuration, timer: undefined, answered: false };
    this.calls.set(run.id, call);
    this.setTimer(call, ringTimeoutMs, async () => {
      await this.endLocally(call, 'no_answer', 'ring_timeout');
    });
    const now = await deps.lifecycle.recordDial(run.id, { providerCallId, sentAt, dialingDeadlineAt: sentAt + ringTimeoutMs + deps.config.REAPER_GRACE_MS });
    // The run may have ended while the dial was in flight (canceled, or reaped): the call must not live on.
    if (!now || isTerminal(now.state)) await this.hangUp(call);
    else if (now.cancelRequested) await this.cancelLocally(call);
  }

  private async dialFailed(runId: number, error: unknown, at: number): Promise<void> {
    const { deps } = this;
    if (error instanceof DialRefusedError) {
      await deps.lifecycle.transition(runId, error.outcome, { at, reason: 'dial_refused', rawProviderStatus: error.rawStatus, data: { detail: error.message } });
    } else {
      const timeout = error instanceof DialTimeoutError;
      deps.logger.warn({ err: error, runId }, 'dial failed');
      await deps.lifecycle.transition(runId, 'failed', {
        at,
        reason: timeout ? 'dial_timeout' : 'dial_error',
        data: { detail: error instanceof Error ? error.message : String(error) },
      });
    }
    this.wake();
  }

  private setTimer(call: TrackedCall, ms: number, fire: () => Promise<void>): void {
    if (call.timer) clearTimeout(call.timer);
    call.timer = setTimeout(() => this.track(fire()), ms);
  }

  private forget(call: TrackedCall): void {
    if (call.timer) clearTimeout(call.timer);
    this.calls.delete(call.runId);
    this.wake();
  }

  private async hangUp(call: TrackedCall): Promise<void> {
    this.forget(call);
    try {
      await this.deps.providers[call.configuration.provider].hangUp(call);
    } catch (error) {
      this.deps.logger.warn({ err: error, runId: call.runId }, 'hang-up failed');
    }
  }

  /** Ends a live call for a reason of Dialtone's own (timeout, cancel): the run first, then the line. */
  private async endLocally(call: TrackedCall, to: RunState, reason: string, onlyFrom?: RunState): Promise<AppliedTransition | undefined> {
    const applied = await this.deps.lifecycle.transition(call.runId, to, { at: this.deps.clock.now(), reason, ...(onlyFrom ? { onlyFrom } : {}) });
    if (applied) await this.hangUp(call);
    return applied;
  }

  private async cancelLocally(call: TrackedCall): Promise<void> {
    // Before the answer a cancel is a cancel; after it, hanging up completes the call.
    if (!(await this.endLocally(call, 'canceled', 'canceled_by_request'))) {
      await this.endLocally(call, 'completed', 'canceled_by_request', 'in_progress');
    }
  }

  private async cancelRequested(): Promise<void> {
    if (this.calls.size === 0) return;
    const rows = await this.deps.store.db
      .selectFrom('workflow_runs')
      .select('id')
      .where('lease_owner', '=', this.deps.nodeId)
      .where('cancel_requested_at', 'is not', null)
      .where('state', 'in', LIVE_STATES)
      .execute();
    for (const { id } of rows) {
      const call = this.calls.get(id);
      if (call) await this.cancelLocally(call);
    }
  }

  private inOrder(runId: number, work: () => Promise<void>): Promise<void> {
    const next = (this.eventChains.get(runId) ?? Promise.resolve()).then(work);
    const settled = next.catch(() => undefined);
    this.eventChains.set(runId, settled);
    void settled.then(() => {
      if (this.eventChains.get(runId) === settled) this.eventChains.delete(runId);
    });
    return next;
  }

  private async handleProviderEvent(event: ProviderEvent): Promise<void> {
    const call = this.calls.get(event.runId);
    const ringTimeoutMs = call ? ringTimeoutOf(this.deps, call.configuration) : this.deps.config.RING_TIMEOUT_MS;
    const applied = await applyProviderEvent(this.deps, call?.configuration.provider ?? 'unknown', event, ringTimeoutMs);
    if (!call) return;
    // An event that moved nothing may have been applied already (a Twilio callback taken by the
    // webhook on this node): the run's state in the store says what this node's timers should be.
    const state = applied?.to ?? (await this.currentState(event.runId));
    if (state === 'in_progress' && !call.answered) {
      call.answered = true;
      this.setTimer(call, this.deps.config.MAX_CALL_DURATION_MS, async () => {
        await this.endLocally(call, 'completed', 'max_duration', 'in_progress');
      });
    } else if (state !== undefined && isTerminal(state)) {
      // The run ended elsewhere (reaped, or its node presumed lost) while this call still reports
      // progress: the line is still up, so put it down. A terminal event means the call is over.
      if (!applied && (event.kind === 'ringing' || event.kind === 'answered')) await this.hangUp(call);
      else this.forget(call);
    }
  }

  /** Providers whose calls live in this process and die with it. */
  private inProcessProviders(): ProviderName[] {
    return Object.values(this.deps.providers)
      .filter((provider) => !provider.callsOutliveNode)
      .map((provider) => provider.name);
  }

  private async currentState(runId: number): Promise<RunState | undefined> {
    const row = await this.deps.store.db.selectFrom('workflow_runs').select('state').where('id', '=', runId).executeTakeFirst();
    return row?.state;
  }

  /** Live calls this node holds (for tests and metrics). */
  get liveCalls(): number {
    return this.calls.size;
  }

  /**
   * Stops claiming, lets claimed dials and dials under way finish (bounded by DISPATCH_SHUTDOWN_MS),
   * then releases this node's hold on its live calls so deadlines alone govern them.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    const deadline = Date.now() + this.deps.config.DISPATCH_SHUTDOWN_MS;
    // Provider events keep flowing while in-process calls drain (below); the rest stops now.
    for (const off of this.unsubscribe.splice(1)) off();
    const unlisten = await this.listening;
    await unlisten?.();
    if (this.nextTick) clearTimeout(this.nextTick);
    await this.ticking;
    // Includes claimed runs waiting for their pacing slot, at most DISPATCH_LOOKAHEAD_MS away.
    const pending = Promise.allSettled([...this.inFlight]);
    await Promise.race([pending, new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now())).unref())]);
    await this.drainInProcessCalls(deadline);
    for (const off of this.unsubscribe.splice(0)) off();
    for (const call of this.calls.values()) if (call.timer) clearTimeout(call.timer);
    await this.deps.lifecycle.releaseCalls(this.deps.nodeId);
    await leave(this.deps.store, this.deps.nodeId).catch((error: unknown) => this.deps.logger.warn({ err: error }, 'could not remove this node\'s heartbeat'));
  }

  /**
   * Calls whose dialog lives in this process (SIP, simulator) cannot outlive it: they get until
   * the shutdown deadline to end by themselves, then are hung up and their runs ended
   * (node_shutdown), so none is left live with nobody holding it. Calls that outlive the node
   * (Twilio) are released to their provider's callbacks instead.
   */
  private async drainInProcessCalls(deadline: number): Promise<void> {
    const inProcess = () => [...this.calls.values()].filter((call) => !this.deps.providers[call.configuration.provider].callsOutliveNode);
    while (inProcess().length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    for (const call of inProcess()) {
      const state = await this.currentState(call.runId);
      if (state === 'in_progress') await this.endLocally(call, 'completed', 'node_shutdown', 'in_progress');
      else if (state !== undefined && !isTerminal(state)) await this.endLocally(call, 'failed', 'node_shutdown', state);
      else this.forget(call);
    }
  }
}
