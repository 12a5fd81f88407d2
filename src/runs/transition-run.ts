// Moves one run to a new state and appends the matching event (and its webhook deliveries),
// atomically. The UPDATE only matches when the current state is an allowed predecessor of the
// target (compare-and-set), so concurrent or repeated events on any node cannot move a run
// backwards or out of a terminal state.
import { writeTransition, type RunColumns, type TransitionWrite, type TransitionWritten } from '../store/statements/run-writes.js';
import type { RunWriteQueue } from '../store/engine/run-write-queue.js';
import type { RunState } from '../store/schema/schema.js';
import type { Store, StoreTransaction } from '../store/engine/store.js';
import { webhookTypeForState } from '../webhooks/event-types.js';
import { isTerminal, PREDECESSORS } from './states.js';

export interface TransitionDetails {
  at: number;
  reason?: string | null;
  rawProviderStatus?: string | null;
  providerCallId?: string | null;
  /** New reaper deadline; terminal states clear it. */
  deadlineAt?: number | null;
  /** When the caller asked for this (a cancel): recorded in `cancel_requested_at`. */
  requestedAt?: number;
  /** Extra facts for the event. */
  data?: Record<string, unknown>;
  /** Apply only if the run is still in exactly this state (the caller decided on what it read). */
  onlyFrom?: RunState;
  /** Apply only if the run's deadline is still before this time (the reaper's guard). */
  onlyIfDeadlineBefore?: number;
  /** Commit durably (see Durability): for transitions a caller was promised, like a cancel. */
  durable?: boolean;
}

export interface AppliedTransition {
  runId: number;
  to: RunState;
  seq: number;
  /** Webhook deliveries written to report it. */
  webhookDeliveries: number;
}

type RunUpdate = RunColumns;

function phaseColumns(to: RunState, at: number): RunUpdate {
  switch (to) {
    case 'ringing':
      return { ringing_at: at };
    case 'in_progress':
      return { answered_at: at };
    default:
      return isTerminal(to) ? { ended_at: at, deadline_at: null, lease_owner: null, lease_expires_at: null } : {};
  }
}

/** The writes of one transition: the run's new columns, the compare-and-set guard, its event. */
export function transitionWrite(runId: number, to: RunState, details: TransitionDetails): TransitionWrite {
  const columns: RunUpdate = {
    state: to,
    updated_at: details.at,
    ...(details.reason !== undefined ? { outcome_reason: details.reason } : {}),
    ...(details.rawProviderStatus !== undefined ? { raw_provider_status: details.rawProviderStatus } : {}),
    ...(details.providerCallId !== undefined ? { provider_call_id: details.providerCallId } : {}),
    ...(details.deadlineAt !== undefined ? { deadline_at: details.deadlineAt } : {}),
    ...(details.requestedAt !== undefined ? { cancel_requested_at: details.requestedAt } : {}),
    ...phaseColumns(to, details.at),
  };
  return {
    runId,
    columns,
    guard: { from: PREDECESSORS[to], onlyFrom: details.onlyFrom, deadlineBefore: details.onlyIfDeadlineBefore },
    event: {
      type: to,
      at: details.at,
      webhookType: webhookTypeForState(to),
      data: {
        ...(details.reason ? { reason: details.reason } : {}),
        ...(details.rawProviderStatus ? { provider_status: details.rawProviderStatus } : {}),
        ...(details.providerCallId ? { provider_call_id: details.providerCallId } : {}),
        ...details.data,
      },
    },
  };
}

function applied(runId: number, to: RunState, written: TransitionWritten | undefined): AppliedTransition | undefined {
  return written === undefined ? undefined : { runId, to, seq: written.seq, webhookDeliveries: written.webhookDeliveries };
}

/** Applies one transition inside the caller's transaction (the claim cancels runs it may never dial this way). */
export async function transitionRunInTransaction(
  trx: StoreTransaction,
  runId: number,
  to: RunState,
  details: TransitionDetails,
): Promise<AppliedTransition | undefined> {
  const { columns, guard, event } = transitionWrite(runId, to, details);
  return applied(runId, to, await writeTransition(trx, runId, columns, guard, event));
}

/**
 * Applies one transition; undefined when the run was not in a predecessor state. A durable one
 * commits in a transaction of its own; the others go through the run write queue
 * (store/engine/run-write-queue.ts), which writes the transitions of a moment together, in order per run.
 */
export async function transitionRun(store: Store, writes: RunWriteQueue, runId: number, to: RunState, details: TransitionDetails): Promise<AppliedTransition | undefined> {
  if (details.durable) return store.transaction('durable', (trx) => transitionRunInTransaction(trx, runId, to, details));
  return applied(runId, to, await writes.transition(transitionWrite(runId, to, details)));
}
