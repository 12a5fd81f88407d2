// Load from the bench's own process (closed and open loops through fetch, or the open loop handed
// to a generator process of its own, bench/open-loop.ts), what it sends (`Target`), and the
// summaries of what came back.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { ServiceProcess } from '../test/helpers/service-process.js';
import { CONCURRENCY } from './knobs.js';
import { runOpenLoop, type OpenLoopResult, type OpenLoopRun } from './open-loop.js';
import type { Setup } from './services.js';

export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

export const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

export interface LoadSample {
  latencies: number[];
  errors: number;
  seconds: number;
}

/** One kind of request, sent again and again: where, with which headers, with which body (or a new body each time). */
export interface Target {
  url: string;
  headers: () => Record<string, string>;
  body: string | (() => string);
}

export const bodyOf = (target: Target): string => (typeof target.body === 'string' ? target.body : target.body());

export function initiationTarget(service: ServiceProcess, setup: Setup, idempotencyKeys = false): Target {
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
export async function closedLoop(target: Target, seconds: number): Promise<LoadSample> {
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
export async function openLoop(target: Target, rate: number, seconds: number): Promise<OpenLoopResult> {
  const { samples: _samples, ...figures } = await openLoopRun(target, rate, seconds);
  return figures;
}

export function openLoopRun(target: Target, rate: number, seconds: number): Promise<OpenLoopRun> {
  if (typeof target.body !== 'string') throw new Error('the open loop sends the same headers and body again and again');
  return runOpenLoop({ url: target.url, headers: target.headers(), body: target.body, rate, seconds });
}

export function summarize(samples: LoadSample[]) {
  const latencies = samples.flatMap((s) => s.latencies).sort((a, b) => a - b);
  const seconds = samples.reduce((sum, s) => sum + s.seconds, 0);
  return {
    requests: latencies.length,
    errors: samples.reduce((sum, s) => sum + s.errors, 0),
    initiations_per_second: round(latencies.length / seconds, 1),
    request_latency_ms: { p50: round(percentile(latencies, 50)), p99: round(percentile(latencies, 99)) },
  };
}
