// Prepared statements of the SQLite store, kept by SQL text. Kysely's SQLite driver prepares every
// statement it runs, and better-sqlite3's prepare compiles the SQL each time: on the request path
// that was a fifth of the CPU. Kysely runs one statement at a time on its one connection and this
// store never streams rows, so a cached statement is never in use twice at once.
import type { Database as BetterSqlite, Statement } from 'better-sqlite3';
import type { SqliteDatabase } from 'kysely';

/** Enough for every statement text the service builds; texts that vary (IN lists) are evicted oldest first. */
const MAX_STATEMENTS = 1_000;

export function withStatementCache(sqlite: BetterSqlite, capacity = MAX_STATEMENTS): SqliteDatabase {
  const statements = new Map<string, Statement>();
  return {
    close: () => sqlite.close(),
    prepare(sql) {
      let statement = statements.get(sql);
      if (statement) {
        // Most recently used last, so eviction takes the least recently used.
        statements.delete(sql);
      } else {
        statement = sqlite.prepare(sql);
        if (statements.size >= capacity) statements.delete(statements.keys().next().value as string);
      }
      statements.set(sql, statement);
      return statement;
    },
  };
}
