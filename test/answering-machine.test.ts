// Answering-machine detection through the simulator, end to end: the definition's settings, the
// reserved numbers (a voicemail box, a fax, a person after a silence), every on_machine action,
// who answered in the run, its list filter, its event and webhook message, and the refusal of a
// route that cannot detect.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { DialDetections } from '../src/dispatch/machine-verdicts.js';
import { selectDefinitionGraph } from '../src/store/statements/run-reads.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { validateDefinition } from '../src/workflows/definition.js';
import { messageBody } from '../src/webhooks/message.js';
import { getJson, postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, eventTypes, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, definition, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { CAMPAIGNS } from './helpers/campaigns.js';
import { assertProblem } from './helpers/problems.js';
import { SseClient } from './helpers/sse-client.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { scaledTimeout } from './helpers/timeouts.js';
import { Receiver, startReceiver, WEBHOOK_TEST_ENV } from './helpers/webhooks.js';
import { describe, it } from './helpers/suite.js';

const VOICEMAIL = '+12025550120';
const FAX = '+12025550121';
const PERSON = '+12025550122';

function agent(answeringMachine: Record<string, unknown> | undefined) {
  return { ...definition({ greeting: 'Hello {{name}}' }), ...(answeringMachine ? { answering_machine: answeringMachine } : {}) };
}

async function amdEnv(t: TestContext, kind: StoreKind, answeringMachine: Record<string, unknown> | undefined): Promise<DispatchEnv & { f: OrgFixture }> {
  // A box records 30 simulated seconds (300 ms here) after its beep: calls last longer than FAST_TIMINGS' maximum.
  const env = await buildWithDispatcher(t, kind, { webhooks: false, env: { MAX_CALL_DURATION_MS: '5000' } });
  const f = await createOrgFixture(env.deps, 'Acme', agent(answeringMachine));
  return { ...env, f };
}

async function call(env: DispatchEnv & { f: OrgFixture }, phoneNumber: string) {
  const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: phoneNumber, initial_context: { name: 'Ada' } }, { key: env.f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  const runId = response.json().workflow_run_id as number;
  return { runId, run: await waitForRun(env, runId, ended) };
}

async function answeredByEvent(env: DispatchEnv, runId: number) {
  const row = await env.deps.store.db.selectFrom('run_events').select(['data']).where('run_id', '=', runId).where('type', '=', 'answered_by').executeTakeFirst();
  assert.ok(row, 'an answered_by event was recorded');
  return (typeof row.data === 'string' ? JSON.parse(row.data) : row.data) as Record<string, unknown>;
}

describe('answering_machine in a definition', () => {
  const valid = (answeringMachine: unknown) => validateDefinition({ ...definition({ triggerUuid: '0b6f1c3e-8a43-4a43-9c3c-1d7f0a2b3c4d' }), answering_machine: answeringMachine });

  it('accepts detection with each action, a message template and a timeout within Twilio\'s bounds', () => {
    for (const settings of [
      { detect: 'off' },
      { detect: 'on', on_machine: 'hangup' },
      { detect: 'on', on_machine: 'connect_agent', detection_timeout_ms: 3_000 },
      { detect: 'message_end', on_machine: 'leave_message', message: 'Hi {{name | there}}, please call us back.', detection_timeout_ms: 59_000 },
    ]) {
      const result = valid(settings);
      assert.equal(result.ok, true, JSON.stringify(result));
    }
  });

  it('lists every problem of the settings, each at its JSON Pointer', () => {
    const result = valid({ detect: 'sometimes', on_machine: 'shout', message: 'Hi {{ }}', detection_timeout_ms: 500, colour: 'red' });
    assert.equal(result.ok, false);
    const pointers = result.ok ? [] : result.errors.map((e) => e.pointer).sort();
    assert.deepEqual(pointers, ['/answering_machine/colour', '/answering_machine/detect', '/answering_machine/detection_timeout_ms', '/answering_machine/message', '/answering_machine/on_machine']);
  });

  it('refuses leaving a message without one, or without waiting for the end of the greeting', () => {
    const result = valid({ detect: 'on', on_machine: 'leave_message' });
    assert.equal(result.ok, false);
    assert.deepEqual(result.ok ? [] : result.errors.map((e) => e.pointer).sort(), ['/answering_machine/detect', '/answering_machine/message']);
    const notObject = valid('on');
    assert.deepEqual(notObject.ok ? [] : notObject.errors.map((e) => e.pointer), ['/answering_machine']);
  });
});

for (const store of await storeCases()) {
  describe(`Answering-machine detection on the simulator (${store.kind})`, { skip: store.skip }, () => {
    it("reads an agent's detection settings once for a batch of dials made at once, and each dial gets them", async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { webhooks: false, start: false });
      const f = await createOrgFixture(env.deps, 'Acme', agent({ detect: 'on', on_machine: 'hangup', detection_timeout_ms: 20000 }));
      const { id: definitionId } = await env.deps.store.db
        .selectFrom('workflow_definitions as d')
        .innerJoin('workflows as w', 'w.id', 'd.workflow_id')
        .select('d.id')
        .where('w.workflow_uuid', '=', f.workflowUuid)
        .executeTakeFirstOrThrow();
      let reads = 0;
      const detections = new DialDetections(env.deps, 1_000, (id) => {
        reads += 1;
        return selectDefinitionGraph(env.deps.store, id);
      });
      const dials = await Promise.all(Array.from({ length: 50 }, (_, i) => detections.forDial({ id: i + 1, definition_id: definitionId, campaign_id: null })));
      assert.equal(reads, 1, 'one read for 50 dials of one definition');
      for (const dial of dials) assert.deepEqual(dial, { detect: 'on', timeoutMs: 20000 });

      // A read that failed is not kept: the next dial reads again and gets the settings.
      let failNext = true;
      const flaky = new DialDetections(env.deps, 1_000, (id) => {
        if (failNext) {
          failNext = false;
          return Promise.reject(new Error('store unreachable'));
        }
        return selectDefinitionGraph(env.deps.store, id);
      });
      await assert.rejects(flaky.forDial({ id: 1, definition_id: definitionId, campaign_id: null }), /store unreachable/);
      assert.deepEqual(await flaky.forDial({ id: 2, definition_id: definitionId, campaign_id: null }), { detect: 'on', timeoutMs: 20000 });
    });

    it('hangs up on a voicemail box: the run completes machine_hangup, with who answered and the raw verdict', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'hangup' });
      const { runId, run } = await call(env, VOICEMAIL);
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'machine_hangup');
      assert.equal(run.answered_by, 'machine');
      assert.equal(run.raw_answered_by, 'machine_start');
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress', 'answered_by', 'completed']);
      assert.deepEqual(await answeredByEvent(env, runId), { answered_by: 'machine', provider_verdict: 'machine_start', action: 'hangup' });
    });

    it('leaves the rendered message after the beep: the run completes voicemail_left and its event log shows the message', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'message_end', on_machine: 'leave_message', message: 'Hi {{name}}, this is Acme. Please call us back.' });
      const { runId, run } = await call(env, VOICEMAIL);
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'voicemail_left');
      assert.equal(run.answered_by, 'machine');
      assert.equal(run.raw_answered_by, 'machine_end_beep');
      assert.deepEqual(await answeredByEvent(env, runId), { answered_by: 'machine', provider_verdict: 'machine_end_beep', action: 'leave_message', message: 'Hi Ada, this is Acme. Please call us back.' });
      assert.deepEqual(env.simulator.messagesLeft, [{ runId, text: 'Hi Ada, this is Acme. Please call us back.' }]);
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress', 'answered_by', 'completed']);
    });

    it('leaves a machine with the agent on connect_agent: the call goes on and ends as any other, the verdict recorded', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'connect_agent' });
      const { runId, run } = await call(env, VOICEMAIL);
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'hangup');
      assert.equal(run.answered_by, 'machine');
      assert.deepEqual(await answeredByEvent(env, runId), { answered_by: 'machine', provider_verdict: 'machine_start', action: 'connect_agent' });
      assert.deepEqual(env.simulator.messagesLeft, []);
    });

    it('hangs up on a fax even when a message would be left (a fax hears none)', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'message_end', on_machine: 'leave_message', message: 'Hello' });
      const { runId, run } = await call(env, FAX);
      assert.equal(run.outcome_reason, 'machine_hangup');
      assert.equal(run.answered_by, 'fax');
      assert.equal(run.raw_answered_by, 'fax');
      assert.deepEqual(await answeredByEvent(env, runId), { answered_by: 'fax', provider_verdict: 'fax', action: 'hangup' });
      assert.deepEqual(env.simulator.messagesLeft, []);
    });

    it('leaves a person who answers after a silence with the agent, answered_by human', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'hangup' });
      const { runId, run } = await call(env, PERSON);
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'hangup');
      assert.equal(run.answered_by, 'human');
      assert.deepEqual(await answeredByEvent(env, runId), { answered_by: 'human', provider_verdict: 'human' });
    });

    it('asks nothing when the definition has no answering_machine: the voicemail box is talked to, answered_by stays null', async (t) => {
      const env = await amdEnv(t, store.kind, undefined);
      const { runId, run } = await call(env, VOICEMAIL);
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'hangup');
      assert.equal(run.answered_by, null);
      assert.equal(run.raw_answered_by, null);
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'ringing', 'in_progress', 'completed']);
    });

    it('filters the run list by who answered, and shows it in GET', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'hangup' });
      const machine = await call(env, VOICEMAIL);
      const person = await call(env, PERSON);
      const list = async (answeredBy: string) => (await getJson(env.app, `/api/v1/public/workflow-runs?answered_by=${answeredBy}`, env.f.apiKey)).json().data.map((r: { id: number }) => r.id);
      assert.deepEqual(await list('machine'), [machine.runId]);
      assert.deepEqual(await list('human'), [person.runId]);
      assert.deepEqual(await list('fax'), []);
      assertProblem(await getJson(env.app, '/api/v1/public/workflow-runs?answered_by=robot', env.f.apiKey), 422, 'validation_failed');
      const got = await getJson(env.app, `/api/v1/public/workflow-runs/${machine.runId}`, env.f.apiKey);
      assert.equal(got.json().answered_by, 'machine');
      assert.equal(got.json().raw_answered_by, 'machine_start');
    });

    it('streams the answered_by event live and delivers run.answered_by and the ended run\'s message with answered_by, signed as Standard Webhooks verifies', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: { ...WEBHOOK_TEST_ENV, MAX_CALL_DURATION_MS: '5000', STREAM_POLL_INTERVAL_MS: '50' } });
      const f = await createOrgFixture(env.deps, 'Acme', agent({ detect: 'on', on_machine: 'hangup' }));
      const endpoint = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: receiver.url, events: ['run.answered_by', 'run.ended'] }, { key: f.apiKey });
      assert.equal(endpoint.statusCode, 201, endpoint.body);
      const { secret } = endpoint.json() as { secret: string };
      const base = await env.app.listen({ host: '127.0.0.1', port: 0 });
      const stream = await SseClient.open(base, f.apiKey);
      t.after(() => stream.close());
      assert.equal(stream.status, 200);

      const { runId } = await call({ ...env, f }, VOICEMAIL);
      await stream.waitFor(() => stream.runEvents.some((e) => e.run_id === runId && e.type === 'completed'), scaledTimeout(10_000), 'the run to complete on the stream');
      const types = stream.runEvents.filter((e) => e.run_id === runId).map((e) => e.type);
      assert.ok(types.indexOf('answered_by') >= 0 && types.indexOf('answered_by') < types.indexOf('completed'), `the verdict streamed before the end: ${types.join(', ')}`);
      const streamed = stream.messages.find((m) => m.event === 'run' && (m.data as { run_id: number; type: string }).run_id === runId && (m.data as { type: string }).type === 'answered_by');
      assert.equal((streamed?.data as { data?: { answered_by?: string } }).data?.answered_by, 'machine', JSON.stringify(streamed));

      const received = await receiver.waitFor((all) => all.filter((m) => (m.json.data.run as { id?: number } | undefined)?.id === runId).length >= 2, scaledTimeout(10_000));
      const messages = received.filter((m) => (m.json.data.run as { id?: number } | undefined)?.id === runId);
      assert.deepEqual(messages.map((m) => m.json.type), ['run.answered_by', 'run.ended'], 'in seq order');
      for (const message of messages) {
        // Throws unless the signature verifies under the endpoint's secret (the standardwebhooks package, not Dialtone's code).
        const verified = Receiver.verify(secret, message) as { data: { run: { answered_by: string; raw_answered_by: string } } };
        assert.equal(verified.data.run.answered_by, 'machine', message.json.type);
        assert.equal(typeof verified.data.run.raw_answered_by, 'string');
      }
      assert.throws(() => Receiver.verify(secret, { ...messages[0]!, body: messages[0]!.body.replace('"machine"', '"human"') }), 'a changed body does not verify');
    });

    it('writes a run.answered_by webhook message with the run as it was then, for endpoints subscribed to it', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'hangup' });
      const endpoint = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: 'https://93.184.216.34/amd', events: ['run.answered_by'] }, { key: env.f.apiKey });
      assert.equal(endpoint.statusCode, 201, endpoint.body);
      const { runId } = await call(env, VOICEMAIL);
      const deliveries = await env.deps.store.db
        .selectFrom('webhook_deliveries as w')
        .innerJoin('workflow_runs as r', 'r.id', 'w.run_id')
        .innerJoin('workflows as f', 'f.id', 'r.workflow_id')
        .innerJoin('workflow_definitions as d', 'd.id', 'r.definition_id')
        .select(['w.event_type', 'w.payload', 'f.workflow_uuid', 'd.version as definition_version'])
        .where('w.run_id', '=', runId)
        .execute();
      assert.deepEqual(deliveries.map((d) => d.event_type), ['run.answered_by']);
      const [delivery] = deliveries;
      assert.ok(delivery);
      const message = JSON.parse(messageBody(delivery)) as { type: string; data: { run: { answered_by: string; raw_answered_by: string; state: string }; event: { type: string; data: Record<string, unknown> } } };
      assert.equal(message.type, 'run.answered_by');
      assert.equal(message.data.run.answered_by, 'machine');
      assert.equal(message.data.run.raw_answered_by, 'machine_start');
      assert.equal(message.data.run.state, 'in_progress', 'the run as the verdict left it');
      assert.equal(message.data.event.type, 'answered_by');
      assert.equal(message.data.event.data.action, 'hangup');
    });

    it('refuses at request time an agent that asks for detection through a SIP route, creating nothing', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'hangup' });
      const sip = await createTelephonyConfiguration(
        env.deps.store,
        env.deps.cipher,
        { orgId: env.f.orgId, name: 'Trunk', provider: 'sip', callerIds: ['+12025550100'], settings: { host: '2001:db8::1', port: 5060, transport: 'udp', media_address: '127.0.0.1', media_port: 40000 } },
        env.deps.clock.now(),
      );
      const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: VOICEMAIL, telephony_configuration_id: sip.id, initial_context: { name: 'Ada' } }, { key: env.f.apiKey });
      const problem = assertProblem(response, 422, 'machine_detection_unsupported');
      assert.match(String(problem.detail), /cannot tell a machine from a person/);
      const dryRun = await postJson(env.app, `${PATHS.initiateCall(env.f.agentUuid)}?dry_run=true`, { phone_number: VOICEMAIL, telephony_configuration_id: sip.id }, { key: env.f.apiKey });
      assertProblem(dryRun, 422, 'machine_detection_unsupported');
      const runs = await env.deps.store.db.selectFrom('workflow_runs').select('id').execute();
      assert.equal(runs.length, 0);
      // A campaign through the same route is refused alike at its creation (admission's readiness stage).
      const campaign = await postJson(env.app, CAMPAIGNS, { name: 'Drive', agent_uuid: env.f.agentUuid, mode: 'published', telephony_configuration_id: sip.id }, { key: env.f.apiKey });
      assertProblem(campaign, 422, 'machine_detection_unsupported');
      const campaigns = await env.deps.store.db.selectFrom('campaigns').select('id').execute();
      assert.equal(campaigns.length, 0);
    });
  });
}
