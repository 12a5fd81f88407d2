// The queue cap: an organization may have at most so many queued runs (429 queue_full beyond).
//
// Counting an organization's queued runs on every request costs more than it looks on
// PostgreSQL: the partial index of queued runs keeps an entry for every run that was ever queued
// until vacuum removes it, so the count grows with recent traffic, and an exact count needs the
// organization's creations serialized (one durable commit at a time). So each node keeps a count
// at most COUNT_TTL_MS old per organization; while it is more than QUEUE_CAP_LOCK_MARGIN below the
// cap, nothing more is checked. Near the cap, every creation counts exactly inside its transaction,
// on PostgreSQL after locking the organization's row. The cap can only be overshot if an
// organization queues more than the margin within COUNT_TTL_MS, which its rate limits forbid.
import { DialtoneError } from '../errors.js';
import { countQueuedRuns, lockOrganization } from '../store/statements/run-reads.js';
import type { Store, StoreTransaction } from '../store/engine/store.js';

/** How stale a node's count may be; short, so the margin it needs stays small. */
const COUNT_TTL_MS = 1_000;

export interface QueueCap {
  maxQueued: number;
  /**
   * The run is deferred to its calling hours: it is counted with the organization's other deferred
   * runs, against the same number but apart from the runs due at once, so that a night's deferred
   * calls never make an immediate call queue_full (and stay bounded all the same).
   */
  scheduled?: boolean;
  /** The route's pacing, to estimate when a place opens. */
  callsPerSecond: number;
}

export class QueuedRunCounts {
  private readonly counts = new Map<number, { count: number; at: number } | Promise<number>>();

  /** True when this organization is, by a count at most COUNT_TTL_MS old, more than `margin` below `maxQueued` (runs due at once only). */
  async farBelowCap(store: Store, orgId: number, maxQueued: number, margin: number, now: number): Promise<boolean> {
    if (maxQueued - margin <= 0) return false;
    let known = this.counts.get(orgId);
    if (known === undefined || (!(known instanceof Promise) && now - known.at > COUNT_TTL_MS)) {
      // Concurrent requests of one organization share one count.
      const counting = countQueuedRuns(store, orgId);
      this.counts.set(orgId, counting);
      counting.then(
        (count) => this.counts.set(orgId, { count, at: now }),
        () => this.counts.delete(orgId),
      );
      known = counting;
    }
    const count = known instanceof Promise ? await known : known.count;
    return count < maxQueued - margin;
  }
}

/** The exact check, inside the transaction that creates the run. */
export async function enforceQueueCap(trx: StoreTransaction, orgId: number, cap: QueueCap): Promise<void> {
  // SQLite runs one write transaction at a time; PostgreSQL needs the organization's row locked
  // so that concurrent creations cannot all see room for one more.
  await lockOrganization(trx, orgId);
  const count = await countQueuedRuns(trx, orgId, cap.scheduled === true);
  if (count >= cap.maxQueued) {
    if (cap.scheduled) {
      throw new DialtoneError('queue_full', `The organization has ${count} runs deferred to its calling hours; the limit is ${cap.maxQueued}.`, {
        retryAfterSeconds: 3_600,
        extra: { queued_runs: count, max_queued_runs: cap.maxQueued },
      });
    }
    // Queued runs leave the queue at the route's pacing rate: this is when the first place opens.
    const retryAfterSeconds = Math.min(3_600, Math.max(1, Math.ceil((count - cap.maxQueued + 1) / Math.max(1, cap.callsPerSecond))));
    throw new DialtoneError('queue_full', `The organization has ${count} runs queued; the limit is ${cap.maxQueued}. Retry after ${retryAfterSeconds} s.`, {
      retryAfterSeconds,
      extra: { queued_runs: count, max_queued_runs: cap.maxQueued },
    });
  }
}
