// A rolling restart fails no call (docs/operations.md, "Several nodes"): a node stopped with
// SIGTERM gives back to the queue the runs it claimed but never sent a dial request for, and another
// node dials each of them exactly once. Runs whose dial was sent are never given back.
import assert from 'node:assert/strict';
import { Dispatcher } from '../src/dispatch/dispatcher.js';
import { PREDECESSORS, RUN_STATES, TERMINAL_STATES, canTransition } from '../src/runs/states.js';
import { postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, eventTypes, waitForRun } from './helpers/dispatch.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = scaledTimeout(10_000)): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('The run transition table', () => {
  it('has one way back, dialing → queued (an undialed claim given back), and nothing leaves a terminal state', () => {
    assert.deepEqual(PREDECESSORS.queued, ['dialing']);
    for (const from of RUN_STATES) {
      for (const to of RUN_STATES) {
        if ((TERMINAL_STATES as readonly string[]).includes(from)) assert.equal(canTransition(from, to), false, `${from} → ${to}`);
      }
    }
    for (const from of ['ringing', 'in_progress'] as const) assert.equal(canTransition(from, 'queued'), false, `${from} → queued`);
  });
});

for (const store of await storeCases()) {
  describe(`A node that stops during a rolling restart (${store.kind})`, { skip: store.skip }, () => {
    it('gives back the runs it claimed but never dialed (queued again, claim cleared, a queued event saying node_shutdown), and another node dials each exactly once', async (t) => {
      // One call a second with 3 s of lookahead: a claim holds runs whose pacing slots are seconds away.
      const env = await buildWithDispatcher(t, store.kind, { start: false, env: { DISPATCH_LOOKAHEAD_MS: '3000', DISPATCH_SHUTDOWN_MS: '2000', SIMULATOR_TALK_MS: '30' } });
      const f = await createOrgFixture(env.deps);
      await env.deps.store.db.updateTable('telephony_configurations').set({ calls_per_second: 1 }).where('id', '=', f.telephonyId).execute();
      const runs: number[] = [];
      for (let i = 0; i < 4; i++) {
        const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: `+1202555012${i}` }, { key: f.apiKey });
        assert.equal(response.statusCode, 200);
        runs.push((response.json() as { workflow_run_id: number }).workflow_run_id);
      }
      const nodeA = env.deps.nodeId;
      env.dispatcher.start();
      await until(async () => env.simulator.dials.length >= 1 && (await env.deps.store.db.selectFrom('workflow_runs').select('id').where('state', '=', 'dialing').where('provider_call_id', 'is', null).execute()).length >= 1, 'a dial placed and a claim waiting for its slot');
      await env.dispatcher.stop();

      const dialedByA = new Set(env.simulator.dials.map((d) => d.runId));
      // Runs node A claimed (a dialing event of its own) and did not dial; the others it never claimed.
      const claimedByA = new Set(
        (await env.deps.store.db.selectFrom('run_events').select('run_id').where('run_id', 'in', runs).where('type', '=', 'dialing').execute()).map((r) => r.run_id),
      );
      const givenBack = runs.filter((id) => claimedByA.has(id) && !dialedByA.has(id));
      assert.ok(givenBack.length >= 1, 'node A held claimed runs it had not dialed');
      for (const id of givenBack) {
        const row = await env.deps.store.db.selectFrom('workflow_runs').select(['state', 'lease_owner', 'lease_expires_at', 'deadline_at', 'claimed_at']).where('id', '=', id).executeTakeFirstOrThrow();
        assert.deepEqual(row, { state: 'queued', lease_owner: null, lease_expires_at: null, deadline_at: null, claimed_at: null }, `run ${id}`);
        const last = await env.deps.store.db.selectFrom('run_events').select(['type', 'data']).where('run_id', '=', id).orderBy('seq', 'desc').limit(1).executeTakeFirstOrThrow();
        assert.equal(last.type, 'queued');
        const data: unknown = typeof last.data === 'string' ? JSON.parse(last.data) : last.data;
        assert.deepEqual(data, { reason: 'node_shutdown', node: nodeA });
      }

      // Node B, on the same store, picks them up.
      const nodeB = new Dispatcher({ ...env.deps, nodeId: 'node-b' });
      nodeB.start();
      try {
        for (const id of runs) {
          const run = await waitForRun(env, id, ended, scaledTimeout(20_000));
          assert.equal(run.state, 'completed', `run ${id}`);
        }
      } finally {
        // Before the environment's own teardown closes the store (registered first, so run first).
        await nodeB.stop();
      }
      const dialed = env.simulator.dials.map((d) => d.runId).sort((a, b) => a - b);
      assert.deepEqual(dialed, [...runs].sort((a, b) => a - b), 'every run dialed exactly once, across both nodes');
      for (const id of givenBack) {
        const types = await eventTypes(env, id);
        assert.deepEqual(types.slice(0, 4), ['queued', 'dialing', 'queued', 'dialing'], `run ${id}`);
        const dialings = await env.deps.store.db.selectFrom('run_events').select('data').where('run_id', '=', id).where('type', '=', 'dialing').orderBy('seq').execute();
        const nodes = dialings.map((r) => (typeof r.data === 'string' ? (JSON.parse(r.data) as { node: string }) : (r.data as { node: string })).node);
        assert.deepEqual(nodes, [nodeA, 'node-b']);
      }
    });

    it('never gives back a run whose dial is recorded, or one another node holds', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const ids: number[] = [];
      for (let i = 0; i < 3; i++) {
        const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: `+1202555013${i}` }, { key: f.apiKey });
        ids.push((response.json() as { workflow_run_id: number }).workflow_run_id);
      }
      const [undialed, dialed, elsewhere] = ids as [number, number, number];
      const now = Date.now();
      const claim = { state: 'dialing' as const, lease_expires_at: now + 30_000, deadline_at: now + 30_000, claimed_at: now };
      await env.deps.store.db.updateTable('workflow_runs').set({ ...claim, lease_owner: 'node-a' }).where('id', 'in', [undialed, dialed]).execute();
      await env.deps.store.db.updateTable('workflow_runs').set({ provider_call_id: 'SIM-1', dial_sent_at: now }).where('id', '=', dialed).execute();
      await env.deps.store.db.updateTable('workflow_runs').set({ ...claim, lease_owner: 'node-c' }).where('id', '=', elsewhere).execute();
      assert.deepEqual(await env.deps.lifecycle.requeueUndialed('node-a', ids, now), [undialed]);
      const states = await env.deps.store.db.selectFrom('workflow_runs').select(['id', 'state']).where('id', 'in', ids).orderBy('id').execute();
      assert.deepEqual(
        states.map((r) => r.state),
        ids.map((id) => (id === undialed ? 'queued' : 'dialing')),
      );
    });
  });
}
