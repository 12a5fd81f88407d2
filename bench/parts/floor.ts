// The `floor` part (`versus_floor`): the service as an API-only node against the floor
// (bench/floor-server.ts, a bare Fastify route doing one insert of a run row of the same shape and
// durability), in alternating rounds against fresh databases of the same store, each loaded by a
// closed loop from a generator process of its own (bench/open-loop.ts), reported as ratios
// (service / floor). Latency is measured at half the service's throughput with evenly spaced
// requests, floor and service again in alternating rounds; the CPU time each server's process used
// per request in those rounds is read from /proc beside it, and on SQLite the service's flushes
// and durable writes from its /metrics.
import { spawnProcess } from '../../test/helpers/process.js';
import type { ServiceProcess } from '../../test/helpers/service-process.js';
import type { StoreKind } from '../../test/helpers/stores.js';
import { CONCURRENCY, INSTANT_SIMULATOR, ROUNDS, SECONDS } from '../knobs.js';
import { bodyOf, initiationTarget, openLoopRun, round, summarize, type LoadSample, type Target } from '../load.js';
import { addCpu, cpuPerRequest, cpuTimeOf, idleMemory, memoryOf, noCpuSpent, type CpuSpent } from '../machine.js';
import { pooledOpenLoops, runClosedLoop, type OpenLoopRun } from '../open-loop.js';
import { setUp, startBenchService, type Setup } from '../services.js';

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

/** An open-loop round with the CPU time the server's process used during it. */
async function openLoopWithCpu(target: Target, pid: number | undefined, rate: number, seconds: number, cpu: CpuSpent): Promise<OpenLoopRun> {
  const before = cpuTimeOf(pid, cpu.kind);
  const run = await openLoopRun(target, rate, seconds);
  addCpu(cpu, before, cpuTimeOf(pid, cpu.kind), run.sent, seconds);
  return run;
}

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
export async function floorComparison(kind: StoreKind) {
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
