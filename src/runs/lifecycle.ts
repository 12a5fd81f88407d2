// The writer of run state. Every change of a run's state after its creation goes through here:
// the compare-and-set transition with its event (transition-run.ts), the claim's writes
// (claim.ts), the dial recorded, lease renewals and releases. Here, too, each change is counted,
// once, in dialtone_run_transitions_total. The webhook outbox will be written here, in the same
// transactions. Callers elsewhere decide *which* runs to move (dispatch/ picks overdue ones,
// providers report events); only this module writes them.
import type { Store } from '../store/store.js';
import type { RunState } from './states.js';
import { transitionRun, type AppliedTransition, type TransitionDetails } from './transition-run.js';

/** Where transitions are counted (a prom-client counter). */
export interface TransitionCounter {
  inc(labels: { state: RunState }, value?: number): void;
}

export interface DialRecorded {
  providerCallId: string;
  sentAt: number;
  /** The reaper's deadline while the run is still `dialing` (ring timeout plus grace). */
  dialingDeadlineAt: number;
}

export class RunLifecycle {
  constructor(
    private readonly store: Store,
    private readonly transitions: TransitionCounter,
  ) {}

  /** Applies one transition (see transition-run.ts); undefined when the run was not in a predecessor state. */
  async transition(runId: number, to: RunState, details: TransitionDetails): Promise<AppliedTransition | undefined> {
    const applied = await transitionRun(this.store, runId, to, details);
    if (applied) this.transitions.inc({ state: to });
    return applied;
  }

  /** Counts runs a claim (claim.ts, committed by its caller) moved to `dialing`. */
  claimed(count: number): void {
    if (count > 0) this.transitions.inc({ state: 'dialing' }, count);
  }

  /**
   * Records that the provider took the dial: its call id and when. The run may have ended while the
   * dial was in flight (canceled, reaped): what it is now is returned, so the caller can put the
   * line down. Undefined when the run no longer exists.
   */
  async recordDial(runId: number, dial: DialRecorded): Promise<{ state: RunState; cancelRequested: boolean } | undefined> {
    const row = await this.store.batched((trx) =>
      trx
        .updateTable('workflow_runs')
        .set((eb) => ({
          provider_call_id: dial.providerCallId,
          dial_sent_at: dial.sentAt,
          lease_expires_at: null,
          deadline_at: eb.case().when('state', '=', 'dialing').then(dial.dialingDeadlineAt).else(eb.ref('deadline_at')).end(),
        }))
        .where('id', '=', runId)
        .returning(['state', 'cancel_requested_at'])
        .executeTakeFirst(),
    );
    return row ? { state: row.state, cancelRequested: row.cancel_requested_at !== null } : undefined;
  }

  /**
   * Extends a node's claim on a run it has not dialed yet. False when the run is no longer that
   * node's undialed claim (canceled, or reaped after the lease ran out): it must not be dialed.
   */
  async renewClaim(runId: number, nodeId: string, until: number): Promise<boolean> {
    const row = await this.store.batched((trx) =>
      trx
        .updateTable('workflow_runs')
        .set({ lease_expires_at: until, deadline_at: until })
        .where('id', '=', runId)
        .where('state', '=', 'dialing')
        .where('lease_owner', '=', nodeId)
        .where('provider_call_id', 'is', null)
        .returning('id')
        .executeTakeFirst(),
    );
    return row !== undefined;
  }

  /** A stopping node lets go of its live calls: from now on their deadlines (and the reaper) govern them. */
  async releaseCalls(nodeId: string): Promise<void> {
    await this.store.db
      .updateTable('workflow_runs')
      .set({ lease_owner: null })
      .where('lease_owner', '=', nodeId)
      .where('provider_call_id', 'is not', null)
      .execute();
  }
}
