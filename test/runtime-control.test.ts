// The agent runtime acts on its call through Dialtone, with the run token handed over with the
// answered call: it reports a result (checked against the definition's result_schema), appends its
// own agent.* events, hangs up, transfers the callee and sends digits (through the simulator here;
// Twilio in twilio-call-control.test.ts). Every action refuses a forged, expired or other run's
// token with the same 401, and applies an Idempotency-Key's retry once.
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { getRun } from '../src/runs/read-run.js';
import { issueRunToken } from '../src/runtime/run-token.js';
import { createWorkflow } from '../src/workflows/workflows.js';
import { postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, eventTypes, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, definition, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { Receiver, startReceiver, WEBHOOK_TEST_ENV } from './helpers/webhooks.js';
import { scaledTimeout } from './helpers/timeouts.js';
import { builtInProviders, ProviderRegistry } from '../src/telephony/registry.js';

/** Answered and never hangs up by itself (docs/simulator.md); the maximum duration is set long. */
const TALKS_ON = '+12025550107';
const ENV = { ...WEBHOOK_TEST_ENV, MAX_CALL_DURATION_MS: '60000' };

const RESULT_SCHEMA = {
  type: 'object',
  properties: { outcome: { enum: ['booked', 'declined'] }, slot: { type: 'string', format: 'date-time' } },
  required: ['outcome'],
  additionalProperties: false,
};

async function answeredCall(env: DispatchEnv, f: OrgFixture): Promise<{ runId: number; token: string }> {
  const response = await postJson(env.app, `/api/v1/public/agent/${f.agentUuid}`, { phone_number: TALKS_ON }, { key: f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  const runId = response.json().workflow_run_id as number;
  await waitForRun(env, runId, (run) => run.state === 'in_progress');
  return { runId, token: issueRunToken(env.deps.cipher, runId, env.deps.clock.now() + 60_000) };
}

/** Waits for a condition, polling; bounded by the suite's scaled timeout. */
async function waitFor(done: () => boolean | Promise<boolean>, timeoutMs = scaledTimeout(5000)): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function act(env: DispatchEnv, runId: number, action: string, token: string, body: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return env.app.inject({
    method: 'POST',
    url: `/api/v1/runtime/runs/${runId}/${action}`,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body),
  });
}

for (const store of await storeCases()) {
  describe(`Agent runtime actions (${store.kind})`, { skip: store.skip }, () => {
    it('refuses every action with the same 401 for a forged, expired or other run\'s token, before reading the body, and changes nothing', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: ENV });
      const f = await createOrgFixture(env.deps);
      const { runId, token } = await answeredCall(env, f);
      const other = await answeredCall(env, f);
      const expired = issueRunToken(env.deps.cipher, runId, env.deps.clock.now() - 1);
      const before = await eventTypes(env, runId);
      for (const action of ['result', 'events', 'hangup', 'transfer', 'dtmf']) {
        for (const bad of [other.token, expired, `${token.slice(0, -2)}xx`, 'nope']) {
          // An invalid body too: the token is checked first, so the answer says nothing of it.
          const response = await act(env, runId, action, bad, { nonsense: true });
          const problem = assertProblem(response, 401, 'invalid_run_token');
          assert.equal(problem.detail, 'Send the run token handed over with the call as "Authorization: Bearer <token>".');
        }
        assertProblem(await act(env, runId + 1000, action, token, {}), 401, 'invalid_run_token');
      }
      assert.deepEqual(await eventTypes(env, runId), before);
      assert.equal((await getRun(env.deps.store, undefined, runId)).state, 'in_progress');
    });

    it('stores a valid result with the run, replaces it on a second report, and shows it in GET, the list, run.result and run.ended, signed', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: ENV });
      const f = await createOrgFixture(env.deps, 'Acme', { ...definition(), result_schema: RESULT_SCHEMA });
      const endpoint = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: receiver.url, events: ['run.result', 'run.ended'] }, { key: f.apiKey });
      assert.equal(endpoint.statusCode, 201, endpoint.body);
      const { secret } = endpoint.json() as { secret: string };
      const { runId, token } = await answeredCall(env, f);

      const first = await act(env, runId, 'result', token, { data: { outcome: 'declined' } });
      assert.equal(first.statusCode, 200, first.body);
      assert.deepEqual(first.json().result, { outcome: 'declined' });
      const second = await act(env, runId, 'result', token, { data: { outcome: 'booked', slot: '2026-12-01T10:00:00Z' } });
      assert.equal(second.statusCode, 200, second.body);

      const read = await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${runId}`, headers: { 'x-api-key': f.apiKey } });
      assert.deepEqual(read.json().result, { outcome: 'booked', slot: '2026-12-01T10:00:00Z' });
      const list = await env.app.inject({ method: 'GET', url: '/api/v1/public/workflow-runs', headers: { 'x-api-key': f.apiKey } });
      assert.deepEqual(list.json().data.find((run: { id: number }) => run.id === runId).result, { outcome: 'booked', slot: '2026-12-01T10:00:00Z' });

      assert.equal((await act(env, runId, 'hangup', token, {})).statusCode, 200);
      const messages = await receiver.waitFor((all) => all.some((m) => m.json.type === 'run.ended'));
      assert.deepEqual(messages.map((m) => m.json.type), ['run.result', 'run.result', 'run.ended']);
      for (const m of messages) assert.deepEqual(Receiver.verify(secret, m), m.json);
      assert.deepEqual((messages[0]?.json.data.event as unknown as { data: unknown }).data, { result: { outcome: 'declined' } });
      assert.deepEqual(messages[2]?.json.data.run?.result, { outcome: 'booked', slot: '2026-12-01T10:00:00Z' });

      // Once the run has ended, the result is final.
      const late = await act(env, runId, 'result', token, { data: { outcome: 'declined' } });
      const problem = assertProblem(late, 409, 'run_already_ended');
      assert.equal(problem.state, 'completed');
      assert.deepEqual((await getRun(env.deps.store, undefined, runId)).result, { outcome: 'booked', slot: '2026-12-01T10:00:00Z' });
    });

    it('refuses a result the schema does not allow with every problem and its JSON Pointer, and one over 64 KiB, keeping nothing', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: ENV });
      const f = await createOrgFixture(env.deps, 'Acme', { ...definition(), result_schema: RESULT_SCHEMA });
      const { runId, token } = await answeredCall(env, f);
      const invalid = await act(env, runId, 'result', token, { data: { slot: 'tomorrow', extra: 1 } });
      const problem = assertProblem(invalid, 422, 'result_invalid');
      assert.deepEqual(new Set(problem.errors?.map((e) => e.pointer)), new Set(['/data/outcome', '/data/slot', '/data']));
      const huge = await act(env, runId, 'result', token, { data: { outcome: 'booked', notes: 'x'.repeat(64 * 1024) } });
      assert.equal(huge.statusCode, 413, huge.body);
      assert.equal((await getRun(env.deps.store, undefined, runId)).result, null);
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress']);
    });

    it('refuses to save a definition whose result_schema is not a valid JSON Schema, with its pointer', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: ENV, start: false });
      const f = await createOrgFixture(env.deps);
      for (const schema of [{ type: 'objekt' }, { type: 'object', properties: { a: { tpye: 'string' } } }, 'object']) {
        await assert.rejects(
          createWorkflow(env.deps.store, { orgId: f.orgId, name: 'bad', definition: { ...definition(), result_schema: schema } }, env.deps.clock.now()),
          (error: { code?: string; errors?: { pointer: string }[] }) => {
            assert.equal(error.code, 'validation_failed');
            assert.ok(error.errors?.every((e) => e.pointer.startsWith('/result_schema')), JSON.stringify(error.errors));
            return true;
          },
        );
      }
    });

    it('appends agent.* events to the event log and sends them as run.agent_event; a retry with the same Idempotency-Key appends once', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: ENV });
      const f = await createOrgFixture(env.deps);
      const endpoint = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: receiver.url, events: ['run.agent_event'] }, { key: f.apiKey });
      const { secret } = endpoint.json() as { secret: string };
      const { runId, token } = await answeredCall(env, f);
      const body = { type: 'agent.transcript_ready', data: { url: 'https://runtime.example/t/1' } };
      const first = await act(env, runId, 'events', token, body, { 'idempotency-key': 'k1' });
      assert.equal(first.statusCode, 200, first.body);
      assert.equal(first.json().seq, 5);
      const retry = await act(env, runId, 'events', token, body, { 'idempotency-key': 'k1' });
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      assert.equal(retry.body, first.body);
      assertProblem(await act(env, runId, 'events', token, { ...body, data: {} }, { 'idempotency-key': 'k1' }), 422, 'idempotency_key_reused');
      assertProblem(await act(env, runId, 'events', token, { type: 'transcript_ready' }), 422, 'validation_failed');
      assert.equal((await act(env, runId, 'events', token, { type: 'agent.big', data: { x: 'y'.repeat(17 * 1024) } })).statusCode, 413);
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress', 'agent.transcript_ready']);
      const events = await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${runId}/events`, headers: { 'x-api-key': f.apiKey } });
      assert.deepEqual(events.json().data[4].data, body.data);
      const [message] = await receiver.waitFor((all) => all.length >= 1);
      assert.equal(message?.json.type, 'run.agent_event');
      assert.deepEqual(Receiver.verify(secret, message!), message?.json);
      assert.equal(message?.json.data.event?.type, 'agent.transcript_ready');
    });

    it('hangs up the call: the run ends completed (agent_hangup, the reason in its event), the simulator plays no more, a retry replays and a new request gets 409', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: ENV });
      const f = await createOrgFixture(env.deps);
      const { runId, token } = await answeredCall(env, f);
      const response = await act(env, runId, 'hangup', token, { reason: 'caller said goodbye' }, { 'idempotency-key': 'bye' });
      assert.equal(response.statusCode, 200, response.body);
      assert.equal(response.json().state, 'completed');
      assert.equal(response.json().outcome_reason, 'agent_hangup');
      // The line is down: the node holds the call no more.
      assert.equal(env.dispatcher['live'].size, 0);
      const events = await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${runId}/events`, headers: { 'x-api-key': f.apiKey } });
      const last = events.json().data.at(-1);
      assert.deepEqual([last.type, last.data.reason, last.data.agent_reason], ['completed', 'agent_hangup', 'caller said goodbye']);
      const retry = await act(env, runId, 'hangup', token, { reason: 'caller said goodbye' }, { 'idempotency-key': 'bye' });
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      assert.equal(retry.body, response.body);
      const again = assertProblem(await act(env, runId, 'hangup', token, {}), 409, 'run_already_ended');
      assert.equal(again.state, 'completed');
    });

    it('keeps agent_hangup when the provider reports the call completed afterwards', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: ENV });
      const f = await createOrgFixture(env.deps);
      const { runId, token } = await answeredCall(env, f);
      assert.equal((await act(env, runId, 'hangup', token, {})).statusCode, 200);
      const run = await getRun(env.deps.store, undefined, runId);
      env.deps.signals.providerEvent({ runId, providerCallId: run.provider_call_id ?? '', kind: 'completed', rawStatus: 'completed', at: env.deps.clock.now() });
      const after = await waitForRun(env, runId, ended);
      assert.equal(after.outcome_reason, 'agent_hangup');
      assert.deepEqual((await eventTypes(env, runId)).slice(-1), ['completed']);
    });

    it('transfers the callee to a target who answers: the run records the request, then ends completed (transferred); the simulator plays no more and the node lets the call go', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: ENV });
      const f = await createOrgFixture(env.deps);
      const { runId, token } = await answeredCall(env, f);
      const response = await act(env, runId, 'transfer', token, { to: '+12025550188', announce: 'Connecting you now' }, { 'idempotency-key': 'xfer' });
      assert.equal(response.statusCode, 200, response.body);
      assert.equal(response.json().state, 'in_progress');
      const run = await waitForRun(env, runId, ended, scaledTimeout(5000));
      assert.deepEqual([run.state, run.outcome_reason], ['completed', 'transferred']);
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress', 'transfer', 'completed']);
      const events = (await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${runId}/events`, headers: { 'x-api-key': f.apiKey } })).json().data;
      assert.deepEqual(events[4].data, { status: 'requested', to: '+12025550188', caller_id: null, announce: 'Connecting you now' });
      assert.deepEqual([events[5].data.reason, events[5].data.transfer_result], ['transferred', 'answered']);
      assert.deepEqual(env.simulator.callControls, [{ runId, transferTo: '+12025550188' }]);
      // The call is the target's: never put down, no longer held.
      await waitFor(() => env.dispatcher['live'].size === 0);
      const retry = await act(env, runId, 'transfer', token, { to: '+12025550188', announce: 'Connecting you now' }, { 'idempotency-key': 'xfer' });
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      assert.equal(retry.body, response.body);
      assert.equal(env.simulator.callControls.length, 1, 'the retry did not transfer again');
      assertProblem(await act(env, runId, 'transfer', token, { to: '+12025550188' }), 409, 'run_already_ended');
    });

    it('keeps the call with the agent when the target is busy or does not answer, records each outcome once, and refuses a second transfer while one is under way', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: { ...ENV, TRANSFER_RING_TIMEOUT_MS: '5000', SIMULATOR_SECOND_MS: '40' } });
      const f = await createOrgFixture(env.deps);
      const { runId, token } = await answeredCall(env, f);
      const readEvents = async () => (await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${runId}/events`, headers: { 'x-api-key': f.apiKey } })).json().data as { type: string; data: Record<string, unknown> }[];
      assert.equal((await act(env, runId, 'transfer', token, { to: '+12025550101' })).statusCode, 200);
      await waitFor(async () => (await readEvents()).filter((e) => e.type === 'transfer').length === 2);
      // No answer: the target rings 5 simulated seconds (the transfer's timeout); meanwhile a second transfer waits its turn.
      assert.equal((await act(env, runId, 'transfer', token, { to: '+12025550102' })).statusCode, 200);
      assertProblem(await act(env, runId, 'transfer', token, { to: '+12025550188' }), 409, 'transfer_in_progress');
      await waitFor(async () => (await readEvents()).filter((e) => e.type === 'transfer').length === 4);
      const transfers = (await readEvents()).filter((e) => e.type === 'transfer').map((e) => [e.data.status, e.data.provider_status ?? e.data.to]);
      assert.deepEqual(transfers, [['requested', '+12025550101'], ['busy', '486 Busy Here'], ['requested', '+12025550102'], ['no_answer', 'transfer timeout']]);
      const run = await getRun(env.deps.store, undefined, runId);
      assert.equal(run.state, 'in_progress', 'the call stays with the agent');
      assert.equal(env.dispatcher['live'].size, 1);
      // A duplicate of an outcome already applied changes nothing.
      env.deps.signals.transferOutcome({ runId, providerCallId: run.provider_call_id ?? '', result: 'answered', raw: 'late', at: env.deps.clock.now() });
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal((await act(env, runId, 'hangup', token, {})).statusCode, 200);
      assert.equal((await getRun(env.deps.store, undefined, runId)).outcome_reason, 'agent_hangup');
    });

    it('refuses a transfer the calling policy refuses (suppressed target), a SIP URI the simulator cannot dial, a caller ID not the route\'s, and a call not answered, recording nothing', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: ENV });
      const f = await createOrgFixture(env.deps);
      const suppressed = await env.app.inject({ method: 'PUT', url: `/api/v1/public/suppressions/${encodeURIComponent('+12025550166')}`, headers: { 'x-api-key': f.apiKey } });
      assert.ok(suppressed.statusCode < 300, suppressed.body);
      const { runId, token } = await answeredCall(env, f);
      const refused = assertProblem(await act(env, runId, 'transfer', token, { to: '+12025550166' }), 422, 'transfer_target_refused');
      assert.equal(refused.reason, 'number_suppressed');
      assertProblem(await act(env, runId, 'transfer', token, { to: 'sip:desk@pbx.example.com' }), 422, 'validation_failed');
      assertProblem(await act(env, runId, 'transfer', token, { to: '12345' }), 422, 'validation_failed');
      assertProblem(await act(env, runId, 'transfer', token, { to: '+12025550188', caller_id: '+12025550199' }), 422, 'validation_failed');
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress']);
      assert.deepEqual(env.simulator.callControls, []);
      // A call still ringing is not the runtime's to transfer.
      const ringing = await postJson(env.app, `/api/v1/public/agent/${f.agentUuid}`, { phone_number: '+12025550102' }, { key: f.apiKey });
      const ringingId = ringing.json().workflow_run_id as number;
      await waitForRun(env, ringingId, (run) => run.state === 'ringing', scaledTimeout(5000));
      const ringingToken = issueRunToken(env.deps.cipher, ringingId, env.deps.clock.now() + 60_000);
      assertProblem(await act(env, ringingId, 'transfer', ringingToken, { to: '+12025550188' }), 409, 'run_not_answered');
      assertProblem(await act(env, ringingId, 'dtmf', ringingToken, { digits: '1' }), 409, 'run_not_answered');
    });

    it('reports a transfer the carrier refuses (502 with its words), records it as refused, and leaves the call with the agent', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: ENV });
      const f = await createOrgFixture(env.deps);
      const { runId, token } = await answeredCall(env, f);
      const problem = assertProblem(await act(env, runId, 'transfer', token, { to: '+12025550108' }), 502, 'call_control_refused');
      assert.equal(problem.provider_status, '501 Not Implemented');
      const events = (await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${runId}/events`, headers: { 'x-api-key': f.apiKey } })).json().data;
      assert.deepEqual(events.slice(4).map((e: { data: { status: string } }) => e.data.status), ['requested', 'refused']);
      assert.equal((await getRun(env.deps.store, undefined, runId)).state, 'in_progress');
    });

    it('sends digits: recorded as a dtmf event and by the simulator, a retry with the same Idempotency-Key sends once, bad digits refused, digits the carrier refuses reported', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: ENV });
      const f = await createOrgFixture(env.deps);
      const { runId, token } = await answeredCall(env, f);
      const first = await act(env, runId, 'dtmf', token, { digits: '12w#' }, { 'idempotency-key': 'd1' });
      assert.equal(first.statusCode, 200, first.body);
      assert.deepEqual([first.json().seq, first.json().digits], [5, '12w#']);
      const retry = await act(env, runId, 'dtmf', token, { digits: '12w#' }, { 'idempotency-key': 'd1' });
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      assert.equal(retry.body, first.body);
      for (const digits of ['', '12x', '1'.repeat(65)]) assertProblem(await act(env, runId, 'dtmf', token, { digits }), 422, 'validation_failed');
      // The simulated carrier carries no A-D: reported with its words, nothing recorded.
      assert.equal(assertProblem(await act(env, runId, 'dtmf', token, { digits: 'A1' }), 502, 'call_control_refused').provider_status, '488 Not Acceptable Here');
      assert.deepEqual(env.simulator.callControls, [{ runId, digits: '12w#' }]);
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress', 'dtmf']);
      const events = (await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${runId}/events`, headers: { 'x-api-key': f.apiKey } })).json().data;
      assert.deepEqual(events[4].data, { digits: '12w#' });
    });

    it('hands a simulated call\'s run token over in its in_progress event, and the token opens the runtime API for that run', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: ENV });
      const f = await createOrgFixture(env.deps);
      const { runId } = await answeredCall(env, f);
      const events = (await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${runId}/events`, headers: { 'x-api-key': f.apiKey } })).json().data;
      const token = events.find((e: { type: string }) => e.type === 'in_progress').data.runtime_token as string;
      assert.ok(token);
      const read = await env.app.inject({ method: 'GET', url: `/api/v1/runtime/runs/${runId}`, headers: { authorization: `Bearer ${token}` } });
      assert.equal(read.statusCode, 200, read.body);
      assert.equal(read.json().state, 'in_progress');
      assert.equal((await act(env, runId, 'dtmf', token, { digits: '5' })).statusCode, 200);
    });

    it('refuses transfer and digits with call_control_unsupported where the route\'s provider declares neither capability, changing nothing', async (t) => {
      const registry = new ProviderRegistry(builtInProviders.definitions.map((d) => (d.name === 'simulator' ? { ...d, capabilities: { ...d.capabilities, supportsTransfer: false, sendsDtmf: false } } : d)));
      const env = await buildWithDispatcher(t, store.kind, { env: ENV, registry });
      const f = await createOrgFixture(env.deps);
      const { runId, token } = await answeredCall(env, f);
      const transfer = assertProblem(await act(env, runId, 'transfer', token, { to: '+12025550188' }), 422, 'call_control_unsupported');
      assert.deepEqual([transfer.provider, transfer.operation], ['simulator', 'transfer']);
      assertProblem(await act(env, runId, 'dtmf', token, { digits: '1' }), 422, 'call_control_unsupported');
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress']);
      assert.deepEqual(env.simulator.callControls, []);
    });
  });
}
