// Idempotency-Key for the Initiate Call operations (draft-ietf-httpapi-idempotency-key-header):
// a client's retry with the same key and payload gets the first response again, and is never
// dialed again, across restarts and nodes, because the records live in the store.
//
// A request first *claims* its key with a committed `in_flight` row (unique per organization and
// key, so of two concurrent requests exactly one wins). The run and the completion of the record
// with the response then commit in ONE transaction (createRun's `onCreated`), so there is no moment
// at which a run exists and its key could be claimed again. If the request fails before that, it
// releases its claim and the client may retry; if its process dies, the claim is taken over once
// IDEMPOTENCY_LOCK_MS has passed, which is safe for the same reason: no run was created under it.
import { createHash, randomUUID } from 'node:crypto';
import type { Deps } from '../deps.js';
import { DialtoneError } from '../errors.js';
import {
  deleteExpiredIdempotencyRecords,
  deleteIdempotencyClaim,
  insertIdempotencyClaim,
  selectIdempotencyRecord,
  setIdempotencyCompleted,
  takeOverIdempotencyRecord,
  type InFlightClaimColumns,
} from '../store/statements/idempotency-statements.js';
import type { Store, StoreTransaction } from '../store/engine/store.js';

/** The longest key accepted, in characters. */
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;
const HEADER = 'Idempotency-Key';

export interface IdempotencyRequest {
  key: string;
  /** SHA-256 over method, path and canonical JSON body. */
  fingerprint: string;
}

export interface Claim {
  orgId: number;
  key: string;
  owner: string;
}

export type ClaimOutcome = { kind: 'claimed'; claim: Claim } | { kind: 'replay'; status: number; body: string };

/**
 * The key from the header, or undefined when there is none. The draft sends it as a structured
 * field string (`"abc"`); a bare token is accepted too, as most clients send one.
 */
export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (Array.isArray(header)) throw invalidKey('Send one Idempotency-Key header, not several.');
  const quoted = /^"(.*)"$/.exec(header.trim());
  const key = quoted ? (quoted[1] ?? '') : header.trim();
  if (key.length === 0) throw invalidKey('The Idempotency-Key header is empty.');
  if (key.length > IDEMPOTENCY_KEY_MAX_LENGTH) {
    throw invalidKey(`The Idempotency-Key is ${key.length} characters long; the limit is ${IDEMPOTENCY_KEY_MAX_LENGTH}.`);
  }
  if (!/^[\x20-\x7e]+$/.test(key)) throw invalidKey('The Idempotency-Key may hold printable ASCII characters only.');
  return key;
}

function invalidKey(detail: string): DialtoneError {
  return new DialtoneError('validation_failed', detail, { extra: { header: HEADER } });
}

/** JSON with object members in key order at every depth, so equal payloads have equal text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const members = Object.keys(value)
      .sort()
      .map((name) => `${JSON.stringify(name)}:${canonicalJson((value as Record<string, unknown>)[name])}`);
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function requestFingerprint(method: string, path: string, body: unknown): string {
  return createHash('sha256').update(`${method.toUpperCase()} ${path}\n${canonicalJson(body)}`).digest('hex');
}

/** Claims the key for this request, or tells what an earlier request with it left. */
export async function claimIdempotencyKey(deps: Deps, orgId: number, request: IdempotencyRequest): Promise<ClaimOutcome> {
  const { store, clock, config } = deps;
  const owner = randomUUID();
  // A few rounds at most: each lost round means another request changed the row in between.
  for (let round = 0; round < 3; round++) {
    const now = clock.now();
    const fresh: InFlightClaimColumns = {
      fingerprint: request.fingerprint,
      state: 'in_flight',
      owner,
      locked_until: now + config.IDEMPOTENCY_LOCK_MS,
      response_status: null,
      response_body: null,
      run_id: null,
      created_at: now,
      expires_at: now + config.IDEMPOTENCY_TTL_MS,
    };
    if (await insertIdempotencyClaim(store, orgId, request.key, fresh)) return { kind: 'claimed', claim: { orgId, key: request.key, owner } };

    const row = await selectIdempotencyRecord(store, orgId, request.key);
    if (!row) continue; // released in between: claim it on the next round

    const abandoned = row.expires_at <= now || (row.state === 'in_flight' && row.locked_until <= now);
    if (abandoned) {
      if (await takeOverIdempotencyRecord(store, orgId, request.key, row, fresh)) return { kind: 'claimed', claim: { orgId, key: request.key, owner } };
      continue;
    }
    if (row.fingerprint !== request.fingerprint) {
      throw new DialtoneError(
        'idempotency_key_reused',
        'This Idempotency-Key was used with a different request (another operation, target or body). Use a new key for a new request.',
        { extra: { header: HEADER } },
      );
    }
    if (row.state === 'in_flight' || row.response_status === null || row.response_body === null) {
      throw inUse();
    }
    // The first request's answer goes out after its flush; a replay, which can read the record a
    // moment before that flush ends (SQLite, store/engine/wal-sync.ts), waits for it too.
    await store.durable();
    return { kind: 'replay', status: row.response_status, body: row.response_body };
  }
  throw inUse();
}

/**
 * The stored response of a completed earlier request with this key and payload, if any: read only,
 * nothing is claimed. For a check that a retry would fail only because its first attempt succeeded
 * (the per-number cap counts the run that attempt created).
 */
export async function storedResponse(deps: Pick<Deps, 'store' | 'clock'>, orgId: number, request: IdempotencyRequest): Promise<{ status: number; body: string } | undefined> {
  const row = await selectIdempotencyRecord(deps.store, orgId, request.key);
  if (!row || row.expires_at <= deps.clock.now() || row.fingerprint !== request.fingerprint) return undefined;
  if (row.state === 'in_flight' || row.response_status === null || row.response_body === null) return undefined;
  await deps.store.durable();
  return { status: row.response_status, body: row.response_body };
}

function inUse(): DialtoneError {
  return new DialtoneError('idempotency_key_in_use', 'A request with this Idempotency-Key is still being processed; retry shortly.', {
    retryAfterSeconds: 1,
    extra: { header: HEADER },
  });
}

/**
 * Stores the response on the claim inside the transaction that creates the run (or, for a
 * campaign's contacts import, writes the contacts: runId null). When the claim was
 * taken over meanwhile (this request outlived IDEMPOTENCY_LOCK_MS), it throws, so the run is not
 * created twice under one key.
 */
export async function completeClaim(trx: StoreTransaction, claim: Claim, status: number, body: string, runId: number | null, now: number): Promise<void> {
  if (!(await setIdempotencyCompleted(trx, claim, { status, body, runId }, now))) throw inUse();
}

/** Gives the key back after a failure, so the client can retry with it. */
export async function releaseClaim(store: Store, claim: Claim): Promise<void> {
  await deleteIdempotencyClaim(store, claim);
}

/** Deletes records past their retention (run by the dispatcher's maintenance pass). */
export async function purgeExpiredIdempotencyKeys(store: Store, now: number): Promise<number> {
  return deleteExpiredIdempotencyRecords(store, now);
}
