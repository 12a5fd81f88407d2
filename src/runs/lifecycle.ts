// The writer of run state (its statements are store/statements/run-writes.ts). Every change of a run's state
// after its creation goes through here:
// the compare-and-set transition with its event (transition-run.ts), the claim's writes
// (claim.ts), the dial recorded, lease renewals and releases. Here, too, each change is counted,
// once, in dialtone_run_transitions_total. The webhook outbox is written with each event, in the
// same transaction (store/statements/run-event-outbox.ts). Callers elsewhere decide *which* runs to move (dispatch/ picks overdue ones,
// providers report events); only this module writes them.
import { RunWriteQueue } from '../store/engine/run-write-queue.js';
import { extendUndialedClaim, markCancelRequested, markReconciled, releaseNodeCalls, setFoundCall, setUndialedRunsQueued, type DialValues } from '../store/statements/run-writes.js';
import type { Store } from '../store/engine/store.js';
import { LIVE_STATES, PREDECESSORS, type RunState } from './states.js';
import { transitionRun, type AppliedTransition, type TransitionDetails } from './transition-run.js';
import { answeredByWrite, type AnsweredByDetails } from './answered-by.js';

/** Where transitions are counted (a prom-client counter). */
export interface TransitionCounter {
  inc(labels: { state: RunState }, value?: number): void;
}

/** The dial the provider took: its call id, when, and the reaper's deadline while the run is still `dialing`. */
export type DialRecorded = DialValues;

export class RunLifecycle {
  /** Call progress (the dial recorded, transitions that are not durable), written together per moment. */
  private readonly writes: RunWriteQueue;

  constructor(
    private readonly store: Store,
    private readonly transitions: TransitionCounter,
    /** Called after a commit that wrote webhook deliveries (the delivery worker looks at once). */
    private readonly deliveriesWritten: () => void = () => undefined,
  ) {
    this.writes = new RunWriteQueue(store);
  }

  /** Applies one transition (see transition-run.ts); undefined when the run was not in a predecessor state. */
  async transition(runId: number, to: RunState, details: TransitionDetails): Promise<AppliedTransition | undefined> {
    const applied = await transitionRun(this.store, this.writes, runId, to, details);
    if (applied) this.transitions.inc({ state: to });
    if (applied && applied.webhookDeliveries > 0) this.deliveriesWritten();
    return applied;
  }

  /**
   * Records who answered, once (answered-by.ts), in order with the run's transitions; undefined
   * when a verdict was already recorded (or the run was never dialed). Its event's `seq` is returned.
   */
  async recordAnsweredBy(runId: number, details: AnsweredByDetails): Promise<{ seq: number } | undefined> {
    const written = await this.writes.transition(answeredByWrite(runId, details));
    if (written && written.webhookDeliveries > 0) this.deliveriesWritten();
    return written ? { seq: written.seq } : undefined;
  }

  /**
   * Counts runs a claim (claim.ts, committed by its caller) moved to `dialing`, and those its screen
   * ended `canceled` instead, and wakes the delivery of their messages.
   */
  claimed(count: number, webhookDeliveries = 0, canceled = 0): void {
    if (count > 0) this.transitions.inc({ state: 'dialing' }, count);
    if (canceled > 0) this.transitions.inc({ state: 'canceled' }, canceled);
    if (webhookDeliveries > 0) this.deliveriesWritten();
  }

  /**
   * Counts a transition a caller applied inside its own transaction (transition-run.ts's
   * transitionRunInTransaction: a campaign attempt refused as it was created), once that committed,
   * and wakes the delivery of its messages.
   */
  applied(transition: AppliedTransition): void {
    this.transitions.inc({ state: transition.to });
    if (transition.webhookDeliveries > 0) this.deliveriesWritten();
  }

  /**
   * Records that the provider took the dial: its call id and when. The run may have ended while the
   * dial was in flight (canceled, reaped): what it is now is returned, so the caller can put the
   * line down. Undefined when the run no longer exists.
   */
  async recordDial(runId: number, dial: DialRecorded): Promise<{ state: RunState; cancelRequested: boolean } | undefined> {
    const row = await this.writes.dialRecorded(runId, dial);
    return row ? { state: row.state, cancelRequested: row.cancel_requested_at !== null } : undefined;
  }

  /**
   * Extends a node's claim on a run it has not dialed yet. False when the run is no longer that
   * node's undialed claim (canceled, or reaped after the lease ran out): it must not be dialed.
   */
  renewClaim(runId: number, nodeId: string, until: number): Promise<boolean> {
    return this.store.batched((trx) => extendUndialedClaim(trx, runId, nodeId, until));
  }

  /**
   * A stopping node gives back runs it claimed and never sent a dial request for (the caller knows:
   * it names only those): `dialing → queued`, claim cleared, with a `queued` event saying why
   * (`node_shutdown`), in one durable transaction, so another node dials them. Runs that moved on
   * meanwhile (canceled, reaped) or that have a dial recorded are left as they are. Returns the
   * runs given back.
   */
  async requeueUndialed(nodeId: string, runIds: readonly number[], at: number): Promise<number[]> {
    if (runIds.length === 0) return [];
    const written = await this.store.transaction('durable', (trx) =>
      setUndialedRunsQueued(trx, runIds, { nodeId, now: at, reason: 'node_shutdown', from: PREDECESSORS.queued }),
    );
    if (written.ids.length > 0) this.transitions.inc({ state: 'queued' }, written.ids.length);
    if (written.webhookDeliveries > 0) this.deliveriesWritten();
    return written.ids;
  }

  /** A stopping node lets go of its live calls: from now on their deadlines (and the reaper) govern them. */
  releaseCalls(nodeId: string): Promise<void> {
    return releaseNodeCalls(this.store, nodeId);
  }

  /** Takes this node's turn to ask the provider about a live run; false when another node has it, or the run ended. */
  claimReconciliation(runId: number, previous: number | null, now: number): Promise<boolean> {
    return markReconciled(this.store, runId, previous, now, LIVE_STATES);
  }

  /** Records the call the provider says it placed for a run interrupted mid-dial; false when the run moved on meanwhile. */
  recordFoundCall(runId: number, found: { providerCallId: string; sentAt: number; deadlineAt: number }): Promise<boolean> {
    return this.store.batched((trx) => setFoundCall(trx, runId, found));
  }

  /** Marks a live run's cancel request for the node holding its call; false when it is not live or already marked. */
  requestCancel(runId: number, at: number): Promise<boolean> {
    return markCancelRequested(this.store, runId, at, LIVE_STATES);
  }
}
