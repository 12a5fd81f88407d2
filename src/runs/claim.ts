// The claim's writes: queued runs of one configuration become `dialing`, leased to a node, each
// with its event, inside the transaction of the caller (dispatch/claim-runs.ts), which decides
// how many may be claimed (pacing, concurrency) and commits. Several nodes claim at once without
// taking the same runs (store/run-writes.ts skips rows another claim holds).
import type { Transaction } from 'kysely';
import { appendRunEvents, setQueuedRunsDialing, type ClaimedRow } from '../store/run-writes.js';
import type { Database } from '../store/schema.js';
import type { Store } from '../store/store.js';

export type { ClaimedRow };

export interface ClaimWrite {
  configurationId: number;
  /** Most runs to claim, oldest first. */
  limit: number;
  nodeId: string;
  now: number;
  leaseMs: number;
}

/** Claims up to `limit` queued runs; returns them in id order (empty when none is queued). */
export async function claimQueuedRuns(store: Pick<Store, 'dialect'>, trx: Transaction<Database>, claim: ClaimWrite): Promise<ClaimedRow[]> {
  const rows = await setQueuedRunsDialing(store, trx, {
    configurationId: claim.configurationId,
    limit: claim.limit,
    nodeId: claim.nodeId,
    now: claim.now,
    leaseExpiresAt: claim.now + claim.leaseMs,
  });
  await appendRunEvents(trx, rows.map((r) => ({ runId: r.id, seq: r.last_event_seq, type: 'dialing', at: claim.now, data: { node: claim.nodeId } })));
  return rows.map(({ last_event_seq: _seq, ...run }) => run);
}
