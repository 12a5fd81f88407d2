// The SIP trunk provider against SIPp, a real SIP peer, with the real dispatcher: answered calls
// hung up by either side, refusals mapped to their states with the SIP status kept, CANCEL on ring
// timeout and on cancel, and digest authentication.
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import type { TestContext } from 'node:test';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, eventTypes, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { DIALTONE_SIP_ADDRESS, freeUdpPort, SIPP_ADDRESS, sippSkip, startSipp, strangerBye, type Sipp, type SippOptions } from './helpers/sipp.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

interface SipEnv extends DispatchEnv {
  f: OrgFixture;
  routeId: number;
  sipp: Sipp;
}

async function sipEnv(
  t: TestContext,
  kind: StoreKind,
  scenario: string,
  options: SippOptions & { env?: Record<string, string>; credentials?: Record<string, string> } = {},
): Promise<SipEnv> {
  const sipp = await startSipp(t, scenario, options);
  const sipPort = await freeUdpPort(DIALTONE_SIP_ADDRESS);
  const env = await buildWithDispatcher(t, kind, {
    env: {
      SIP_BIND_ADDRESS: DIALTONE_SIP_ADDRESS,
      SIP_PUBLIC_ADDRESS: DIALTONE_SIP_ADDRESS,
      SIP_PORT: String(sipPort),
      RING_TIMEOUT_MS: '8000',
      MAX_CALL_DURATION_MS: '20000',
      REAPER_GRACE_MS: '5000',
      ...options.env,
    },
  });
  const f = await createOrgFixture(env.deps);
  const route = await createTelephonyConfiguration(
    env.deps.store,
    env.deps.cipher,
    {
      orgId: f.orgId,
      name: 'Trunk',
      provider: 'sip',
      callerIds: ['+12025550100'],
      settings: { host: SIPP_ADDRESS, port: sipp.port, transport: 'udp', media_address: '127.0.0.1', media_port: 40000 },
      ...(options.credentials ? { credentials: options.credentials } : {}),
    },
    Date.now(),
  );
  return { ...env, f, routeId: route.id, sipp };
}

async function call(env: SipEnv): Promise<number> {
  const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: env.routeId }, { key: env.f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return response.json().workflow_run_id as number;
}

async function cancel(env: SipEnv, runId: number): Promise<void> {
  const response = await env.app.inject({ method: 'POST', url: `/api/v1/public/workflow-runs/${runId}/cancel`, headers: { 'x-api-key': env.f.apiKey } });
  assert.equal(response.statusCode, 200, response.body);
}

/** Places a call, waits for the far end to answer, cancels the run: the call is hung up (BYE). */
async function answerThenCancel(env: SipEnv): Promise<void> {
  const runId = await call(env);
  await waitForRun(env, runId, (r) => r.state === 'in_progress', 10_000);
  await cancel(env, runId);
  const run = await waitForRun(env, runId, ended, 10_000);
  assert.equal(run.state, 'completed');
  assert.equal(run.outcome_reason, 'canceled_by_request');
}

async function sippPassed(env: SipEnv): Promise<void> {
  assert.equal(await env.sipp.exited, 0, `SIPp's scenario ran to its end:\n${env.sipp.output()}`);
}

