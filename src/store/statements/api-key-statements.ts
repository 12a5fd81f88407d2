// Statements on API keys. A key is found by its display prefix (unique), read together with its
// organization's own limits so that authenticating a request costs one query.
import { queryable, relaxed, type Connection } from '../engine/store.js';

export interface NewApiKeyRow {
  org_id: number;
  name: string;
  prefix: string;
  hash: string;
  /** Comma-separated (auth/scopes.ts). */
  scopes: string;
  created_at: number;
}

/** Inserts a key and returns its id; a taken prefix fails as a unique violation (isUniqueViolation). */
export async function insertApiKey(on: Connection, key: NewApiKeyRow): Promise<number> {
  const row = await queryable(on).insertInto('api_keys').values(key).returning('id').executeTakeFirstOrThrow();
  return row.id;
}

/** The key with this prefix, revoked or not, with its organization's own limits (null: the default) and calling hours (null: off). */
export function selectKeyByPrefix(on: Connection, prefix: string) {
  return queryable(on)
    .selectFrom('api_keys')
    .innerJoin('organizations', 'organizations.id', 'api_keys.org_id')
    .select([
      'api_keys.id',
      'api_keys.org_id',
      'api_keys.name',
      'api_keys.hash',
      'api_keys.scopes',
      'api_keys.revoked_at',
      'api_keys.last_used_at',
      'organizations.rate_limit_per_second',
      'organizations.key_rate_limit_per_second',
      'organizations.max_queued_runs',
      'organizations.calling_hours',
      'organizations.number_max_calls',
      'organizations.number_window_seconds',
    ])
    .where('api_keys.prefix', '=', prefix)
    .executeTakeFirst();
}

/**
 * Records a key's use unless it was recorded less than `intervalMs` ago: the guard in SQL keeps
 * concurrent requests on several nodes from all writing. Relaxed (Store.relaxed): a last use lost
 * in a power cut breaks no promise, and the request that records it should not wait for a flush.
 */
export async function setKeyLastUsed(on: Connection, keyId: number, now: number, intervalMs: number): Promise<void> {
  await relaxed(on, (db) =>
    db
      .updateTable('api_keys')
      .set({ last_used_at: now })
      .where('id', '=', keyId)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<=', now - intervalMs)]))
      .execute(),
  );
}

const SHOWN = ['id', 'org_id', 'name', 'prefix', 'scopes', 'created_at', 'last_used_at', 'revoked_at'] as const;

/** An organization's keys, oldest first, without their hashes: all of them, or a page after a key id. */
export function selectKeysOfOrganization(on: Connection, orgId: number, page?: { afterId?: number; limit: number }) {
  let query = queryable(on).selectFrom('api_keys').select(SHOWN).where('org_id', '=', orgId);
  if (page?.afterId !== undefined) query = query.where('id', '>', page.afterId);
  query = query.orderBy('id');
  return (page ? query.limit(page.limit) : query).execute();
}

/** One key without its hash, or undefined. */
export function selectKey(on: Connection, keyId: number) {
  return queryable(on).selectFrom('api_keys').select(SHOWN).where('id', '=', keyId).executeTakeFirst();
}

/** Revokes a key; one already revoked keeps its first time. True when this call revoked it. */
export async function setKeyRevoked(on: Connection, keyId: number, now: number): Promise<boolean> {
  const result = await queryable(on).updateTable('api_keys').set({ revoked_at: now }).where('id', '=', keyId).where('revoked_at', 'is', null).executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}
