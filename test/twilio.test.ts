// The Twilio provider against a local server speaking Twilio's REST wire format, with status
// callbacks signed by Twilio's algorithm: every path from dial to the end of the call, the answer
// TwiML, the agent runtime hand-off, and refusals that change nothing.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import twilio from 'twilio';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { getJson, postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, eventTypes, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, definition, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { scaledTimeout } from './helpers/timeouts.js';
import { describe, it } from './helpers/suite.js';
import { ACCOUNT_SID, AUTH_TOKEN, PUBLIC_BASE_URL, sendCallback, startFakeTwilio, type FakeTwilio } from './helpers/twilio-server.js';

interface TwilioEnv extends DispatchEnv {
  fake: FakeTwilio;
  f: OrgFixture;
  routeId: number;
}

async function twilioEnv(t: TestContext, kind: StoreKind, env: Record<string, string> = {}, credentials: Record<string, string> = { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN }): Promise<TwilioEnv> {
  const fake = await startFakeTwilio(t);
  const built = await buildWithDispatcher(t, kind, {
    env: { TWILIO_API_BASE_URL: fake.baseUrl, PUBLIC_BASE_URL, RING_TIMEOUT_MS: '30000', MAX_CALL_DURATION_MS: '600000', ...env },
  });
  const f = await createOrgFixture(built.deps, 'Acme', definition({ greeting: 'Hello {{name | there}}, this is {{company.name}} calling.' }));
  const route = await createTelephonyConfiguration(
    built.deps.store,
    built.deps.cipher,
    { orgId: f.orgId, name: 'Twilio', provider: 'twilio', callerIds: ['+12025550100'], credentials, callsPerSecond: 10, maxConcurrentCalls: 10 },
    Date.now(),
  );
  return { ...built, fake, f, routeId: route.id };
}

const statusPath = (runId: number) => `/api/v1/providers/twilio/runs/${runId}/status`;
const answerPath = (runId: number) => `/api/v1/providers/twilio/runs/${runId}/answer`;

/** Starts a call through the API and waits until Twilio has accepted it. */
async function placeCall(env: TwilioEnv, initialContext: Record<string, unknown> = { name: 'Ada', company: { name: 'Acme' } }) {
  const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: env.routeId, initial_context: initialContext }, { key: env.f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  const runId = response.json().workflow_run_id as number;
  const run = await waitForRun(env, runId, (r) => r.provider_call_id !== null || ended(r));
  assert.ok(run.provider_call_id, `the call was placed: ${JSON.stringify(run)}`);
  return { runId, callSid: run.provider_call_id };
}

async function status(env: TwilioEnv, runId: number, callSid: string, callStatus: string, extra: Record<string, string> = {}) {
  const response = await sendCallback(env.app, statusPath(runId), { CallSid: callSid, CallStatus: callStatus, ...extra });
  assert.equal(response.statusCode, 204, response.body);
}

