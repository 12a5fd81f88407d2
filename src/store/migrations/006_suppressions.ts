// Calling policy, part one: each organization's suppression (do-not-call) list and its per-number
// frequency cap. The cap counts an organization's recent runs to one number through migration
// 009's (org_id, phone_number, id) index: no index of its own, so creating a run costs no more.
import type { Kysely } from 'kysely';
import type { DialectName } from '../store.js';
import { column } from './columns.js';

export function up006(dialect: DialectName) {
  const c = column(dialect);
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema
      .createTable('suppressions')
      .addColumn('org_id', c.refType, (col) => col.notNull().references('organizations.id'))
      // E.164, normalized as a run's phone_number is, so the claim can match it by equality.
      .addColumn('phone_number', 'text', (col) => col.notNull())
      .addColumn('reason', 'text')
      // After this moment the number may be called again (null: never expires).
      .addColumn('expires_at', 'bigint')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      // The lookup (org, number) and the listing (org, ordered by number) both use the key.
      .addPrimaryKeyConstraint('suppressions_pk', ['org_id', 'phone_number'])
      .execute();

    // The per-number cap: at most number_max_calls runs to one number within number_window_seconds
    // (both null: off, the default).
    await db.schema.alterTable('organizations').addColumn('number_max_calls', 'integer').execute();
    await db.schema.alterTable('organizations').addColumn('number_window_seconds', 'integer').execute();
  };
}
