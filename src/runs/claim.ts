// The claim's writes: queued runs of one configuration become `dialing`, leased to a node, each
// with its event and webhook deliveries, inside the transaction of the caller
// (dispatch/claim-runs.ts), which decides how many may be claimed (pacing, concurrency) and commits. Several nodes claim at once without
// taking the same runs (store/run-writes.ts skips rows another claim holds).
//
// A run taken from the queue may not be dialable now (its organization's calling hours closed
// while it waited): the caller's `hold` says so, and the run is deferred instead, in the same
// transaction: it stays queued with a new scheduled_for and a `deferred` event, and is not dialed.
import { appendRunEvents } from '../store/run-event-outbox.js';
import { selectClaimCandidates, setQueuedRunsDialing, writeTransition, type ClaimCandidate, type ClaimedRow } from '../store/run-writes.js';
import { runMessageId, webhookTypeForState } from '../webhooks/event-types.js';
import type { Store, StoreTransaction } from '../store/store.js';
import { transitionRunInTransaction } from './transition-run.js';

export type { ClaimCandidate, ClaimedRow };

/** Whether a candidate may be dialed now, must wait until a time, or can never be dialed. */
export type HoldDecision = { kind: 'dial' } | { kind: 'defer'; until: number; reason: string } | { kind: 'cancel'; reason: string };

export interface ClaimWrite {
  configurationId: number;
  /** Most runs to claim, oldest first. */
  limit: number;
  nodeId: string;
  now: number;
  leaseMs: number;
  /** Decides, per candidate, whether it is dialed now (absent: every candidate is). */
  hold?: (candidate: ClaimCandidate) => HoldDecision;
  /** Whether to look for deferred runs now due (false: only runs due at once). */
  deferredDue: boolean;
}

export interface ClaimWritten {
  rows: ClaimedRow[];
  webhookDeliveries: number;
  /** Runs deferred instead of claimed, and runs canceled as never dialable. */
  deferred: number;
  canceled: number;
}

/** Claims up to `limit` queued runs; returns them in id order (empty when none is queued), and the webhook deliveries written. */
export async function claimQueuedRuns(store: Pick<Store, 'dialect'>, trx: StoreTransaction, claim: ClaimWrite): Promise<ClaimWritten> {
  const candidates = await selectClaimCandidates(store, trx, { configurationId: claim.configurationId, limit: claim.limit, now: claim.now, deferredDue: claim.deferredDue });
  const dialable: number[] = [];
  let webhookDeliveries = 0;
  let deferred = 0;
  let canceled = 0;
  for (const candidate of candidates) {
    const decision = claim.hold?.(candidate) ?? { kind: 'dial' };
    if (decision.kind === 'dial') {
      dialable.push(candidate.id);
    } else if (decision.kind === 'defer') {
      const written = await writeTransition(
        trx,
        store.dialect,
        candidate.id,
        { scheduled_for: decision.until, updated_at: claim.now },
        { from: ['queued'] },
        { type: 'deferred', at: claim.now, data: { reason: decision.reason, scheduled_for: new Date(decision.until).toISOString() }, webhookType: 'run.deferred' },
      );
      if (written) {
        deferred += 1;
        webhookDeliveries += written.webhookDeliveries;
      }
    } else {
      const applied = await transitionRunInTransaction(trx, store.dialect, candidate.id, 'canceled', { at: claim.now, reason: decision.reason });
      if (applied) {
        canceled += 1;
        webhookDeliveries += applied.webhookDeliveries;
      }
    }
  }
  const rows = await setQueuedRunsDialing(trx, dialable, {
    configurationId: claim.configurationId,
    limit: claim.limit,
    nodeId: claim.nodeId,
    now: claim.now,
    leaseExpiresAt: claim.now + claim.leaseMs,
  });
  webhookDeliveries += await appendRunEvents(
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
  return { rows: claimed, webhookDeliveries, deferred, canceled };
}
