// Calls that live in a node's process (SIP, simulator) die with it. A node that stops beating has
// its live calls' runs ended by the others (node_lost) without waiting for their deadlines; a node
// that shuts down cleanly ends its own (node_shutdown). Calls that outlive their node (Twilio) are
// left to their provider's callbacks.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Deps } from '../src/deps.js';
import { getRun } from '../src/runs/read-run.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, waitForRun } from './helpers/dispatch.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

/** A run left in progress by node `owner`, as a node holding a live call leaves it. */
async function liveRunOf(deps: Deps, f: OrgFixture, owner: string, telephonyId: number): Promise<number> {
  const now = Date.now();
  const definition = await deps.store.db.selectFrom('workflow_definitions').select(['id', 'workflow_id']).executeTakeFirstOrThrow();
  const { id } = await deps.store.db
    .insertInto('workflow_runs')
    .values({
      name: null,
      org_id: f.orgId,
      workflow_id: definition.workflow_id,
      definition_id: definition.id,
      mode: 'published',
      trigger_uuid: null,
      phone_number: '+12025550123',
      caller_id: null,
      telephony_configuration_id: telephonyId,
      initial_context: null,
      state: 'in_progress',
      outcome_reason: null,
      provider_call_id: `CALL-${owner}-${now}-${Math.random()}`,
      lease_owner: owner,
      deadline_at: now + 3_600_000,
      answered_at: now,
      created_at: now,
      updated_at: now,
      ended_at: null,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return id;
}

for (const store of await storeCases()) {
  describe(`Nodes that stop (${store.kind})`, { skip: store.skip }, () => {
    it('ends the in-process calls of a node that stopped beating (node_lost), and leaves its Twilio calls and a live node\'s calls alone', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false, env: { NODE_HEARTBEAT_TIMEOUT_MS: '400', REAPER_INTERVAL_MS: '50' } });
      const f = await createOrgFixture(env.deps);
      const twilio = await createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: f.orgId, name: 'Twilio', provider: 'twilio' }, Date.now());
      const now = Date.now();
      await env.deps.store.db
        .insertInto('dispatcher_nodes')
        .values([
          { node_id: 'dead-node', started_at: now - 60_000, heartbeat_at: now - 10_000 },
          { node_id: 'busy-node', started_at: now - 60_000, heartbeat_at: now + 60_000 },
        ])
        .execute();
      const lostCall = await liveRunOf(env.deps, f, 'dead-node', f.telephonyId);
      const twilioCall = await liveRunOf(env.deps, f, 'dead-node', twilio.id);
      const livingCall = await liveRunOf(env.deps, f, 'busy-node', f.telephonyId);

      env.dispatcher.start();
      const lost = await waitForRun(env, lostCall, ended);
      assert.equal(lost.state, 'failed');
      assert.equal(lost.outcome_reason, 'node_lost');
      await sleep(300); // several more maintenance passes
      assert.equal((await getRun(env.deps.store, undefined, twilioCall)).state, 'in_progress', 'Twilio still holds that call');
      assert.equal((await getRun(env.deps.store, undefined, livingCall)).state, 'in_progress', 'a beating node keeps its calls');
      const self = await env.deps.store.db.selectFrom('dispatcher_nodes').selectAll().where('node_id', '=', env.deps.nodeId).executeTakeFirst();
      assert.ok(self && self.heartbeat_at >= now, 'the running dispatcher beats');
    });

    it('on a clean stop, waits for its in-process calls, then hangs up the rest and ends their runs (node_shutdown), and leaves', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, {
        env: { SIMULATOR_RING_MS: '20', SIMULATOR_TALK_MS: '60000', DISPATCH_SHUTDOWN_MS: '300', MAX_CALL_DURATION_MS: '120000', RING_TIMEOUT_MS: '60000' },
      });
      const f = await createOrgFixture(env.deps);
      const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123' }, { key: f.apiKey });
      const runId = response.json().workflow_run_id as number;
      await waitForRun(env, runId, (r) => r.state === 'in_progress');
      const stoppedAt = Date.now();
      await env.dispatcher.stop();
      assert.ok(Date.now() - stoppedAt >= 250, 'it waited for the call before cutting it');
      const run = await getRun(env.deps.store, undefined, runId);
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'node_shutdown');
      assert.equal(env.dispatcher.liveCalls, 0);
      const self = await env.deps.store.db.selectFrom('dispatcher_nodes').selectAll().where('node_id', '=', env.deps.nodeId).executeTakeFirst();
      assert.equal(self, undefined, 'a node that left is not mistaken for a dead one');
    });
  });
}
