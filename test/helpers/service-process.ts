// The real service (`npm start`'s entry point) as a child process, started with the test defaults
// and resolved once it listens. Outside a test (the benchmark) the caller owns its end; tests kill
// it in their own `t.after`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import pino from 'pino';
import { buildDeps, type Deps } from '../../src/deps.js';
import { migrateToLatest } from '../../src/store/schema/migrate.js';
import type { Store } from '../../src/store/engine/store.js';
import { TEST_SECRET_KEY, testConfig } from './app.js';
import { createOrgFixture, type OrgFixture } from './fixtures.js';
import { npmStartArgs, spawnProcess, STARTUP_TIMEOUT_MS, type RunningProcess, type SpawnOptions } from './process.js';
import { scaledTimeout } from './timeouts.js';
import { createTestDatabase, openTestStore, type StoreKind } from './stores.js';

// The whole port: a line read from a file while it is being written may end mid-number.
const LISTENING = /Server listening at (http:\/\/127\.0\.0\.1:\d+)(?=["\s])/;

export interface ServiceProcess {
  child: RunningProcess['child'];
  /** Base URL once the server listens. */
  url: string;
  output(): string;
  /** Resolves with the exit code (or the signal's name). */
  exited: Promise<number | string>;
}

export async function startServiceProcess(env: Record<string, string>, options: SpawnOptions = {}): Promise<ServiceProcess> {
  const service = spawnProcess(
    process.execPath,
    npmStartArgs(),
    {
      NODE_ENV: 'test',
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      DIALTONE_FIRST_RUN_DEMO: 'false',
      DIALTONE_SECRET_KEY: TEST_SECRET_KEY,
      // Load tests and the benchmark send as fast as they can; they measure the service, not its limits.
      RATE_LIMIT_KEY_PER_SECOND: '0',
      RATE_LIMIT_ORG_PER_SECOND: '0',
      MAX_QUEUED_RUNS_PER_ORG: '10000000',
      ...env,
    },
    options,
  );
  const [, url = ''] = await service.waitForStdout(LISTENING, scaledTimeout(STARTUP_TIMEOUT_MS));
  return {
    child: service.child,
    url,
    output: () => `${service.stdout()}\n${service.stderr()}`,
    exited: service.exited.then((exit) => exit.code ?? exit.signal ?? 'unknown'),
  };
}

export interface PreparedDatabase {
  /** DATABASE_URL for the service processes. */
  url: string;
  /** The test's own view of the database, to set things up and check what the services did. */
  observer: Store;
  deps: Deps;
  fixture: OrgFixture;
  /** A scratch directory (dial logs and the like), removed with the database when the test ends. */
  dir: string;
}

/** A fresh, migrated database with one organization, for service processes to run on. */
export async function prepareDatabase(t: TestContext, kind: StoreKind): Promise<PreparedDatabase> {
  const database = await createTestDatabase(kind);
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-service-'));
  const observer = openTestStore(database);
  t.after(async () => {
    await observer.close();
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  });
  const deps = buildDeps(testConfig(database.url), { store: observer, logger: pino({ level: 'silent' }) });
  await migrateToLatest(observer);
  return { url: database.url, observer, deps, fixture: await createOrgFixture(deps), dir };
}
