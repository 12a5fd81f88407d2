// `npm run bench`: measures the service as a user runs it (a real process, a real socket), on the
// embedded default (SQLite) and, when reachable, PostgreSQL, with the simulator, including the
// cost of an Idempotency-Key on every request. Prints a summary and
// writes the figures as JSON to bench/results/. Rerun it to check any figure quoted elsewhere.
//
// First, and what the other figures are read against: the floor (bench/floor-server.ts, a bare
// Fastify route doing one insert of a run row of the same shape and durability) and the service as
// an API-only node, in alternating rounds against fresh databases of the same store, reported as
// ratios (service / floor). The machine is shared and noisy: only figures from one run compare.
//
//   BENCH_SECONDS       length of each load phase (default 10)
//   BENCH_ROUNDS        alternating floor/service rounds of the floor comparison (default 4)
//   BENCH_CONCURRENCY   concurrent HTTP clients of the closed-loop phases (default 10)
//   BENCH_RATE          requests per second of the paced phase (default 100)
//   BENCH_BACKLOG       queued runs for the dispatcher throughput phase (default 3000)
//   BENCH_PARTS         which parts to run, comma-separated, of floor,saturation,paced,drain (default all)
//   BENCH_STORES        which stores, comma-separated, of sqlite,postgres (default both; postgres when reachable)
//   BENCH_NODE_OPTIONS  NODE_OPTIONS of the service processes (e.g. to compare V8 flags; default none)
//   TEST_DATABASE_URL   PostgreSQL server to use (a fresh database is created and dropped)
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { buildDeps } from '../src/deps.js';
import { migrateToLatest } from '../src/store/migrate.js';
import type { Store } from '../src/store/store.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { testConfig } from '../test/helpers/app.js';
import { createOrgFixture, type OrgFixture } from '../test/helpers/fixtures.js';
import { spawnProcess } from '../test/helpers/process.js';
import { startServiceProcess, type ServiceProcess } from '../test/helpers/service-process.js';
import { createTestDatabase, openTestStore, TEST_DATABASE_URL, type StoreKind } from '../test/helpers/stores.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 3_000);
const RATE = Number(process.env.BENCH_RATE ?? 100);
const PARTS = new Set((process.env.BENCH_PARTS ?? 'floor,saturation,paced,drain').split(','));
const STORES = new Set((process.env.BENCH_STORES ?? 'sqlite,postgres').split(','));

/** Simulated calls end at once, so capacity stays free and the figures measure Dialtone itself. */
const INSTANT_SIMULATOR = {
  SIMULATOR_LATENCY_MS: '0',
  SIMULATOR_RING_MS: '0',
  SIMULATOR_TALK_MS: '0',
  LOG_LEVEL: 'info',
  ...(process.env.BENCH_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS } : {}),
};

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

interface Setup {
  store: Store;
  fixture: OrgFixture;
  routeId: number;
  url: string;
  drop(): Promise<void>;
}

async function setUp(kind: StoreKind): Promise<Setup> {
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
    fixture,
    routeId: route.id,
    url: database.url,
    drop: async () => {
      await store.close();
      await database.drop();
    },
  };
}

interface LoadSample {
  latencies: number[];
  errors: number;
  seconds: number;
}

/** One kind of request, sent again and again: where, with which headers, with which body. */
interface Target {
  url: string;
  headers: () => Record<string, string>;
  body: string;
}

function initiationTarget(service: ServiceProcess, setup: Setup, idempotencyKeys = false): Target {
  return {
    url: `${service.url}/api/v1/public/agent/${setup.fixture.agentUuid}`,
    headers: () => ({
      'content-type': 'application/json',
      'x-api-key': setup.fixture.apiKey,
      ...(idempotencyKeys ? { 'idempotency-key': randomUUID() } : {}),
    }),
    body: JSON.stringify({ phone_number: '+12025550123', telephony_configuration_id: setup.routeId, initial_context: { name: 'Ada' } }),
  };
}

