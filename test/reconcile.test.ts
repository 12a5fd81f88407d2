// Reconciliation against a local server speaking Twilio's REST wire format: when every status
// callback is lost, Dialtone asks Twilio (Fetch Call; List Calls for a run whose call id was never
// recorded) and runs end as Twilio reports. The service's clock is moved on by the test (the node's
// dispatcher runs its maintenance and reconciliation sweeps from it); nothing waits on wall time
// for the outcome except the polling of the store.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { TestContext } from 'node:test';
import { claimRuns } from '../src/dispatch/claim-runs.js';
import { createRun as createQueuedRun } from '../src/runs/create-run.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { DialTimeoutError, type DecodedRoute } from '../src/telephony/provider.js';
import { TwilioProvider, type TwilioRouteConfig } from '../src/telephony/twilio/provider.js';
import { twilioDefinition } from '../src/telephony/twilio/definition.js';
import { postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, eventTypes, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { ACCOUNT_SID, AUTH_TOKEN, PUBLIC_BASE_URL, startFakeTwilio, type FakeTwilio } from './helpers/twilio-server.js';

/** Answering-machine detection's tuning as the configuration defaults it (these calls ask for none). */
const TWILIO_AMD_DEFAULTS = { TWILIO_AMD_TIMEOUT_MS: 30_000, TWILIO_AMD_SPEECH_THRESHOLD_MS: 2_400, TWILIO_AMD_SPEECH_END_THRESHOLD_MS: 1_200, TWILIO_AMD_SILENCE_TIMEOUT_MS: 5_000 };

const RECONCILE_AFTER_MS = 10_000;
const REAPER_INTERVAL_MS = 1_000;
const CALLER_ID = '+12025550100';

interface Env extends DispatchEnv {
  fake: FakeTwilio;
  f: OrgFixture;
  routeId: number;
  /** Moves the service's clock on. */
  advance(ms: number): void;
}

async function reconcileEnv(t: TestContext, kind: StoreKind, env: Record<string, string> = {}, options: { start?: boolean } = {}): Promise<Env> {
  const fake = await startFakeTwilio(t);
  let offset = 0;
  const built = await buildWithDispatcher(t, kind, {
    ...options,
    clock: { now: () => Date.now() + offset },
    env: {
      TWILIO_API_BASE_URL: fake.baseUrl,
      PUBLIC_BASE_URL,
      RING_TIMEOUT_MS: '30000',
      MAX_CALL_DURATION_MS: '600000',
      REAPER_GRACE_MS: '5000',
      REAPER_INTERVAL_MS: String(REAPER_INTERVAL_MS),
      NODE_HEARTBEAT_TIMEOUT_MS: '3600000',
      RECONCILE_AFTER_MS: String(RECONCILE_AFTER_MS),
      RECONCILE_READS_PER_SECOND: '100',
      ...env,
    },
  });
  const f = await createOrgFixture(built.deps);
  const route = await createTelephonyConfiguration(
    built.deps.store,
    built.deps.cipher,
    { orgId: f.orgId, name: 'Twilio', provider: 'twilio', callerIds: [CALLER_ID], credentials: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN }, callsPerSecond: 100, maxConcurrentCalls: 100 },
    built.deps.clock.now(),
  );
  return { ...built, fake, f, routeId: route.id, advance: (ms) => (offset += ms) };
}

async function createRun(env: Env, phoneNumber: string): Promise<number> {
  const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: phoneNumber, telephony_configuration_id: env.routeId }, { key: env.f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return response.json().workflow_run_id as number;
}

/** Starts a call and waits until Twilio took it; its callbacks are never sent (all lost). */
async function placeCall(env: Env, phoneNumber: string): Promise<{ runId: number; callSid: string }> {
  const runId = await createRun(env, phoneNumber);
  const run = await waitForRun(env, runId, (r) => r.provider_call_id !== null || ended(r));
  assert.ok(run.provider_call_id, `the call was placed: ${JSON.stringify(run)}`);
  return { runId, callSid: run.provider_call_id };
}

const number = (i: number) => `+120255501${String(60 + i).padStart(2, '0')}`;

