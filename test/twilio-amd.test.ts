// Twilio's answering-machine detection against the local server speaking Twilio's wire format (the
// production code path): the Calls create request's AMD parameters, the signed AsyncAmd callback
// for each verdict, a forged one refused, hang-up and leave-message on a machine, and a lost AMD
// callback recovered by reconciliation from the call resource's answered_by.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { TestContext } from 'node:test';
import { ConfigError, ConfigSchema, loadConfig } from '../src/config.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, eventTypes, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, definition, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';
import { ACCOUNT_SID, AUTH_TOKEN, PUBLIC_BASE_URL, sendCallback, startFakeTwilio, type FakeTwilio } from './helpers/twilio-server.js';

/**
 * The form parameters of Twilio's Calls create request (POST /2010-04-01/Accounts/{AccountSid}/Calls.json)
 * as Twilio's published OpenAPI description (twilio/twilio-oai, spec/json/twilio_api_v2010.json,
 * `CreateCallRequest`) names them. That document is not vendored here; the `twilio` package is
 * generated from it, so its Calls create function (lib/rest/api/v2010/account/call.js, the `data["…"]`
 * it fills) is read instead, from the installed package, not from a list copied by hand.
 */
function publishedCreateParameters(): { names: string[]; ranges: Map<string, [number, number]> } {
  const file = createRequire(import.meta.url).resolve('twilio/lib/rest/api/v2010/account/call.js');
  const source = readFileSync(file, 'utf8');
  const start = source.indexOf('instance.create = function create(');
  assert.ok(start >= 0, `the Calls create function in ${file}`);
  const body = source.slice(start, source.indexOf('operationVersion.create', start));
  const names = [...body.matchAll(/data\["([A-Za-z]+)"\]/g)].map((m) => m[1] ?? '');
  // The typings carry each parameter's published range ("Possible Values: 1000-6000").
  const typings = readFileSync(file.replace(/\.js$/, '.d.ts'), 'utf8');
  const ranges = new Map<string, [number, number]>();
  for (const m of typings.matchAll(/Possible Values: (\d+)-(\d+)\.[^*]*\*\/\s*(machineDetection[A-Za-z]+)\?:/g)) {
    ranges.set(`${(m[3] ?? '').charAt(0).toUpperCase()}${(m[3] ?? '').slice(1)}`, [Number(m[1]), Number(m[2])]);
  }
  return { names, ranges };
}
const PUBLISHED = publishedCreateParameters();
const PUBLISHED_AMD_CREATE_PARAMETERS = PUBLISHED.names.filter((name) => /machine|amd/i.test(name));
/** MachineDetection's published values. */
const MACHINE_DETECTION_VALUES = ['Enable', 'DetectMessageEnd'];

const RECONCILE_AFTER_MS = 10_000;
const REAPER_INTERVAL_MS = 1_000;

interface Env extends DispatchEnv {
  fake: FakeTwilio;
  f: OrgFixture;
  routeId: number;
  advance(ms: number): void;
}

async function amdEnv(t: TestContext, kind: StoreKind, answeringMachine: Record<string, unknown> | undefined, extraEnv: Record<string, string> = {}): Promise<Env> {
  const fake = await startFakeTwilio(t);
  let offset = 0;
  const built = await buildWithDispatcher(t, kind, {
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
      ...extraEnv,
    },
  });
  const agent = { ...definition({ greeting: 'Hello {{name}}' }), ...(answeringMachine ? { answering_machine: answeringMachine } : {}) };
  const f = await createOrgFixture(built.deps, 'Acme', agent);
  const route = await createTelephonyConfiguration(
    built.deps.store,
    built.deps.cipher,
    { orgId: f.orgId, name: 'Twilio', provider: 'twilio', callerIds: ['+12025550100'], credentials: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN }, callsPerSecond: 10, maxConcurrentCalls: 10 },
    built.deps.clock.now(),
  );
  return { ...built, fake, f, routeId: route.id, advance: (ms) => (offset += ms) };
}

const runPath = (runId: number, callback: string) => `/api/v1/providers/twilio/runs/${runId}/${callback}`;

