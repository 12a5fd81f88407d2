// `npm run bench`: measures the service as a user runs it (a real process, a real socket), on the
// embedded default (SQLite) and, when reachable, PostgreSQL, with the simulator, including the
// cost of an Idempotency-Key on every request. Prints a summary and
// writes the figures as JSON to bench/results/. Rerun it to check any figure quoted elsewhere.
//
// First, and what the other figures are read against: the floor (bench/floor-server.ts, a bare
// Fastify route doing one insert of a run row of the same shape and durability) and the service as
// an API-only node, in alternating rounds against fresh databases of the same store, each loaded
// by a closed loop from a generator process of its own (bench/open-loop.ts), reported as ratios
// (service / floor). The machine is shared and noisy: only figures from one run compare.
// Latency is measured at half the service's throughput with evenly spaced requests, floor and
// service again in alternating rounds, from a load generator in a process of its own
// (bench/open-loop.ts) so that the bench's own work is not counted as the server's; the CPU time
// each server's process used per request in those rounds is read from /proc beside it.
//
//   BENCH_SECONDS       length of each load phase (default 10)
//   BENCH_ROUNDS        alternating floor/service rounds of the floor comparison (default 4)
//   BENCH_CONCURRENCY   concurrent HTTP clients of the closed-loop phases (default 10)
//   BENCH_RATE          requests per second of the paced phase (default 100)
//   BENCH_BACKLOG       queued runs for the dispatcher throughput phase (default 3000)
//   BENCH_PARTS         which parts to run, comma-separated, of floor,saturation,paced,drain,webhooks,policy,campaigns,import (default all)
//   BENCH_IMPORT_LINES  numbers in the suppression CSV of the import part (default 1000000; bench/import.ts)
//   BENCH_SUPPRESSIONS  suppressed numbers loaded for the policy part (default 1000000)
//   BENCH_DELIVERIES    pending webhook deliveries for the delivery throughput phase (default 5000)
//   BENCH_WEBHOOK_RATE  calls per second of the event-to-first-attempt phase, each reported by about
//                       five messages to one endpoint (default 20: well within delivery capacity)
//   BENCH_CAMPAIGN_CONTACTS  contacts imported into a campaign, 10,000 per request (default 100000)
//   BENCH_CAMPAIGN_CALLS     simulator calls of the campaign whose pace is measured (default 10000)
//   BENCH_CAMPAIGN_RATE      that campaign's calls_per_second (default 200)
//   BENCH_STORES        which stores, comma-separated, of sqlite,postgres (default both; postgres when reachable)
//   BENCH_NODE_OPTIONS  NODE_OPTIONS of the service processes (default none; node refuses most V8
//                       flags there and npm start's command line overrides the rest: to compare V8
//                       flags, edit scripts.start)
//   DATABASE_PREPARED_STATEMENTS  passed to the service processes, to compare (the floor always
//                       prepares its insert on PostgreSQL)
//   DISPATCH_WAKE_INTERVAL_MS  passed to the service processes, to compare (0: a wake-up per
//                       created run whenever the last has been answered)
//   BENCH_IDLE_SETTLE_SECONDS  how long a node is left without work before its idle memory is read
//                       again (default 30: V8's memory reducer shrank idle nodes 15-18 s after start)
//   TEST_DATABASE_URL   PostgreSQL server to use (a fresh database is created and dropped)
//
// Every service process writes its log (a line per request) to a file in a temporary directory,
// removed when the bench ends, not to a pipe to this process: reading a busy node's pipe cost this
// process 40-110 µs of CPU per request on a 2-core machine, taken from the servers it measures
// (the floor logs nothing), as the generator's work did before it had a process of its own.
import { randomUUID } from 'node:crypto';
import { closeSync, fdatasyncSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { buildDeps } from '../src/deps.js';
import { setOrganizationLimits } from '../src/orgs/organizations.js';
import { migrateToLatest } from '../src/store/schema/migrate.js';
import { upsertSuppressions, type SuppressionValues } from '../src/store/statements/suppression-statements.js';
import type { Store } from '../src/store/engine/store.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { testConfig } from '../test/helpers/app.js';
import { createOrgFixture, type OrgFixture } from '../test/helpers/fixtures.js';
import { spawnProcess } from '../test/helpers/process.js';
import { importBench, IMPORT_LINES } from './import.js';
import { pooledOpenLoops, runClosedLoop, runOpenLoop, type OpenLoopResult, type OpenLoopRun } from './open-loop.js';
import { startServiceProcess, type ServiceProcess } from '../test/helpers/service-process.js';
import { createTestDatabase, openTestStore, TEST_DATABASE_URL, type StoreKind } from '../test/helpers/stores.js';

const LOG_DIR = mkdtempSync(join(tmpdir(), 'dialtone-bench-logs-'));
process.once('exit', () => rmSync(LOG_DIR, { recursive: true, force: true }));
process.once('SIGINT', () => process.exit(130));
let servicesStarted = 0;

/** The service as a process (test/helpers/service-process.ts), its stdout a file in LOG_DIR removed when it exits. */
async function startBenchService(env: Record<string, string>): Promise<ServiceProcess> {
  const file = join(LOG_DIR, `service-${++servicesStarted}.log`);
  const service = await startServiceProcess(env, { stdoutFile: file });
  service.child.once('exit', () => rmSync(file, { force: true }));
  return service;
}

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 3_000);
const RATE = Number(process.env.BENCH_RATE ?? 100);
const PARTS = new Set((process.env.BENCH_PARTS ?? 'floor,saturation,paced,drain,webhooks,policy,campaigns,import').split(','));
const SUPPRESSIONS = Number(process.env.BENCH_SUPPRESSIONS ?? 1_000_000);
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 5_000);
const WEBHOOK_RATE = Number(process.env.BENCH_WEBHOOK_RATE ?? 20);
const CAMPAIGN_CONTACTS = Number(process.env.BENCH_CAMPAIGN_CONTACTS ?? 100_000);
const CAMPAIGN_CALLS = Number(process.env.BENCH_CAMPAIGN_CALLS ?? 10_000);
const CAMPAIGN_RATE = Number(process.env.BENCH_CAMPAIGN_RATE ?? 200);
const STORES = new Set((process.env.BENCH_STORES ?? 'sqlite,postgres').split(','));
const IDLE_SETTLE_SECONDS = Number(process.env.BENCH_IDLE_SETTLE_SECONDS ?? 30);

