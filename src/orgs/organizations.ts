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
