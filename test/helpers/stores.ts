// Real stores for tests: a fresh SQLite file, and a fresh PostgreSQL database when PostgreSQL is
// reachable. With DIALTONE_TEST_REQUIRE_POSTGRES=1 (set by .ci/run) an unreachable PostgreSQL
// fails the suite instead of skipping its half.
//
// A PostgreSQL test database is cloned (CREATE DATABASE … TEMPLATE) from a template migrated once
// and named after the migrations' source, so it is shared by every test process (and checkout) with
// the same migrations and rebuilt when they change. Cloning takes a fraction of migrating.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { checkCompiledStatements } from '../../src/store/engine/compiled-statements.js';
import { migrateToLatest } from '../../src/store/schema/migrate.js';
import { openStore, type Store } from '../../src/store/engine/store.js';

// Every statement that runs from a compiled template is checked against a fresh build with its real
// values, so a shape key that leaves something out fails the test that runs it twice.
checkCompiledStatements(true);

export type StoreKind = 'sqlite' | 'postgres';

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REQUIRE_POSTGRES = process.env.DIALTONE_TEST_REQUIRE_POSTGRES === '1';

let postgresProbe: Promise<string | undefined> | undefined;

/** Undefined when PostgreSQL is reachable; otherwise why not. */
function probePostgres(): Promise<string | undefined> {
  postgresProbe ??= (async () => {
    const client = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 2000 });
    try {
      await client.connect();
      await client.query('select 1');
      return undefined;
    } catch (error) {
      return `PostgreSQL not reachable at ${TEST_DATABASE_URL} (${(error as Error).message})`;
    } finally {
      await client.end().catch(() => undefined);
    }
  })();
  return postgresProbe;
}

export interface StoreCase {
  kind: StoreKind;
  /** A reason to skip, or false. */
  skip: string | false;
}

/** The stores every store-backed test runs against. */
export async function storeCases(): Promise<StoreCase[]> {
  const unreachable = await probePostgres();
  if (unreachable && REQUIRE_POSTGRES) {
    throw new Error(`${unreachable}; DIALTONE_TEST_REQUIRE_POSTGRES=1 forbids skipping PostgreSQL tests`);
  }
  if (unreachable) process.stderr.write(`# skipping PostgreSQL tests: ${unreachable}\n`);
  return [
    { kind: 'sqlite', skip: false },
    { kind: 'postgres', skip: unreachable ?? false },
  ];
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * A new database of the given kind (PostgreSQL's already migrated unless `empty`, for a test of a
 * migration; SQLite's empty), and how to remove it.
 */
export async function createTestDatabase(kind: StoreKind, options: { empty?: boolean } = {}): Promise<TestDatabase> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'dialtone-test-'));
    return { url: `sqlite:${join(dir, 'test.db')}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const name = `dialtone_t_${process.pid}_${randomBytes(4).toString('hex')}`;
  if (options.empty) {
    await withAdmin((admin) => admin.query(`create database ${name}`));
  } else {
    const template = await postgresTemplate();
    await withAdmin((admin) => whileInUse(() => admin.query(`create database ${name} template ${template}`)));
  }
  return {
    url: postgresUrl(name),
    drop: () => withAdmin(async (admin) => void (await admin.query(`drop database if exists ${name} with (force)`))),
  };
}

let templateName: Promise<string> | undefined;

/** The migrated template database, built by the first test process that needs it. */
function postgresTemplate(): Promise<string> {
  templateName ??= withAdmin(async (admin) => {
    const name = `dialtone_template_${migrationsHash()}`;
    const exists = await admin.query('select 1 from pg_database where datname = $1', [name]);
    if (exists.rowCount) return name;
    // Built under a name of its own and renamed when complete, so no process clones a half-built one.
    const building = `${name}_${process.pid}_${randomBytes(4).toString('hex')}`;
    await admin.query(`create database ${building}`);
    const store = openStore(postgresUrl(building), { poolSize: 1 });
    try {
      await migrateToLatest(store);
    } finally {
      await store.close();
    }
    try {
      await whileInUse(() => admin.query(`alter database ${building} rename to ${name}`));
    } catch (error) {
      // Another process finished the same template first: use theirs.
      if ((error as { code?: string }).code !== DUPLICATE_DATABASE) throw error;
      await admin.query(`drop database if exists ${building} with (force)`);
    }
    return name;
  });
  return templateName;
}

const DUPLICATE_DATABASE = '42P04';
const OBJECT_IN_USE = '55006';

/** The migrations' source, hashed: the template of one set of migrations is never used for another. */
function migrationsHash(): string {
  const dir = new URL('../../src/store/schema/', import.meta.url);
  const hash = createHash('sha256').update(readFileSync(new URL('migrate.ts', dir)));
  for (const file of readdirSync(new URL('migrations/', dir)).sort()) hash.update(file).update(readFileSync(new URL(`migrations/${file}`, dir)));
  return hash.digest('hex').slice(0, 16);
}

/**
 * Retries `work` while PostgreSQL answers that a database it needs is in use: a clone or rename
 * fails while any session is connected to its source, including one that just closed (its backend
 * may take a moment to exit), or another clone being taken at the same instant.
 */
async function whileInUse<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if ((error as { code?: string }).code !== OBJECT_IN_USE || attempt === 50) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 80));
    }
  }
}

async function withAdmin<T>(work: (admin: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    return await work(admin);
  } finally {
    await admin.end();
  }
}

function postgresUrl(database: string): string {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

export function openTestStore(database: TestDatabase): Store {
  return openStore(database.url, { poolSize: 5 });
}