/** Simulated calls end at once, so capacity stays free and the figures measure Dialtone itself. */
const INSTANT_SIMULATOR = {
  SIMULATOR_LATENCY_MS: '0',
  SIMULATOR_RING_MS: '0',
  SIMULATOR_TALK_MS: '0',
  LOG_LEVEL: 'info',
  ...(process.env.BENCH_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS } : {}),
  ...(process.env.DATABASE_PREPARED_STATEMENTS ? { DATABASE_PREPARED_STATEMENTS: process.env.DATABASE_PREPARED_STATEMENTS } : {}),
  ...(process.env.DISPATCH_WAKE_INTERVAL_MS ? { DISPATCH_WAKE_INTERVAL_MS: process.env.DISPATCH_WAKE_INTERVAL_MS } : {}),
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

/** One kind of request, sent again and again: where, with which headers, with which body (or a new body each time). */
interface Target {
  url: string;
  headers: () => Record<string, string>;
  body: string | (() => string);
}

const bodyOf = (target: Target): string => (typeof target.body === 'string' ? target.body : target.body());

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
      const response = await fetch(target.url, { method: 'POST', headers: target.headers(), body: bodyOf(target) });
      await response.arrayBuffer();
      if (response.status === 200) latencies.push(performance.now() - start);
      else errors++;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return { latencies, errors, seconds: (performance.now() - started) / 1000 };
}

/** Open loop (bench/open-loop.ts): one request every 1/rate s whatever the answers, from a process of its own. */
async function openLoop(target: Target, rate: number, seconds: number): Promise<OpenLoopResult> {
  const { samples: _samples, ...figures } = await openLoopRun(target, rate, seconds);
  return figures;
}

function openLoopRun(target: Target, rate: number, seconds: number): Promise<OpenLoopRun> {
  if (typeof target.body !== 'string') throw new Error('the open loop sends the same headers and body again and again');
  return runOpenLoop({ url: target.url, headers: target.headers(), body: target.body, rate, seconds });
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

/**
 * A node's memory with nothing to do: as it starts listening, and once it has been left without
 * work for IDLE_SETTLE_SECONDS. The two differ by what start-up allocated: V8 keeps the heap it
 * grew to until its memory reducer collects and shrinks it. The reducer first looks 8 s in
 * (--gc-memory-reducer-start-delay-ms); on one machine it shrank idle nodes 15-18 s after start,
 * by 15-20 MB with npm start's flags (start-up grows their young generation to 8 MB per
 * semi-space). `settled` is what an idle node holds; `at_start` is kept beside it so the
 * difference stays visible.
 */
async function idleMemory(pid: number | undefined) {
  const atStart = memoryOf(pid);
  await new Promise((resolve) => setTimeout(resolve, IDLE_SETTLE_SECONDS * 1000));
  return { at_start: atStart, settled: memoryOf(pid), settle_seconds: IDLE_SETTLE_SECONDS };
}

/** A dispatcher node's idle memory, on a database with nothing to dial. */
async function idleDispatcher(kind: StoreKind) {
  const setup = await setUp(kind);
  try {
    const service = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: setup.url, DIALTONE_ROLE: 'dispatcher' });
    try {
      return await idleMemory(service.child.pid);
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  } finally {
    await setup.drop();
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
 * Clock ticks (USER_HZ, 100 on Linux) of a /proc stat line's utime and stime, and with
 * `reapedChildren` its cutime and cstime (the children it has waited for), in ms; read after the
 * command name, which may hold spaces or brackets.
 */
function cpuMsOfStat(path: string, reapedChildren = false): number {
  const line = readFileSync(path, 'utf8');
  const fields = line.slice(line.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]) + (reapedChildren ? Number(fields[13]) + Number(fields[14]) : 0);
  return ticks * 10;
}

/**
 * CPU time PostgreSQL's processes on this machine have used so far, in ms (its backends do the
 * statements' work): the live ones', and the ended ones' that the postmaster has reaped.
 */
function postgresCpuMs(): number {
  let total = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') total += cpuMsOfStat(`/proc/${pid}/stat`, true);
    } catch {
      // The process ended between the listing and the reading.
    }
  }
  return total;
}

/** CPU time this (the bench's) process has used so far, in ms. */
function benchCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/**
 * CPU time used so far, in ms (Linux: /proc): the server process's main thread, the whole process
 * (its own stat line counts every thread, those that have ended too), on PostgreSQL the database
 * server's processes, and the bench's own process (which should stay out of the servers' way).
 */
