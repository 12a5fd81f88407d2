// API keys: `dt_live_<prefix-id>_<secret>`. Only a SHA-256 hash of the whole key is stored, next to
// a short display prefix that also serves as the lookup index. The secret is shown once, at creation.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { NO_CACHE, type LookupCache } from '../shared/lookup-cache.js';
import { insertApiKey, selectKeyByPrefix, selectKeyExists, selectKeysOfOrganization, setKeyLastUsed, setKeyRevoked } from '../store/statements/api-key-statements.js';
import { decodeCallingHours } from '../orgs/organizations.js';
import type { CallingHours } from '../policy/calling-hours.js';
import { isUniqueViolation, type Store } from '../store/engine/store.js';

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
  /** The full secret: returned once, never stored. */
  key: string;
}

export async function createApiKey(store: Store, orgId: number, name: string, now: number): Promise<CreatedApiKey> {
  for (let attempt = 0; ; attempt++) {
    const publicId = randomToken(10);
    const key = `${KEY_PREFIX}${publicId}_${randomToken(32)}`;
    const prefix = `${KEY_PREFIX}${publicId}`;
    try {
      const id = await insertApiKey(store, { org_id: orgId, name, prefix, hash: hashKey(key), created_at: now });
      return { id, org_id: orgId, name, prefix, key };
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
  orgId: number;
  limits: OrganizationLimits;
  /** The organization's calling hours (null: off), read with the key like its limits. */
  callingHours: CallingHours | null;
}

/** Calling hours decoded once per cached key row, not once per request. */
const decodedCallingHours = new WeakMap<object, CallingHours | null>();

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
  return {
    keyId: row.id,
    orgId: row.org_id,
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

export function listApiKeys(store: Store, orgId: number) {
  return selectKeysOfOrganization(store, orgId);
}

/** Revokes a key; returns false when no such key exists. Revoking twice keeps the first time. */
export async function revokeApiKey(store: Store, keyId: number, now: number): Promise<boolean> {
  if (!(await selectKeyExists(store, keyId))) return false;
  await setKeyRevoked(store, keyId, now);
  return true;
}
