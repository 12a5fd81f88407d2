// The service and its database, as every part of the bench starts them: a fresh database of the
// store with an organization, its agent and an unpaced simulator route (`setUp`), the real service
// as a child process logging to a file (`startBenchService`), and waiting for its runs to be dialed.
//
// Every service process writes its log (a line per request) to a file in a temporary directory,
// removed when the bench ends, not to a pipe to this process: reading a busy node's pipe cost this
// process 40-110 µs of CPU per request on a 2-core machine, taken from the servers it measures
// (the floor logs nothing), as the generator's work did before it had a process of its own.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { buildDeps, type Deps } from '../src/deps.js';
import { migrateToLatest } from '../src/store/schema/migrate.js';
import type { Store } from '../src/store/engine/store.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { testConfig } from '../test/helpers/app.js';
import { createOrgFixture, type OrgFixture } from '../test/helpers/fixtures.js';
import { startServiceProcess, type ServiceProcess } from '../test/helpers/service-process.js';
import { createTestDatabase, openTestStore, type StoreKind } from '../test/helpers/stores.js';
import { percentile } from './load.js';

const LOG_DIR = mkdtempSync(join(tmpdir(), 'dialtone-bench-logs-'));
process.once('exit', () => rmSync(LOG_DIR, { recursive: true, force: true }));
// Ctrl-C exits through process.exit, so the 'exit' hook above still removes the logs.
process.once('SIGINT', () => process.exit(130));

let servicesStarted = 0;

/** The service as a process (test/helpers/service-process.ts), its stdout a file in LOG_DIR removed when it exits. */
export async function startBenchService(env: Record<string, string>): Promise<ServiceProcess> {
  const file = join(LOG_DIR, `service-${++servicesStarted}.log`);
  const service = await startServiceProcess(env, { stdoutFile: file });
  service.child.once('exit', () => rmSync(file, { force: true }));
  return service;
}

export interface Setup {
  store: Store;
  /** The service's credentials cipher (the same key): for routes with credentials or settings of their own (bench/parts/media.ts). */
  cipher: Deps['cipher'];
  fixture: OrgFixture;
  routeId: number;
  url: string;
  drop(): Promise<void>;
}

export async function setUp(kind: StoreKind): Promise<Setup> {
  const database = await createTestDatabase(kind);
  const store = openTestStore(database);
  const deps = buildDeps(testConfig(database.url), { store, logger: pino({ level: 'silent' }) });
  await migrateToLatest(store);
  const fixture = await createOrgFixture(deps, 'Bench');
  const route = await createTelephonyConfiguration(
    store,
    deps.cipher,
    { orgId: fixture.orgId, name: 'Unpaced', provider: 'simulator', callsPerSecond: 10_000, maxConcurrentCalls: 1_000_000 },
    Date.now(),
  );
  return {
    store,
    cipher: deps.cipher,
    fixture,
    routeId: route.id,
    url: database.url,
    drop: async () => {
      await store.close();
      await database.drop();
    },
  };
}

export async function waitUntilDialed(store: Store, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const row = await store.db
      .selectFrom('workflow_runs')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('dial_sent_at', 'is', null)
      .where('state', 'in', ['queued', 'dialing'])
      .executeTakeFirstOrThrow();
    if (Number(row.n) === 0) return;
    if (Date.now() > deadline) throw new Error(`${row.n} runs still undialed after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function timeToDial(store: Store) {
  const rows = await store.db.selectFrom('workflow_runs').select(['created_at', 'dial_sent_at']).where('dial_sent_at', 'is not', null).execute();
  const delays = rows.map((r) => (r.dial_sent_at as number) - r.created_at).sort((a, b) => a - b);
  return { runs: delays.length, p50: percentile(delays, 50), p99: percentile(delays, 99) };
}
