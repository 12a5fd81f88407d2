// A test environment with a running dispatcher and a fast simulator.
import type { TestContext } from 'node:test';
import { Dispatcher } from '../../src/dispatch/dispatcher.js';
import { getRun, type RunView } from '../../src/runs/read-run.js';
import { isTerminal } from '../../src/runs/states.js';
import type { SimulatorProvider } from '../../src/telephony/simulator/provider.js';
import { packageInfo } from '../../src/package-info.js';
import { DeliveryWorker } from '../../src/webhooks/delivery-worker.js';
import { createTestEnv, type TestEnv, type TestEnvOptions } from './app.js';
import type { StoreKind } from './stores.js';
import { scaledTimeout } from './timeouts.js';

/** Simulator and lifecycle timings short enough for tests, long enough to be ordered. */
export const FAST_TIMINGS: Record<string, string> = {
  SIMULATOR_LATENCY_MS: '5',
  SIMULATOR_RING_MS: '20',
  SIMULATOR_TALK_MS: '30',
  SIMULATOR_SECOND_MS: '10',
  RING_TIMEOUT_MS: '200',
  MAX_CALL_DURATION_MS: '150',
  DISPATCH_POLL_INTERVAL_MS: '20',
  REAPER_INTERVAL_MS: '50',
  REAPER_GRACE_MS: '100',
};

export interface DispatchEnv extends TestEnv {
  dispatcher: Dispatcher;
  simulator: SimulatorProvider;
  /** The node's webhook delivery worker, woken like in server.ts (started unless `webhooks: false`). */
  webhooks: DeliveryWorker;
}

export async function buildWithDispatcher(t: TestContext, kind: StoreKind, options: TestEnvOptions & { start?: boolean; webhooks?: boolean } = {}): Promise<DispatchEnv> {
  const env = await createTestEnv(kind, { ...options, env: { ...FAST_TIMINGS, ...options.env } });
  const simulator = env.deps.providers.simulator as SimulatorProvider;
  simulator.record();
  const dispatcher = new Dispatcher(env.deps);
  if (options.start !== false) dispatcher.start();
  const webhooks = new DeliveryWorker({ ...env.deps, version: packageInfo().version, onRecorded: () => env.deps.signals.journal() });
  const stopWaking = env.deps.signals.onOutbox(() => webhooks.wake());
  if (options.webhooks !== false && options.start !== false) webhooks.start();
  t.after(async () => {
    stopWaking();
    await webhooks.stop();
    await dispatcher.stop();
    await Promise.all(Object.values(env.deps.providers).map((provider) => provider.close()));
    await env.close();
  });
  return { ...env, dispatcher, simulator, webhooks };
}

/** Polls the run until `done` holds; the default bound is scaled (helpers/timeouts.ts), a caller's own is taken as given. */
export async function waitForRun(env: TestEnv, runId: number, done: (run: RunView) => boolean, timeoutMs = scaledTimeout(5000)): Promise<RunView> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = await getRun(env.deps.store, undefined, runId);
    if (done(run)) return run;
    if (Date.now() > deadline) throw new Error(`run ${runId} still ${run.state} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export const ended = (run: RunView) => isTerminal(run.state);

export async function eventTypes(env: TestEnv, runId: number): Promise<string[]> {
  const rows = await env.deps.store.db.selectFrom('run_events').select(['seq', 'type']).where('run_id', '=', runId).orderBy('seq').execute();
  rows.forEach((row, i) => {
    if (row.seq !== i + 1) throw new Error(`run ${runId} event seqs are not 1..n: ${rows.map((r) => r.seq).join(',')}`);
  });
  return rows.map((r) => r.type);
}
