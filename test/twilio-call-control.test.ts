// The agent runtime's control of a Twilio call, against the local server speaking Twilio's wire
// format (the production code path): hang-up, the <Dial> transfer and <Play digits> as Call
// updates whose parameters are those of Twilio's published description, the transfer's signed
// callbacks ending the run for answered, busy and no-answer targets (once, however often Twilio
// retries), a forged one refused, and the call returned to its answer (a new stream) after digits
// and after a transfer nobody answered.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { getRun } from '../src/runs/read-run.js';
import { issueRunToken } from '../src/runtime/run-token.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, eventTypes, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, definition, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';
import { ACCOUNT_SID, AUTH_TOKEN, PUBLIC_BASE_URL, sendCallback, startFakeTwilio, type FakeTwilio, type RecordedRequest } from './helpers/twilio-server.js';

/**
 * The Call update's request body in Twilio's published OpenAPI description (twilio/twilio-oai,
 * spec/json/twilio_api_v2010.json, `UpdateCallRequest` of POST
 * /2010-04-01/Accounts/{AccountSid}/Calls/{Sid}.json): its properties, Status's enum, and Twiml and
 * Url being mutually exclusive. Every update Dialtone sends must keep to it.
 */
const PUBLISHED_UPDATE_CALL = {
  properties: ['FallbackMethod', 'FallbackUrl', 'Method', 'Status', 'StatusCallback', 'StatusCallbackMethod', 'TimeLimit', 'Twiml', 'Url'],
  status: ['canceled', 'completed'],
};

function assertPublishedUpdate(update: RecordedRequest | undefined, callSid: string): asserts update is RecordedRequest {
  assert.ok(update, 'the call was updated');
  assert.equal(update.path, `/2010-04-01/Accounts/${ACCOUNT_SID}/Calls/${callSid}.json`);
  assert.equal(update.contentType, 'application/x-www-form-urlencoded');
  const unpublished = [...update.form.keys()].filter((name) => !PUBLISHED_UPDATE_CALL.properties.includes(name));
  assert.deepEqual(unpublished, [], 'every parameter is one of UpdateCallRequest\'s');
  const status = update.form.get('Status');
  if (status !== null) assert.ok(PUBLISHED_UPDATE_CALL.status.includes(status), `Status ${status} is in the published enum`);
  assert.ok(!(update.form.has('Twiml') && update.form.has('Url')), 'Twiml and Url are mutually exclusive');
}

const RUNTIME_URL = 'wss://runtime.example.test/media';

interface Env extends DispatchEnv {
  fake: FakeTwilio;
  f: OrgFixture;
  routeId: number;
}

async function twilioEnv(t: TestContext, kind: StoreKind): Promise<Env> {
  const fake = await startFakeTwilio(t);
  const built = await buildWithDispatcher(t, kind, {
    env: {
      TWILIO_API_BASE_URL: fake.baseUrl,
      PUBLIC_BASE_URL,
      AGENT_RUNTIME_URL: RUNTIME_URL,
      RING_TIMEOUT_MS: '30000',
      MAX_CALL_DURATION_MS: '600000',
      NODE_HEARTBEAT_TIMEOUT_MS: '3600000',
      RECONCILE_AFTER_MS: '600000',
      ENDED_ELSEWHERE_INTERVAL_MS: '20',
      TRANSFER_RING_TIMEOUT_MS: '25000',
    },
  });
  const f = await createOrgFixture(built.deps, 'Acme', definition({ greeting: 'Hello {{name}}' }));
  const route = await createTelephonyConfiguration(
    built.deps.store,
    built.deps.cipher,
    { orgId: f.orgId, name: 'Twilio', provider: 'twilio', callerIds: ['+12025550100', '+12025550111'], credentials: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN }, callsPerSecond: 10, maxConcurrentCalls: 10 },
    built.deps.clock.now(),
  );
  return { ...built, fake, f, routeId: route.id };
}

const runPath = (runId: number, callback: string) => `/api/v1/providers/twilio/runs/${runId}/${callback}`;

/** Places a call, answers it (status callback in-progress) and hands the runtime its token. */
async function answeredCall(env: Env): Promise<{ runId: number; callSid: string; token: string }> {
  const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: env.routeId, initial_context: { name: 'Ada' } }, { key: env.f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  const runId = response.json().workflow_run_id as number;
  const placed = await waitForRun(env, runId, (r) => r.provider_call_id !== null || ended(r), scaledTimeout(5000));
  const callSid = placed.provider_call_id ?? '';
  const status = await sendCallback(env.app, runPath(runId, 'status'), { CallSid: callSid, CallStatus: 'in-progress' });
  assert.equal(status.statusCode, 204, status.body);
  await waitForRun(env, runId, (r) => r.state === 'in_progress', scaledTimeout(5000));
  return { runId, callSid, token: issueRunToken(env.deps.cipher, runId, env.deps.clock.now() + 60_000) };
}

