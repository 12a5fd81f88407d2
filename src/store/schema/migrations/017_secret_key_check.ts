// A check value of DIALTONE_SECRET_KEY (an HMAC of a constant under a key derived from it:
// shared/credentials-cipher.ts, keyCheck), written by the first node that starts with a key, so
// a node started with another key (a second PostgreSQL node given a different one, a lost SQLite
// key file replaced by a new one) is refused at start-up instead of failing, one secret at a time,
// on every webhook, credential and run token written under the first. One row at most.
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';

export function up017(_dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema
      .createTable('secret_key_check')
      .addColumn('id', 'integer', (col) => col.primaryKey().check(sql`id = 1`))
      .addColumn('value', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .execute();
  };
}
