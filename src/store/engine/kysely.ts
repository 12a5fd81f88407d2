// Kysely's values for store/ (the query builder, `sql`, the dialects, the migrator, compiled
// queries), through the package's CommonJS build. Its ES build is some 260 modules, each with a
// record Node's ES loader keeps besides the code: about 0.8 MB more heap in every node for the same
// classes, and more churn while it starts. Types still come from 'kysely' itself (`import type`
// compiles to nothing). Everything in store/ takes Kysely's values from here, so a process holds
// one copy of them, and `instanceof Kysely` means what it says.
import { createRequire } from 'node:module';
import type * as K from 'kysely';

const kysely = createRequire(import.meta.url)('kysely') as typeof K;

export const Kysely: typeof K.Kysely = kysely.Kysely;
export type Kysely<DB> = K.Kysely<DB>;
export const CompiledQuery: typeof K.CompiledQuery = kysely.CompiledQuery;
export type CompiledQuery<O = unknown> = K.CompiledQuery<O>;
export const Migrator: typeof K.Migrator = kysely.Migrator;
export const createQueryId: typeof K.createQueryId = kysely.createQueryId;
export const PostgresDialect: typeof K.PostgresDialect = kysely.PostgresDialect;
export const SqliteDialect: typeof K.SqliteDialect = kysely.SqliteDialect;
export const sql: typeof K.sql = kysely.sql;