function cpuTimeOf(pid: number | undefined, kind: StoreKind): { main: number; all: number; database: number; bench: number } | undefined {
  if (pid === undefined) return undefined;
  try {
    return { main: cpuMsOfStat(`/proc/${pid}/task/${pid}/stat`), all: cpuMsOfStat(`/proc/${pid}/stat`), database: kind === 'postgres' ? postgresCpuMs() : 0, bench: benchCpuMs() };
  } catch {
    return undefined;
  }
}

/** CPU time a server used over some rounds, the requests it answered (errors and the generator's warm-up included) and how long they ran. */
interface CpuSpent {
  kind: StoreKind;
  main: number;
  all: number;
  database: number;
  bench: number;
  requests: number;
  seconds: number;
}

const noCpuSpent = (kind: StoreKind): CpuSpent => ({ kind, main: 0, all: 0, database: 0, bench: 0, requests: 0, seconds: 0 });

/** Adds to `cpu` what was used between two readings (NaN when either is missing). */
function addCpu(cpu: CpuSpent, before: ReturnType<typeof cpuTimeOf>, after: ReturnType<typeof cpuTimeOf>, requests: number, seconds: number): void {
  if (!before || !after) {
    cpu.requests = NaN;
    return;
  }
  cpu.main += after.main - before.main;
  cpu.all += after.all - before.all;
  cpu.database += after.database - before.database;
  cpu.bench += after.bench - before.bench;
  cpu.requests += requests;
  cpu.seconds += seconds;
}

/** An open-loop round with the CPU time the server's process used during it. */
async function openLoopWithCpu(target: Target, pid: number | undefined, rate: number, seconds: number, cpu: CpuSpent): Promise<OpenLoopRun> {
  const before = cpuTimeOf(pid, cpu.kind);
  const run = await openLoopRun(target, rate, seconds);
  addCpu(cpu, before, cpuTimeOf(pid, cpu.kind), run.sent, seconds);
  return run;
}

/**
 * CPU time per request in µs (main thread and whole process), from clock ticks of 10 ms: read it
 * over thousands of requests. With it, the share of the time the main thread was busy at this
 * rate: how much of a pause's backlog it can absorb.
 */
const cpuPerRequest = (cpu: CpuSpent) => ({
  main_thread_us: round((cpu.main * 1000) / cpu.requests, 0),
  process_us: round((cpu.all * 1000) / cpu.requests, 0),
  main_thread_busy: round(cpu.main / 1000 / cpu.seconds, 2),
  // The database server's share of each request: where parsing and planning show (DATABASE_PREPARED_STATEMENTS).
  ...(cpu.kind === 'postgres' ? { postgres_us: round((cpu.database * 1000) / cpu.requests, 0) } : {}),
  // The bench's own process over the same rounds: on a machine of few cores its CPU is taken from
  // the servers it measures, so it must stay small beside theirs (the load comes from a generator
  // process of its own, and the servers' logs go to files, not to a pipe this process reads).
  bench_process_us: round((cpu.bench * 1000) / cpu.requests, 0),
});

/**
 * The floor comparison's closed loop, from a generator process of its own (bench/open-loop.ts),
 * with the CPU time the server's process used during it added to `cpu`.
 */
async function closedLoopApart(target: Target, pid: number | undefined, seconds: number, cpu?: CpuSpent): Promise<LoadSample> {
  if (typeof target.body !== 'string') throw new Error('the generator process sends the same headers and body again and again');
  const before = cpu ? cpuTimeOf(pid, cpu.kind) : undefined;
  const sample = await runClosedLoop({ url: target.url, headers: target.headers(), body: target.body, concurrency: CONCURRENCY, seconds });
  if (cpu) addCpu(cpu, before, cpuTimeOf(pid, cpu.kind), sample.latencies.length + sample.errors, sample.seconds);
  return sample;
}

/** A closed loop's summary with the server's CPU time per request and how busy its main thread was. */
function withCpu(summary: ReturnType<typeof summarize>, cpu: CpuSpent) {
  return { ...summary, cpu_per_request: cpuPerRequest(cpu) };
}

/**
 * The service against the floor: alternating rounds of the same closed-loop load, then alternating
 * rounds of each at half the service's throughput in an open loop (evenly spaced requests) for latency.
 */
