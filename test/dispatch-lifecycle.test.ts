import assert from 'node:assert/strict';
import { claimRuns } from '../src/dispatch/claim-runs.js';
import { getRun } from '../src/runs/read-run.js';
import { getJson, postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, eventTypes, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { FakeTime } from './helpers/fake-time.js';
import { createOrgFixture, type OrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

async function startCall(env: DispatchEnv, f: OrgFixture, phone: string): Promise<number> {
  const response = await postJson(env.app, `/api/v1/public/agent/${f.agentUuid}`, { phone_number: phone }, { key: f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return response.json().workflow_run_id;
}

interface ReservedCase {
  number: string;
  state: string;
  events: string[];
  reason: string | null;
  raw?: string;
}

// The simulator's reserved numbers (docs/simulator.md) and what each must do.
const RESERVED: ReservedCase[] = [
  { number: '+12025550100', state: 'completed', events: ['queued', 'dialing', 'ringing', 'in_progress', 'completed'], reason: 'hangup', raw: 'completed' },
  { number: '+12025550101', state: 'busy', events: ['queued', 'dialing', 'ringing', 'busy'], reason: 'busy', raw: '486 Busy Here' },
  { number: '+12025550102', state: 'no_answer', events: ['queued', 'dialing', 'ringing', 'no_answer'], reason: 'ring_timeout' },
  { number: '+12025550103', state: 'rejected', events: ['queued', 'dialing', 'ringing', 'rejected'], reason: 'rejected', raw: '603 Decline' },
  { number: '+12025550104', state: 'failed', events: ['queued', 'dialing', 'failed'], reason: 'dial_refused', raw: '404 Not Found' },
  { number: '+12025550105', state: 'failed', events: ['queued', 'dialing', 'ringing', 'in_progress', 'failed'], reason: 'provider_failed', raw: 'call dropped' },
  { number: '+12025550106', state: 'no_answer', events: ['queued', 'dialing', 'no_answer'], reason: 'ring_timeout' },
  { number: '+12025550107', state: 'completed', events: ['queued', 'dialing', 'ringing', 'in_progress', 'completed'], reason: 'max_duration' },
  { number: '+12025550153', state: 'completed', events: ['queued', 'dialing', 'ringing', 'in_progress', 'completed'], reason: 'hangup' },
  { number: '+14155550199', state: 'completed', events: ['queued', 'dialing', 'ringing', 'in_progress', 'completed'], reason: 'hangup' },
];

for (const store of await storeCases()) {
  describe(`Run lifecycle with the simulator (${store.kind})`, { skip: store.skip }, () => {
    it('takes every reserved number to its documented terminal state through the documented events, dialing each once', async (t) => {
      // On fake time: each outcome is a race between the simulator's timers and Dialtone's (ring
      // timeout 200 ms, maximum duration 150 ms, reaper grace 100 ms). Time moves only while the
      // store is idle, so the documented outcome is the only one possible and a wrong one is the
      // code's. (A timer firing while the event it should lose to is still being written is the
      // next test's case.)
      const time = new FakeTime(t);
      const env = await buildWithDispatcher(t, store.kind, { start: false, wrapStore: time.watch });
      const f = await createOrgFixture(env.deps);
      const runIds = await Promise.all(RESERVED.map((c) => startCall(env, f, c.number)));
      time.start();
      try {
        env.dispatcher.start();
        await time.runUntil(() => env.simulator.dials.length >= RESERVED.length && env.dispatcher.liveCalls === 0, 60_000);
      } finally {
        time.stop();
      }
      for (const [i, c] of RESERVED.entries()) {
        const runId = runIds[i] as number;
        const run = await getRun(env.deps.store, undefined, runId);
        assert.ok(ended(run), `${c.number} ended (${run.state})`);
        assert.equal(run.state, c.state, `${c.number}`);
        assert.deepEqual(await eventTypes(env, runId), c.events, `${c.number} events`);
        assert.equal(run.outcome_reason, c.reason, `${c.number} reason`);
        if (c.raw) assert.equal(run.raw_provider_status, c.raw, `${c.number} raw status`);
        assert.ok(run.claimed_at && run.ended_at, `${c.number} phase times`);
        if (c.reason !== 'dial_refused') assert.match(run.provider_call_id ?? '', /^SIM[0-9a-f]{32}$/);
        assert.equal(env.simulator.dials.filter((d) => d.runId === runId).length, 1, `${c.number} dialed exactly once`);
        if (c.events.includes('in_progress')) assert.ok(run.answered_at, `${c.number} answered_at`);
      }
      // "+1 202 555 0153" talks for 3 simulated seconds (SIMULATOR_SECOND_MS = 10 in tests).
      const talk = await getRun(env.deps.store, undefined, runIds[RESERVED.findIndex((c) => c.number === '+12025550153')] as number);
      assert.equal(Date.parse(talk.ended_at ?? '') - Date.parse(talk.answered_at ?? ''), 30);
    });

    it('never dials a run canceled while queued', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const runId = await startCall(env, f, '+12025550123');
      const canceled = await postJson(env.app, `/api/v1/public/workflow-runs/${runId}/cancel`, undefined, { key: f.apiKey, raw: '' });
      assert.equal(canceled.statusCode, 200, canceled.body);
      assert.equal(canceled.json().state, 'canceled');
      assert.equal(canceled.json().outcome_reason, 'canceled_by_request');
      env.dispatcher.start();
      const other = await startCall(env, f, '+12025550124');
      await waitForRun(env, other, ended);
      assert.deepEqual(env.simulator.dials.map((d) => d.runId), [other]);
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'canceled']);
    });

    it('cancels a ringing call: the run ends canceled and the line is released', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: { RING_TIMEOUT_MS: '10000' } });
      const f = await createOrgFixture(env.deps);
      const runId = await startCall(env, f, '+12025550102');
      await waitForRun(env, runId, (r) => r.state === 'ringing');
      const response = await postJson(env.app, `/api/v1/public/workflow-runs/${runId}/cancel`, undefined, { key: f.apiKey, raw: '' });
      assert.equal(response.statusCode, 200, response.body);
      assert.equal(response.json().state, 'canceled');
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'canceled']);
      assert.equal(env.dispatcher.liveCalls, 0);
    });

    it('hangs up an answered call on cancel, completing it', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: { MAX_CALL_DURATION_MS: '10000' } });
      const f = await createOrgFixture(env.deps);
      const runId = await startCall(env, f, '+12025550107');
      await waitForRun(env, runId, (r) => r.state === 'in_progress');
      const response = await postJson(env.app, `/api/v1/public/workflow-runs/${runId}/cancel`, undefined, { key: f.apiKey, raw: '' });
      assert.equal(response.json().state, 'completed');
      assert.equal(response.json().outcome_reason, 'canceled_by_request');
    });

    it('answers 409 run_already_ended when canceling a run that has ended', async (t) => {
      const env = await buildWithDispatcher(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const runId = await startCall(env, f, '+12025550101');
      await waitForRun(env, runId, ended);
      const response = await postJson(env.app, `/api/v1/public/workflow-runs/${runId}/cancel`, undefined, { key: f.apiKey, raw: '' });
      assert.equal(response.statusCode, 409);
      assert.equal(response.json().code, 'run_already_ended');
    });

    it('expires a run still queued after its queue TTL, without dialing it', async (t) => {
      let offset = 0;
      const env = await buildWithDispatcher(t, store.kind, { start: false, clock: { now: () => Date.now() + offset }, env: { QUEUE_TTL_MS: '60000' } });
      const f = await createOrgFixture(env.deps);
      const runId = await startCall(env, f, '+12025550123');
      offset = 61_000;
      env.dispatcher.start();
      const run = await waitForRun(env, runId, ended);
      assert.equal(run.state, 'expired');
      assert.equal(run.outcome_reason, 'queue_ttl_exceeded');
      assert.equal(env.simulator.dials.length, 0);
    });

    it('ignores duplicate, late and out-of-order provider events', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: { RING_TIMEOUT_MS: '10000', MAX_CALL_DURATION_MS: '10000' } });
      const f = await createOrgFixture(env.deps);
      const runId = await startCall(env, f, '+12025550102');
      const ringing = await waitForRun(env, runId, (r) => r.state === 'ringing');
      const providerCallId = ringing.provider_call_id ?? '';
      const send = async (kind: 'ringing' | 'answered' | 'completed') => {
        env.deps.signals.providerEvent({ runId, providerCallId, kind, rawStatus: kind, at: Date.now() });
        await new Promise((resolve) => setTimeout(resolve, 30));
      };
      await send('ringing'); // duplicate
      await send('answered');
      await send('ringing'); // late, out of order
      await send('answered'); // duplicate
      // Waited on, not read after a fixed pause: on a loaded machine an event's write can take
      // longer than the pause between sends (the pause only gives ignored events their turn).
      await waitForRun(env, runId, (r) => r.state === 'in_progress');
      await send('completed');
      await send('completed'); // duplicate
      await send('answered'); // after the end
      const run = await waitForRun(env, runId, (r) => r.state === 'completed');
      assert.equal(run.state, 'completed');
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress', 'completed']);
    });

    it('ends a call as its provider said before a timer fired, however long that event takes to write', async (t) => {
      // On fake time. The busy number's busy comes 10 ms after the dial and the answered number
      // hangs up 30 ms after its answer; each of those writes is held here past the timer it
      // races (ring timeout 200 ms, maximum duration 150 ms) but within the reaper's deadline
      // (each plus 100 ms of grace). The provider spoke first, so its outcome must stand.
      const time = new FakeTime(t);
      const env = await buildWithDispatcher(t, store.kind, { start: false, wrapStore: time.watch });
      const f = await createOrgFixture(env.deps);
      const busy = await startCall(env, f, '+12025550101');
      const hangsUp = await startCall(env, f, '+12025550100');
      const held: Record<number, { to: string; ms: number }> = { [busy]: { to: 'busy', ms: 240 }, [hangsUp]: { to: 'completed', ms: 180 } };
      const { lifecycle } = env.deps;
      const transition = lifecycle.transition.bind(lifecycle);
      const timerEndings: string[] = [];
      lifecycle.transition = async (runId, to, details) => {
        const hold = held[runId];
        if (hold?.to === to && details.reason !== 'ring_timeout' && details.reason !== 'max_duration') await new Promise((resolve) => setTimeout(resolve, hold.ms));
        if (details.reason === 'ring_timeout' || details.reason === 'max_duration') timerEndings.push(`${runId}:${details.reason}`);
        return transition(runId, to, details);
      };
      time.start();
      try {
        env.dispatcher.start();
        await time.runUntil(() => env.simulator.dials.length >= 2 && env.dispatcher.liveCalls === 0, 10_000);
      } finally {
        time.stop();
      }
      const busyRun = await getRun(env.deps.store, undefined, busy);
      assert.deepEqual([busyRun.state, busyRun.outcome_reason], ['busy', 'busy']);
      assert.deepEqual(await eventTypes(env, busy), ['queued', 'dialing', 'ringing', 'busy']);
      const hungUp = await getRun(env.deps.store, undefined, hangsUp);
      assert.deepEqual([hungUp.state, hungUp.outcome_reason], ['completed', 'hangup']);
      assert.deepEqual(timerEndings, [], 'a timer whose call had ended by its turn tries no ending of its own');
    });

    it('claims queued runs in id order, each moved to dialing under the node\'s lease with its dialing event naming the node', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const ids = [await startCall(env, f, '+12025550123'), await startCall(env, f, '+12025550124'), await startCall(env, f, '+12025550125')];
      const now = Date.now();
      const { claimed } = await claimRuns(env.deps.store, f.telephonyId, { nodeId: 'node-a', now, leaseMs: 30_000, lookaheadMs: 1_000, batchSize: 2, pacingHeadroom: 0 });
      assert.deepEqual(claimed.map((c) => [c.run.id, c.run.phone_number, c.leaseExpiresAt]), [[ids[0], '+12025550123', now + 30_000], [ids[1], '+12025550124', now + 30_000]]);
      for (const id of ids.slice(0, 2)) {
        const row = await env.deps.store.db.selectFrom('workflow_runs').selectAll().where('id', '=', id as number).executeTakeFirstOrThrow();
        assert.deepEqual([row.state, row.lease_owner, row.lease_expires_at, row.deadline_at, row.claimed_at, row.last_event_seq], ['dialing', 'node-a', now + 30_000, now + 30_000, now, 2]);
        const event = await env.deps.store.db.selectFrom('run_events').select(['type', 'at', 'data']).where('run_id', '=', id as number).where('seq', '=', 2).executeTakeFirstOrThrow();
        assert.deepEqual([event.type, event.at, typeof event.data === 'string' ? JSON.parse(event.data) : event.data], ['dialing', now, { node: 'node-a' }]);
      }
      assert.deepEqual(await eventTypes(env, ids[2] as number), ['queued'], 'beyond the batch, left queued');
    });

    it('ends a run left dialing by a node that died before dialing it as failed (dispatch_interrupted), never dialing it', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const runId = await startCall(env, f, '+12025550123');
      const past = Date.now() - 120_000;
      const { claimed } = await claimRuns(env.deps.store, f.telephonyId, { nodeId: 'dead-node', now: past, leaseMs: 30_000, lookaheadMs: 0, batchSize: 10, pacingHeadroom: 0 });
      assert.deepEqual(claimed.map((c) => c.run.id), [runId]);
      env.dispatcher.start();
      const run = await waitForRun(env, runId, ended);
      assert.equal(run.state, 'failed');
      assert.equal(run.outcome_reason, 'dispatch_interrupted');
      assert.equal(env.simulator.dials.length, 0);
    });

    it('ends a live run that stopped hearing from its provider as failed (provider_silent)', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const runId = await startCall(env, f, '+12025550123');
      await claimRuns(env.deps.store, f.telephonyId, { nodeId: 'dead-node', now: Date.now(), leaseMs: 30_000, lookaheadMs: 0, batchSize: 10, pacingHeadroom: 0 });
      await env.deps.store.db.updateTable('workflow_runs').set({ state: 'ringing', provider_call_id: 'SIMgone', deadline_at: Date.now() - 1 }).where('id', '=', runId).execute();
      env.dispatcher.start();
      const run = await waitForRun(env, runId, ended);
      assert.equal(run.state, 'failed');
      assert.equal(run.outcome_reason, 'provider_silent');
    });

    it('wakes an idle dispatcher when a run is created, without waiting for its poll', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: { DISPATCH_POLL_INTERVAL_MS: '60000', REAPER_INTERVAL_MS: '60000', NODE_HEARTBEAT_TIMEOUT_MS: '300000' } });
      const f = await createOrgFixture(env.deps);
      await new Promise((resolve) => setTimeout(resolve, 100)); // let the first tick pass: the dispatcher is now idle
      const runId = await startCall(env, f, '+12025550123');
      // A bound far below the 60 s poll, not a latency target: only the wake-up can dial the run in time.
      const run = await waitForRun(env, runId, (r) => r.dial_sent_at !== null, 20_000);
      assert.ok(run.dial_sent_at);
    });

    it('lists a run\'s events in order with a seq cursor', async (t) => {
      const env = await buildWithDispatcher(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const runId = await startCall(env, f, '+12025550100');
      await waitForRun(env, runId, ended);
      const first = (await getJson(env.app, `/api/v1/public/workflow-runs/${runId}/events?limit=2`, f.apiKey)).json();
      assert.deepEqual(first.data.map((e: { seq: number; type: string }) => [e.seq, e.type]), [[1, 'queued'], [2, 'dialing']]);
      assert.equal(first.next_after, 2);
      const rest = (await getJson(env.app, `/api/v1/public/workflow-runs/${runId}/events?after=2`, f.apiKey)).json();
      assert.deepEqual(rest.data.map((e: { type: string }) => e.type), ['ringing', 'in_progress', 'completed']);
      assert.equal(rest.next_after, null);
      const other = await createOrgFixture(env.deps, 'Other');
      const foreign = await getJson(env.app, `/api/v1/public/workflow-runs/${runId}/events`, other.apiKey);
      assert.equal(foreign.statusCode, 404);
    });

    it('exposes run, queue, latency and active-call metrics at /metrics', async (t) => {
      // The call must complete on its own course (see the reserved numbers' test): no reaper in the race.
      const env = await buildWithDispatcher(t, store.kind, { env: { REAPER_GRACE_MS: '60000' } });
      const f = await createOrgFixture(env.deps);
      await waitForRun(env, await startCall(env, f, '+12025550100'), ended);
      const text = (await env.app.inject({ method: 'GET', url: '/metrics' })).body;
      assert.match(text, /dialtone_runs_created_total\{mode="published"\} 1/);
      assert.match(text, /dialtone_run_transitions_total\{state="completed"\} 1/);
      assert.match(text, /dialtone_dial_latency_seconds_count 1/);
      assert.match(text, /# TYPE dialtone_queue_depth gauge/);
      assert.match(text, /# TYPE dialtone_queue_oldest_age_seconds gauge/);
      assert.match(text, /# TYPE dialtone_active_calls gauge/);
    });
  });
}
