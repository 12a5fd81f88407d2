import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';

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

for (const store of await storeCases()) {
  describe(`Dispatch pacing (${store.kind})`, { skip: store.skip }, () => {
    it('spreads 50 queued runs at calls_per_second = 5: at most 5 dials in any one-second window, 4 to 6 in each second', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false, env: { SIMULATOR_RING_MS: '20', SIMULATOR_TALK_MS: '100' } });
      const ids = await queueRuns(env, 50, { cps: 5, maxConcurrent: 10 });
      env.dispatcher.start();
      for (const id of ids) await waitForRun(env, id, ended, 20_000);

      const times = env.simulator.dials.map((d) => d.at).sort((a, b) => a - b);
      assert.equal(times.length, 50);
      assert.equal(new Set(env.simulator.dials.map((d) => d.runId)).size, 50, 'each run dialed once');
      // Every window [t, t + 1 s) that starts at a dial is the busiest of its neighbours.
      const busiest = Math.max(...times.map((start) => times.filter((x) => x >= start && x < start + 1000).length));
      assert.ok(busiest <= 5 + 1, `busiest one-second window had ${busiest} dials`);
      const first = times[0] as number;
      for (let second = 0; second < 9; second++) {
        const inSecond = times.filter((x) => x >= first + second * 1000 && x < first + (second + 1) * 1000).length;
        assert.ok(inSecond >= 4 && inSecond <= 6, `second ${second} had ${inSecond} dials`);
      }
      assert.ok(await peakConcurrency(env, ids) <= 10);
    });

    it('never has more live calls than max_concurrent_calls, and fills that capacity when the queue is deep', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false, env: { SIMULATOR_RING_MS: '30', SIMULATOR_TALK_MS: '80' } });
      const ids = await queueRuns(env, 24, { cps: 500, maxConcurrent: 3 });
      env.dispatcher.start();
      for (const id of ids) await waitForRun(env, id, ended, 20_000);
      assert.equal(await peakConcurrency(env, ids), 3);
      assert.equal(env.simulator.dials.length, 24);
    });
  });
}
