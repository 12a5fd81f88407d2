// The statements behind the start-up check of DIALTONE_SECRET_KEY (secret-key.ts): the stored
// check value, and one secret written under the key, for a database written before the check existed.
import { queryable, type Connection } from '../engine/store.js';

/** The check value of the key the stored secrets were written with; undefined before any. */
export async function selectKeyCheck(on: Connection): Promise<string | undefined> {
  const row = await queryable(on).selectFrom('secret_key_check').select('value').where('id', '=', 1).executeTakeFirst();
  return row?.value;
}

/** Stores the check value unless one is stored already (another node's, racing); returns the one stored. */
export async function insertKeyCheckIfAbsent(on: Connection, value: string, at: number): Promise<string> {
  await queryable(on).insertInto('secret_key_check').values({ id: 1, value, created_at: at }).onConflict((oc) => oc.column('id').doNothing()).execute();
  return (await selectKeyCheck(on)) ?? value;
}

/** One encrypted secret with its organization (the associated data), if any is stored. */
export async function selectAnyEncryptedSecret(on: Connection): Promise<{ orgId: number; envelope: string } | undefined> {
  const endpoint = await queryable(on).selectFrom('webhook_endpoints').select(['org_id', 'secret_encrypted']).limit(1).executeTakeFirst();
  if (endpoint) return { orgId: endpoint.org_id, envelope: endpoint.secret_encrypted };
  const route = await queryable(on)
    .selectFrom('telephony_configurations')
    .select(['org_id', 'credentials_encrypted'])
    .where('credentials_encrypted', 'is not', null)
    .limit(1)
    .executeTakeFirst();
  return route?.credentials_encrypted ? { orgId: route.org_id, envelope: route.credentials_encrypted } : undefined;
}
