// Real stores for tests: a fresh SQLite file, and a fresh PostgreSQL database per test file when
// PostgreSQL is reachable. With DIALTONE_TEST_REQUIRE_POSTGRES=1 (set by .ci/run) an unreachable
// PostgreSQL fails the suite instead of skipping its half.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openStore, type Store } from '../../src/store/store.js';

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

/** A new, empty database of the given kind, and how to remove it. */
export async function createTestDatabase(kind: StoreKind): Promise<TestDatabase> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'dialtone-test-'));
    return { url: `sqlite:${join(dir, 'test.db')}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const name = `dialtone_t_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await client.connect();
      try {
        await client.query(`drop database if exists ${name} with (force)`);
      } finally {
        await client.end();
      }
    },
  };
}

export function openTestStore(database: TestDatabase): Store {
  return openStore(database.url, { poolSize: 5 });
}
