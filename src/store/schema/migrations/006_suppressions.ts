// Calling policy, part one: each organization's suppression (do-not-call) list and its per-number
// frequency cap. The cap counts an organization's recent runs to one number through migration
// 009's (org_id, phone_number, id) index: no index of its own, so creating a run costs no more.
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';
import { column } from './columns.js';

/**
 * PostgreSQL: the cap's exact check, called by the statement that inserts the run (store/statements/insert-run.ts,
 * insertOnPostgres). It takes the number's transaction-scoped advisory lock, which
 * serializes the creations of runs to one number of one organization (keyed on a hash of both:
 * nothing to clean up, unrelated numbers never wait on each other, a collision only makes two
 * numbers take turns), and only then counts, in a statement of its own.
 *
 * Why a function and not one plain statement: in READ COMMITTED a statement's snapshot is taken
 * when it starts, before a lock it asks for is granted, so a count in the statement that locks
 * would miss the run committed by the lock's previous holder. A VOLATILE function's statements each
 * take a fresh snapshot: PostgreSQL manual, "Function Volatility Categories" (xfunc-volatility,
 * 38.7 in PostgreSQL 16; "VOLATILE functions obtain a fresh snapshot at the start of each query
 * they execute"), so the count below sees every run committed before the lock was granted.
 * It must stay VOLATILE (the default, written out here): a STABLE one would count in its caller's
 * snapshot.
 *
 * Returns the created_at of the max_calls-th newest run created after `since` (when a place
 * opens), or null while fewer are in the window. The newest by id are the newest by time: the
 * count walks migration 009's (org_id, phone_number, id) index and stops after max_calls rows.
 */
const NUMBER_CAP_FUNCTION = `create function dialtone_number_cap_opening(p_org_id bigint, p_phone_number text, p_since bigint, p_max_calls integer)
returns bigint language plpgsql volatile as $$
begin
  perform pg_advisory_xact_lock(hashtextextended('dialtone.number_cap:' || p_org_id || ':' || p_phone_number, 0));
  return (
    select case when count(*) = p_max_calls then min(recent.created_at) end
    from (
      select created_at from workflow_runs
      where org_id = p_org_id and phone_number = p_phone_number and created_at > p_since
      order by id desc
      limit p_max_calls
    ) recent
  );
end;
$$`;

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
    // SQLite's single writer serializes the creations already: its count needs no lock.
    if (dialect === 'postgres') await sql.raw(NUMBER_CAP_FUNCTION).execute(db);
  };
}
