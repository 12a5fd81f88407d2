// A management creation (an API key, a workflow, a telephony configuration) under the request's
// Idempotency-Key, as calls/idempotency.ts keeps keys: the key is claimed before anything is made,
// the answer a retry gets is stored in the creation's own transaction (so it exists exactly when the
// thing does), and a refusal gives the key back.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { claimIdempotencyKey, completeClaim, parseIdempotencyKey, releaseClaim, requestFingerprint, type Claim } from '../calls/idempotency.js';
import type { Deps } from '../deps.js';
import type { StoreTransaction } from '../store/engine/store.js';

/** Stores, inside the creation's transaction, the answer a retry under the same key gets. */
export type RememberAnswer = (trx: StoreTransaction, answer: unknown) => Promise<void>;

/**
 * Answers 201 with what `create` returns, once per Idempotency-Key: a retry with the same body gets
 * the first answer again (`Idempotent-Replayed: true`) and creates nothing. `create` calls
 * `remember` in its transaction; `remember` is undefined when the request has no key (so an answer
 * only a replay needs is not built).
 */
export async function createOnce(
  deps: Deps,
  request: FastifyRequest,
  reply: FastifyReply,
  orgId: number,
  create: (remember: RememberAnswer | undefined, now: number) => Promise<unknown>,
): Promise<FastifyReply> {
  const key = parseIdempotencyKey(request.headers['idempotency-key']);
  let claim: Claim | undefined;
  if (key !== undefined) {
    // The fingerprint is a hash of the body (credentials included); the stored answer holds what `create` gives `remember`.
    const claimed = await claimIdempotencyKey(deps, orgId, { key, fingerprint: requestFingerprint(request.method, request.url.split('?')[0] ?? '', request.body) });
    if (claimed.kind === 'replay') return reply.code(claimed.status).header('idempotent-replayed', 'true').type('application/json').send(claimed.body);
    claim = claimed.claim;
  }
  try {
    const now = deps.clock.now();
    const held = claim;
    const answer = await create(held && ((trx, stored) => completeClaim(trx, held, 201, JSON.stringify(stored), null, now)), now);
    return reply.code(201).send(answer);
  } catch (error) {
    if (claim) await releaseClaim(deps.store, claim).catch((releaseError: unknown) => request.log.warn({ err: releaseError }, 'could not release an Idempotency-Key claim; it frees itself after IDEMPOTENCY_LOCK_MS'));
    throw error;
  }
}
