// API key scopes (docs/api.md, "Scopes"): what each key may do, as the comma-separated scope names
// of auth/scopes.ts (`admin,calls,campaigns,webhooks`). Every key that exists when this migration
// runs gets every scope, so nothing a key could do before stops working; a key created afterwards
// is given its scopes explicitly (auth/api-keys.ts).
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';

/** Every scope there was when this migration was written (a snapshot: auth/scopes.ts may grow). */
const ALL_SCOPES_THEN = 'admin,calls,campaigns,webhooks';

export function up026(_dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema
      .alterTable('api_keys')
      .addColumn('scopes', 'text', (col) => col.notNull().defaultTo(sql.lit(ALL_SCOPES_THEN)))
      .execute();
  };
}