async function placeCall(env: Env) {
  const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: env.routeId, initial_context: { name: 'Ada' } }, { key: env.f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  const runId = response.json().workflow_run_id as number;
  const run = await waitForRun(env, runId, (r) => r.provider_call_id !== null || ended(r));
  assert.ok(run.provider_call_id, `the call was placed: ${JSON.stringify(run)}`);
  return { runId, callSid: run.provider_call_id };
}

/** Places a call and answers it (status callback in-progress). */
async function answeredCall(env: Env) {
  const placed = await placeCall(env);
  const response = await sendCallback(env.app, runPath(placed.runId, 'status'), { CallSid: placed.callSid, CallStatus: 'in-progress' });
  assert.equal(response.statusCode, 204, response.body);
  await waitForRun(env, placed.runId, (r) => r.state === 'in_progress');
  return placed;
}

/** Twilio's AsyncAmdStatusCallback, signed as Twilio signs it. */
async function amdCallback(env: Env, runId: number, callSid: string, answeredBy: string) {
  const response = await sendCallback(env.app, runPath(runId, 'amd'), { CallSid: callSid, AnsweredBy: answeredBy, MachineDetectionDuration: '2350' });
  assert.equal(response.statusCode, 204, response.body);
}

for (const store of await storeCases()) {
  describe(`Twilio answering-machine detection (${store.kind})`, { skip: store.skip }, () => {
    it('asks for asynchronous detection in the create request, with parameter names and values from Twilio\'s published Calls API', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'message_end', on_machine: 'leave_message', message: 'Hi {{name}}', detection_timeout_ms: 12_000 });
      const { runId } = await placeCall(env);
      const [create] = env.fake.creates();
      assert.ok(create);
      assert.equal(create.form.get('MachineDetection'), 'DetectMessageEnd');
      assert.equal(create.form.get('MachineDetectionTimeout'), '12');
      assert.equal(create.form.get('AsyncAmd'), 'true');
      assert.equal(create.form.get('AsyncAmdStatusCallback'), `${PUBLIC_BASE_URL}${runPath(runId, 'amd')}#rc=5&rp=all`);
      assert.equal(create.form.get('AsyncAmdStatusCallbackMethod'), 'POST');
      const sent = [...create.form.keys()].filter((name) => /machine|amd/i.test(name));
      assert.deepEqual(sent.filter((name) => !PUBLISHED_AMD_CREATE_PARAMETERS.includes(name)), [], 'every AMD parameter sent is one Twilio publishes');
      assert.ok(MACHINE_DETECTION_VALUES.includes(create.form.get('MachineDetection') ?? ''));
    });

    it("sends the configured tuning (TWILIO_AMD_*) as Twilio's published parameters, within their published ranges, and the configured timeout when the agent gives none", async (t) => {
      // What the installed client says Twilio publishes: the four tuning parameters, three with a range.
      for (const name of ['MachineDetectionTimeout', 'MachineDetectionSpeechThreshold', 'MachineDetectionSpeechEndThreshold', 'MachineDetectionSilenceTimeout']) {
        assert.ok(PUBLISHED_AMD_CREATE_PARAMETERS.includes(name), `${name} is published: ${PUBLISHED_AMD_CREATE_PARAMETERS.join(', ')}`);
      }
      const tuning = { TWILIO_AMD_TIMEOUT_MS: '45000', TWILIO_AMD_SPEECH_THRESHOLD_MS: '3100', TWILIO_AMD_SPEECH_END_THRESHOLD_MS: '900', TWILIO_AMD_SILENCE_TIMEOUT_MS: '4000' };
      const env = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'hangup' }, tuning);
      await placeCall(env);
      const [create] = env.fake.creates();
      assert.ok(create);
      assert.equal(create.form.get('MachineDetectionTimeout'), '45');
      assert.equal(create.form.get('MachineDetectionSpeechThreshold'), '3100');
      assert.equal(create.form.get('MachineDetectionSpeechEndThreshold'), '900');
      assert.equal(create.form.get('MachineDetectionSilenceTimeout'), '4000');
      for (const [name, [min, max]] of PUBLISHED.ranges) {
        const sent = Number(create.form.get(name));
        assert.ok(sent >= min && sent <= max, `${name}=${sent} within Twilio's published ${min}-${max}`);
      }
      assert.equal(PUBLISHED.ranges.size, 3, 'the three thresholds have a published range');
      // The configuration accepts exactly the published ranges.
      const keys = { MachineDetectionSpeechThreshold: 'TWILIO_AMD_SPEECH_THRESHOLD_MS', MachineDetectionSpeechEndThreshold: 'TWILIO_AMD_SPEECH_END_THRESHOLD_MS', MachineDetectionSilenceTimeout: 'TWILIO_AMD_SILENCE_TIMEOUT_MS' } as const;
      for (const [name, key] of Object.entries(keys)) {
        const schema = ConfigSchema.properties[key];
        assert.deepEqual([schema.minimum, schema.maximum], PUBLISHED.ranges.get(name), key);
        assert.throws(() => loadConfig({ [key]: String((schema.maximum ?? 0) + 1) }), ConfigError, `${key} above its range stops the boot`);
      }
      const sent = [...create.form.keys()].filter((name) => /machine|amd/i.test(name));
      assert.deepEqual(sent.filter((name) => !PUBLISHED_AMD_CREATE_PARAMETERS.includes(name)), []);
      // The agent's own detection_timeout_ms wins over the configured one.
      const own = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'hangup', detection_timeout_ms: 7_000 }, tuning);
      await placeCall(own);
      assert.equal(own.fake.creates()[0]?.form.get('MachineDetectionTimeout'), '7');
    });

    it('sends Enable for detect "on", and no detection parameter at all for an agent without answering_machine', async (t) => {
      const on = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'hangup' });
      await placeCall(on);
      const [create] = on.fake.creates();
      assert.equal(create?.form.get('MachineDetection'), 'Enable');
      // Without the agent's timeout or any TWILIO_AMD_* set, the configuration's defaults, which are Twilio's.
      assert.equal(create?.form.get('MachineDetectionTimeout'), '30');
      assert.equal(create?.form.get('MachineDetectionSpeechThreshold'), '2400');
      const off = await amdEnv(t, store.kind, undefined);
      await placeCall(off);
      const [plain] = off.fake.creates();
      assert.deepEqual([...(plain?.form.keys() ?? [])].filter((name) => /machine|amd/i.test(name)), []);
    });

    for (const [raw, answeredBy] of [
      ['human', 'human'],
      ['unknown', 'unknown'],
    ] as const) {
      it(`records a signed AsyncAmd verdict ${raw} as answered_by ${answeredBy} and leaves the call with the agent`, async (t) => {
        const env = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'hangup' });
        const { runId, callSid } = await answeredCall(env);
        await amdCallback(env, runId, callSid, raw);
        const run = await waitForRun(env, runId, (r) => r.answered_by !== null);
        assert.equal(run.state, 'in_progress');
        assert.equal(run.answered_by, answeredBy);
        assert.equal(run.raw_answered_by, raw);
        assert.equal(env.fake.updates().length, 0, 'the call was left alone');
        assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'in_progress', 'answered_by']);
      });
    }

    for (const raw of ['machine_start', 'machine_end_beep', 'machine_end_silence', 'machine_end_other', 'fax'] as const) {
      it(`hangs up through the REST API on a signed AsyncAmd verdict ${raw}: the run completes machine_hangup`, async (t) => {
        const env = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'hangup' });
        const { runId, callSid } = await answeredCall(env);
        await amdCallback(env, runId, callSid, raw);
        const run = await waitForRun(env, runId, ended);
        assert.equal(run.state, 'completed');
        assert.equal(run.outcome_reason, 'machine_hangup');
        assert.equal(run.answered_by, raw === 'fax' ? 'fax' : 'machine');
        assert.equal(run.raw_answered_by, raw);
        const updates = env.fake.updates();
        assert.equal(updates.length, 1);
        assert.equal(updates[0]?.path, `/2010-04-01/Accounts/${ACCOUNT_SID}/Calls/${callSid}.json`);
        assert.equal(updates[0]?.form.get('Status'), 'completed');
        // Twilio's own completed that follows changes nothing.
        await sendCallback(env.app, runPath(runId, 'status'), { CallSid: callSid, CallStatus: 'completed', AnsweredBy: raw });
        assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'in_progress', 'answered_by', 'completed']);
        assert.equal((await waitForRun(env, runId, ended)).outcome_reason, 'machine_hangup');
      });
    }

    it('refuses a forged AsyncAmd callback with 403 and records nothing', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'hangup' });
      const { runId, callSid } = await answeredCall(env);
      assertProblem(await sendCallback(env.app, runPath(runId, 'amd'), { CallSid: callSid, AnsweredBy: 'machine_start' }, { authToken: 'another-accounts-token' }), 403, 'invalid_signature');
      assertProblem(await sendCallback(env.app, runPath(runId, 'amd'), { CallSid: callSid, AnsweredBy: 'machine_start' }, { signature: 'bm90IGEgc2lnbmF0dXJl' }), 403, 'invalid_signature');
      const run = await waitForRun(env, runId, () => true);
      assert.equal(run.answered_by, null);
      assert.equal(run.state, 'in_progress');
      assert.equal(env.fake.updates().length, 0);
    });

    it('applies an AsyncAmd verdict once: a repeated callback, or one with another verdict, changes nothing', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'connect_agent' });
      const { runId, callSid } = await answeredCall(env);
      await amdCallback(env, runId, callSid, 'machine_start');
      await amdCallback(env, runId, callSid, 'machine_start');
      await amdCallback(env, runId, callSid, 'human');
      const run = await waitForRun(env, runId, () => true);
      assert.equal(run.answered_by, 'machine');
      assert.equal(run.state, 'in_progress', 'connect_agent keeps the call');
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'in_progress', 'answered_by']);
      assert.equal(env.fake.updates().length, 0);
    });

    it('leaves the rendered message once the greeting has ended: the call update\'s TwiML says it and hangs up, and the call ends voicemail_left', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'message_end', on_machine: 'leave_message', message: 'Hi {{name}}, this is Acme & co. Please call back.' });
      const { runId, callSid } = await answeredCall(env);
      await amdCallback(env, runId, callSid, 'machine_end_beep');
      const deadline = Date.now() + scaledTimeout(5_000);
      while (env.fake.updates().length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      const [update] = env.fake.updates();
      assert.ok(update, 'the call was updated');
      assert.equal(update.form.get('Twiml'), '<?xml version="1.0" encoding="UTF-8"?><Response><Say>Hi Ada, this is Acme &amp; co. Please call back.</Say><Hangup/></Response>');
      const statusWithOutcome = `${runPath(runId, 'status')}?outcome=voicemail_left`;
      assert.equal(update.form.get('StatusCallback'), `${PUBLIC_BASE_URL}${statusWithOutcome}#rc=5&rp=all`);
      assert.equal(update.form.get('StatusCallbackMethod'), 'POST');
      assert.equal((await waitForRun(env, runId, () => true)).state, 'in_progress', 'the message is being left');
      // Twilio reports the end of the call to the status callback the update gave it.
      const response = await sendCallback(env.app, statusWithOutcome, { CallSid: callSid, CallStatus: 'completed', AnsweredBy: 'machine_end_beep' });
      assert.equal(response.statusCode, 204, response.body);
      const run = await waitForRun(env, runId, ended);
      assert.equal(run.outcome_reason, 'voicemail_left');
      assert.equal(run.answered_by, 'machine');
      assert.equal(run.raw_answered_by, 'machine_end_beep');
      const event = await env.deps.store.db.selectFrom('run_events').select('data').where('run_id', '=', runId).where('type', '=', 'answered_by').executeTakeFirstOrThrow();
      const data = (typeof event.data === 'string' ? JSON.parse(event.data) : event.data) as Record<string, unknown>;
      assert.equal(data.message, 'Hi Ada, this is Acme & co. Please call back.');
    });

    it('recovers a lost AsyncAmd callback by reconciliation: the call resource\'s answered_by is recorded before the end it explains', async (t) => {
      const env = await amdEnv(t, store.kind, { detect: 'on', on_machine: 'hangup' });
      const { runId, callSid } = await answeredCall(env);
      // Every callback after the answer is lost: Twilio's call resource says what happened.
      env.fake.setAnsweredBy(callSid, 'machine_end_silence');
      env.fake.setStatus(callSid, 'completed');
      env.advance(RECONCILE_AFTER_MS + REAPER_INTERVAL_MS);
      const run = await waitForRun(env, runId, ended);
      assert.equal(run.state, 'completed');
      assert.equal(run.answered_by, 'machine');
      assert.equal(run.raw_answered_by, 'machine_end_silence');
      assert.deepEqual(await eventTypes(env, runId), ['queued', 'dialing', 'in_progress', 'answered_by', 'completed']);
    });
  });
}
