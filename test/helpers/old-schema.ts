// A database at an older schema, holding what today's service wrote: rows written at the latest
// schema are copied, column by column, into one migrated only so far. Today's code cannot write to an
// old schema itself (its writes touch newer columns), and the migration tests need the old shape.
import { sql } from '../../src/store/engine/kysely.js';
import type { Store } from '../../src/store/engine/store.js';
import type { StoreKind } from './stores.js';

/**
 * Every row of `from` into `to`, each table's columns as `to` has them (an older schema has fewer),
 * with foreign keys unchecked while the tables fill in no particular order; PostgreSQL's sequences
 * are then moved past the ids copied.
 */
export async function copyRows(kind: StoreKind, from: Store, to: Store): Promise<void> {
  const target = (await to.db.introspection.getTables()).filter((table) => !table.name.startsWith('kysely_'));
  const value = (v: unknown) => (v !== null && typeof v === 'object' && !(v instanceof Date) && !Buffer.isBuffer(v) ? JSON.stringify(v) : v);
  if (kind === 'sqlite') await sql`pragma foreign_keys = off`.execute(to.db);
  try {
    await to.db.transaction().execute(async (trx) => {
      if (kind === 'postgres') await sql`set local session_replication_role = replica`.execute(trx);
      for (const table of target) {
        const columns = table.columns.map((c) => c.name);
        const rows = (await sql<Record<string, unknown>>`select ${sql.join(columns.map((c) => sql.ref(c)))} from ${sql.table(table.name)}`.execute(from.db)).rows;
        for (const row of rows) {
          await sql`insert into ${sql.table(table.name)} (${sql.join(columns.map((c) => sql.ref(c)))}) values (${sql.join(columns.map((c) => value(row[c])))})`.execute(trx);
        }
      }
    });
  } finally {
    if (kind === 'sqlite') await sql`pragma foreign_keys = on`.execute(to.db);
  }
  if (kind === 'postgres') {
    for (const table of target) {
      if (!table.columns.some((c) => c.name === 'id' && c.isAutoIncrementing)) continue;
      await sql`select setval(pg_get_serial_sequence(${table.name}, 'id'), coalesce((select max(id) from ${sql.table(table.name)}), 0) + 1, false)`.execute(to.db);
    }
  }
}