async function floorComparison(kind: StoreKind) {
  process.stdout.write(`\n[${kind}] floor and service (API-only), ${ROUNDS} alternating rounds of ${SECONDS / ROUNDS} s, ${CONCURRENCY} clients\n`);
  const serviceSetup = await setUp(kind);
  const floorSetup = await setUp(kind);
  const service = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: serviceSetup.url, DIALTONE_ROLE: 'api' });
  const idle = await idleMemory(service.child.pid);
  const { floor, url } = await startFloor(floorSetup);
  try {
    const floorTarget: Target = { url: `${url}/floor`, headers: () => ({ 'content-type': 'application/json' }), body: bodyOf(initiationTarget(service, serviceSetup)) };
    const serviceTarget = initiationTarget(service, serviceSetup);
    // Warm both (JIT, pools, caches) before anything counts.
    await closedLoopApart(floorTarget, undefined, 1);
    await closedLoopApart(serviceTarget, undefined, 1);
    const floorSamples: LoadSample[] = [];
    const serviceSamples: LoadSample[] = [];
    const floorLoopCpu = noCpuSpent(kind);
    const serviceLoopCpu = noCpuSpent(kind);
    for (let i = 0; i < ROUNDS; i++) {
      floorSamples.push(await closedLoopApart(floorTarget, floor.child.pid, SECONDS / ROUNDS, floorLoopCpu));
      serviceSamples.push(await closedLoopApart(serviceTarget, service.child.pid, SECONDS / ROUNDS, serviceLoopCpu));
    }
    const floorSummary = withCpu(summarize(floorSamples), floorLoopCpu);
    const serviceSummary = withCpu(summarize(serviceSamples), serviceLoopCpu);
    // Latency at half the service's throughput, the floor at the same rate, in alternating rounds
    // like the throughput's, so a burst of noise on the shared machine falls on both alike; each
    // side's rounds are pooled, and each round's p99 is kept to show the spread.
    const halfRate = serviceSummary.initiations_per_second / 2;
    const storeBefore = kind === 'sqlite' ? await sqliteHistograms(service) : undefined;
    const serviceRuns: OpenLoopRun[] = [];
    const floorRuns: OpenLoopRun[] = [];
    const serviceCpu = noCpuSpent(kind);
    const floorCpu = noCpuSpent(kind);
    for (let i = 0; i < ROUNDS; i++) {
      floorRuns.push(await openLoopWithCpu(floorTarget, floor.child.pid, halfRate, SECONDS / ROUNDS, floorCpu));
      serviceRuns.push(await openLoopWithCpu(serviceTarget, service.child.pid, halfRate, SECONDS / ROUNDS, serviceCpu));
    }
    const serviceAtHalf = {
      ...pooledOpenLoops(serviceRuns),
      cpu_per_request: cpuPerRequest(serviceCpu),
      ...(storeBefore ? storeFigures(storeBefore, await sqliteHistograms(service)) : {}),
    };
    const floorAtHalf = { ...pooledOpenLoops(floorRuns), cpu_per_request: cpuPerRequest(floorCpu) };
    return {
      floor: floorSummary,
      service: serviceSummary,
      throughput_ratio: round(serviceSummary.initiations_per_second / floorSummary.initiations_per_second, 2),
      at_half_service_throughput: {
        service: serviceAtHalf,
        floor: floorAtHalf,
        // The service's p99 over the floor's at the same rate in the same run: the disk's flushes and
        // this machine's pauses weigh on both, so this reads what the service adds.
        p99_ratio_to_floor: round(serviceAtHalf.request_latency_ms.p99 / floorAtHalf.request_latency_ms.p99, 2),
        // What the service spends per request over what the floor does, at the same rate: steadier
        // than latency on a shared machine, whose pauses a busier process takes longer to absorb.
        cpu_ratio_to_floor: {
          main_thread: round(serviceAtHalf.cpu_per_request.main_thread_us / floorAtHalf.cpu_per_request.main_thread_us, 2),
          process: round(serviceAtHalf.cpu_per_request.process_us / floorAtHalf.cpu_per_request.process_us, 2),
          ...(serviceAtHalf.cpu_per_request.postgres_us !== undefined && floorAtHalf.cpu_per_request.postgres_us !== undefined
            ? { postgres: round(serviceAtHalf.cpu_per_request.postgres_us / floorAtHalf.cpu_per_request.postgres_us, 2) }
            : {}),
        },
      },
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

/** One of the service's histograms as scraped from /metrics: cumulative count per bucket bound, sum and count. */
interface HistogramSnapshot {
  buckets: Map<number, number>;
  sum: number;
  count: number;
}

function histogramIn(text: string, name: string): HistogramSnapshot {
  const buckets = new Map<number, number>();
  for (const [, le = '', n = ''] of text.matchAll(new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\S+)$`, 'gm'))) buckets.set(le === '+Inf' ? Infinity : Number(le), Number(n));
  const value = (part: string) => Number(new RegExp(`^${name}_${part} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return { buckets, sum: value('sum'), count: value('count') };
}

/**
 * The service's SQLite histograms: its flushes of the write-ahead log
 * (dialtone_sqlite_wal_flush_seconds) and its durable writes from being queued to being on the disk
 * (dialtone_sqlite_durable_write_seconds: the wait for a group commit, the statements, the commit and
 * the flush), read before and after the latency rounds.
 */
async function sqliteHistograms(service: ServiceProcess) {
  const text = await (await fetch(`${service.url}/metrics`)).text();
  return { flushes: histogramIn(text, 'dialtone_sqlite_wal_flush_seconds'), durableWrites: histogramIn(text, 'dialtone_sqlite_durable_write_seconds') };
}

/**
 * What a histogram gained between two scrapes (the latency rounds, floor rounds included: the floor
 * is another process, so only the service's own): how many, their mean, and the bucket bound under
 * which 99% of them fell, in ms.
 */
function histogramFigures(before: HistogramSnapshot, after: HistogramSnapshot) {
  const count = after.count - before.count;
  let p99 = NaN;
  for (const [le, n] of [...after.buckets].sort((a, b) => a[0] - b[0])) {
    if (n - (before.buckets.get(le) ?? 0) >= 0.99 * count) {
      p99 = le * 1000;
      break;
    }
  }
  return { count, mean: round(count > 0 ? ((after.sum - before.sum) / count) * 1000 : NaN), p99_at_most: p99 };
}

/**
 * The flushes (every durable commit waits for one or two) and the durable writes of the latency
 * rounds: an accepted call's answer waits for its durable write, so read their p99 beside the
 * requests'; what is left of a request's latency is spent outside the store.
 */
function storeFigures(before: Awaited<ReturnType<typeof sqliteHistograms>>, after: Awaited<ReturnType<typeof sqliteHistograms>>) {
  const { count: flushes, ...flushFigures } = histogramFigures(before.flushes, after.flushes);
  const { count: writes, ...writeFigures } = histogramFigures(before.durableWrites, after.durableWrites);
  return { wal_flush_ms: { flushes, ...flushFigures }, durable_write_ms: { writes, ...writeFigures } };
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
  const service = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: setup.url, DIALTONE_ROLE: 'dispatcher', DISPATCH_BATCH_SIZE: '1000' });
  // Read as it starts, with the backlog already there: its idle memory is read by idleDispatcher.
  const atStart = memoryOf(service.child.pid);
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
    memory: { at_start: atStart, after_drain: memory },
  };
}

