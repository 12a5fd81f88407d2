// Steering and reading the planners. SQLite's planner has no statistics (the service never runs
// ANALYZE), so between an equality on one index and a range on another it can pick the range and
// walk every row in it; PostgreSQL's planner, with statistics, picks the equality. A term wrapped in
// notIndexed stays a filter on both: `+column` is SQLite's documented way to keep a term from
// choosing an index, and on PostgreSQL it is the same number, which no index is on either.
import { CompiledQuery, sql } from './kysely.js';
import type { Compilable, RawBuilder } from 'kysely';
import { plainTransaction, queryable, type Connection } from './store.js';

/** The column as a value no index serves: a WHERE term on it filters rows, never picks the index. */
export function notIndexed(column: string): RawBuilder<number> {
  return sql<number>`+${sql.ref(column)}`;
}

/**
 * The plan the store would use for a query, as text (tests check which index serves it).
 * PostgreSQL is told to leave sequential scans aside, so a test on a small table sees which index
 * the query can use rather than the scan a tiny table makes cheaper.
 */
export async function explainQuery(on: Connection, query: Compilable): Promise<string> {
  const compiled = query.compile();
  if (on.dialect === 'sqlite') {
    const plan = await queryable(on).executeQuery<{ detail: string }>(CompiledQuery.raw(`explain query plan ${compiled.sql}`, [...compiled.parameters]));
    return plan.rows.map((r) => r.detail).join('\n');
  }
  return plainTransaction(on, async (trx) => {
    await sql`set local enable_seqscan = off`.execute(trx);
    const plan = await trx.executeQuery<{ 'QUERY PLAN': string }>(CompiledQuery.raw(`explain ${compiled.sql}`, [...compiled.parameters]));
    return plan.rows.map((r) => r['QUERY PLAN']).join('\n');
  });
}
