// The dispatcher of one node. Its life, in order:
//
// 1. Claim: for each telephony configuration with queued runs, claim what its pacing slots and
//    free concurrency allow (claim-runs.ts). The claim commits `queued → dialing` before any dial.
// 2. Dial: each configuration's pacer (route-pacer.ts) dials its claimed runs at their pacing
//    slots, one at a time (a node that stops gives back to the queue those it has not dialed yet). The provider's call id is recorded; a refused dial ends the run. A dial
//    the provider did not answer within DIAL_TIMEOUT_MS may have rung, so it is never retried: a
//    provider whose calls outlive the node (Twilio) is asked later (the run stays `dialing` without
//    a call id, as if its node had stopped mid-dial, and reconciliation looks for the call when the
//    claim's lease ends); an in-process call is given up and the run ends `failed` (dial_timeout).
// 3. Track: the node holds the live calls it placed (live-calls.ts), with a ring timeout
//    (→ `no_answer`) and a maximum duration (→ `completed`, hung up). Provider events move runs
//    through provider-events.ts; cancel requests for its calls are picked up on every tick.
// 4. Maintain: every REAPER_INTERVAL_MS (maintenance.ts), beat, end lost nodes' calls, expire stale
//    queued runs and end live runs past their deadline (end-runs.ts), and run the service's
//    housekeeping. Then, in the background, reconcile (reconcile.ts): ask providers whose calls
//    outlive the node about overdue runs (before they end) and runs with no news.
//
// A tick runs when work is signalled on this node (no polling delay) or announced by another node
// through the store (PostgreSQL NOTIFY), when a pacing slot opens, or every
// DISPATCH_POLL_INTERVAL_MS as a safety net. Ticks never overlap.
import type { Deps } from '../deps.js';
import { claimScreen } from '../admission/claim.js';
import { WORK_CHANNEL } from '../runs/create-run.js';
import { DialRefusedError, DialTimeoutError } from '../telephony/provider.js';
import { routeInvalidDetail } from '../telephony/routes.js';
import { deleteNode, selectConfigurationsWithQueuedRuns } from '../store/statements/dispatch-statements.js';
import { claimRuns, takePacingSlots, type ClaimedRun } from './claim-runs.js';
import { LiveCalls } from './live-calls.js';
import { maintain, type Housekeeping } from './maintenance.js';
import { DialDetections } from './machine-verdicts.js';
import { ringTimeoutOf } from './provider-events.js';
import { askFirstProviders, Reconciler } from './reconcile.js';
import { RoutePacer, type PacedDial, type PacerSettings } from './route-pacer.js';

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
  private nextEndedElsewhereAt = 0;
  private readonly detections: DialDetections;
  /** One pacer per telephony configuration this node has claimed runs of. */
  private readonly pacers = new Map<number, RoutePacer<PendingDial>>();
  private readonly inFlight = new Set<Promise<void>>();
  /**
   * Runs this node claimed whose dial request it has not sent: taken out just before the provider
   * is called (synchronously, so nothing runs between the check and the call), or by stop(), which
   * gives them back to the queue. A run is in one of the two hands, never both.
   */
  private readonly undialed = new Set<number>();
  /** Ends the pacers' waits for their slots when the node stops. */
  private readonly stopWaiting = new AbortController();
  private readonly unsubscribe: (() => void)[] = [];
  private listening: Promise<(() => Promise<void>) | undefined> | undefined;

  private readonly live: LiveCalls;
  private readonly reconciler: Reconciler;
  private readonly housekeeping: readonly Housekeeping[];

  constructor(
    private readonly deps: Deps,
    options: { housekeeping?: readonly Housekeeping[] } = {},
  ) {
    this.live = new LiveCalls(deps, (work) => this.track(work), () => this.wake());
    this.reconciler = new Reconciler(deps, { reaped: (runId) => this.live.reaped(runId) });
    this.housekeeping = options.housekeeping ?? [];
    this.detections = new DialDetections(deps);
  }

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
      this.deps.signals.onProviderEvent((event, applied) => this.live.onProviderEvent(event, applied)),
      this.deps.signals.onMachineVerdict((verdict) => this.live.onMachineVerdict(verdict)),
      this.deps.signals.onWork(() => this.wake()),
      this.deps.signals.onCancel((runId) => this.live.cancel(runId)),
      this.deps.signals.onHangUp((runId) => this.live.reaped(runId)),
      this.deps.signals.onTransferOutcome((outcome) => this.live.onTransferOutcome(outcome)),
      this.deps.signals.onHeldCall((runId) => this.live.held(runId)),
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
        await maintain(deps, now, {
          inProcessProviders: this.live.inProcessProviders(),
          askFirstProviders: askFirstProviders(deps),
          reaped: (runId) => this.live.reaped(runId),
          housekeeping: this.housekeeping,
        });
        // In the background, so a slow provider never holds up dispatch; one sweep at a time.
        this.track(this.reconciler.sweep());
      }
      await this.live.cancelRequested();
      // Names every live call of this node: on its own cadence, not on every tick (a drain of
      // thousands of live calls would send that list hundreds of times a second).
      if (now >= this.nextEndedElsewhereAt) {
        this.nextEndedElsewhereAt = now + deps.config.ENDED_ELSEWHERE_INTERVAL_MS;
        await this.live.endedElsewhere();
      }
      for (const { id: configurationId, deferredDue } of await selectConfigurationsWithQueuedRuns(deps.store, 100, deps.clock.now())) {
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
          deferredDue,
          screen: claimScreen(deps.clock.now()),
        });
        this.pace(configurationId, result.claimed);
        deps.lifecycle.claimed(result.claimed.length, result.webhookDeliveries ?? 0, result.canceled ?? 0);
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
        sleep: (ms) =>
          new Promise((resolve) => {
            if (this.stopWaiting.signal.aborted) return resolve();
            const timer = setTimeout(done, ms);
            function done() {
              clearTimeout(timer);
              resolve();
            }
            this.stopWaiting.signal.addEventListener('abort', done, { once: true });
          }),
        takeSlots: async (late, now) => {
          // A fresh slot too near the end of its claim's lease renews it (the same margin as
          // dialClaimed's), in the re-slot's transaction: the reaper never ends a run still waiting here.
          const reslots = await takePacingSlots(
            deps.store,
            configurationId,
            late.map(({ claimed }) => ({
              campaignId: claimed.run.campaign_id,
              campaignCallsPerSecond: claimed.run.campaign_calls_per_second,
              claim: { runId: claimed.run.id, leaseExpiresAt: claimed.leaseExpiresAt },
            })),
            now,
            deps.config.DISPATCH_PACING_HEADROOM,
            { nodeId: deps.nodeId, leaseMs: deps.config.DISPATCH_LEASE_MS, renewBeforeMs: deps.config.DIAL_TIMEOUT_MS + LEASE_MARGIN_MS },
          );
          late.forEach(({ claimed }, i) => (claimed.leaseExpiresAt = reslots[i]?.leaseExpiresAt ?? claimed.leaseExpiresAt));
          return reslots.map((r) => r.dialAt);
        },
        dial: (pending) => this.track(this.dialClaimed(pending.claimed)),
        onReslot: () => deps.metrics.pacingReslots.inc(),
        onGaveUp: (pending, lateness) => deps.logger.warn({ runId: pending.runId, lateness }, 'dialing late: this node keeps missing its pacing slots'),
        onIdle: () => this.wake(),
      });
      this.pacers.set(configurationId, pacer);
    }
    for (const c of claimed) this.undialed.add(c.run.id);
    // Tracked from now, not from their slots, so shutdown waits for them: they were claimed and must be dialed (or given back).
    this.track(pacer.add(claimed.map((c) => ({ runId: c.run.id, dialAt: c.dialAt, claimed: c })), settings));
  }

  /**
   * The dial and the recording of its call id must finish inside the claim's lease, or another
   * node's reaper may end the run as interrupted while it rings. Near the end, the lease is renewed;
   * a run that is no longer ours (reaped, canceled) is not dialed at all.
   */
  private async dialClaimed(claimed: ClaimedRun): Promise<void> {
    const { deps } = this;
    // Given back to the queue by stop(): another node dials it.
    if (!this.undialed.has(claimed.run.id)) return;
    if (claimed.leaseExpiresAt - deps.clock.now() < deps.config.DIAL_TIMEOUT_MS + LEASE_MARGIN_MS) {
      const until = deps.clock.now() + deps.config.DISPATCH_LEASE_MS;
      if (!(await deps.lifecycle.renewClaim(claimed.run.id, deps.nodeId, until))) {
        // Not ours to dial, nor to give back; unless stop() gave it back meanwhile (then nothing was lost).
        if (!this.undialed.delete(claimed.run.id)) return;
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
    const decoded = deps.routes.decode(configuration);
    if (!decoded.ok) {
      // Stored settings or credentials that do not fit the provider (start-up logged them): the run
      // ends failed with every problem, and nothing is dialed.
      if (!this.undialed.delete(run.id)) return;
      await this.dialFailed(run.id, new DialRefusedError('failed', 'route_invalid', routeInvalidDetail(decoded.problems)), deps.clock.now());
      return;
    }
    const route = decoded.route;
    const provider = deps.providers[configuration.provider];
    const ringTimeoutMs = ringTimeoutOf(deps, route);
    // Asked only of providers that can detect: a request for it on another route was refused when the run was created.
    const machineDetection = route.capabilities.supportsMachineDetection ? await this.detections.forDial(run) : undefined;
    // The last moment a run can go back to the queue: from here on its dial request is sent.
    if (!this.undialed.delete(run.id)) return;
    const sentAt = deps.clock.now();
    deps.metrics.dialLatency.observe((sentAt - run.created_at) / 1000);
    const attempt = provider.dial({ runId: run.id, to: run.phone_number, from: run.caller_id, ringTimeoutMs, route, ...(machineDetection ? { machineDetection } : {}) });
    let providerCallId: string;
    try {
      ({ providerCallId } = await withTimeout(attempt, deps.config.DIAL_TIMEOUT_MS));
    } catch (error) {
      if (error instanceof DialTimeoutError && provider.callsOutliveNode) {
        // The provider may have placed the call and only its answer is late: ending the run would
        // lose a call that rings, hanging it up would lose one that was placed. The run stays
        // `dialing` with no call id and this node's lease: a status callback moves it, and when the
        // lease ends reconciliation finds the call (List Calls) and the run follows it, or finds
        // none and the run ends failed (dispatch_interrupted). Never dialed again either way.
        deps.logger.warn({ runId: run.id }, 'the provider did not answer the dial in time; the call is looked for when the claim\'s lease ends');
        return;
      }
      await this.dialFailed(run.id, error, sentAt);
      if (error instanceof DialTimeoutError) {
        // The provider may still place the call after we gave up on it: hang it up if it does.
        attempt.then((late) => provider.hangUp({ runId: run.id, providerCallId: late.providerCallId, route }), () => undefined);
      }
      return;
    }

    await this.live.placed({ runId: run.id, providerCallId, route, sentAt, ringTimeoutMs });
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

  /**
   * A stopping node dials nothing more: the runs it claimed and has not sent a dial request for
   * (waiting for their pacing slot, or between the claim and the provider) go back to the queue,
   * with a `queued` event (node_shutdown), and the other nodes are told there is work. A run whose
   * dial request was sent is never given back (it may ring): it finishes here, or is reaped or
   * reconciled like any other. If the store refuses the write, the runs stay claimed and their
   * lease ends them failed (dispatch_interrupted), as before: never dialed twice.
   */
  private async giveBackUndialed(): Promise<void> {
    const { deps } = this;
    for (const pacer of this.pacers.values()) pacer.drain();
    this.stopWaiting.abort();
    const ids = [...this.undialed];
    this.undialed.clear();
    if (ids.length === 0) return;
    try {
      const requeued = await deps.lifecycle.requeueUndialed(deps.nodeId, ids, deps.clock.now());
      deps.store.announce(WORK_CHANNEL);
      deps.logger.info({ runs: requeued.length }, 'stopping: gave back to the queue the runs this node claimed but had not dialed');
    } catch (error) {
      deps.logger.warn({ err: error, runs: ids.length }, 'stopping: could not give back undialed runs; their claims end with their lease (dispatch_interrupted)');
    }
  }

  /** Live calls this node holds (for tests and metrics). */
  get liveCalls(): number {
    return this.live.size;
  }

  /**
   * Stops claiming, gives the runs it claimed and has not dialed back to the queue (another node
   * dials them), lets dials under way finish (bounded by DISPATCH_SHUTDOWN_MS), then releases this
   * node's hold on its live calls so deadlines alone govern them.
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
    await this.reconciler.stop();
    await this.giveBackUndialed();
    // Dials already sent (and their recording) finish; nothing claimed is left to wait for.
    const pending = Promise.allSettled([...this.inFlight]);
    await Promise.race([pending, new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now())).unref())]);
    await this.live.drainInProcessCalls(deadline);
    for (const off of this.unsubscribe.splice(0)) off();
    this.live.clearTimers();
    await this.deps.lifecycle.releaseCalls(this.deps.nodeId);
    // A node that stops cleanly says so, so it is never mistaken for a dead one.
    await deleteNode(this.deps.store, this.deps.nodeId).catch((error: unknown) => this.deps.logger.warn({ err: error }, 'could not remove this node\'s heartbeat'));
  }


}