async function benchStore(kind: StoreKind) {
  const versusFloor = PARTS.has('floor') ? await floorComparison(kind) : undefined;
  const saturation = PARTS.has('saturation') ? await saturationAndKeys(kind) : undefined;
  const paced = PARTS.has('paced') ? await pacedLoad(kind) : undefined;
  let dispatcher;
  if (PARTS.has('drain')) {
    process.stdout.write(`[${kind}] dispatcher: idle memory, then draining ${BACKLOG} queued runs\n`);
    const idle = await idleDispatcher(kind);
    const drain = await setUp(kind);
    try {
      dispatcher = { idle_memory: idle, ...(await dispatcherThroughput(drain)) };
    } finally {
      await drain.drop();
    }
  }
  const webhooks = PARTS.has('webhooks') ? await webhookBench(kind) : undefined;
  const policy = PARTS.has('policy') ? await policyCost(kind) : undefined;
  const campaigns = PARTS.has('campaigns') ? await campaignBench(kind) : undefined;
  const csvImport = PARTS.has('import') ? await importBench(kind) : undefined;
  return { versus_floor: versusFloor, ...saturation, paced, dispatcher, webhooks, policy, campaigns, import: csvImport };
}

/** A webhook receiver in this process that answers 204 at once and counts what it got. */
async function startBenchReceiver(): Promise<{ url: string; received: () => number; close(): Promise<void> }> {
  let received = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received++;
      res.statusCode = 204;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received: () => received,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

/** Registers an endpoint of the setup's organization, subscribed to every message type. */
async function subscribeEndpoint(service: ServiceProcess, apiKey: string, url: string): Promise<void> {
  const response = await fetch(`${service.url}/api/v1/public/webhook-endpoints`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({ url }),
  });
  if (response.status !== 201) throw new Error(`registering the bench endpoint failed: ${response.status} ${await response.text()}`);
}

