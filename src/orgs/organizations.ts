import type { Store } from '../store/store.js';

export async function createOrganization(store: Store, name: string, now: number) {
  const row = await store.db
    .insertInto('organizations')
    .values({ name, created_at: now })
    .returning(['id', 'name'])
    .executeTakeFirstOrThrow();
  return row;
}

export async function organizationExists(store: Store, id: number): Promise<boolean> {
  return (await store.db.selectFrom('organizations').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
}

export interface LimitChanges {
  /** A number sets the organization's own limit; null returns it to the configuration's default. */
  rate_limit_per_second?: number | null;
  key_rate_limit_per_second?: number | null;
  max_queued_runs?: number | null;
}

/** Sets an organization's own limits; returns the organization with all three, or undefined when there is none. */
export async function setOrganizationLimits(store: Store, id: number, changes: LimitChanges) {
  if (Object.keys(changes).length > 0) {
    await store.db.updateTable('organizations').set(changes).where('id', '=', id).execute();
  }
  return store.db
    .selectFrom('organizations')
    .select(['id', 'name', 'rate_limit_per_second', 'key_rate_limit_per_second', 'max_queued_runs'])
    .where('id', '=', id)
    .executeTakeFirst();
}

/** Every organization with its own limits (null: the configured default), oldest first. */
export async function listOrganizations(store: Store) {
  return store.db
    .selectFrom('organizations')
    .select(['id', 'name', 'created_at', 'rate_limit_per_second', 'key_rate_limit_per_second', 'max_queued_runs'])
    .orderBy('id')
    .execute();
}
