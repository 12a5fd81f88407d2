// API keys: `dt_live_<prefix-id>_<secret>`. Only a SHA-256 hash of the whole key is stored, next to
// a short display prefix that also serves as the lookup index. The secret is shown once, at creation.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { NO_CACHE, type LookupCache } from '../shared/lookup-cache.js';
import { insertApiKey, selectKey, selectKeyByPrefix, selectKeysOfOrganization, setKeyLastUsed, setKeyRevoked } from '../store/statements/api-key-statements.js';
import { CLI_ACTOR, recordAuditEvent, type AuditActor } from '../audit/audit-log.js';
import { decodeCallingHours } from '../orgs/organizations.js';
import type { CallingHours } from '../policy/calling-hours.js';
import { isUniqueViolation, plainTransaction, type Store, type StoreTransaction } from '../store/engine/store.js';
import { decodeScopes, encodeScopes, SCOPES, type Scope } from './scopes.js';

const KEY_PREFIX = 'dt_live_';
const KEY_PATTERN = /^dt_live_([A-Za-z0-9]{10})_([A-Za-z0-9]{32})$/;
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function randomToken(length: number): string {
  // Rejection sampling keeps every character equally likely (256 is not a multiple of 62).
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62];
    }
  }
  return out;
}

export function hashKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export interface CreatedApiKey {
  id: number;
  org_id: number;
  name: string;
  prefix: string;
  scopes: Scope[];
  /** The full secret: returned once, never stored. */
  key: string;
}

/** A key as it is shown (the API, the CLI, the audit log): never its secret nor its hash. */
export interface ApiKeyView {
  id: number;
  name: string;
  prefix: string;
  scopes: Scope[];
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

function viewOf(row: { id: number; name: string; prefix: string; scopes: string; created_at: number; last_used_at: number | null; revoked_at: number | null }): ApiKeyView {
  return { id: row.id, name: row.name, prefix: row.prefix, scopes: decodeScopes(row.scopes), created_at: row.created_at, last_used_at: row.last_used_at, revoked_at: row.revoked_at };
}

export interface CreateKeyOptions {
  /** Every scope unless told. */
  scopes?: readonly Scope[];
  /** Who creates it, for the audit log (the CLI unless told). */
  actor?: AuditActor;
  /** Runs in the creating transaction, after the key and its audit entry (an Idempotency-Key's answer stored with them). */
  onCreated?: (trx: StoreTransaction, created: CreatedApiKey) => Promise<void>;
}

/**
 * Creates a key and records `api_key.created` in the same transaction (the secret never reaches
 * the audit log: it is given the key's view, and redacts besides).
 */
export async function createApiKey(store: Store, orgId: number, name: string, now: number, options: CreateKeyOptions = {}): Promise<CreatedApiKey> {
  const stored = encodeScopes(options.scopes ?? SCOPES);
  for (let attempt = 0; ; attempt++) {
    const publicId = randomToken(10);
    const key = `${KEY_PREFIX}${publicId}_${randomToken(32)}`;
    const prefix = `${KEY_PREFIX}${publicId}`;
    try {
      return await plainTransaction(store, async (trx) => {
        const id = await insertApiKey(trx, { org_id: orgId, name, prefix, hash: hashKey(key), scopes: stored, created_at: now });
        const created: CreatedApiKey = { id, org_id: orgId, name, prefix, scopes: decodeScopes(stored), key };
        const after = viewOf({ id, name, prefix, scopes: stored, created_at: now, last_used_at: null, revoked_at: null });
        await recordAuditEvent(trx, { orgId, actor: options.actor ?? CLI_ACTOR, action: 'api_key.created', target: { type: 'api_key', id }, after, at: now });
        await options.onCreated?.(trx, created);
        return created;
      });
    } catch (error) {
      // A prefix collision (62^10 space) is astronomically rare; retry rather than fail.
      if (!isUniqueViolation(error) || attempt >= 3) throw error;
    }
  }
}

/** An organization's own limits, read with the key so a request costs no extra query; null means the default. */
export interface OrganizationLimits {
  ratePerSecond: number | null;
  keyRatePerSecond: number | null;
  maxQueuedRuns: number | null;
  /** The per-number frequency cap (calling policy); absent or null: off. */
  numberCap?: { maxCalls: number; windowSeconds: number } | null;
}

export interface AuthenticatedKey {
  keyId: number;
  /** The key's name, as the audit log records who acted. */
  keyName: string;
  orgId: number;
  /** What the key may do (auth/scopes.ts). */
  scopes: readonly Scope[];
  limits: OrganizationLimits;
  /** The organization's calling hours (null: off), read with the key like its limits. */
  callingHours: CallingHours | null;
}

/** Calling hours and scopes decoded once per cached key row, not once per request. */
const decodedCallingHours = new WeakMap<object, CallingHours | null>();
const decodedScopes = new WeakMap<object, readonly Scope[]>();

/**
 * Finds the active key for a presented secret, or undefined. Unknown, malformed and revoked keys
 * look the same to the caller. The hash comparison is constant-time even though the lookup is by
 * prefix, so response timing says nothing about how much of a guessed key was right.
 */
export async function authenticateApiKey(
  store: Store,
  presented: string,
  now: number,
  lastUsedWriteIntervalMs: number,
  cache: LookupCache = NO_CACHE,
): Promise<AuthenticatedKey | undefined> {
  const match = KEY_PATTERN.exec(presented);
  if (!match) return undefined;
  const prefix = `${KEY_PREFIX}${match[1]}`;
  const row = await cache.get(`api-key:${prefix}`, () => selectKeyByPrefix(store, prefix));
  if (!row || !hashesEqual(row.hash, hashKey(presented)) || row.revoked_at !== null) return undefined;
  if (row.last_used_at === null || now - row.last_used_at >= lastUsedWriteIntervalMs) {
    // The cached row remembers the write, so this node writes once per interval, not once per request.
    row.last_used_at = now;
    await setKeyLastUsed(store, row.id, now, lastUsedWriteIntervalMs);
  }
  let callingHours = decodedCallingHours.get(row);
  if (callingHours === undefined) {
    callingHours = decodeCallingHours(row.calling_hours);
    decodedCallingHours.set(row, callingHours);
  }
  let scopes = decodedScopes.get(row);
  if (scopes === undefined) {
    scopes = decodeScopes(row.scopes);
    decodedScopes.set(row, scopes);
  }
  return {
    keyId: row.id,
    keyName: row.name,
    orgId: row.org_id,
    scopes,
    limits: {
      ratePerSecond: row.rate_limit_per_second,
      keyRatePerSecond: row.key_rate_limit_per_second,
      maxQueuedRuns: row.max_queued_runs,
      ...(row.number_max_calls !== null && row.number_window_seconds !== null ? { numberCap: { maxCalls: row.number_max_calls, windowSeconds: row.number_window_seconds } } : {}),
    },
    callingHours,
  };
}

function hashesEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}