function act(env: Env, runId: number, action: string, token: string, body: unknown, headers: Record<string, string> = {}) {
  return env.app.inject({
    method: 'POST',
    url: `/api/v1/runtime/runs/${runId}/${action}`,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body),
  });
}

/** The <Dial> action callback, as Twilio sends it once the dialed leg ends. */
function dialAction(env: Env, runId: number, callSid: string, dialCallStatus: string) {
  return sendCallback(env.app, runPath(runId, 'transfer'), { CallSid: callSid, CallStatus: 'in-progress', DialCallStatus: dialCallStatus, DialCallSid: `CA${'d'.repeat(32)}` });
}

async function transferEvents(env: Env, runId: number): Promise<Record<string, unknown>[]> {
  const response = await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${runId}/events`, headers: { 'x-api-key': env.f.apiKey } });
  return (response.json().data as { type: string; data: Record<string, unknown> }[]).filter((e) => e.type === 'transfer').map((e) => e.data);
}

const ANSWER_URL = (runId: number) => `${PUBLIC_BASE_URL}${runPath(runId, 'answer')}`;
/** The transfer callback as the TwiML attribute holds it (XML-escaped). */
const TRANSFER_URL = (runId: number) => `${PUBLIC_BASE_URL}${runPath(runId, 'transfer')}#rc=5&amp;rp=all`;

for (const store of await storeCases()) {
  describe(`Twilio call control by the agent runtime (${store.kind})`, { skip: store.skip }, () => {
    it('hangs up with a Call update Twilio publishes (Status completed)', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const { runId, callSid, token } = await answeredCall(env);
      const response = await act(env, runId, 'hangup', token, { reason: 'done' });
      assert.equal(response.statusCode, 200, response.body);
      assert.equal(response.json().outcome_reason, 'agent_hangup');
      // Put down by this request, or by the holder's next look at runs ended elsewhere: either way once.
      const deadline = Date.now() + scaledTimeout(5000);
      while (env.fake.updates().length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      const [update] = env.fake.updates();
      assertPublishedUpdate(update, callSid);
      assert.equal(update.form.get('Status'), 'completed');
    });

    it('transfers with a Call update whose TwiML <Dial>s the target; the target\'s signed answered callback ends the run transferred, once, and the line is never put down', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const { runId, callSid, token } = await answeredCall(env);
      const response = await act(env, runId, 'transfer', token, { to: '+12025550177', caller_id: '+12025550111', announce: 'Please hold' });
      assert.equal(response.statusCode, 200, response.body);
      const [update] = env.fake.updates();
      assertPublishedUpdate(update, callSid);
      assert.equal(
        update.form.get('Twiml'),
        `<?xml version="1.0" encoding="UTF-8"?><Response><Say>Please hold</Say><Dial timeout="25" action="${TRANSFER_URL(runId)}" method="POST" callerId="+12025550111"><Number statusCallbackEvent="answered" statusCallback="${TRANSFER_URL(runId)}" statusCallbackMethod="POST">+12025550177</Number></Dial></Response>`,
      );
      // The target answers: Twilio reports the dialed leg in-progress, its parent the run's call; retried once.
      for (let i = 0; i < 2; i++) {
        const answered = await sendCallback(env.app, runPath(runId, 'transfer'), { CallSid: `CA${'e'.repeat(32)}`, ParentCallSid: callSid, CallStatus: 'in-progress' });
        assert.equal(answered.statusCode, 204, answered.body);
      }
      const run = await waitForRun(env, runId, ended, scaledTimeout(5000));
      assert.deepEqual([run.state, run.outcome_reason], ['completed', 'transferred']);
      // The <Dial>'s action at the end of the bridged call: this leg hangs up, nothing changes.
      const action = await dialAction(env, runId, callSid, 'completed');
      assert.equal(action.statusCode, 200, action.body);
      assert.equal(action.body, '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>');
      await sendCallback(env.app, runPath(runId, 'status'), { CallSid: callSid, CallStatus: 'completed' });
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'in_progress', 'transfer', 'completed']);
      // The node that placed the call lets it go without a hang-up (that would cut the transfer).
      const deadline = Date.now() + scaledTimeout(5000);
      while (env.dispatcher['live'].size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(env.dispatcher['live'].size, 0);
      assert.equal(env.fake.updates().length, 1, 'no update after the transfer\'s');
    });

    for (const [dialStatus, result] of [
      ['busy', 'busy'],
      ['no-answer', 'no_answer'],
      ['failed', 'failed'],
    ] as const) {
      it(`returns the call to its answer when the <Dial> action says ${dialStatus}: a transfer event ${result}, the run still in_progress, applied once`, async (t) => {
        const env = await twilioEnv(t, store.kind);
        const { runId, callSid, token } = await answeredCall(env);
        assert.equal((await act(env, runId, 'transfer', token, { to: '+12025550177' })).statusCode, 200);
        for (let i = 0; i < 2; i++) {
          const action = await dialAction(env, runId, callSid, dialStatus);
          assert.equal(action.statusCode, 200, action.body);
          assert.equal(action.body, `<?xml version="1.0" encoding="UTF-8"?><Response><Redirect method="POST">${ANSWER_URL(runId)}</Redirect></Response>`);
        }
        assert.deepEqual(
          (await transferEvents(env, runId)).map((e) => e.status),
          ['requested', result],
        );
        assert.equal((await getRun(env.deps.store, undefined, runId)).state, 'in_progress');
        // Back at the answer, the runtime gets a stream again, with a new token for the same run.
        const answer = await sendCallback(env.app, runPath(runId, 'answer'), { CallSid: callSid, CallStatus: 'in-progress' });
        assert.match(answer.body, new RegExp(`<Connect><Stream url="${RUNTIME_URL}"><Parameter name="run_id" value="${runId}"/>`));
        // The call is the agent's again: a second transfer may be asked.
        assert.equal((await act(env, runId, 'transfer', token, { to: '+12025550178' })).statusCode, 200);
      });
    }

    it('refuses a forged transfer callback with 403 and changes nothing', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const { runId, callSid, token } = await answeredCall(env);
      assert.equal((await act(env, runId, 'transfer', token, { to: '+12025550177' })).statusCode, 200);
      const params = { CallSid: callSid, CallStatus: 'in-progress', DialCallStatus: 'completed' };
      assertProblem(await sendCallback(env.app, runPath(runId, 'transfer'), params, { authToken: 'another-accounts-token' }), 403, 'invalid_signature');
      assertProblem(await sendCallback(env.app, runPath(runId, 'transfer'), params, { signature: 'bm90IGEgc2lnbmF0dXJl' }), 403, 'invalid_signature');
      const run = await getRun(env.deps.store, undefined, runId);
      assert.equal(run.state, 'in_progress');
      assert.deepEqual((await transferEvents(env, runId)).map((e) => e.status), ['requested']);
    });

    it('sends digits with a Call update whose TwiML plays them and redirects to the answer; a retry with the same Idempotency-Key updates once', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const { runId, callSid, token } = await answeredCall(env);
      const first = await act(env, runId, 'dtmf', token, { digits: '1234#' }, { 'idempotency-key': 'pin' });
      assert.equal(first.statusCode, 200, first.body);
      const retry = await act(env, runId, 'dtmf', token, { digits: '1234#' }, { 'idempotency-key': 'pin' });
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      const updates = env.fake.updates();
      assert.equal(updates.length, 1);
      assertPublishedUpdate(updates[0], callSid);
      assert.equal(updates[0].form.get('Twiml'), `<?xml version="1.0" encoding="UTF-8"?><Response><Play digits="1234#"/><Redirect method="POST">${ANSWER_URL(runId)}</Redirect></Response>`);
      assert.deepEqual((await eventTypes(env, runId)).slice(-1), ['dtmf']);
    });

    it('reports Twilio refusing the update as call_control_refused with its words, the transfer recorded refused', async (t) => {
      const env = await twilioEnv(t, store.kind);
      const { runId, token } = await answeredCall(env);
      env.fake.failNextUpdate({ status: 400, code: 21220, message: 'Unable to update record. Call is not in-progress.' });
      const problem = assertProblem(await act(env, runId, 'transfer', token, { to: '+12025550177' }), 502, 'call_control_refused');
      assert.equal(problem.provider_status, '21220 Unable to update record. Call is not in-progress.');
      assert.deepEqual((await transferEvents(env, runId)).map((e) => e.status), ['requested', 'refused']);
    });
  });
}
