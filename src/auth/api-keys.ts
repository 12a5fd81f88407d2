// API keys: `dt_live_<prefix-id>_<secret>`. Only a SHA-256 hash of the whole key is stored, next to
// a short display prefix that also serves as the lookup index. The secret is shown once, at creation.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { NO_CACHE, type LookupCache } from '../calls/lookup-cache.js';
import { isUniqueViolation, type Store } from '../store/store.js';
import type { ApiKeyRow } from '../store/schema.js';

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
      const row = await store.db
        .insertInto('api_keys')
        .values({ org_id: orgId, name, prefix, hash: hashKey(key), created_at: now })
        .returning('id')
        .executeTakeFirstOrThrow();
      return { id: row.id, org_id: orgId, name, prefix, key };
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
}

export interface AuthenticatedKey {
  keyId: number;
  orgId: number;
  limits: OrganizationLimits;
}

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
  const row = await cache.get(`api-key:${prefix}`, () => findKeyByPrefix(store, prefix));
  if (!row || !hashesEqual(row.hash, hashKey(presented)) || row.revoked_at !== null) return undefined;
  if (row.last_used_at === null || now - row.last_used_at >= lastUsedWriteIntervalMs) {
    // The cached row remembers the write, so this node writes once per interval, not once per request.
    row.last_used_at = now;
    await touchLastUsed(store, row, now, lastUsedWriteIntervalMs);
  }
  return {
    keyId: row.id,
    orgId: row.org_id,
    limits: { ratePerSecond: row.rate_limit_per_second, keyRatePerSecond: row.key_rate_limit_per_second, maxQueuedRuns: row.max_queued_runs },
  };
}

function findKeyByPrefix(store: Store, prefix: string) {
  return store.db
    .selectFrom('api_keys')
    .innerJoin('organizations', 'organizations.id', 'api_keys.org_id')
    .select([
      'api_keys.id',
      'api_keys.org_id',
      'api_keys.hash',
      'api_keys.revoked_at',
      'api_keys.last_used_at',
      'organizations.rate_limit_per_second',
      'organizations.key_rate_limit_per_second',
      'organizations.max_queued_runs',
    ])
    .where('api_keys.prefix', '=', prefix)
    .executeTakeFirst();
}

async function touchLastUsed(
  store: Store,
  row: Pick<ApiKeyRow, 'id'>,
  now: number,
  intervalMs: number,
): Promise<void> {
  // The guard in SQL keeps concurrent requests on several nodes from all writing.
  await store.db
    .updateTable('api_keys')
    .set({ last_used_at: now })
    .where('id', '=', row.id)
    .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<=', now - intervalMs)]))
    .execute();
}

function hashesEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}

export async function listApiKeys(store: Store, orgId: number) {
  return store.db
    .selectFrom('api_keys')
    .select(['id', 'org_id', 'name', 'prefix', 'created_at', 'last_used_at', 'revoked_at'])
    .where('org_id', '=', orgId)
    .orderBy('id')
    .execute();
}

/** Revokes a key; returns false when no such key exists. Revoking twice keeps the first time. */
export async function revokeApiKey(store: Store, keyId: number, now: number): Promise<boolean> {
  const exists = await store.db.selectFrom('api_keys').select('id').where('id', '=', keyId).executeTakeFirst();
  if (!exists) return false;
  await store.db
    .updateTable('api_keys')
    .set({ revoked_at: now })
    .where('id', '=', keyId)
    .where('revoked_at', 'is', null)
    .execute();
  return true;
}