/** An organization's keys, oldest first: every one, or a page after a key id. */
export async function listApiKeys(store: Store, orgId: number, page?: { afterId?: number; limit: number }): Promise<ApiKeyView[]> {
  return (await selectKeysOfOrganization(store, orgId, page)).map(viewOf);
}

/** One of the organization's keys, or undefined (another organization's key too). */
export async function getApiKey(store: Store, orgId: number, keyId: number): Promise<ApiKeyView | undefined> {
  const row = await selectKey(store, keyId);
  return row && row.org_id === orgId ? viewOf(row) : undefined;
}

export interface RevokeKeyOptions {
  /** Only a key of this organization is found (the API); the CLI on the database names any key. */
  orgId?: number;
  actor?: AuditActor;
}

/**
 * Revokes a key, recording `api_key.revoked` in the same transaction; returns the key as it is now,
 * or undefined when there is no such key (or it is another organization's). Revoking twice keeps
 * the first time and records nothing the second time.
 */
export async function revokeApiKey(store: Store, keyId: number, now: number, options: RevokeKeyOptions = {}): Promise<ApiKeyView | undefined> {
  return plainTransaction(store, async (trx) => {
    const row = await selectKey(trx, keyId);
    if (!row || (options.orgId !== undefined && row.org_id !== options.orgId)) return undefined;
    if (!(await setKeyRevoked(trx, keyId, now))) return viewOf(row);
    const before = viewOf(row);
    const after = { ...before, revoked_at: now };
    await recordAuditEvent(trx, { orgId: row.org_id, actor: options.actor ?? CLI_ACTOR, action: 'api_key.revoked', target: { type: 'api_key', id: keyId }, before, after, at: now });
    return after;
  });
}
