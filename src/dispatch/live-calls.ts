// The live calls one node placed and holds: each with its timer (ring timeout, then maximum
// duration), its provider events applied in the order the provider sent them, cancel requests for
// it, and at shutdown the end of the calls that cannot outlive the process. The dispatcher hands
// a call over once the provider took the dial (`placed`); every state change goes through the run
// lifecycle (runs/lifecycle.ts).
import type { Deps } from '../deps.js';
import { LIVE_STATES, isTerminal } from '../runs/states.js';
import type { AppliedTransition } from '../runs/transition-run.js';
import { selectCancelRequested, selectEndedRuns, selectRunState } from '../store/statements/run-reads.js';
import type { ProviderName, RunState } from '../store/schema/schema.js';
import type { AppliedElsewhere } from '../signals.js';
import type { DecodedRoute, LiveCall, MachineVerdict, ProviderEvent, TransferOutcome } from '../telephony/provider.js';
import { TRANSFERRED } from '../runs/runtime-actions.js';
import { applyTransferOutcome } from './call-control.js';
import { issueRunToken } from '../runtime/run-token.js';
import { applyMachineVerdict } from './machine-verdicts.js';
import { applyProviderEvent, ringTimeoutOf } from './provider-events.js';

interface TrackedCall {
  runId: number;
  providerCallId: string;
  route: DecodedRoute;
  timer: NodeJS.Timeout | undefined;
  /** Set once the maximum-duration timer replaced the ring timer. */
  answered: boolean;
}

export interface PlacedCall {
  runId: number;
  providerCallId: string;
  route: DecodedRoute;
  sentAt: number;
  ringTimeoutMs: number;
}

export class LiveCalls {
  private readonly calls = new Map<number, TrackedCall>();
  /**
   * Per-run chains, so one call's events are applied in the order the provider sent them, and a
   * timer's ending after every event received before it fired.
   */
  private readonly eventChains = new Map<number, Promise<void>>();

  constructor(
    private readonly deps: Deps,
    /** Keeps work the node must finish before it stops. */
    private readonly track: (work: Promise<void>) => void,
    /** A call ended: its concurrency is free again. */
    private readonly freed: () => void,
  ) {}

  /**
   * Holds a call the provider took, with its ring timer, and records the dial. The run may have
   * ended while the dial was in flight (canceled, or reaped): then the call must not live on.
   */
  async placed(placed: PlacedCall): Promise<void> {
    const { deps } = this;
    const call: TrackedCall = { runId: placed.runId, providerCallId: placed.providerCallId, route: placed.route, timer: undefined, answered: false };
    this.calls.set(call.runId, call);
    this.setTimer(call, placed.ringTimeoutMs, async () => {
      await this.endLocally(call, 'no_answer', 'ring_timeout');
    });
    const now = await deps.lifecycle.recordDial(call.runId, {
      providerCallId: call.providerCallId,
      sentAt: placed.sentAt,
      dialingDeadlineAt: placed.sentAt + placed.ringTimeoutMs + deps.config.REAPER_GRACE_MS,
    });
    if (!now || isTerminal(now.state)) await this.hangUp(call);
    else if (now.cancelRequested) await this.cancelLocally(call);
  }

  /**
   * A provider event for one of this node's runs (or another's: the store decides). An event
   * already applied (a Twilio callback taken by this node's HTTP route, or reconciliation) is not
   * applied again: only this node's timers follow it.
   */
  onProviderEvent(event: ProviderEvent, appliedElsewhere?: AppliedElsewhere): void {
    this.track(this.inOrder(event.runId, () => this.handleProviderEvent(event, appliedElsewhere)));
  }

  /**
   * Who answered one of this node's in-process calls (the simulator's verdict), in order with its
   * events: recorded once, then acted on here, where the call is held.
   */
  onMachineVerdict(verdict: MachineVerdict): void {
    this.track(
      this.inOrder(verdict.runId, async () => {
        const call = this.calls.get(verdict.runId);
        await applyMachineVerdict(
          this.deps,
          verdict,
          call && {
            hangUp: async (reason) => void (await this.endLocally(call, 'completed', reason, 'in_progress')),
            leaveMessage: async (text) => this.deps.providers[call.route.provider].leaveMessage?.(call, text),
          },
        );
      }),
    );
  }

  /** Ends the call of a run whose cancel was requested, if this node holds it. */
  async cancel(runId: number): Promise<void> {
    const call = this.calls.get(runId);
    if (call) await this.cancelLocally(call);
  }

  /**
   * Puts down the lines of this node's calls whose runs another node ended (an agent's hang-up
   * taken by another node's API; picked up on every tick). Their provider's own report would end
   * them too, but only when the far end hangs up.
   */
  async endedElsewhere(): Promise<void> {
    if (this.calls.size === 0) return;
    for (const { id, outcome_reason } of await selectEndedRuns(this.deps.store, [...this.calls.keys()])) {
      const call = this.calls.get(id);
      // In the call's event chain: a terminal event of the provider's received first lets it go
      // (the far end hung up), and then there is no line to put down. A call transferred to
      // someone who answered is theirs now: let go of it, never put it down.
      if (call) await this.inOrder(id, async () => {
        if (this.calls.get(id) !== call) return;
        if (outcome_reason === TRANSFERRED) this.forget(call);
        else await this.hangUp(call);
      });
    }
  }

  /** The call this node holds for a run (its agent runtime's transfer and digits act on it here). */
  held(runId: number): LiveCall | undefined {
    const call = this.calls.get(runId);
    return call && { runId: call.runId, providerCallId: call.providerCallId, route: call.route };
  }

