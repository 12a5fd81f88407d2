// The claim's writes: queued runs of one configuration become `dialing`, leased to a node, each
// with its event and webhook deliveries, inside the transaction of the caller
// (dispatch/claim-runs.ts), which decides how many may be claimed (pacing, concurrency) and commits. Several nodes claim at once without
// taking the same runs (store/run-writes.ts skips rows another claim holds). Before they move, the
// caller's screen (the calling policy, checked again at claim time) may name runs that must not be
// dialed at all: those end `canceled` with the screen's reason in the same transaction.
import { appendRunEvents } from '../store/run-event-outbox.js';
import { selectClaimCandidates, setQueuedRunsCanceled, setQueuedRunsDialing, type ClaimCandidate, type ClaimedRow } from '../store/run-writes.js';
import type { WorkflowRunRow } from '../store/schema.js';
import { runMessageId, webhookTypeForState } from '../webhooks/event-types.js';
import type { Store, StoreTransaction } from '../store/store.js';

export type { ClaimCandidate, ClaimedRow };

/** Runs of a claim batch that must not be dialed, by id, each with the reason it ends `canceled`. */
export type ClaimScreen = (trx: StoreTransaction, candidates: readonly ClaimCandidate[]) => Promise<Map<number, string>>;

export interface ClaimWrite {
  configurationId: number;
  /** Most runs to claim, oldest first. */
  limit: number;
  nodeId: string;
  now: number;
  leaseMs: number;
  screen?: ClaimScreen;
}

export interface ClaimWritten {
  /** The claimed runs, in id order (empty when none is queued). */
  rows: ClaimedRow[];
  /** How many runs the screen ended `canceled` instead. */
  canceled: number;
  webhookDeliveries: number;
}

/** Claims up to `limit` queued runs (fewer when the screen cancels some); returns them in id order, with the webhook deliveries written. */
export async function claimQueuedRuns(store: Pick<Store, 'dialect'>, trx: StoreTransaction, claim: ClaimWrite): Promise<ClaimWritten> {
  const candidates = await selectClaimCandidates(store, trx, claim.configurationId, claim.limit);
  if (candidates.length === 0) return { rows: [], canceled: 0, webhookDeliveries: 0 };
  const refused = claim.screen ? await claim.screen(trx, candidates) : new Map<number, string>();

  const rows = await setQueuedRunsDialing(
    trx,
    candidates.filter((c) => !refused.has(c.id)).map((c) => c.id),
    { nodeId: claim.nodeId, now: claim.now, leaseExpiresAt: claim.now + claim.leaseMs },
  );
  const canceled: WorkflowRunRow[] = [];
  for (const reason of new Set(refused.values())) {
    const ids = [...refused].filter(([, r]) => r === reason).map(([id]) => id);
    canceled.push(...(await setQueuedRunsCanceled(trx, ids, claim.now, reason)));
  }

  const webhookDeliveries = await appendRunEvents(trx, store.dialect, [
    ...rows.map((run) => ({
      run,
      type: 'dialing' as const,
      at: claim.now,
      data: { node: claim.nodeId },
      webhookType: webhookTypeForState('dialing'),
      messageId: runMessageId(run.id, run.last_event_seq),
    })),
    ...canceled.map((run) => ({
      run,
      type: 'canceled' as const,
      at: claim.now,
      data: { reason: run.outcome_reason },
      webhookType: webhookTypeForState('canceled'),
      messageId: runMessageId(run.id, run.last_event_seq),
    })),
  ]);
  const claimed = rows.map((r) => ({ id: r.id, created_at: r.created_at, phone_number: r.phone_number, caller_id: r.caller_id, telephony_configuration_id: r.telephony_configuration_id, mode: r.mode }));
  return { rows: claimed, canceled: canceled.length, webhookDeliveries };
}
