// Keyset pages as the listings answer them: a handler reads one row more than the page holds, and
// that row's presence is what says a next page exists (its cursor is the page's last row's).
import { Type, type TString } from '@sinclair/typebox';

/** The `limit` query member: a page of 1 to 100 rows, `fallback` when absent. */
export function PageLimit(fallback: number): TString {
  return Type.String({ pattern: '^([1-9][0-9]?|100)$', description: `Page size, 1 to 100 (default ${fallback})` });
}

/** A page of `limit` from the `limit + 1` rows read, with its last row's cursor when more follow. */
export function pageOf<T, C>(rows: readonly T[], limit: number, cursor: (row: T) => C): { data: T[]; next_after: C | null } {
  const data = rows.slice(0, limit);
  const last = data[data.length - 1];
  return { data, next_after: rows.length > limit && last !== undefined ? cursor(last) : null };
}