/** Closed loop: CONCURRENCY clients sending back to back for `seconds`. */
async function closedLoop(target: Target, seconds: number): Promise<LoadSample> {
  const latencies: number[] = [];
  let errors = 0;
  const endAt = performance.now() + seconds * 1000;
  const worker = async () => {
    while (performance.now() < endAt) {
      const start = performance.now();
      const response = await fetch(target.url, { method: 'POST', headers: target.headers(), body: target.body });
      await response.arrayBuffer();
      if (response.status === 200) latencies.push(performance.now() - start);
      else errors++;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return { latencies, errors, seconds: (performance.now() - started) / 1000 };
}

/** Open loop: one request every 1/rate s whatever the answers, as independent clients would send them. */
async function openLoop(target: Target, rate: number, seconds: number) {
  const latencies: number[] = [];
  let errors = 0;
  const total = Math.max(1, Math.round(rate * seconds));
  const started = performance.now();
  const requests: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const wait = started + (i * 1000) / rate - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    requests.push(
      (async () => {
        const start = performance.now();
        const response = await fetch(target.url, { method: 'POST', headers: target.headers(), body: target.body });
        await response.arrayBuffer();
        if (response.status === 200) latencies.push(performance.now() - start);
        else errors++;
      })(),
    );
  }
  await Promise.all(requests);
  latencies.sort((a, b) => a - b);
  return { rate_per_second: round(rate, 1), requests: latencies.length, errors, request_latency_ms: { p50: round(percentile(latencies, 50)), p99: round(percentile(latencies, 99)) } };
}

/** Resident memory of a process now and at its peak, in MB (Linux). */
function memoryOf(pid: number | undefined): { rss_mb: number; peak_rss_mb: number } | string {
  if (pid === undefined) return 'unknown pid';
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
    return { rss_mb: round(kb('VmRSS') / 1024, 1), peak_rss_mb: round(kb('VmHWM') / 1024, 1) };
  } catch (error) {
    return `not measured: ${(error as Error).message}`;
  }
}

/** The floor process (bench/floor-server.ts) on the given setup's database. */
async function startFloor(setup: Setup) {
  const definition = await setup.store.db.selectFrom('workflow_definitions').select(['id', 'workflow_id']).executeTakeFirstOrThrow();
  const floor = spawnProcess(process.execPath, ['--import', 'tsx', 'bench/floor-server.ts'], {
    DATABASE_URL: setup.url,
    FLOOR_IDS: [setup.fixture.orgId, definition.workflow_id, definition.id, setup.routeId].join(','),
  });
  const [, url = ''] = await floor.waitForStdout(/Server listening at (http:\/\/127\.0\.0\.1:\d+)/, 20_000);
  return { floor, url };
}

/**
 * The service against the floor: alternating rounds of the same closed-loop load, then each at
 * half the service's throughput in an open loop (evenly spaced requests) for latency.
 */
async function floorComparison(kind: StoreKind) {
  process.stdout.write(`\n[${kind}] floor and service (API-only), ${ROUNDS} alternating rounds of ${SECONDS / ROUNDS} s, ${CONCURRENCY} clients\n`);
  const serviceSetup = await setUp(kind);
  const floorSetup = await setUp(kind);
  const service = await startServiceProcess({ ...INSTANT_SIMULATOR, DATABASE_URL: serviceSetup.url, DIALTONE_ROLE: 'api' });
  const idle = memoryOf(service.child.pid);
  const { floor, url } = await startFloor(floorSetup);
  try {
    const floorTarget: Target = { url: `${url}/floor`, headers: () => ({ 'content-type': 'application/json' }), body: initiationTarget(service, serviceSetup).body };
    const serviceTarget = initiationTarget(service, serviceSetup);
    // Warm both (JIT, pools, caches) before anything counts.
    await closedLoop(floorTarget, 1);
    await closedLoop(serviceTarget, 1);
    const floorSamples: LoadSample[] = [];
    const serviceSamples: LoadSample[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      floorSamples.push(await closedLoop(floorTarget, SECONDS / ROUNDS));
      serviceSamples.push(await closedLoop(serviceTarget, SECONDS / ROUNDS));
    }
    const floorSummary = summarize(floorSamples);
    const serviceSummary = summarize(serviceSamples);
    const halfRate = serviceSummary.initiations_per_second / 2;
    const serviceAtHalf = await openLoop(serviceTarget, halfRate, SECONDS / 2);
    const floorAtHalf = await openLoop(floorTarget, halfRate, SECONDS / 2);
    return {
      floor: floorSummary,
      service: serviceSummary,
      throughput_ratio: round(serviceSummary.initiations_per_second / floorSummary.initiations_per_second, 2),
      at_half_service_throughput: { service: serviceAtHalf, floor: floorAtHalf },
      service_memory: { idle: idle, after_load: memoryOf(service.child.pid) },
    };
  } finally {
    floor.child.kill('SIGTERM');
    await floor.exited;
    service.child.kill('SIGTERM');
    await service.exited;
    await serviceSetup.drop();
    await floorSetup.drop();
  }
}

