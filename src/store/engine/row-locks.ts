// Row locks, the dialects' one difference in how claims and caps stay exact across nodes.
// PostgreSQL locks the rows a statement selects (FOR UPDATE, and SKIP LOCKED to pass over rows
// another node's claim holds). SQLite has one writer at a time, so a write transaction already
// excludes every other: it has no such clauses, and needs none.
import type { SelectQueryBuilder } from 'kysely';
import type { Store } from './store.js';

type Dialect = Pick<Store, 'dialect'>;

/** The query, locking the rows it selects until the transaction ends (PostgreSQL). */
export function lockingRows<DB, TB extends keyof DB, O>(store: Dialect, query: SelectQueryBuilder<DB, TB, O>): SelectQueryBuilder<DB, TB, O> {
  return store.dialect === 'postgres' ? query.forUpdate() : query;
}

/** The query, locking the rows it selects and skipping those another transaction holds (PostgreSQL). */
export function lockingFreeRows<DB, TB extends keyof DB, O>(store: Dialect, query: SelectQueryBuilder<DB, TB, O>): SelectQueryBuilder<DB, TB, O> {
  return store.dialect === 'postgres' ? query.forUpdate().skipLocked() : query;
}
