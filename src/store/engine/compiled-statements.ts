// Statements Kysely builds once per shape and that then run again with new values. Building a query
// (a tree of frozen operation nodes, rebuilt at every builder call, then compiled to SQL) cost more
// CPU than SQLite took to run it on the hot paths: creating a run (about a tenth of a request's CPU)
// and each step of a dispatched call (a fifth of a drain's CPU, and much of its garbage).
//
// A statement is built the first time with a placeholder wherever a value goes. Kysely carries a
// value through to the compiled query's parameters without looking into it, so where each
// placeholder lands says which parameter takes which value on every later run. What is not a
// placeholder is part of the statement's shape, and the shape's key must name it (`shape` below):
// a value left out of both would be replayed from the first run. `checkCompiledStatements(true)`
// (the tests turn it on) rebuilds every statement with its real values and throws if the SQL or
// the parameters differ, so a test that runs a statement twice with different values catches that.
//
// Written here because the one library for it (kysely-params) depends on Kysely 0.24 as a runtime
// dependency, which would put a second, older Kysely in every node.
import { isDeepStrictEqual } from 'node:util';
import type { Compilable, CompiledQuery, QueryExecutorProvider, QueryResult, RawBuilder } from 'kysely';
import { LRUCache } from 'lru-cache';
import { createQueryId, type Kysely } from './kysely.js';
import { prepareOnPostgres } from './prepared-statements.js';
import type { DialectName } from './store.js';

/** What a statement runs on: a Kysely instance or one of its transactions, whatever its schema. */
type Runner = Pick<Kysely<unknown>, 'executeQuery'> & QueryExecutorProvider;

/** Stands in for the value named `name` while a statement is built for its template. */
class Placeholder {
  constructor(readonly name: string) {}
}

/** One compiled parameter: the value named `name`, or a constant of the shape. */
type Slot = { readonly name: string } | { readonly constant: unknown };

interface Template {
  sql: string;
  query: CompiledQuery['query'];
  slots: readonly Slot[];
}

/** A statement as built: a query builder, or a `sql` template (compiled against the Kysely instance it runs on). */
export type Statement<O> = Compilable<O> | RawBuilder<O>;

function compileStatement<O>(db: Runner, statement: Statement<O>): CompiledQuery<O> {
  return 'isRawBuilder' in statement ? statement.compile(db) : statement.compile();
}

/** Where each value goes in the statement: `param('x')` is values.x. */
export type Param<V> = <K extends keyof V & string>(name: K) => V[K];

/**
 * Shapes kept per dialect, least recently used out first. The hot statements have a few dozen
 * shapes (a transition's shape is its columns and guard); the bound only matters if a caller
 * puts something unbounded in a key.
 */
const MAX_SHAPES = 500;

/**
 * Templates per dialect, shared by every store of the process: the SQL of a shape depends only on
 * the dialect's compiler while no store adds a plugin that rewrites queries (none does). Shape keys
 * are one namespace: each starts with its module's name.
 */
const templates: Record<DialectName, LRUCache<string, Template>> = {
  sqlite: new LRUCache({ max: MAX_SHAPES }),
  postgres: new LRUCache({ max: MAX_SHAPES }),
};

let checking = false;

/** With `on`, every run of a cached statement is checked against a fresh build with its real values (the tests turn it on). */
export function checkCompiledStatements(on: boolean): void {
  checking = on;
}

function compileTemplate(compiled: CompiledQuery): Template {
  const slots = compiled.parameters.map((p): Slot => (p instanceof Placeholder ? { name: p.name } : { constant: p }));
  return { sql: compiled.sql, query: compiled.query, slots };
}

/**
 * Runs the statement `build` makes, built and compiled once per `shape` and dialect. `shape` names
 * everything the statement's text depends on besides the values passed through `param` (which
 * columns, which states, how many list items); undefined builds it with the real values this once,
 * uncached (a shape too varied to keep, such as a long list).
 */
export async function executeCompiled<V extends Record<string, unknown>, O>(
  db: Runner,
  dialect: DialectName,
  shape: string | undefined,
  values: V,
  build: (param: Param<V>) => Statement<O>,
): Promise<QueryResult<O>> {
  if (shape === undefined) return db.executeQuery(compileStatement(db, build((name) => values[name])));
  let template = templates[dialect].get(shape);
  if (template === undefined) {
    template = compileTemplate(compileStatement(db, build((name) => new Placeholder(name) as V[typeof name])));
    templates[dialect].set(shape, template);
    if (dialect === 'postgres') prepareOnPostgres(template.sql);
  }
  const parameters = template.slots.map((slot) => ('name' in slot ? values[slot.name] : slot.constant));
  if (checking) {
    const fresh = compileStatement(db, build((name) => values[name]));
    if (fresh.sql !== template.sql || !isDeepStrictEqual(fresh.parameters, parameters)) {
      throw new Error(`the compiled statement of shape ${shape} differs from a fresh build: its shape key leaves something out`);
    }
  }
  const query: CompiledQuery<O> = { sql: template.sql, parameters, query: template.query, queryId: createQueryId() };
  return db.executeQuery(query);
}