  /**
   * How a transfer of one of this node's in-process calls ended (the simulator's, SIP's NOTIFY):
   * applied once, in order with the call's events; a transfer the target answered ends the run
   * and the call is let go (it is the target's now), never put down.
   */
  onTransferOutcome(outcome: TransferOutcome): void {
    this.track(
      this.inOrder(outcome.runId, async () => {
        const ended = await applyTransferOutcome(this.deps, outcome);
        const call = this.calls.get(outcome.runId);
        if (ended && call) this.forget(call);
      }),
    );
  }

  /** Hangs up the call of a run that ended elsewhere (the reaper, its agent), if this node holds it. */
  async reaped(runId: number): Promise<void> {
    const call = this.calls.get(runId);
    if (call) await this.hangUp(call);
  }

  /** Stops every timer (the node is letting go of its calls). */
  clearTimers(): void {
    for (const call of this.calls.values()) if (call.timer) clearTimeout(call.timer);
  }

  /**
   * A timer's ending joins the call's event chain: an event the provider sent before the timer
   * fired is applied first, however long its write takes, so a busy heard at 10 ms is not
   * overtaken by a 200 ms ring timeout while the busy is still being written. An ending whose
   * turn comes after such an event let the call go, or replaced its timer (an answer ends the ring
   * timeout), does nothing.
   */
  private setTimer(call: TrackedCall, ms: number, fire: () => Promise<void>): void {
    if (call.timer) clearTimeout(call.timer);
    const timer = setTimeout(() => {
      this.track(
        this.inOrder(call.runId, async () => {
          if (this.calls.get(call.runId) === call && call.timer === timer) await fire();
        }),
      );
    }, ms);
    call.timer = timer;
  }

  private forget(call: TrackedCall): void {
    if (call.timer) clearTimeout(call.timer);
    this.calls.delete(call.runId);
    this.freed();
  }

  private async hangUp(call: TrackedCall): Promise<void> {
    this.forget(call);
    try {
      await this.deps.providers[call.route.provider].hangUp(call);
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

  /** Cancel requests for this node's calls, made on any node (picked up on every tick). */
  async cancelRequested(): Promise<void> {
    if (this.calls.size === 0) return;
    for (const id of await selectCancelRequested(this.deps.store, this.deps.nodeId, LIVE_STATES)) {
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

  private async handleProviderEvent(event: ProviderEvent, appliedElsewhere: AppliedElsewhere | undefined): Promise<void> {
    const call = this.calls.get(event.runId);
    if (appliedElsewhere && !call) return;
    const ringTimeoutMs = call ? ringTimeoutOf(this.deps, call.route) : this.deps.config.RING_TIMEOUT_MS;
    const applied = appliedElsewhere ? undefined : await applyProviderEvent(this.deps, call?.route.provider ?? 'unknown', event, ringTimeoutMs, call && event.kind === 'answered' ? this.runtimeHandOver(call) : undefined);
    if (!call) return;
    const moved = appliedElsewhere ? appliedElsewhere.moved : applied !== undefined;
    // The run's state in the store says what this node's timers should be (an event applied
    // elsewhere, or one that moved nothing because it was a duplicate).
    const state = applied?.to ?? (await this.currentState(event.runId));
    if (state === 'in_progress' && !call.answered) {
      call.answered = true;
      this.setTimer(call, this.deps.config.MAX_CALL_DURATION_MS, async () => {
        await this.endLocally(call, 'completed', 'max_duration', 'in_progress');
      });
    } else if (state !== undefined && isTerminal(state)) {
      // The run ended elsewhere (reaped, or its node presumed lost) while this call still reports
      // progress: the line is still up, so put it down. A terminal event means the call is over.
      if (!moved && (event.kind === 'ringing' || event.kind === 'answered')) await this.hangUp(call);
      else this.forget(call);
    }
  }

  /**
   * What the answered event of an in-process call carries for the agent runtime: the run token.
   * Twilio hands it over in the media stream's parameters; a simulated call has no media, and a SIP
   * call's media carries only the run id, so the runtime reads it from the run's `in_progress`
   * event (docs/agent-runtime.md, "Getting the call"), which only the organization's API key reads.
   */
  private runtimeHandOver(call: TrackedCall): Record<string, unknown> | undefined {
    if (call.route.capabilities.callsOutliveNode || !this.deps.cipher.hasKey) return undefined;
    return { runtime_token: issueRunToken(this.deps.cipher, call.runId, this.deps.clock.now() + this.deps.config.RUNTIME_TOKEN_TTL_MS) };
  }

  /** Providers whose calls live in this process and die with it. */
  inProcessProviders(): ProviderName[] {
    return Object.values(this.deps.providers)
      .filter((provider) => !provider.callsOutliveNode)
      .map((provider) => provider.name);
  }

  private async currentState(runId: number): Promise<RunState | undefined> {
    return selectRunState(this.deps.store, runId);
  }

  /** Live calls this node holds (for tests and metrics). */
  get size(): number {
    return this.calls.size;
  }

  /**
   * Calls whose dialog lives in this process (SIP, simulator) cannot outlive it: they get until
   * the shutdown deadline to end by themselves, then are hung up and their runs ended
   * (node_shutdown), so none is left live with nobody holding it. Calls that outlive the node
   * (Twilio) are released to their provider's callbacks instead.
   */
  async drainInProcessCalls(deadline: number): Promise<void> {
    const inProcess = () => [...this.calls.values()].filter((call) => !call.route.capabilities.callsOutliveNode);
    while (inProcess().length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    for (const call of inProcess()) {
      const state = await this.currentState(call.runId);
      if (state === 'in_progress') await this.endLocally(call, 'completed', 'node_shutdown', 'in_progress');
      else if (state !== undefined && !isTerminal(state)) await this.endLocally(call, 'failed', 'node_shutdown', state);
      else this.forget(call);
    }
  }}
