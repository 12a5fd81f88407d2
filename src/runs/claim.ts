// The claim's writes: queued runs of one configuration become `dialing`, leased to a node, each
// with its event and webhook deliveries, inside the transaction of the caller
// (dispatch/claim-runs.ts), which decides how many may be claimed (pacing, concurrency) and commits. Several nodes claim at once without
// taking the same runs (store/statements/run-writes.ts skips rows another claim holds).
//
// A run taken from the queue may not be dialable now. The caller's screen (the calling policy's
// suppression list, checked again at claim time) names runs that must never be dialed: they end
// `canceled` with the screen's reason, in one statement per reason. The caller's `hold` (calling
// hours) says per run whether it may be dialed now, must wait (it stays queued with a new
// scheduled_for and a `deferred` event) or can never be (canceled). All in the claim's transaction.
//
// A claim a node's catch-up re-slot would outlast (its fresh slot too near the lease's end) is
// renewed here too, in the re-slot's transaction (dispatch/claim-runs.ts's takePacingSlots).
import { appendRunEvents } from '../store/statements/run-event-outbox.js';
import { extendUndialedClaim, selectClaimCandidates, setQueuedRunsCanceled, setQueuedRunsDialing, writeTransition, type ClaimCandidate, type ClaimedRow } from '../store/statements/run-writes.js';
import type { WorkflowRunRow } from '../store/schema/schema.js';
import { runMessageId, webhookTypeForState } from '../webhooks/event-types.js';
import type { StoreTransaction } from '../store/engine/store.js';
import { transitionRunInTransaction } from './transition-run.js';

export type { ClaimCandidate, ClaimedRow };

/** Whether a candidate may be dialed now, must wait until a time, or can never be dialed. */
export type HoldDecision = { kind: 'dial' } | { kind: 'defer'; until: number; reason: string } | { kind: 'cancel'; reason: string };

/** Runs of a claim batch that must not be dialed, by id, each with the reason it ends `canceled`. */
export type ClaimScreen = (trx: StoreTransaction, candidates: readonly ClaimCandidate[]) => Promise<Map<number, string>>;

export interface ClaimWrite {
  configurationId: number;
  limit: number;
  nodeId: string;
  now: number;
  leaseMs: number;
  /** Decides, per candidate, whether it is dialed now (absent: every candidate is). */
  hold?: (candidate: ClaimCandidate) => HoldDecision;
  /** Whether to look for deferred runs now due (false: only runs due at once). */
  deferredDue: boolean;
  /** The calling policy's check of the whole batch: runs it names end canceled, never dialed. */
  screen?: ClaimScreen;
  /** Campaigns whose runs are not candidates this time (their pace allows no dial within the claim's reach). */
  excludeCampaigns?: readonly number[];
  /**
   * Of the runs that may be dialed now, the ones to claim (the pacing slots the caller has for
   * them); the others stay queued, untouched. Absent: all of them.
   */
  pick?: (dialable: readonly ClaimCandidate[]) => readonly ClaimCandidate[];
}

export interface ClaimWritten {
  /** The claimed runs, in id order (empty when none is queued). */
  rows: ClaimedRow[];
  webhookDeliveries: number;
  /** Runs deferred instead of claimed, and runs canceled as never dialable (by the screen or the hold). */
  deferred: number;
  canceled: number;
  /** Runs that could have been dialed but that `pick` left queued. */
  passed: number;
}

/** Claims up to `limit` queued runs; returns them in id order (empty when none is queued), and the webhook deliveries written. */
export async function claimQueuedRuns(trx: StoreTransaction, claim: ClaimWrite): Promise<ClaimWritten> {
  const candidates = await selectClaimCandidates(trx, {
    configurationId: claim.configurationId,
    limit: claim.limit,
    now: claim.now,
    deferredDue: claim.deferredDue,
    ...(claim.excludeCampaigns ? { excludeCampaigns: claim.excludeCampaigns } : {}),
  });
  if (candidates.length === 0) return { rows: [], webhookDeliveries: 0, deferred: 0, canceled: 0, passed: 0 };
  const refused = claim.screen ? await claim.screen(trx, candidates) : new Map<number, string>();
  const dialable: ClaimCandidate[] = [];
  let webhookDeliveries = 0;
  let deferred = 0;
  let canceled = 0;
  for (const candidate of candidates) {
    if (refused.has(candidate.id)) continue;
    const decision = claim.hold?.(candidate) ?? { kind: 'dial' };
    if (decision.kind === 'dial') {
      dialable.push(candidate);
    } else if (decision.kind === 'defer') {
      const written = await writeTransition(
        trx,
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
      const applied = await transitionRunInTransaction(trx, candidate.id, 'canceled', { at: claim.now, reason: decision.reason });
      if (applied) {
        canceled += 1;
        webhookDeliveries += applied.webhookDeliveries;
      }
    }
  }
  const picked = claim.pick ? claim.pick(dialable) : dialable;
  const dialing = await setQueuedRunsDialing(
    trx,
    picked.map((c) => c.id),
    { nodeId: claim.nodeId, now: claim.now, leaseExpiresAt: claim.now + claim.leaseMs },
  );
  webhookDeliveries += dialing.webhookDeliveries;
  const screened: WorkflowRunRow[] = [];
  for (const reason of new Set(refused.values())) {
    const ids = [...refused].filter(([, r]) => r === reason).map(([id]) => id);
    screened.push(...(await setQueuedRunsCanceled(trx, ids, claim.now, reason)));
  }
  canceled += screened.length;
  webhookDeliveries += await appendRunEvents(
    trx,
    screened.map((run) => ({
      run,
      type: 'canceled' as const,
      at: claim.now,
      data: { reason: run.outcome_reason },
      webhookType: webhookTypeForState('canceled'),
      messageId: runMessageId(run.id, run.last_event_seq),
    })),
  );
  // The statement returns the run's own columns; its campaign and pace come from the candidate.
  const campaigns = new Map(picked.map((c) => [c.id, c]));
  const claimed = dialing.rows.map((r) => ({
    ...r,
    campaign_id: campaigns.get(r.id)?.campaign_id ?? null,
    campaign_calls_per_second: campaigns.get(r.id)?.campaign_calls_per_second ?? null,
    // Every claimed run was picked from the candidates, so its definition is there.
    definition_id: campaigns.get(r.id)!.definition_id,
  }));
  return { rows: claimed, webhookDeliveries, deferred, canceled, passed: dialable.length - picked.length };
}

/**
 * Extends a node's claims on runs it has not dialed yet, inside the caller's transaction (a re-slot,
 * dispatch/claim-runs.ts, whose fresh slots would outlast them). Returns the runs renewed: a run no
 * longer that node's undialed claim (canceled, reaped) is left alone and must not be dialed.
 */
export async function renewUndialedClaims(trx: StoreTransaction, nodeId: string, renewals: readonly { runId: number; until: number }[]): Promise<Set<number>> {
  const renewed = new Set<number>();
  for (const { runId, until } of renewals) if (await extendUndialedClaim(trx, runId, nodeId, until)) renewed.add(runId);
  return renewed;
}