const skip = sippSkip();
for (const store of await storeCases()) {
  // The provider does not touch the store itself: PostgreSQL runs the first case, SQLite all of them.
  const postgresSubset = store.kind === 'postgres';
  describe(`SIP trunk provider against SIPp (${store.kind})`, { skip: store.skip || skip }, () => {
    it('follows a call the far end answers and hangs up: ringing, in progress, completed on its BYE; the INVITE carries the run id and the media address', async (t) => {
      const env = await sipEnv(t, store.kind, 'answer-remote-bye.xml');
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, 10_000);
      assert.equal(run.state, 'completed', JSON.stringify(run));
      assert.equal(run.outcome_reason, 'hangup');
      assert.equal(run.raw_provider_status, 'BYE');
      assert.match(String(run.provider_call_id), /@127\.0\.0\.1$/);
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress', 'completed']);
      await sippPassed(env);
      assert.match(env.sipp.output(), new RegExp(`INVITE X-Dialtone-Run-Id: ${runId} c=IN IP4 127\\.0\\.0\\.1`));
    });

    if (postgresSubset) return;

    it('hangs up an answered call with BYE when the run is canceled', async (t) => {
      const env = await sipEnv(t, store.kind, 'answer-local-bye.xml');
      await answerThenCancel(env);
      await sippPassed(env);
    });

    it('sends the ACK and the BYE through the route set of a record-routing proxy, to the callee\'s Contact as Request-URI', async (t) => {
      const env = await sipEnv(t, store.kind, 'record-route.xml');
      await answerThenCancel(env);
      // SIPp saw the ACK and the BYE (sent to an address where nothing listens, they reach it only
      // through the route set) and checked their Request-URI and Route header.
      await sippPassed(env);
      assert.match(env.sipp.output(), /^ACK ACK sip:callee@127\.0\.0\.3:9 <sip:127\.0\.0\.2:\d+;lr;ftag=proxied>$/m);
      assert.match(env.sipp.output(), /^BYE BYE sip:callee@127\.0\.0\.3:9 <sip:127\.0\.0\.2:\d+;lr;ftag=proxied>$/m);
    });

    it('routes the ACK and the BYE through a strict router: its URI as Request-URI, the callee\'s Contact as the last Route', async (t) => {
      const env = await sipEnv(t, store.kind, 'strict-route.xml');
      await answerThenCancel(env);
      // Sent to the Contact (where nothing listens) they would never reach SIPp: they went to the strict router.
      await sippPassed(env);
      assert.match(env.sipp.output(), /^ACK ACK sip:127\.0\.0\.2:\d+;ftag=strict SIP\/2\.0 <sip:callee@127\.0\.0\.3:9;transport=UDP>$/m);
      assert.match(env.sipp.output(), /^BYE BYE sip:127\.0\.0\.2:\d+;ftag=strict SIP\/2\.0 <sip:callee@127\.0\.0\.3:9;transport=UDP>$/m);
    });

    for (const [status, state] of [
      ['486 Busy Here', 'busy'],
      ['600 Busy Everywhere', 'busy'],
      ['480 Temporarily Unavailable', 'no_answer'],
      ['603 Decline', 'rejected'],
      ['404 Not Found', 'failed'],
      ['503 Service Unavailable', 'failed'],
    ] as const) {
      it(`ends the run ${state} on "${status}", keeping the SIP status`, async (t) => {
        const env = await sipEnv(t, store.kind, 'reject.template.xml', { replace: { REJECT_STATUS: status } });
        const runId = await call(env);
        const run = await waitForRun(env, runId, ended, 10_000);
        assert.equal(run.state, state, JSON.stringify(run));
        assert.equal(run.raw_provider_status, status);
        assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', state]);
        await sippPassed(env);
      });
    }

    it('sends CANCEL when the ring timeout passes, and the run ends no_answer', async (t) => {
      const env = await sipEnv(t, store.kind, 'ring-no-answer.xml', { env: { RING_TIMEOUT_MS: '600' } });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, 10_000);
      assert.equal(run.state, 'no_answer');
      assert.equal(run.outcome_reason, 'ring_timeout');
      await sippPassed(env);
    });

    it('sends CANCEL when a ringing run is canceled, and the run ends canceled', async (t) => {
      const env = await sipEnv(t, store.kind, 'ring-no-answer.xml');
      const runId = await call(env);
      await waitForRun(env, runId, (r) => r.state === 'ringing', 10_000);
      await cancel(env, runId);
      const run = await waitForRun(env, runId, ended, 10_000);
      assert.equal(run.state, 'canceled');
      await sippPassed(env);
    });

    it('answers a 401 challenge with digest credentials once, and the authenticated call goes through', async (t) => {
      const env = await sipEnv(t, store.kind, 'digest-auth.xml', { credentials: { username: 'alice', password: 's3cret' } });
      const runId = await call(env);
      await waitForRun(env, runId, (r) => r.state === 'in_progress', 10_000);
      await cancel(env, runId);
      assert.equal((await waitForRun(env, runId, ended, 10_000)).state, 'completed');
      await sippPassed(env);
    });

    it('ends the run failed with the trunk\'s 403 when the digest credentials are wrong, and does not retry again', async (t) => {
      const env = await sipEnv(t, store.kind, 'digest-auth.xml', { credentials: { username: 'alice', password: 'wrong' } });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, 10_000);
      assert.equal(run.state, 'failed');
      assert.equal(run.raw_provider_status, '403 Forbidden');
      assert.notEqual(await env.sipp.exited, 0, 'the trunk saw a wrong digest');
    });

    it('answers an in-dialog request naming no call of its own with 481, and the live call goes on', async (t) => {
      const env = await sipEnv(t, store.kind, 'answer-local-bye.xml');
      const runId = await call(env);
      await waitForRun(env, runId, (r) => r.state === 'in_progress', 10_000);
      const stranger = createSocket('udp4');
      t.after(() => stranger.close());
      await new Promise<void>((resolve) => stranger.bind(0, '127.0.0.3', resolve));
      const answer = new Promise<string>((resolve) => stranger.once('message', (message) => resolve(message.toString())));
      const bye = (branch: string, callId?: string) =>
        strangerBye({ transport: 'udp', dialtonePort: env.deps.config.SIP_PORT, strangerPort: stranger.address().port, branch, ...(callId !== undefined ? { callId } : {}) });
      stranger.send(bye('z9hG4bKforged1'), env.deps.config.SIP_PORT, DIALTONE_SIP_ADDRESS);
      assert.match(await answer, /^SIP\/2\.0 481 /);
      // The right Call-ID without the dialog's tags is no better.
      const callId = (await waitForRun(env, runId, () => true)).provider_call_id ?? '';
      const second = new Promise<string>((resolve) => stranger.once('message', (message) => resolve(message.toString())));
      stranger.send(bye('z9hG4bKforged2', callId), env.deps.config.SIP_PORT, DIALTONE_SIP_ADDRESS);
      assert.match(await second, /^SIP\/2\.0 481 /);
      assert.equal((await waitForRun(env, runId, () => true)).state, 'in_progress', 'a forged BYE ends nothing');
      await cancel(env, runId);
      assert.equal((await waitForRun(env, runId, ended, 10_000)).state, 'completed');
      await sippPassed(env);
    });

    it('fails the dial, not the process, when the SIP port is already taken', async (t) => {
      const squatter = createSocket('udp4');
      t.after(() => squatter.close());
      await new Promise<void>((resolve) => squatter.bind(0, DIALTONE_SIP_ADDRESS, resolve));
      const env = await sipEnv(t, store.kind, 'answer-local-bye.xml', { env: { SIP_PORT: String(squatter.address().port) } });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, 10_000);
      assert.equal(run.state, 'failed');
      assert.equal(run.outcome_reason, 'dial_refused');
      assert.equal(run.raw_provider_status, 'sip_stack_unavailable');
    });

    it('refuses at request time a SIP route without a trunk host, and a SIP URI through a non-SIP route', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      await assert.rejects(
        createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: f.orgId, name: 'No host', provider: 'sip', settings: { port: 5060 } }, Date.now()),
        (error: { code?: string; errors?: { pointer: string }[] }) => error.code === 'validation_failed' && error.errors?.[0]?.pointer === '/settings/host',
      );
      const sipUri = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: 'sip:alice@example.com' }, { key: f.apiKey });
      assertProblem(sipUri, 422, 'invalid_phone_number');
    });
  });
}
