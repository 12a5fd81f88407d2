// Ending runs nobody else will end: queued runs past their TTL, and live runs whose node or
// provider went quiet. Each statement picks a bounded batch; every run still goes through
// the run lifecycle, so the state rules, events and counts are the same as for any other transition.
import { selectOverdueRuns, selectStaleQueuedRuns } from '../store/statements/run-reads.js';
import type { ProviderName } from '../store/schema/schema.js';
import type { Store } from '../store/engine/store.js';
import type { RunLifecycle } from '../runs/lifecycle.js';
import type { AppliedTransition } from '../runs/transition-run.js';
import { LIVE_STATES } from '../runs/states.js';

const BATCH = 500;

/** Queued runs queued more than `ttlMs` ago (a deferred run: due that long ago) end `expired`; they are never dialed. */
export async function expireQueuedRuns(store: Store, lifecycle: RunLifecycle, now: number, ttlMs: number): Promise<AppliedTransition[]> {
  const applied: AppliedTransition[] = [];
  for (const id of await selectStaleQueuedRuns(store, now - ttlMs, BATCH)) {
    const t = await lifecycle.transition(id, 'expired', { at: now, reason: 'queue_ttl_exceeded', durable: true });
    if (t) applied.push(t);
  }
  return applied;
}

/**
 * Live runs past their deadline. A run still `dialing` with no provider call id was claimed by a
 * node that never finished the dial (it crashed or hung): it may or may not have reached the
 * provider, so it is never dialed again and ends `failed` (dispatch_interrupted). Any other live
 * run past its deadline stopped hearing from its provider and ends `failed` (provider_silent).
 * Runs of the `askFirst` providers are left to reconciliation (reconcile.ts), which asks the
 * provider what became of the call before ending them.
 */
export async function reapSilentRuns(
  store: Store,
  lifecycle: RunLifecycle,
  now: number,
  askFirst: readonly ProviderName[] = [],
): Promise<{ run: AppliedTransition; providerCallId: string | null }[]> {
  const overdue = await selectOverdueRuns(store, now, LIVE_STATES, BATCH, askFirst);
  const ended: { run: AppliedTransition; providerCallId: string | null }[] = [];
  for (const row of overdue) {
    const interrupted = row.state === 'dialing' && row.provider_call_id === null;
    const t = await lifecycle.transition(row.id, 'failed', {
      at: now,
      reason: interrupted ? 'dispatch_interrupted' : 'provider_silent',
      data: { reaped_from: row.state },
      onlyFrom: row.state,
      onlyIfDeadlineBefore: now,
    });
    if (t) ended.push({ run: t, providerCallId: row.provider_call_id });
  }
  return ended;
}