async function waitForDeliveries(store: Store, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const row = await store.db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<number>().as('n')).where('status', '=', 'pending').executeTakeFirstOrThrow();
    if (Number(row.n) === 0) return;
    if (Date.now() > deadline) throw new Error(`${row.n} webhook deliveries still pending after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const WEBHOOK_ENV = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' };

async function webhookBench(kind: StoreKind) {
  const receiver = await startBenchReceiver();
  try {
    // 1. What subscribing costs run creation: one API-only service, two organizations, one of them
    // with an endpoint (its deliveries are written with each run and left pending: no node here
    // delivers), in alternating rounds.
    process.stdout.write(`\n[${kind}] webhooks: run creation with one subscribed endpoint against none, ${ROUNDS} alternating rounds\n`);
    const creation = await setUp(kind);
    const apiNode = await startBenchService({ ...INSTANT_SIMULATOR, ...WEBHOOK_ENV, DATABASE_URL: creation.url, DIALTONE_ROLE: 'api' });
    let costOfSubscribing;
    try {
      const deps = buildDeps(testConfig(creation.url), { store: creation.store, logger: pino({ level: 'silent' }) });
      const subscribedOrg = await createOrgFixture(deps, 'Subscribed');
      await subscribeEndpoint(apiNode, subscribedOrg.apiKey, receiver.url);
      const plain = initiationTarget(apiNode, creation);
      const subscribed: Target = {
        url: `${apiNode.url}/api/v1/public/agent/${subscribedOrg.agentUuid}`,
        headers: () => ({ 'content-type': 'application/json', 'x-api-key': subscribedOrg.apiKey }),
        body: JSON.stringify({ phone_number: '+12025550123', initial_context: { name: 'Ada' } }),
      };
      await closedLoop(plain, 1);
      await closedLoop(subscribed, 1);
      const none: LoadSample[] = [];
      const one: LoadSample[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        none.push(await closedLoop(plain, SECONDS / ROUNDS));
        one.push(await closedLoop(subscribed, SECONDS / ROUNDS));
      }
      const [noneSummary, oneSummary] = [summarize(none), summarize(one)];
      costOfSubscribing = { without_endpoint: noneSummary, with_endpoint: oneSummary, throughput_ratio: round(oneSummary.initiations_per_second / noneSummary.initiations_per_second, 2) };
    } finally {
      apiNode.child.kill('SIGTERM');
      await apiNode.exited;
      await creation.drop();
    }

    // 2. Event to first attempt, with free capacity: calls at a paced rate (a fraction of what one
    // endpoint takes, measured next) on a node that delivers; each delivery's first attempt against
    // the event it reports (both on the service's clock). A run's messages go out one after the
    // other (per-run order), so its last waits for the ones before it.
    process.stdout.write(`[${kind}] webhooks: event to first attempt, ${WEBHOOK_RATE} calls/s for ${SECONDS} s, each reported to one endpoint\n`);
    const paced = await setUp(kind);
    const node = await startBenchService({ ...INSTANT_SIMULATOR, ...WEBHOOK_ENV, DATABASE_URL: paced.url });
    let firstAttempt;
    try {
      await subscribeEndpoint(node, paced.fixture.apiKey, receiver.url);
      await openLoop(initiationTarget(node, paced), WEBHOOK_RATE, SECONDS);
      await waitUntilDialed(paced.store, 60_000);
      await waitForDeliveries(paced.store, 120_000);
      const rows = await paced.store.db
        .selectFrom('webhook_deliveries as d')
        .innerJoin('webhook_attempts as a', 'a.delivery_id', 'd.id')
        .select(['d.id', 'd.created_at', (eb) => eb.fn.min('a.at').as('first')])
        .groupBy(['d.id', 'd.created_at'])
        .execute();
      const delays = rows.map((r) => Number(r.first) - r.created_at).sort((a, b) => a - b);
      firstAttempt = { calls_per_second: WEBHOOK_RATE, messages: delays.length, p50_ms: percentile(delays, 50), p99_ms: percentile(delays, 99), max_ms: delays[delays.length - 1] };
    } finally {
      node.child.kill('SIGTERM');
      await node.exited;
      await paced.drop();
    }

    // 3. Delivery throughput: a backlog of pending messages to one endpoint (its default
    // concurrency, WEBHOOK_ENDPOINT_CONCURRENCY) drained by one dispatcher node.
    process.stdout.write(`[${kind}] webhooks: delivering ${DELIVERIES} pending messages to one endpoint\n`);
    const drain = await setUp(kind);
    let throughput;
    try {
      const deps = buildDeps(testConfig(drain.url), { store: drain.store, logger: pino({ level: 'silent' }) });
      const now = Date.now();
      const endpoint = await drain.store.db
        .insertInto('webhook_endpoints')
        .values({
          org_id: drain.fixture.orgId, url: receiver.url, description: null, event_filter: '', enabled: 1, disabled_reason: null,
          secret_encrypted: deps.cipher.encrypt(drain.fixture.orgId, { secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/pMSuqlFkFI=' }),
          previous_secret_encrypted: null, previous_secret_expires_at: null, failing_since: null, created_at: now, updated_at: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      for (let offset = 0; offset < DELIVERIES; offset += 500) {
        const rows = Array.from({ length: Math.min(500, DELIVERIES - offset) }, (_, i) => ({
          endpoint_id: endpoint.id, message_id: `msg_bench_${offset + i}`, event_type: 'webhook.test', run_id: null, seq: null,
          payload: JSON.stringify({ type: 'webhook.test', timestamp: new Date(now).toISOString(), data: { endpoint_id: endpoint.id } }),
          status: 'pending' as const, attempt_count: 0, next_attempt_at: now, locked_by: null, locked_until: null, created_at: now, updated_at: now,
        }));
        await drain.store.db.insertInto('webhook_deliveries').values(rows).execute();
      }
      const before = receiver.received();
      const dispatcherNode = await startBenchService({ ...INSTANT_SIMULATOR, ...WEBHOOK_ENV, DATABASE_URL: drain.url, DIALTONE_ROLE: 'dispatcher' });
      const started = Date.now();
      try {
        await waitForDeliveries(drain.store, 600_000);
      } finally {
        dispatcherNode.child.kill('SIGTERM');
        await dispatcherNode.exited;
      }
      const seconds = (Date.now() - started) / 1000;
      throughput = { deliveries: DELIVERIES, received: receiver.received() - before, seconds: round(seconds), deliveries_per_second: round(DELIVERIES / seconds, 1), endpoint_concurrency: deps.config.WEBHOOK_ENDPOINT_CONCURRENCY };
    } finally {
      await drain.drop();
    }
    return { creation_with_one_endpoint: costOfSubscribing, event_to_first_attempt: firstAttempt, delivery_throughput: throughput };
  } finally {
    await receiver.close();
  }
}

async function saturationAndKeys(kind: StoreKind) {
  process.stdout.write(`\n[${kind}] saturation (API and dispatcher on one node): ${CONCURRENCY} clients for ${SECONDS} s\n`);
  const load = await setUp(kind);
  const service = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: load.url });
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
  const pacedService = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: pacedSetup.url });
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

/**
 * The calling policy's cost: initiation throughput with SUPPRESSIONS suppressed numbers and a
 * per-number cap on, against both off, in alternating rounds on two fresh databases of the same
 * store (API-only nodes). Every request calls a number of its own that is not suppressed, so every
 * one is accepted, and each pays for the suppression lookup among SUPPRESSIONS entries and for the
 * cap's count (inside the creating transaction, under the number's lock on PostgreSQL). Also
 * timed: loading the suppressions in bulk (the store's batched upsert, as the CSV import writes),
 * and a 100,000-line CSV import over HTTP.
 */
async function policyCost(kind: StoreKind) {
  process.stdout.write(`\n[${kind}] calling policy: ${SUPPRESSIONS} suppressions and a per-number cap, against both off\n`);
  const offSetup = await setUp(kind);
  const onSetup = await setUp(kind);
  const loadStarted = performance.now();
  const batch = 50_000;
  for (let start = 0; start < SUPPRESSIONS; start += batch) {
    const rows: SuppressionValues[] = [];
    for (let i = start; i < Math.min(SUPPRESSIONS, start + batch); i++) rows.push({ orgId: onSetup.fixture.orgId, phoneNumber: `+1646${2_000_000 + i}`, reason: 'bench', expiresAt: null });
    await onSetup.store.transaction('durable', (trx) => upsertSuppressions(trx, rows, Date.now()));
  }
  const loadSeconds = (performance.now() - loadStarted) / 1000;
  await setOrganizationLimits(onSetup.store, onSetup.fixture.orgId, { number_max_calls: 3, number_window_seconds: 86_400 });
  const off = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: offSetup.url, DIALTONE_ROLE: 'api' });
  const on = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: onSetup.url, DIALTONE_ROLE: 'api' });
  try {
    let next = 0;
    const distinct = (service: ServiceProcess, setup: Setup): Target => ({
      ...initiationTarget(service, setup),
      body: () => JSON.stringify({ phone_number: `+1212${2_000_000 + next++}`, telephony_configuration_id: setup.routeId, initial_context: { name: 'Ada' } }),
    });
    const offTarget = distinct(off, offSetup);
    const onTarget = distinct(on, onSetup);
    await closedLoop(offTarget, 1);
    await closedLoop(onTarget, 1);
    const offSamples: LoadSample[] = [];
    const onSamples: LoadSample[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      offSamples.push(await closedLoop(offTarget, SECONDS / ROUNDS));
      onSamples.push(await closedLoop(onTarget, SECONDS / ROUNDS));
    }
    const offSummary = summarize(offSamples);
    const onSummary = summarize(onSamples);

    const lines = 100_000;
    const csv = `phone_number,reason\n${Array.from({ length: lines }, (_, i) => `+1312${2_000_000 + i},bench`).join('\n')}\n`;
    const importStarted = performance.now();
    const imported = await fetch(`${on.url}/api/v1/public/suppressions/import`, { method: 'POST', headers: { 'content-type': 'text/csv', 'x-api-key': onSetup.fixture.apiKey }, body: csv });
    const importBody = (await imported.json()) as { imported?: number };
    const importSeconds = (performance.now() - importStarted) / 1000;
    return {
      suppressions: SUPPRESSIONS,
      number_cap: { max_calls: 3, window_seconds: 86_400 },
      load_suppressions_seconds: round(loadSeconds, 1),
      off: offSummary,
      on: onSummary,
      throughput_ratio: round(onSummary.initiations_per_second / offSummary.initiations_per_second, 2),
      csv_import: { lines, status: imported.status, imported: importBody.imported ?? null, seconds: round(importSeconds, 2), bytes: csv.length },
    };
  } finally {
    off.child.kill('SIGTERM');
    on.child.kill('SIGTERM');
    await off.exited;
    await on.exited;
    await offSetup.drop();
    await onSetup.drop();
  }
}

/** CSV of `count` distinct contacts starting at `first`, with a column that becomes initial_context. */
function contactsCsv(first: number, count: number): string {
  return `phone_number,name\n${Array.from({ length: count }, (_, i) => `+1415${String(2_000_000 + first + i)},Contact ${first + i}`).join('\n')}\n`;
}

/** Busiest one-second window of sorted instants (ms): how many fall within any second. */
function busiestSecond(sorted: readonly number[]): number {
  let most = 0;
  let start = 0;
  for (let end = 0; end < sorted.length; end++) {
    while ((sorted[end] as number) - (sorted[start] as number) >= 1000) start++;
    most = Math.max(most, end - start + 1);
  }
  return most;
}

/**
 * Campaigns (issue 15): importing CAMPAIGN_CONTACTS contacts over HTTP (10,000 a request, the
 * documented maximum), then a campaign of CAMPAIGN_CALLS contacts at CAMPAIGN_RATE calls a second
 * on an unpaced route, run to its end by one node (API, dispatcher and campaign scheduler) with the
 * instant simulator: the pace it held (from each run's dial time), and the node's peak RSS across
 * both (attempts are created lazily, so memory should not grow with the list).
 */
async function campaignBench(kind: StoreKind) {
  process.stdout.write(`\n[${kind}] campaigns: importing ${CAMPAIGN_CONTACTS} contacts, then ${CAMPAIGN_CALLS} calls at ${CAMPAIGN_RATE} a second\n`);
  const setup = await setUp(kind);
  // A batch and tick that let the campaign's own calls_per_second be the limit being measured.
  const service = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: setup.url, DIALTONE_ROLE: 'all', CAMPAIGN_BATCH_SIZE: '10000', CAMPAIGN_TICK_INTERVAL_MS: '100', DISPATCH_BATCH_SIZE: '1000' });
  const api = (path: string, body: string, contentType = 'application/json') =>
    fetch(`${service.url}/api/v1/public/campaigns${path}`, { method: 'POST', headers: { 'content-type': contentType, 'x-api-key': setup.fixture.apiKey }, body });
  const create = async (name: string, extra: Record<string, unknown>) => {
    const response = await api('', JSON.stringify({ name, agent_uuid: setup.fixture.agentUuid, mode: 'published', telephony_configuration_id: setup.routeId, ...extra }));
    if (response.status !== 201) throw new Error(`creating a campaign answered ${response.status}: ${await response.text()}`);
    return ((await response.json()) as { id: number }).id;
  };
  try {
    const atStart = memoryOf(service.child.pid);
    const listId = await create('Import', {});
    const importStarted = performance.now();
    let added = 0;
    for (let first = 0; first < CAMPAIGN_CONTACTS; first += 10_000) {
      const response = await api(`/${listId}/contacts`, contactsCsv(first, Math.min(10_000, CAMPAIGN_CONTACTS - first)), 'text/csv');
      if (response.status !== 200) throw new Error(`importing contacts answered ${response.status}: ${await response.text()}`);
      added += ((await response.json()) as { added: number }).added;
    }
    const importSeconds = (performance.now() - importStarted) / 1000;

    const pacedId = await create('Paced', { calls_per_second: CAMPAIGN_RATE, max_concurrent_calls: 10_000 });
    for (let first = 0; first < CAMPAIGN_CALLS; first += 10_000) {
      const response = await api(`/${pacedId}/contacts`, contactsCsv(CAMPAIGN_CONTACTS + first, Math.min(10_000, CAMPAIGN_CALLS - first)), 'text/csv');
      if (response.status !== 200) throw new Error(`importing contacts answered ${response.status}: ${await response.text()}`);
    }
    const started = await api(`/${pacedId}/start`, '{}');
    if (started.status !== 200) throw new Error(`starting the campaign answered ${started.status}: ${await started.text()}`);
    const deadline = Date.now() + (CAMPAIGN_CALLS / CAMPAIGN_RATE) * 1000 * 3 + 60_000;
    let state = 'running';
    let peakDuringRun = 0;
    while (state !== 'completed') {
      if (Date.now() > deadline) throw new Error(`the campaign is still ${state} after ${deadline} ms`);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const mem = memoryOf(service.child.pid);
      if (typeof mem !== 'string') peakDuringRun = Math.max(peakDuringRun, mem.rss_mb);
      const read = await fetch(`${service.url}/api/v1/public/campaigns/${pacedId}`, { headers: { 'x-api-key': setup.fixture.apiKey } });
      state = ((await read.json()) as { state: string }).state;
    }
    const rows = await setup.store.db.selectFrom('workflow_runs').select(['dial_sent_at', 'provider_call_id']).where('campaign_id', '=', pacedId).execute();
    const dials = rows.flatMap((r) => (r.dial_sent_at === null ? [] : [Number(r.dial_sent_at)])).sort((a, b) => a - b);
    const spanSeconds = dials.length > 1 ? ((dials.at(-1) as number) - (dials[0] as number)) / 1000 : NaN;
    return {
      import: { contacts: CAMPAIGN_CONTACTS, added, requests: Math.ceil(CAMPAIGN_CONTACTS / 10_000), seconds: round(importSeconds, 2) },
      pace: {
        calls_per_second: CAMPAIGN_RATE,
        runs: rows.length,
        dialed: dials.length,
        distinct_provider_calls: new Set(rows.map((r) => r.provider_call_id).filter((id) => id !== null)).size,
        seconds_first_to_last_dial: round(spanSeconds, 1),
        average_dials_per_second: round((dials.length - 1) / spanSeconds, 1),
        busiest_one_second_window: busiestSecond(dials),
      },
      memory: { at_start: atStart, peak_rss_mb_sampled_during_run: peakDuringRun, at_end: memoryOf(service.child.pid) },
    };
  } finally {
    service.child.kill('SIGTERM');
    await service.exited;
    await setup.drop();
  }
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

/**
 * The disk's flush latency where the SQLite databases live (the temporary directory): 500 writes of
 * a page, each followed by fdatasync, the flush a durable SQLite commit waits for. Latency figures
 * cannot beat it, so it is reported beside them, with the load average, at the start and the end.
 */
function diskAndLoad(): { flush_ms: { p50: number; p99: number; max: number }; load_average_1m: number } {
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-bench-disk-'));
  const fd = openSync(join(dir, 'flush'), 'w');
  const page = Buffer.alloc(4096, 1);
  const times: number[] = [];
  try {
    for (let i = 0; i < 500; i++) {
      const start = performance.now();
      writeSync(fd, page);
      fdatasyncSync(fd);
      times.push(performance.now() - start);
    }
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => Math.round((times[Math.min(times.length - 1, Math.floor(q * times.length))] as number) * 100) / 100;
  return { flush_ms: { p50: at(0.5), p99: at(0.99), max: at(1) }, load_average_1m: Math.round((loadavg()[0] as number) * 100) / 100 };
}

const results: Record<string, unknown> = {
  at: new Date().toISOString(),
  machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version, at_start: diskAndLoad() },
  settings: { seconds: SECONDS, rounds: ROUNDS, concurrency: CONCURRENCY, rate: RATE, backlog: BACKLOG, deliveries: DELIVERIES, webhook_rate: WEBHOOK_RATE, suppressions: SUPPRESSIONS, campaign_contacts: CAMPAIGN_CONTACTS, campaign_calls: CAMPAIGN_CALLS, campaign_rate: CAMPAIGN_RATE, import_lines: IMPORT_LINES, parts: [...PARTS], stores: [...STORES] },
};
if (STORES.has('sqlite')) results.sqlite = await benchStore('sqlite');
if (!STORES.has('postgres')) results.postgres = 'skipped: not in BENCH_STORES';
else if (await postgresReachable()) results.postgres = await benchStore('postgres');
else results.postgres = `skipped: PostgreSQL not reachable at ${TEST_DATABASE_URL}`;

(results.machine as Record<string, unknown>).at_end = diskAndLoad();

const dir = fileURLToPath(new URL('./results/', import.meta.url));
mkdirSync(dir, { recursive: true });
const file = `${dir}bench-${String(results.at).replace(/[:.]/g, '-')}.json`;
writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
writeFileSync(`${dir}latest.json`, `${JSON.stringify(results, null, 2)}\n`);
process.stdout.write(`\n${JSON.stringify(results, null, 2)}\nwritten to ${file}\n`);
