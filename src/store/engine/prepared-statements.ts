// PostgreSQL: the statements compiled-statements.ts keeps are also prepared on each connection
// (node-postgres's named statements: parsed and planned once per connection, then only bound and
// run), so the server does not parse and plan them again on every run: for the run insert's one
// statement (CTEs, the cap's function, the outbox trigger), that was much of the database's work
// per request. `npm run bench` prints the database server's CPU per request (`postgres_us`); run it
// with DATABASE_PREPARED_STATEMENTS=false in the environment to see the difference.
//
// Kysely's PostgreSQL driver sends `client.query(sql, parameters)`, with no name to give. So each
// pooled client's `query` is wrapped as it connects: a text registered here goes as a named
// statement, anything else as before. A deployment behind a pooler in transaction mode that does
// not keep named statements (PgBouncer without `max_prepared_statements`) turns this off with
// DATABASE_PREPARED_STATEMENTS=false.
//
// A prepared statement's result columns are fixed when it is prepared. A text that selects or
// returns `*` is therefore never named: a node still running while a rolling upgrade's migration
// adds a column would otherwise fail it on every connection ("cached plan must not change result
// type").
import { createHash } from 'node:crypto';

/**
 * Registered texts and their statement names. The compiled templates are a few dozen shapes (their
 * LRU holds at most 500); the bound only keeps a caller that registers unbounded texts from making
 * every connection hold them all on the server.
 */
const MAX_NAMED = 1_000;
const names = new Map<string, string>();

/** Any `*` but `count(*)`'s: every column of a table, whatever columns it has when the statement runs. */
const EVERY_COLUMN = /\*(?!\))/;

/** Makes `sql` go as a named statement from now on, on every connection that names them (unless it selects or returns `*`). */
export function prepareOnPostgres(sql: string): void {
  if (names.has(sql) || names.size >= MAX_NAMED || EVERY_COLUMN.test(sql)) return;
  // Derived from the text, so one text has one name in every process, and two texts never share one.
  names.set(sql, `dialtone_${createHash('sha256').update(sql).digest('hex').slice(0, 32)}`);
}

/** The name `sql` goes under, if it is registered. */
export function preparedStatementName(sql: string): string | undefined {
  return names.get(sql);
}

/** What is wrapped: node-postgres's client, whose `query` also takes a config with a name. */
interface Client {
  query: (...args: never[]) => unknown;
}

/** Wraps a connected client's `query` so that registered texts, sent with their values, go as named statements. */
export function namePreparedStatements(client: Client): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  client.query = ((...args: unknown[]) => {
    const [text, values] = args;
    const name = args.length === 2 && typeof text === 'string' && Array.isArray(values) ? names.get(text) : undefined;
    return name === undefined ? query(...args) : query({ name, text, values });
  }) as Client['query'];
}