function summarize(samples: LoadSample[]) {
  const latencies = samples.flatMap((s) => s.latencies).sort((a, b) => a - b);
  const seconds = samples.reduce((sum, s) => sum + s.seconds, 0);
  return {
    requests: latencies.length,
    errors: samples.reduce((sum, s) => sum + s.errors, 0),
    initiations_per_second: round(latencies.length / seconds, 1),
    request_latency_ms: { p50: round(percentile(latencies, 50)), p99: round(percentile(latencies, 99)) },
  };
}


async function waitUntilDialed(store: Store, timeoutMs: number): Promise<void> {
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

async function timeToDial(store: Store) {
  const rows = await store.db.selectFrom('workflow_runs').select(['created_at', 'dial_sent_at']).where('dial_sent_at', 'is not', null).execute();
  const delays = rows.map((r) => (r.dial_sent_at as number) - r.created_at).sort((a, b) => a - b);
  return { runs: delays.length, p50: percentile(delays, 50), p99: percentile(delays, 99) };
}

async function dispatcherThroughput(setup: Setup) {
  // Insert the backlog directly (the API is measured separately), then time a dispatcher draining it.
  const now = Date.now();
  const definition = await setup.store.db.selectFrom('workflow_definitions').select(['id', 'workflow_id']).executeTakeFirstOrThrow();
  for (let offset = 0; offset < BACKLOG; offset += 500) {
    const rows = Array.from({ length: Math.min(500, BACKLOG - offset) }, () => ({
      org_id: setup.fixture.orgId,
      workflow_id: definition.workflow_id,
      definition_id: definition.id,
      mode: 'published' as const,
      phone_number: '+12025550123',
      telephony_configuration_id: setup.routeId,
      state: 'queued' as const,
      created_at: now,
      updated_at: now,
    }));
    await setup.store.db.insertInto('workflow_runs').values(rows).execute();
  }
  const service = await startServiceProcess({ ...INSTANT_SIMULATOR, DATABASE_URL: setup.url, DIALTONE_ROLE: 'dispatcher', DISPATCH_BATCH_SIZE: '1000' });
  const idle = memoryOf(service.child.pid);
  const started = Date.now();
  let memory;
  let reslots = 'unknown';
  try {
    await waitUntilDialed(setup.store, 600_000);
    memory = memoryOf(service.child.pid);
    const metrics = await (await fetch(`${service.url}/metrics`)).text();
    reslots = /^dialtone_pacing_reslots_total (\d+)/m.exec(metrics)?.[1] ?? 'not reported';
  } finally {
    service.child.kill('SIGTERM');
    await service.exited;
  }
  const seconds = (Date.now() - started) / 1000;
  const dialed = await setup.store.db
    .selectFrom('workflow_runs')
    .select((eb) => [eb.fn.countAll<number>().as('runs'), eb.fn.count<number>('provider_call_id').distinct().as('calls')])
    .where('dial_sent_at', 'is not', null)
    .executeTakeFirstOrThrow();
  return {
    backlog: BACKLOG,
    seconds: round(seconds),
    dials_per_second: round(BACKLOG / seconds, 1),
    pacing_reslots: reslots,
    runs_dialed: Number(dialed.runs),
    distinct_provider_calls: Number(dialed.calls),
    memory: { idle, after_drain: memory },
  };
}

async function benchStore(kind: StoreKind) {
  const versusFloor = PARTS.has('floor') ? await floorComparison(kind) : undefined;
  const saturation = PARTS.has('saturation') ? await saturationAndKeys(kind) : undefined;
  const paced = PARTS.has('paced') ? await pacedLoad(kind) : undefined;
  let dispatcher;
  if (PARTS.has('drain')) {
    process.stdout.write(`[${kind}] dispatcher throughput: draining ${BACKLOG} queued runs\n`);
    const drain = await setUp(kind);
    try {
      dispatcher = await dispatcherThroughput(drain);
    } finally {
      await drain.drop();
    }
  }
  return { versus_floor: versusFloor, ...saturation, paced, dispatcher };
}

async function saturationAndKeys(kind: StoreKind) {
  process.stdout.write(`\n[${kind}] saturation (API and dispatcher on one node): ${CONCURRENCY} clients for ${SECONDS} s\n`);
  const load = await setUp(kind);
  const service = await startServiceProcess({ ...INSTANT_SIMULATOR, DATABASE_URL: load.url });
  let saturation;
  let saturationDial;
  let withKeys;
  try {
    saturation = summarize([await closedLoop(initiationTarget(service, load), SECONDS)]);
    await waitUntilDialed(load.store, 60_000);
    saturationDial = await timeToDial(load.store);
    // The cost of claiming and completing an Idempotency-Key: the same service and database, with
    // and without a fresh key on every request, in alternating halves so that warm-up and the
    // growing tables weigh on both sides alike.
    process.stdout.write(`[${kind}] saturation with and without an Idempotency-Key, alternating\n`);
    const without: LoadSample[] = [];
    const keyed: LoadSample[] = [];
    for (let round = 0; round < 2; round++) {
      without.push(await closedLoop(initiationTarget(service, load), SECONDS / 2));
      keyed.push(await closedLoop(initiationTarget(service, load, true), SECONDS / 2));
    }
    await waitUntilDialed(load.store, 60_000);
    withKeys = { without_key: summarize(without), with_key: summarize(keyed) };
  } finally {
    service.child.kill('SIGTERM');
    await service.exited;
    await load.drop();
  }
  return {
    saturation: { ...saturation, time_to_dial_ms: saturationDial },
    idempotency_key_cost: {
      ...withKeys,
      throughput_ratio: round((withKeys?.with_key.initiations_per_second ?? NaN) / (withKeys?.without_key.initiations_per_second ?? NaN), 2),
    },
  };
}

async function pacedLoad(kind: StoreKind) {
  process.stdout.write(`[${kind}] paced: ${RATE} requests/s for ${SECONDS} s, telephony capacity free\n`);
  const pacedSetup = await setUp(kind);
  const pacedService = await startServiceProcess({ ...INSTANT_SIMULATOR, DATABASE_URL: pacedSetup.url });
  let paced;
  let pacedDial;
  try {
    paced = await openLoop(initiationTarget(pacedService, pacedSetup), RATE, SECONDS);
    await waitUntilDialed(pacedSetup.store, 60_000);
    pacedDial = await timeToDial(pacedSetup.store);
  } finally {
    pacedService.child.kill('SIGTERM');
    await pacedService.exited;
    await pacedSetup.drop();
  }
  return { ...paced, time_to_dial_ms: pacedDial };
}

async function postgresReachable(): Promise<boolean> {
  try {
    const db = await createTestDatabase('postgres');
    await db.drop();
    return true;
  } catch {
    return false;
  }
}

const results: Record<string, unknown> = {
  at: new Date().toISOString(),
  machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version },
  settings: { seconds: SECONDS, rounds: ROUNDS, concurrency: CONCURRENCY, rate: RATE, backlog: BACKLOG, parts: [...PARTS], stores: [...STORES] },
};
if (STORES.has('sqlite')) results.sqlite = await benchStore('sqlite');
if (!STORES.has('postgres')) results.postgres = 'skipped: not in BENCH_STORES';
else if (await postgresReachable()) results.postgres = await benchStore('postgres');
else results.postgres = `skipped: PostgreSQL not reachable at ${TEST_DATABASE_URL}`;

const dir = fileURLToPath(new URL('./results/', import.meta.url));
mkdirSync(dir, { recursive: true });
const file = `${dir}bench-${String(results.at).replace(/[:.]/g, '-')}.json`;
writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
writeFileSync(`${dir}latest.json`, `${JSON.stringify(results, null, 2)}\n`);
process.stdout.write(`\n${JSON.stringify(results, null, 2)}\nwritten to ${file}\n`);
