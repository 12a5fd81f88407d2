// The claim's writes: queued runs of one configuration become `dialing`, leased to a node, each
// with its event and webhook deliveries, inside the transaction of the caller
// (dispatch/claim-runs.ts), which decides how many may be claimed (pacing, concurrency) and commits. Several nodes claim at once without
// taking the same runs (store/run-writes.ts skips rows another claim holds).
import { appendRunEvents } from '../store/run-event-outbox.js';
import { setQueuedRunsDialing, type ClaimedRow } from '../store/run-writes.js';
import { runMessageId, webhookTypeForState } from '../webhooks/event-types.js';
import type { Store, StoreTransaction } from '../store/store.js';

export type { ClaimedRow };

export interface ClaimWrite {
  configurationId: number;
  /** Most runs to claim, oldest first. */
  limit: number;
  nodeId: string;
  now: number;
  leaseMs: number;
}

/** Claims up to `limit` queued runs; returns them in id order (empty when none is queued), and the webhook deliveries written. */
export async function claimQueuedRuns(store: Pick<Store, 'dialect'>, trx: StoreTransaction, claim: ClaimWrite): Promise<{ rows: ClaimedRow[]; webhookDeliveries: number }> {
  const rows = await setQueuedRunsDialing(store, trx, {
    configurationId: claim.configurationId,
    limit: claim.limit,
    nodeId: claim.nodeId,
    now: claim.now,
    leaseExpiresAt: claim.now + claim.leaseMs,
  });
  const webhookDeliveries = await appendRunEvents(
    trx,
    store.dialect,
    rows.map((run) => ({
      run,
      type: 'dialing',
      at: claim.now,
      data: { node: claim.nodeId },
      webhookType: webhookTypeForState('dialing'),
      messageId: runMessageId(run.id, run.last_event_seq),
    })),
  );
  const claimed = rows.map((r) => ({ id: r.id, created_at: r.created_at, phone_number: r.phone_number, caller_id: r.caller_id, telephony_configuration_id: r.telephony_configuration_id, mode: r.mode }));
  return { rows: claimed, webhookDeliveries };
}