for (const store of await storeCases()) {
  describe(`Reconciliation with Twilio (${store.kind})`, { skip: store.skip }, () => {
    it('asks Twilio about live runs with no news for RECONCILE_AFTER_MS and ends each as Twilio reports, when every status callback was lost', async (t) => {
      const env = await reconcileEnv(t, store.kind);
      const calls = [];
      for (let i = 0; i < 4; i++) calls.push(await placeCall(env, number(i)));
      const [completed, busy, talking, unknown] = calls as [(typeof calls)[number], (typeof calls)[number], (typeof calls)[number], (typeof calls)[number]];
      env.fake.setStatus(completed.callSid, 'completed');
      env.fake.setStatus(busy.callSid, 'busy');
      env.fake.setStatus(talking.callSid, 'in-progress');
      env.fake.calls.delete(unknown.callSid); // Twilio no longer knows it: nothing to apply, it waits for its deadline.

      env.advance(RECONCILE_AFTER_MS + REAPER_INTERVAL_MS);
      const done = await waitForRun(env, completed.runId, ended);
      assert.equal(done.state, 'completed');
      assert.equal(done.outcome_reason, 'hangup');
      assert.equal(done.raw_provider_status, 'completed');
      const gotBusy = await waitForRun(env, busy.runId, ended);
      assert.equal(gotBusy.state, 'busy');
      assert.equal((await waitForRun(env, talking.runId, (r) => r.state === 'in_progress')).raw_provider_status, 'in-progress');
      assert.deepEqual(await eventTypes(env, completed.runId), ['queued', 'dialing', 'completed']);
      assert.equal((await waitForRun(env, unknown.runId, () => true)).state, 'dialing', 'a call Twilio does not know is left to its deadline');

      // Still talking: asked again only after another RECONCILE_AFTER_MS without news.
      const fetchedBefore = env.fake.fetches().filter((r) => r.path.endsWith(`${talking.callSid}.json`)).length;
      assert.equal(fetchedBefore, 1, 'each run was asked once in the sweep');
      env.fake.setStatus(talking.callSid, 'completed');
      env.advance(RECONCILE_AFTER_MS + REAPER_INTERVAL_MS);
      assert.equal((await waitForRun(env, talking.runId, ended)).state, 'completed');
      assert.equal(env.fake.creates().length, 4, 'nothing was dialed twice');
    });

    it('looks up a run interrupted mid-dial before declaring it dispatch_interrupted: a call Twilio placed is found and followed, a call it never placed is not invented', async (t) => {
      const env = await reconcileEnv(t, store.kind, {}, { start: false });
      const placed = await createRun(env, number(1));
      const never = await createRun(env, number(2));
      // A node claims both, reaches Twilio for the first only, and dies before recording anything.
      const claimedAt = env.deps.clock.now();
      const claim = await claimRuns(env.deps.store, env.routeId, { nodeId: 'dead-node', now: claimedAt, leaseMs: 30_000, lookaheadMs: 1_000, batchSize: 10, pacingHeadroom: 0 });
      assert.equal(claim.claimed.length, 2);
      const sid = `CA${randomBytes(16).toString('hex')}`;
      // An earlier call to the same number (before the claim) must not be taken for this run's.
      const old = `CA${randomBytes(16).toString('hex')}`;
      env.fake.calls.set(old, { sid: old, accountSid: ACCOUNT_SID, to: number(1), from: CALLER_ID, status: 'completed', createdAt: claimedAt - 3_600_000 });
      env.fake.calls.set(sid, { sid, accountSid: ACCOUNT_SID, to: number(1), from: CALLER_ID, status: 'in-progress', createdAt: claimedAt + 500 });

      env.advance(31_000); // The claim's lease (its deadline) is over.
      env.dispatcher.start();
      const found = await waitForRun(env, placed, (r) => r.provider_call_id !== null);
      assert.equal(found.provider_call_id, sid);
      assert.equal((await waitForRun(env, placed, (r) => r.state === 'in_progress')).raw_provider_status, 'in-progress');
      const interrupted = await waitForRun(env, never, ended);
      assert.equal(interrupted.state, 'failed');
      assert.equal(interrupted.outcome_reason, 'dispatch_interrupted');
      const [list] = env.fake.lists();
      assert.ok(list, 'Twilio was asked for the calls of the interrupted runs');
      assert.equal(list.query.get('To'), number(1));
      assert.equal(list.query.get('From'), CALLER_ID);
      assert.ok(list.query.has('StartTime>'), `filtered by start time: ${list.query.toString()}`);
      assert.equal(env.fake.creates().length, 0, 'neither run was dialed again');
    });

    it('ends a run Twilio still reports ringing past its deadline as its own ring timer would (no_answer), and hangs the call up', async (t) => {
      const env = await reconcileEnv(t, store.kind, { RING_TIMEOUT_MS: '20000' });
      const { runId, callSid } = await placeCall(env, number(3));
      env.fake.setStatus(callSid, 'ringing');
      // Past the dialing deadline (ring timeout + grace): Twilio says ringing, which moves the run (with a new deadline).
      env.advance(20_000 + 5_000 + REAPER_INTERVAL_MS);
      assert.equal((await waitForRun(env, runId, (r) => r.state === 'ringing')).raw_provider_status, 'ringing');
      // Past that deadline too, Twilio still says ringing: nothing more it can tell, so Dialtone ends it.
      env.advance(20_000 + 5_000 + REAPER_INTERVAL_MS);
      const run = await waitForRun(env, runId, ended);
      assert.equal(run.state, 'no_answer');
      assert.equal(run.outcome_reason, 'ring_timeout');
      // The run ends first, then the line is put down.
      const hangUpOf = () => env.fake.updates().find((r) => r.path.endsWith(`${callSid}.json`));
      const deadline = Date.now() + 5_000;
      while (!hangUpOf() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(hangUpOf()?.form.get('Status'), 'completed', 'the call was put down at Twilio');
    });

    it('asks at most RECONCILE_MAX_READS_PER_ROUTE times per route in one sweep, spaced to RECONCILE_READS_PER_SECOND', async (t) => {
      const env = await reconcileEnv(t, store.kind, { RECONCILE_MAX_READS_PER_ROUTE: '2', RECONCILE_READS_PER_SECOND: '5', REAPER_INTERVAL_MS: '60000', NODE_HEARTBEAT_TIMEOUT_MS: '3600000' });
      const calls = [];
      for (let i = 0; i < 3; i++) calls.push(await placeCall(env, number(10 + i)));
      for (const call of calls) env.fake.setStatus(call.callSid, 'completed');
      env.advance(RECONCILE_AFTER_MS + 60_000);
      const deadline = Date.now() + 10_000;
      while (env.fake.fetches().length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      // Give a third read every chance to happen in this sweep (it must not).
      await new Promise((resolve) => setTimeout(resolve, 600));
      const fetches = env.fake.fetches();
      assert.equal(fetches.length, 2, 'two reads in the first sweep');
      const [first, second] = fetches as [(typeof fetches)[number], (typeof fetches)[number]];
      assert.ok(second.at - first.at >= 190, `reads on one route are spaced to 5 per second (${second.at - first.at} ms apart)`);
      const states = await Promise.all(calls.map((c) => waitForRun(env, c.runId, () => true)));
      assert.equal(states.filter((r) => r.state === 'completed').length, 2);
      env.advance(60_000);
      for (const call of calls) assert.equal((await waitForRun(env, call.runId, ended)).state, 'completed');
      assert.equal(env.fake.fetches().length, 3, 'the third run was asked in the next sweep');
    });

    it('keeps a run whose Twilio create outlasted DIAL_TIMEOUT_MS dialing, and follows the call Twilio placed once reconciliation finds it (never dialed twice, never hung up)', async (t) => {
      const env = await reconcileEnv(t, store.kind, { DIAL_TIMEOUT_MS: '200', DISPATCH_LEASE_MS: '5000' });
      env.fake.answerCreatesAfter(1_000); // Twilio places the call at once; its answer comes long after the dial timeout.
      const runId = await createRun(env, number(30));
      await waitForCreatesAnswered(env, 1);
      // The dial timeout fired before the late answer (an earlier timer of the same process): the run waits, with no call id.
      const waiting = await waitForRun(env, runId, () => true);
      assert.equal(waiting.state, 'dialing', `not ended for a late answer: ${JSON.stringify(waiting)}`);
      assert.equal(waiting.provider_call_id, null);
      const [call] = env.fake.calls.values();
      assert.ok(call, 'Twilio placed the call');
      env.fake.setStatus(call.sid, 'in-progress');

      env.advance(5_000 + REAPER_INTERVAL_MS); // The claim's lease (its deadline) is over: reconciliation looks for the call.
      const run = await waitForRun(env, runId, (r) => r.state === 'in_progress');
      assert.equal(run.provider_call_id, call.sid);
      assert.equal(run.raw_provider_status, 'in-progress');
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'in_progress']);
      assert.equal(env.fake.creates().length, 1, 'nothing was dialed twice');
      assert.equal(env.fake.updates().length, 0, 'the call was not hung up');
    });

    it('ends a run whose slow Twilio create placed no call failed (dispatch_interrupted) once reconciliation finds none, never dial_timeout before asking', async (t) => {
      const env = await reconcileEnv(t, store.kind, { DIAL_TIMEOUT_MS: '200', DISPATCH_LEASE_MS: '5000' });
      env.fake.answerCreatesAfter(1_000, { place: false });
      const runId = await createRun(env, number(31));
      await waitForCreatesAnswered(env, 1);
      assert.equal((await waitForRun(env, runId, () => true)).state, 'dialing');

      env.advance(5_000 + REAPER_INTERVAL_MS);
      const run = await waitForRun(env, runId, ended);
      assert.equal(run.state, 'failed');
      assert.equal(run.outcome_reason, 'dispatch_interrupted');
      assert.ok(env.fake.lists().some((r) => r.query.get('To') === number(31)), 'Twilio was asked for the call first');
      assert.equal(env.fake.creates().length, 1, 'nothing was dialed twice');
    });

    it('asks about another route\'s overdue run in the same sweep when one route has more overdue runs than a sweep takes in all (an outage never starves the other routes)', async (t) => {
      // One sweep per advance of the clock (the maintenance pass runs every REAPER_INTERVAL_MS of it).
      const env = await reconcileEnv(t, store.kind, { RECONCILE_MAX_READS_PER_ROUTE: '2', REAPER_INTERVAL_MS: '600000', NODE_HEARTBEAT_TIMEOUT_MS: '3600000' }, { start: false });
      const outage = await createTelephonyConfiguration(
        env.deps.store,
        env.deps.cipher,
        { orgId: env.f.orgId, name: 'Twilio (outage)', provider: 'twilio', callerIds: [CALLER_ID], credentials: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN }, callsPerSecond: 100, maxConcurrentCalls: 1_000 },
        env.deps.clock.now(),
      );
      const definition = await env.deps.store.db.selectFrom('workflow_definitions').select(['id', 'workflow_id']).executeTakeFirstOrThrow();
      // More overdue runs on the outage route than a sweep's candidate limit (500), inserted directly: the request path adds nothing here.
      const OVERDUE = 510;
      for (let i = 0; i < OVERDUE; i++) {
        await insertQueuedRun(env, { routeId: outage.id, definitionId: definition.id, workflowId: definition.workflow_id, phoneNumber: `+1202555${String(1000 + i).padStart(4, '0')}` });
      }
      const other = await createRun(env, number(20));
      // A node claims all of them, reaches Twilio for none, and dies. The outage route's runs have the earliest deadlines.
      const claim = (routeId: number) => claimRuns(env.deps.store, routeId, { nodeId: 'dead-node', now: env.deps.clock.now(), leaseMs: 30_000, lookaheadMs: 60_000, batchSize: 1_000, pacingHeadroom: 0 });
      assert.equal((await claim(outage.id)).claimed.length, OVERDUE);
      env.advance(1_000);
      assert.equal((await claim(env.routeId)).claimed.length, 1);

      env.advance(32_000); // Every claim's lease (its deadline) is over.
      env.dispatcher.start();
      const interrupted = await waitForRun(env, other, ended);
      assert.equal(interrupted.state, 'failed');
      assert.equal(interrupted.outcome_reason, 'dispatch_interrupted');
      assert.ok(env.fake.lists().some((r) => r.query.get('To') === number(20)), 'Twilio was asked about the other route\'s run');
      // The outage route was asked its share in that sweep, no more (a fourth read would come now if it were).
      const deadline = Date.now() + 5_000;
      while (env.fake.lists().length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(env.fake.lists().length, 3, 'two reads on the outage route and one on the other in the sweep');
    });
  });
}