for (const store of await storeCases()) {
  describe(`Twilio provider (${store.kind})`, { skip: store.skip }, () => {
    it('creates the call with To, From, the answer and status callback URLs, the four status events, the ring timeout and the time limit, as the account', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const { runId, callSid } = await placeCall(env);
      const [create] = env.fake.creates();
      assert.ok(create);
      assert.equal(create.path, `/2010-04-01/Accounts/${ACCOUNT_SID}/Calls.json`);
      assert.deepEqual(create.auth, [ACCOUNT_SID, AUTH_TOKEN]);
      assert.match(String(create.contentType), /^application\/x-www-form-urlencoded/);
      assert.equal(create.form.get('To'), '+12025550123');
      assert.equal(create.form.get('From'), '+12025550100');
      // Twilio's connection overrides ride in the fragment: it retries a failed callback 5 times, on any failure.
      assert.equal(create.form.get('Url'), `${PUBLIC_BASE_URL}${answerPath(runId)}#rc=5&rp=all`);
      assert.equal(create.form.get('StatusCallback'), `${PUBLIC_BASE_URL}${statusPath(runId)}#rc=5&rp=all`);
      assert.equal(create.form.get('StatusCallbackMethod'), 'POST');
      assert.deepEqual(create.form.getAll('StatusCallbackEvent'), ['initiated', 'ringing', 'answered', 'completed']);
      assert.equal(create.form.get('Timeout'), '30');
      assert.equal(create.form.get('TimeLimit'), '600');
      assert.match(callSid, /^CA[0-9a-f]{32}$/);
    });

    it('follows signed callbacks initiated → ringing → in-progress → completed, keeping Twilio\'s status words', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const { runId, callSid } = await placeCall(env);
      await status(env, runId, callSid, 'initiated');
      assert.equal((await waitForRun(env, runId, () => true)).state, 'dialing', 'initiated moves nothing');
      await status(env, runId, callSid, 'ringing');
      assert.equal((await waitForRun(env, runId, () => true)).state, 'ringing');
      await status(env, runId, callSid, 'in-progress');
      assert.equal((await waitForRun(env, runId, () => true)).state, 'in_progress');
      await status(env, runId, callSid, 'completed', { CallDuration: '42' });
      const run = await waitForRun(env, runId, ended);
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'hangup');
      assert.equal(run.raw_provider_status, 'completed');
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress', 'completed']);
      // The webhook hands the event to this node's dispatcher, which lets go of the call.
      const deadline = Date.now() + 10_000;
      while (env.dispatcher.liveCalls > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(env.dispatcher.liveCalls, 0, 'the node that dialed let go of the call');
    });

    for (const [callStatus, state, extra] of [
      ['busy', 'busy', { SipResponseCode: '486' }],
      ['no-answer', 'no_answer', {}],
      ['failed', 'failed', { SipResponseCode: '404' }],
      ['canceled', 'canceled', {}],
    ] as const) {
      it(`ends the run ${state} on CallStatus=${callStatus}, keeping the raw status`, async (t) => {
        const env = await twilioEnv(t, store.kind);
        const { runId, callSid } = await placeCall(env);
        await status(env, runId, callSid, 'ringing');
        await status(env, runId, callSid, callStatus, extra);
        const run = await waitForRun(env, runId, ended);
        assert.equal(run.state, state);
        assert.equal(run.raw_provider_status, 'SipResponseCode' in extra ? `${callStatus} (SIP ${extra.SipResponseCode})` : callStatus);
      });
    }

    it('refuses unsigned, wrongly signed and misdirected callbacks with 403 and changes nothing', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const { runId, callSid } = await placeCall(env);
      const attempts = [
        await sendCallback(env.app, statusPath(runId), { CallSid: callSid, CallStatus: 'completed' }, { signature: 'bm90IGEgc2lnbmF0dXJl' }),
        await sendCallback(env.app, statusPath(runId), { CallSid: callSid, CallStatus: 'completed' }, { authToken: 'another-accounts-token' }),
        await env.app.inject({ method: 'POST', url: statusPath(runId), headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: `CallSid=${callSid}&CallStatus=completed` }),
        await sendCallback(env.app, statusPath(runId + 1000), { CallSid: callSid, CallStatus: 'completed' }),
      ];
      for (const response of attempts) assertProblem(response, 403, 'invalid_signature');
      // A simulator run cannot be moved by a Twilio callback either.
      const sim = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: '+12025550123' }, { key: env.f.apiKey });
      assertProblem(await sendCallback(env.app, statusPath(sim.json().workflow_run_id), { CallSid: callSid, CallStatus: 'completed' }), 403, 'invalid_signature');
      const run = await waitForRun(env, runId, () => true);
      assert.equal(run.state, 'dialing');
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing']);
    });

    it('applies each status callback once on a node that also dispatches: the node holding the call only follows it', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const { runId, callSid } = await placeCall(env);
      const attempts: string[] = [];
      const transition = env.deps.lifecycle.transition.bind(env.deps.lifecycle);
      env.deps.lifecycle.transition = (id, to, details) => {
        if (id === runId) attempts.push(to);
        return transition(id, to, details);
      };
      assert.equal(env.dispatcher.liveCalls, 1, 'this node holds the call it placed');
      await status(env, runId, callSid, 'ringing');
      await status(env, runId, callSid, 'in-progress');
      await status(env, runId, callSid, 'completed');
      // The holder handles the events in order after the callbacks: once it let go of the call, it has seen all three.
      const deadline = Date.now() + 5_000;
      while (env.dispatcher.liveCalls > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(env.dispatcher.liveCalls, 0, 'the holder followed the callbacks to the end of the call');
      assert.deepEqual(attempts, ['ringing', 'in_progress', 'completed'], 'one transition attempt per callback');
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress', 'completed']);
    });

    it('verifies a callback signed over the URL with or without its connection-overrides fragment, and refuses any other fragment', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const { runId, callSid } = await placeCall(env);
      const url = `${PUBLIC_BASE_URL}${statusPath(runId)}`;
      const form = (callStatus: string) => ({ AccountSid: ACCOUNT_SID, ApiVersion: '2010-04-01', Direction: 'outbound-api', CallSid: callSid, CallStatus: callStatus });
      const signed = (signedUrl: string, callStatus: string) => sendCallback(env.app, statusPath(runId), { CallSid: callSid, CallStatus: callStatus }, { signature: twilio.getExpectedTwilioSignature(AUTH_TOKEN, signedUrl, form(callStatus)) });
      assertProblem(await signed(`${url}#rc=3&rp=all`, 'ringing'), 403, 'invalid_signature');
      assert.equal((await signed(`${url}#rc=5&rp=all`, 'ringing')).statusCode, 204);
      assert.equal((await signed(url, 'in-progress')).statusCode, 204);
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress']);
    });

    it('takes duplicate and out-of-order callbacks without moving a run backwards', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const { runId, callSid } = await placeCall(env);
      for (const callStatus of ['in-progress', 'ringing', 'in-progress', 'initiated', 'completed', 'in-progress', 'completed', 'ringing']) {
        await status(env, runId, callSid, callStatus);
      }
      const run = await waitForRun(env, runId, ended);
      assert.equal(run.state, 'completed');
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'in_progress', 'completed']);
    });

    it('ends the run failed with Twilio\'s code and message when the REST API refuses the call (21211)', async (t) => {
      const env = await twilioEnv(t, store.kind);
      env.fake.failNextCreate({ status: 400, code: 21211, message: "The 'To' number +12025550123 is not a valid phone number." });
      const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: env.routeId }, { key: env.f.apiKey });
      const run = await waitForRun(env, response.json().workflow_run_id, ended);
      assert.equal(run.state, 'failed');
      assert.equal(run.outcome_reason, 'dial_refused');
      assert.equal(run.raw_provider_status, "21211 The 'To' number +12025550123 is not a valid phone number.");
      assert.equal(run.provider_call_id, null);
    });

    for (const [status, contentType, body, what, kept] of [
      [502, 'text/html', '<html>\n<body>502 Bad Gateway</body>\n</html>', 'an HTML page', '<html> <body>502 Bad Gateway</body> </html>'],
      [422, 'application/json', '{"error":"unprocessable"}', 'JSON not in Twilio\'s error shape', '{"error":"unprocessable"}'],
      [503, 'text/plain', `upstream ${'x'.repeat(500)}`, 'a long body', `upstream ${'x'.repeat(191)}…`],
    ] as const) {
      it(`ends the run failed with HTTP ${status} and an excerpt of the body, not "undefined", when the API answers ${what} instead of a Twilio error`, async (t) => {
        const env = await twilioEnv(t, store.kind);
        env.fake.answerNextCreate(status, contentType, body);
        const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: env.routeId }, { key: env.f.apiKey });
        const runId = response.json().workflow_run_id as number;
        const run = await waitForRun(env, runId, ended);
        assert.equal(run.state, 'failed');
        assert.equal(run.outcome_reason, 'dial_refused');
        assert.equal(run.raw_provider_status, `HTTP ${status} ${kept}`);
        const events = (await getJson(env.app, `/api/v1/public/workflow-runs/${runId}/events`, env.f.apiKey)).json().data as { type: string; data: { detail?: string } }[];
        const detail = events.find((e) => e.type === 'failed')?.data.detail ?? '';
        assert.equal(detail, `The Twilio API answered HTTP ${status} without a Twilio error: ${kept}; the call was not placed.`);
      });
    }

    it('ends the run failed with 20003 when Twilio refuses the credentials', async (t) => {
      const env = await twilioEnv(t, store.kind, {}, { account_sid: ACCOUNT_SID, auth_token: 'a-wrong-token' });
      const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: env.routeId }, { key: env.f.apiKey });
      const run = await waitForRun(env, response.json().workflow_run_id, ended);
      assert.equal(run.state, 'failed');
      assert.equal(run.raw_provider_status, '20003 Authenticate');
    });

    it('cancels a ringing call and hangs up an answered one through the REST API', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const ringing = await placeCall(env);
      await status(env, ringing.runId, ringing.callSid, 'ringing');
      const answered = await placeCall(env);
      await status(env, answered.runId, answered.callSid, 'in-progress');
      for (const call of [ringing, answered]) {
        const cancel = await env.app.inject({ method: 'POST', url: `/api/v1/public/workflow-runs/${call.runId}/cancel`, headers: { 'x-api-key': env.f.apiKey } });
        assert.equal(cancel.statusCode, 200, cancel.body);
      }
      assert.equal((await waitForRun(env, ringing.runId, ended)).state, 'canceled');
      const hungUp = await waitForRun(env, answered.runId, ended);
      assert.equal(hungUp.state, 'completed');
      assert.equal(hungUp.outcome_reason, 'canceled_by_request');
      // A run ends when its end is recorded; the hang-up's REST request may still be on its way.
      const deadline = Date.now() + scaledTimeout(5_000);
      while (env.fake.updates().length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      const updates = env.fake.updates();
      assert.deepEqual(
        updates.map((u) => [u.path, u.form.get('Status')]).sort(),
        [ringing.callSid, answered.callSid].map((sid) => [`/2010-04-01/Accounts/${ACCOUNT_SID}/Calls/${sid}.json`, 'completed']).sort(),
      );
      // Twilio's own callbacks for those ends arrive later and change nothing.
      await status(env, ringing.runId, ringing.callSid, 'canceled');
      await status(env, answered.runId, answered.callSid, 'completed');
      assert.equal((await waitForRun(env, ringing.runId, () => true)).state, 'canceled');
    });

    it('answers with TwiML that says the greeting rendered from the run\'s context, then hangs up, when no agent runtime is set', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const { runId, callSid } = await placeCall(env, { name: 'Ada & <Bob>', company: { name: 'Acme' } });
      const response = await sendCallback(env.app, answerPath(runId), { CallSid: callSid, CallStatus: 'in-progress' });
      assert.equal(response.statusCode, 200, response.body);
      assert.match(String(response.headers['content-type']), /^text\/xml/);
      assert.equal(
        response.body,
        '<?xml version="1.0" encoding="UTF-8"?><Response><Say>Hello Ada &amp; &lt;Bob&gt;, this is Acme calling.</Say><Hangup/></Response>',
      );
      assertProblem(await sendCallback(env.app, answerPath(runId), { CallSid: callSid }, { signature: 'bad' }), 403, 'invalid_signature');
    });

    it('connects the answered call to AGENT_RUNTIME_URL with the run id and a token that reads the pinned definition and context', async (t) => {
      const env = await twilioEnv(t, store.kind, { AGENT_RUNTIME_URL: 'wss://runtime.example.test/media' });
      const { runId, callSid } = await placeCall(env);
      const response = await sendCallback(env.app, answerPath(runId), { CallSid: callSid, CallStatus: 'in-progress' });
      const match = /^<\?xml version="1.0" encoding="UTF-8"\?><Response><Connect><Stream url="wss:\/\/runtime\.example\.test\/media"><Parameter name="run_id" value="(\d+)"\/><Parameter name="token" value="([^"]+)"\/><\/Stream><\/Connect><\/Response>$/.exec(response.body);
      assert.ok(match, response.body);
      assert.equal(Number(match[1]), runId);
      const token = match[2] ?? '';

      const read = await env.app.inject({ method: 'GET', url: `/api/v1/runtime/runs/${runId}`, headers: { authorization: `Bearer ${token}` } });
      assert.equal(read.statusCode, 200, read.body);
      const body = read.json();
      assert.equal(body.run_id, runId);
      assert.equal(body.workflow_uuid, env.f.workflowUuid);
      assert.equal(body.definition_version, 1);
      assert.equal(body.definition.nodes.find((n: { type: string }) => n.type === 'start').data.greeting, 'Hello {{name | there}}, this is {{company.name}} calling.');
      assert.deepEqual(body.context, { name: 'Ada', company: { name: 'Acme' } });

      const other = await placeCall(env);
      for (const [url, authorization] of [
        [`/api/v1/runtime/runs/${other.runId}`, `Bearer ${token}`],
        [`/api/v1/runtime/runs/${runId}`, `Bearer ${token.slice(0, -2)}xx`],
        [`/api/v1/runtime/runs/${runId}`, ''],
        [`/api/v1/runtime/runs/${runId}`, `Basic ${token}`],
      ] as const) {
        const refused = await env.app.inject({ method: 'GET', url, headers: authorization ? { authorization } : {} });
        assertProblem(refused, 401, 'invalid_run_token');
      }
    });

    it('refuses at request time, with 422 telephony_not_ready, a Twilio route without credentials, without a caller ID, or without PUBLIC_BASE_URL', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const bare = await createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: env.f.orgId, name: 'No credentials', provider: 'twilio', callerIds: ['+12025550100'] }, Date.now());
      const silent = await createTelephonyConfiguration(
        env.deps.store,
        env.deps.cipher,
        { orgId: env.f.orgId, name: 'No caller ID', provider: 'twilio', credentials: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN } },
        Date.now(),
      );
      for (const [id, words] of [
        [bare.id, /credentials are not set/],
        [silent.id, /No caller ID/],
      ] as const) {
        const refused = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: id }, { key: env.f.apiKey });
        const problem = assertProblem(refused, 422, 'telephony_not_ready');
        assert.match(problem.detail, words);
      }
      const unset = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(unset.deps);
      const route = await createTelephonyConfiguration(unset.deps.store, unset.deps.cipher, { orgId: f.orgId, name: 'T', provider: 'twilio', callerIds: ['+12025550100'], credentials: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN } }, Date.now());
      const refused = await postJson(unset.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: route.id }, { key: f.apiKey });
      assert.match(assertProblem(refused, 422, 'telephony_not_ready').detail, /PUBLIC_BASE_URL/);
      assert.equal(env.fake.creates().length, 0, 'nothing was dialed');
    });

    it('refuses Twilio credentials that could not work when the configuration is created', async (t) => {
      const env = await twilioEnv(t, store.kind);
      await assert.rejects(
        createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: env.f.orgId, name: 'Bad', provider: 'twilio', credentials: { account_sid: 'nope', api_key_sid: `SK${'0'.repeat(32)}` } }, Date.now()),
        (error: { code?: string; errors?: { pointer: string }[] }) => {
          assert.equal(error.code, 'validation_failed');
          assert.deepEqual(error.errors?.map((e) => e.pointer).sort(), ['/credentials/account_sid', '/credentials/api_key_secret', '/credentials/auth_token']);
          return true;
        },
      );
    });

    it('authenticates REST calls with an API key when one is stored, and still verifies callbacks with the auth token', async (t) => {
      const keySid = `SK${'b2'.repeat(16)}`;
      const fake = await startFakeTwilio(t, { user: keySid, password: 'key-secret' });
      const built = await buildWithDispatcher(t, store.kind, { env: { TWILIO_API_BASE_URL: fake.baseUrl, PUBLIC_BASE_URL, RING_TIMEOUT_MS: '30000', MAX_CALL_DURATION_MS: '600000' } });
      const f = await createOrgFixture(built.deps);
      const route = await createTelephonyConfiguration(
        built.deps.store,
        built.deps.cipher,
        { orgId: f.orgId, name: 'Key', provider: 'twilio', callerIds: ['+12025550100'], credentials: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN, api_key_sid: keySid, api_key_secret: 'key-secret' } },
        Date.now(),
      );
      const env: TwilioEnv = { ...built, fake, f, routeId: route.id };
      const { runId, callSid } = await placeCall(env);
      assert.deepEqual(fake.creates()[0]?.auth, [keySid, 'key-secret']);
      assert.equal(fake.creates()[0]?.path, `/2010-04-01/Accounts/${ACCOUNT_SID}/Calls.json`);
      await status(env, runId, callSid, 'busy');
      assert.equal((await waitForRun(env, runId, ended)).state, 'busy');
      const view = await getJson(env.app, `/api/v1/public/workflow-runs/${runId}`, f.apiKey);
      assert.equal(view.json().provider_call_id, callSid);
    });
  });
}
