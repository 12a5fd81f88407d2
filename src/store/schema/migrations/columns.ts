// Column shapes that differ between the two stores, for migrations only.
import { sql } from '../../engine/kysely.js';
import type { ColumnDefinitionBuilder, CreateTableBuilder, Kysely } from 'kysely';
import type { DialectName } from '../../engine/store.js';

export function column(dialect: DialectName) {
  const postgres = dialect === 'postgres';
  return {
    idType: postgres ? 'bigint' : 'integer',
    /** A foreign key to an id column. */
    refType: postgres ? 'bigint' : 'integer',
    jsonType: postgres ? 'jsonb' : 'text',
    id: (col: ColumnDefinitionBuilder) =>
      postgres ? col.primaryKey().generatedByDefaultAsIdentity() : col.primaryKey().autoIncrement(),
  } as const;
}

/**
 * A journal table of the event stream (migrations 011, 012) created with its `id` column: ids are
 * drawn from run_events' own sequence, so every journal and run_events share one order. On
 * PostgreSQL the column's default is that identity sequence; SQLite has no shared sequences, so
 * store/statements/event-stream-statements.ts gives the id on insert (and moves run_events' sqlite_sequence
 * row on: writes are serialized there, so this is exact).
 */
export async function createJournalTable(db: Kysely<unknown>, dialect: DialectName, name: string): Promise<CreateTableBuilder<string, 'id'>> {
  const table = db.schema.createTable(name);
  if (dialect === 'sqlite') return table.addColumn('id', 'integer', (col) => col.primaryKey());
  const found = await sql<{ name: string }>`select pg_get_serial_sequence('run_events', 'id') as name`.execute(db);
  const sequence = found.rows[0]?.name;
  if (!sequence) throw new Error('run_events.id has no sequence');
  return table.addColumn('id', 'bigint', (col) => col.primaryKey().defaultTo(sql`nextval(${sql.lit(sequence)}::regclass)`));
}
