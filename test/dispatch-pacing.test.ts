// Pacing and concurrency of the dispatcher, on fake time (helpers/fake-time.ts): the dial times
// asserted are the ones the code chose, however busy the machine.
import assert from 'node:assert/strict';
import { getRun } from '../src/runs/read-run.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, type DispatchEnv } from './helpers/dispatch.js';
import { FakeTime } from './helpers/fake-time.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

async function queueRuns(env: DispatchEnv, count: number, pace: { cps: number; maxConcurrent: number }): Promise<number[]> {
  const f = await createOrgFixture(env.deps);
  const route = await createTelephonyConfiguration(
    env.deps.store,
    env.deps.cipher,
    { orgId: f.orgId, name: 'Paced', provider: 'simulator', callsPerSecond: pace.cps, maxConcurrentCalls: pace.maxConcurrent },
    env.deps.clock.now(),
  );
  const ids: number[] = [];
  for (let i = 0; i < count; i++) {
    const response = await postJson(env.app, `/api/v1/public/agent/${f.agentUuid}`, { phone_number: '+12025550123', telephony_configuration_id: route.id }, { key: f.apiKey });
    assert.equal(response.statusCode, 200, response.body);
    ids.push(response.json().workflow_run_id);
  }
  return ids;
}

/** The most runs live at once, from their claim and end times (an end frees its slot before a claim at the same instant). */
async function peakConcurrency(env: DispatchEnv, ids: number[]): Promise<number> {
  const rows = await env.deps.store.db.selectFrom('workflow_runs').select(['claimed_at', 'ended_at']).where('id', 'in', ids).execute();
  const points = rows.flatMap((r) => [
    { at: r.claimed_at ?? 0, delta: 1 },
    { at: r.ended_at ?? Number.MAX_SAFE_INTEGER, delta: -1 },
  ]);
  points.sort((a, b) => a.at - b.at || a.delta - b.delta);
  let live = 0;
  let peak = 0;
  for (const p of points) {
    live += p.delta;
    peak = Math.max(peak, live);
  }
  return peak;
}

/** Starts the dispatcher on fake time and moves time on until every queued run was dialed and has ended. */
async function dispatchAll(env: DispatchEnv, time: FakeTime, ids: number[]): Promise<void> {
  time.start();
  try {
    env.dispatcher.start();
    await time.runUntil(() => env.simulator.dials.length >= ids.length && env.dispatcher.liveCalls === 0, 60_000);
  } finally {
    time.stop();
  }
  for (const id of ids) assert.ok(ended(await getRun(env.deps.store, undefined, id)), `run ${id} ended`);
}

for (const store of await storeCases()) {
  describe(`Dispatch pacing (${store.kind})`, { skip: store.skip }, () => {
    it('dials 50 queued runs at calls_per_second = 5 evenly spaced, one per 1/5 s plus the pacing headroom, so never more than 5 in any one-second window', async (t) => {
      const time = new FakeTime(t);
      const env = await buildWithDispatcher(t, store.kind, { start: false, wrapStore: time.watch, env: { SIMULATOR_RING_MS: '20', SIMULATOR_TALK_MS: '100' } });
      const ids = await queueRuns(env, 50, { cps: 5, maxConcurrent: 10 });
      await dispatchAll(env, time, ids);

      const times = env.simulator.dials.map((d) => d.at);
      assert.equal(times.length, 50);
      assert.equal(new Set(env.simulator.dials.map((d) => d.runId)).size, 50, 'each run dialed once');
      const spacingMs = (1000 * (1 + env.deps.config.DISPATCH_PACING_HEADROOM)) / 5;
      const gaps = times.slice(1).map((at, i) => at - (times[i] as number));
      assert.deepEqual(gaps, gaps.map(() => spacingMs), `every dial ${spacingMs} ms after the previous one`);
      // The busiest one-second window starts at a dial.
      const busiest = Math.max(...times.map((start) => times.filter((x) => x >= start && x < start + 1000).length));
      assert.equal(busiest, 5, `busiest one-second window had ${busiest} dials`);
      assert.ok(await peakConcurrency(env, ids) <= 10);
    });

    it('never has more live calls than max_concurrent_calls, and fills that capacity when the queue is deep', async (t) => {
      const time = new FakeTime(t);
      const env = await buildWithDispatcher(t, store.kind, { start: false, wrapStore: time.watch, env: { SIMULATOR_RING_MS: '30', SIMULATOR_TALK_MS: '80' } });
      const ids = await queueRuns(env, 24, { cps: 500, maxConcurrent: 3 });
      await dispatchAll(env, time, ids);
      assert.equal(await peakConcurrency(env, ids), 3);
      assert.equal(env.simulator.dials.length, 24);
    });
  });
}
