// What the bench reads of the machine (Linux, /proc): a process's memory now and at its peak, and
// once left idle; the CPU time of a process, its main thread, PostgreSQL's processes and the
// bench's own; and the disk's flush latency with the load average, beside every figure.
import { closeSync, fdatasyncSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { StoreKind } from '../test/helpers/stores.js';
import { IDLE_SETTLE_SECONDS } from './knobs.js';
import { round } from './load.js';

/** Resident memory of a process now and at its peak, in MB (Linux). */
export function memoryOf(pid: number | undefined): { rss_mb: number; peak_rss_mb: number } | string {
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
export async function idleMemory(pid: number | undefined) {
  const atStart = memoryOf(pid);
  await new Promise((resolve) => setTimeout(resolve, IDLE_SETTLE_SECONDS * 1000));
  return { at_start: atStart, settled: memoryOf(pid), settle_seconds: IDLE_SETTLE_SECONDS };
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
export function cpuTimeOf(pid: number | undefined, kind: StoreKind): { main: number; all: number; database: number; bench: number } | undefined {
  if (pid === undefined) return undefined;
  try {
    return { main: cpuMsOfStat(`/proc/${pid}/task/${pid}/stat`), all: cpuMsOfStat(`/proc/${pid}/stat`), database: kind === 'postgres' ? postgresCpuMs() : 0, bench: benchCpuMs() };
  } catch {
    return undefined;
  }
}

/** CPU time a server used over some rounds, the requests it answered (errors and the generator's warm-up included) and how long they ran. */
export interface CpuSpent {
  kind: StoreKind;
  main: number;
  all: number;
  database: number;
  bench: number;
  requests: number;
  seconds: number;
}

export const noCpuSpent = (kind: StoreKind): CpuSpent => ({ kind, main: 0, all: 0, database: 0, bench: 0, requests: 0, seconds: 0 });

/** Adds to `cpu` what was used between two readings (NaN when either is missing). */
export function addCpu(cpu: CpuSpent, before: ReturnType<typeof cpuTimeOf>, after: ReturnType<typeof cpuTimeOf>, requests: number, seconds: number): void {
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

/**
 * CPU time per request in µs (main thread and whole process), from clock ticks of 10 ms: read it
 * over thousands of requests. With it, the share of the time the main thread was busy at this
 * rate: how much of a pause's backlog it can absorb.
 */
export const cpuPerRequest = (cpu: CpuSpent) => ({
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
 * The disk's flush latency where the SQLite databases live (the temporary directory): 500 writes of
 * a page, each followed by fdatasync, the flush a durable SQLite commit waits for. Latency figures
 * cannot beat it, so it is reported beside them, with the load average, at the start and the end.
 */
export function diskAndLoad(): { flush_ms: { p50: number; p99: number; max: number }; load_average_1m: number } {
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
