// Column shapes that differ between the two stores, for migrations only.
import type { ColumnDefinitionBuilder } from 'kysely';
import type { DialectName } from '../store.js';

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