async function waitForCreatesAnswered(env: Env, count: number): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (env.fake.createsAnswered() < count) {
    if (Date.now() > deadline) throw new Error(`${env.fake.createsAnswered()} of ${count} creates answered after 5 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A queued run inserted as the request path would insert it, without the request. */
async function insertQueuedRun(env: Env, run: { routeId: number; definitionId: number; workflowId: number; phoneNumber: string }): Promise<number> {
  const created = await createQueuedRun(
    env.deps.store,
    { orgId: env.f.orgId, workflowId: run.workflowId, definitionId: run.definitionId, definitionVersion: 1, mode: 'published', triggerUuid: null, phoneNumber: run.phoneNumber, callerId: CALLER_ID, telephonyConfigurationId: run.routeId, initialContextJson: null, scheduledFor: null },
    env.deps.clock.now(),
  );
  return created.id;
}

describe('Twilio provider: a create slower than DIAL_TIMEOUT_MS', () => {
  it('is a DialTimeoutError (Twilio may have placed the call), not a network error the run would end with', async (t) => {
    const fake = await startFakeTwilio(t);
    fake.answerCreatesAfter(2_000);
    // The SDK's own timeout (DIAL_TIMEOUT_MS) is the only one here: no dispatcher races it.
    const provider = new TwilioProvider({ TWILIO_API_BASE_URL: fake.baseUrl, PUBLIC_BASE_URL, MAX_CALL_DURATION_MS: 600_000, DIAL_TIMEOUT_MS: 200, TWILIO_CALLBACK_RETRIES: 5, TWILIO_CALLBACK_RETRY_POLICY: 'all', ...TWILIO_AMD_DEFAULTS });
    const route: DecodedRoute<TwilioRouteConfig> = { id: 1, orgId: 1, provider: 'twilio', capabilities: twilioDefinition.capabilities, callerIds: [CALLER_ID], ringTimeoutMs: undefined, config: { credentials: { accountSid: ACCOUNT_SID, authToken: AUTH_TOKEN } } };
    await assert.rejects(provider.dial({ runId: 1, to: number(1), from: CALLER_ID, ringTimeoutMs: 30_000, route }), (error: unknown) => error instanceof DialTimeoutError);
    assert.equal(fake.calls.size, 1, 'the call was placed all the same');
  });
});

describe('Twilio provider: finding a call whose id was never recorded', () => {
  it('follows List Calls across its pages (next_page_uri) and takes the earliest call placed after the claim that no other run holds', async (t) => {
    const fake = await startFakeTwilio(t);
    const provider = new TwilioProvider({
      TWILIO_API_BASE_URL: fake.baseUrl,
      PUBLIC_BASE_URL,
      MAX_CALL_DURATION_MS: 600_000,
      DIAL_TIMEOUT_MS: 5_000,
      TWILIO_CALLBACK_RETRIES: 5,
      TWILIO_CALLBACK_RETRY_POLICY: 'all',
      ...TWILIO_AMD_DEFAULTS,
    });
    const route: DecodedRoute<TwilioRouteConfig> = { id: 1, orgId: 1, provider: 'twilio', capabilities: twilioDefinition.capabilities, callerIds: [CALLER_ID], ringTimeoutMs: undefined, config: { credentials: { accountSid: ACCOUNT_SID, authToken: AUTH_TOKEN } } };
    const placedAfter = Date.UTC(2026, 10, 23, 12);
    const sids: string[] = [];
    // 45 calls to the number after the claim (three pages of 20, newest first): the 44 later ones are other runs'.
    for (let i = 0; i < 45; i++) {
      const sid = `CA${randomBytes(16).toString('hex')}`;
      sids.push(sid);
      fake.calls.set(sid, { sid, accountSid: ACCOUNT_SID, to: number(1), from: CALLER_ID, status: 'completed', createdAt: placedAfter + 1_000 * (i + 1) });
    }
    const [ours, ...others] = sids as [string, ...string[]];
    const found = await provider.findCall(route, { to: number(1), from: CALLER_ID, placedAfter, excluding: new Set(others) });
    assert.equal(found?.providerCallId, ours);
    assert.equal(found?.kind, 'completed');
    assert.deepEqual(fake.lists().map((r) => r.query.get('Page') ?? '0'), ['0', '1', '2'], 'three pages, each asked once');
    assert.equal(await provider.findCall(route, { to: number(2), from: CALLER_ID, placedAfter, excluding: new Set() }), undefined, 'no call to that number: none invented');
    assert.equal(await provider.fetchCall(route, `CA${'0'.repeat(32)}`), undefined, 'a call Twilio does not know (404) is no call');
  });
});
