// The `provider` column of telephony_configurations loses its CHECK (migration 001 listed
// 'simulator', 'twilio', 'sip'): which providers exist is the provider registry's to say
// (telephony/registry.ts), and routes are checked against it when created and whenever they are
// decoded, so a provider added to the registry needs no migration.
//
// PostgreSQL drops the constraint. SQLite cannot drop a constraint, so the table is rebuilt as
// SQLite's documentation of ALTER TABLE describes ("Making Other Kinds Of Table Schema Changes"):
// foreign keys off (outside the transaction: the pragma is a no-op inside one), then in one
// transaction create the new table from the stored definition less the CHECK, copy the rows, drop
// the old table, rename the new one to the old name (so the foreign keys of workflow_runs,
// campaigns and campaign_dial_pacing, which name the table, still point at it), recreate its
// indexes and triggers, and check every foreign key before committing; then foreign keys back on.
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';

const TABLE = 'telephony_configurations';
const NEW_TABLE = 'telephony_configurations_new';
/** The CHECK as migration 001 had Kysely write it (the stored SQL keeps the text as written). */
const PROVIDER_CHECK = / check \(provider in \('simulator', 'twilio', 'sip'\)\)/i;

export function up019(dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    if (dialect === 'postgres') await dropPostgresCheck(db);
    else await rebuildSqliteTable(db);
  };
}

async function dropPostgresCheck(db: Kysely<unknown>): Promise<void> {
  // Named by PostgreSQL when 001 created it (telephony_configurations_provider_check): found by what it checks rather than assumed.
  const found = await sql<{ name: string }>`
    select conname as name from pg_constraint
    where conrelid = ${sql.lit(TABLE)}::regclass and contype = 'c' and pg_get_constraintdef(oid) like '%provider%'`.execute(db);
  for (const { name } of found.rows) await sql`alter table ${sql.table(TABLE)} drop constraint ${sql.ref(name)}`.execute(db);
}

async function rebuildSqliteTable(db: Kysely<unknown>): Promise<void> {
  const enforced = (await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(db)).rows[0]?.foreign_keys === 1;
  if (enforced) await sql`pragma foreign_keys = off`.execute(db);
  try {
    await db.transaction().execute(async (trx) => {
      const table = (await sql<{ sql: string }>`select sql from sqlite_master where type = 'table' and name = ${TABLE}`.execute(trx)).rows[0];
      if (!table) throw new Error(`${TABLE} is missing`);
      if (!PROVIDER_CHECK.test(table.sql)) throw new Error(`${TABLE}'s definition does not hold the provider CHECK migration 001 wrote: ${table.sql}`);
      // Indexes and triggers go with the dropped table; the automatic ones (no sql) come back with the new one.
      const dependents = (
        await sql<{ sql: string }>`select sql from sqlite_master where tbl_name = ${TABLE} and type in ('index', 'trigger') and sql is not null`.execute(trx)
      ).rows;
      const created = table.sql.replace(PROVIDER_CHECK, '').replace(/^create table ("?)telephony_configurations\1/i, `create table "${NEW_TABLE}"`);
      if (!created.includes(NEW_TABLE)) throw new Error(`Cannot rename ${TABLE} in its definition: ${table.sql}`);
      await sql.raw(created).execute(trx);
      const columns = (await sql<{ name: string }>`select name from pragma_table_info(${TABLE})`.execute(trx)).rows.map((c) => `"${c.name}"`).join(', ');
      await sql.raw(`insert into "${NEW_TABLE}" (${columns}) select ${columns} from "${TABLE}"`).execute(trx);
      await sql.raw(`drop table "${TABLE}"`).execute(trx);
      await sql.raw(`alter table "${NEW_TABLE}" rename to "${TABLE}"`).execute(trx);
      for (const dependent of dependents) await sql.raw(dependent.sql).execute(trx);
      const broken = (await sql<{ table: string }>`pragma foreign_key_check`.execute(trx)).rows;
      if (broken.length > 0) throw new Error(`Rebuilding ${TABLE} would break ${broken.length} foreign keys (first in ${broken[0]?.table}).`);
    });
  } finally {
    if (enforced) await sql`pragma foreign_keys = on`.execute(db);
  }
}
