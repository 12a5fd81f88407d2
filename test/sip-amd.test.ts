// Machine detection on SIP calls, end to end: baresip (Debian baresip-core) answers and plays a
// clip of the labelled set (test/helpers/amd-labelled-set.ts: a machine's greeting and beep, a
// person's "Hello?", a fax's answer or calling tone), Dialtone hears it over the call's own RTP
// port, and the verdict goes the way Twilio's AMD verdicts go: the run's answered_by, its raw
// verdict, its event and webhook message, and on_machine's hang-up.
// Also what admission says of SIP routes that cannot do what an agent asks (media_address; a
// message to leave).
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { messageBody } from '../src/webhooks/message.js';
import { postJson } from './helpers/app.js';
import { labelledSet, labelledSetSkip, writeClipWav } from './helpers/amd-labelled-set.js';
import { BARESIP_ADDRESS, baresipSkip, startBaresip, type Baresip } from './helpers/baresip.js';
import { ended, waitForRun } from './helpers/dispatch.js';
import { definition, PATHS } from './helpers/fixtures.js';
import { CAMPAIGNS } from './helpers/campaigns.js';
import { assertProblem } from './helpers/problems.js';
import { callOverRoute as call, sipRouteEnv, type SipRouteEnv } from './helpers/sip-route.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { startTestRuntime } from './helpers/test-runtime.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

type AmdEnv = SipRouteEnv;

/** Dialtone with a SIP route to `callee` (no media_address, no agent runtime: detection needs neither), its agent asking `answeringMachine`. */
function amdEnv(
  t: TestContext,
  kind: StoreKind,
  callee: { port: number },
  answeringMachine: Record<string, unknown>,
  settings: Record<string, unknown> = {},
  env: Record<string, string> = {},
): Promise<AmdEnv> {
  return sipRouteEnv(t, kind, { host: BARESIP_ADDRESS, port: callee.port }, { webhooks: false, env, settings, definition: { ...definition(), answering_machine: answeringMachine } });
}

/** baresip answering with a clip of the labelled set as its microphone. */
async function calleePlaying(t: TestContext, clipName: string): Promise<Baresip> {
  const clip = labelledSet().find((c) => c.name === clipName);
  assert.ok(clip, `no clip named ${clipName}`);
  const source = join(mkdtempSync(join(tmpdir(), 'dialtone-amd-callee-')), 'clip.wav');
  writeClipWav(source, clip);
  return startBaresip(t, { source });
}

const MACHINE = 'machine greeting 1 (en-us, 175 wpm, beep 1000 Hz 500 ms)';
const PERSON = 'person "Hello?" (en-us, 175 wpm)';
const ANSWERING_FAX = 'fax CED 2100 Hz with phase reversals (ANSam), pinknoise -45 dBFS';
const CALLING_FAX = 'fax CNG 1100 Hz, 0.5 s on and 3 s off after 500 ms';

/** The run's answered_by event's data. */
async function answeredByEvent(env: AmdEnv, runId: number): Promise<Record<string, unknown>> {
  const event = await env.deps.store.db.selectFrom('run_events').select(['data']).where('run_id', '=', runId).where('type', '=', 'answered_by').executeTakeFirstOrThrow();
  return (typeof event.data === 'string' ? JSON.parse(event.data) : event.data) as Record<string, unknown>;
}

/** The run.answered_by webhook messages written for the run (to an endpoint subscribed to them). */
async function answeredByMessages(env: AmdEnv, runId: number) {
  const deliveries = await env.deps.store.db
    .selectFrom('webhook_deliveries as w')
    .innerJoin('workflow_runs as r', 'r.id', 'w.run_id')
    .innerJoin('workflows as f', 'f.id', 'r.workflow_id')
    .innerJoin('workflow_definitions as d', 'd.id', 'r.definition_id')
    .select(['w.event_type', 'w.payload', 'f.workflow_uuid', 'd.version as definition_version'])
    .where('w.run_id', '=', runId)
    .where('w.event_type', '=', 'run.answered_by')
    .execute();
  return deliveries.map((delivery) => JSON.parse(messageBody(delivery)) as { data: { run: { answered_by: string; raw_answered_by: string }; event: { data: Record<string, unknown> } } });
}


const skip = baresipSkip() || labelledSetSkip();
for (const store of await storeCases()) {
  describe(`machine detection on SIP calls, baresip as the callee (${store.kind})`, { skip: store.skip || skip }, () => {
    it('hears a voicemail greeting to its beep: answered_by machine (machine_end_beep), and on_machine hangup ends the call machine_hangup', async (t) => {
      const callee = await calleePlaying(t, MACHINE);
      const env = await amdEnv(t, store.kind, callee, { detect: 'message_end', on_machine: 'hangup' });
      const runId = await call(env);
      // The greeting and its beep last about 6.6 s of the call's audio.
      const run = await waitForRun(env, runId, ended, scaledTimeout(25_000));
      assert.equal(run.answered_by, 'machine');
      assert.equal(run.raw_answered_by, 'machine_end_beep');
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'machine_hangup');
      const event = await env.deps.store.db.selectFrom('run_events').select(['data']).where('run_id', '=', runId).where('type', '=', 'answered_by').executeTakeFirstOrThrow();
      const data = (typeof event.data === 'string' ? JSON.parse(event.data) : event.data) as Record<string, unknown>;
      assert.equal(data.action, 'hangup');
    });

    it('hears a fax\'s answer tone (CED with ANSam\'s phase reversals): answered_by fax, its event and webhook message, and Dialtone hangs up (machine_hangup)', async (t) => {
      const callee = await calleePlaying(t, ANSWERING_FAX);
      const env = await amdEnv(t, store.kind, callee, { detect: 'message_end', on_machine: 'hangup' });
      const endpoint = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: 'https://93.184.216.34/amd', events: ['run.answered_by'] }, { key: env.f.apiKey });
      assert.equal(endpoint.statusCode, 201, endpoint.body);
      const runId = await call(env);
      // 1.7 s of the call's audio (SIP_AMD_FAX_TONE_MIN_MS of the tone, after 200 ms); the clip lasts 12 s.
      const run = await waitForRun(env, runId, ended, scaledTimeout(20_000));
      assert.equal(run.answered_by, 'fax');
      assert.equal(run.raw_answered_by, 'fax');
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'machine_hangup');
      assert.notEqual(run.raw_provider_status, 'BYE', 'Dialtone hung up, not the callee');
      await callee.waitFor(/Call established[\s\S]*session closed/, scaledTimeout(10_000));
      assert.deepEqual(await answeredByEvent(env, runId), { answered_by: 'fax', provider_verdict: 'fax', action: 'hangup' });
      const messages = await answeredByMessages(env, runId);
      assert.equal(messages.length, 1);
      assert.equal(messages[0]?.data.run.answered_by, 'fax');
      assert.equal(messages[0]?.data.run.raw_answered_by, 'fax');
      assert.equal(messages[0]?.data.event.data.action, 'hangup');
    });

    it('hears a person\'s "Hello?" and the silence after it: answered_by human, and the call stays with the agent', async (t) => {
      const callee = await calleePlaying(t, PERSON);
      const env = await amdEnv(t, store.kind, callee, { detect: 'on', on_machine: 'hangup' });
      const runId = await call(env);
      const run = await waitForRun(env, runId, (r) => r.answered_by !== null, scaledTimeout(20_000));
      assert.equal(run.answered_by, 'human');
      assert.equal(run.raw_answered_by, 'human');
      assert.equal(run.state, 'in_progress');
      await callee.hangUp();
      const finished = await waitForRun(env, runId, ended, scaledTimeout(15_000));
      assert.equal(finished.state, 'completed');
      assert.notEqual(finished.outcome_reason, 'machine_hangup');
      assert.equal(finished.raw_provider_status, 'BYE', 'the callee hung up, not Dialtone');
    });

    if (store.kind === 'postgres') return;

    it('detects while the call is relayed to the agent runtime, which gets every frame of the greeting all the same (connect_agent)', async (t) => {
      const runtime = await startTestRuntime(t);
      const callee = await calleePlaying(t, MACHINE);
      const env = await amdEnv(t, store.kind, callee, { detect: 'on', on_machine: 'connect_agent' }, {}, { AGENT_RUNTIME_URL: runtime.url });
      const runId = await call(env);
      const stream = await runtime.stream(0);
      const run = await waitForRun(env, runId, (r) => r.answered_by !== null, scaledTimeout(20_000));
      assert.equal(run.answered_by, 'machine');
      assert.equal(run.raw_answered_by, 'machine_start');
      assert.equal(run.state, 'in_progress', 'connect_agent: the agent keeps the call');
      // The greeting passes 2.4 s about 2.6 s in: the runtime has had the audio up to then, in order.
      await stream.waitFor('3 s of audio', () => stream.media.length >= 150);
      stream.media.forEach((media, index) => assert.equal(media.chunk, String(index + 1)));
      assert.deepEqual(stream.problems, []);
      await callee.hangUp();
      await waitForRun(env, runId, ended, scaledTimeout(15_000));
    });

    it('hears a fax calling (CNG in its cadence) with detect "on": answered_by fax, and Dialtone hangs up (machine_hangup)', async (t) => {
      const callee = await calleePlaying(t, CALLING_FAX);
      const env = await amdEnv(t, store.kind, callee, { detect: 'on', on_machine: 'hangup' });
      const runId = await call(env);
      // Its second burst sounds 4 s into the call's audio.
      const run = await waitForRun(env, runId, ended, scaledTimeout(20_000));
      assert.equal(run.answered_by, 'fax');
      assert.equal(run.raw_answered_by, 'fax');
      assert.equal(run.outcome_reason, 'machine_hangup');
      await callee.waitFor(/Call established[\s\S]*session closed/, scaledTimeout(10_000));
      assert.deepEqual(await answeredByEvent(env, runId), { answered_by: 'fax', provider_verdict: 'fax', action: 'hangup' });
    });

    it('leaves a fax with the agent on connect_agent: the verdict recorded, the call up until the callee hangs up', async (t) => {
      const callee = await calleePlaying(t, ANSWERING_FAX);
      const env = await amdEnv(t, store.kind, callee, { detect: 'on', on_machine: 'connect_agent' });
      const runId = await call(env);
      const run = await waitForRun(env, runId, (r) => r.answered_by !== null, scaledTimeout(20_000));
      assert.equal(run.answered_by, 'fax');
      assert.equal(run.state, 'in_progress');
      await callee.hangUp();
      const finished = await waitForRun(env, runId, ended, scaledTimeout(15_000));
      assert.notEqual(finished.outcome_reason, 'machine_hangup');
      assert.equal(finished.raw_provider_status, 'BYE', 'the callee hung up, not Dialtone');
    });

    it('refuses at request time detection through a route with media_address, and a message to leave on any SIP route, saying why', async (t) => {
      const env = await amdEnv(t, store.kind, { port: 5060 }, { detect: 'on', on_machine: 'hangup' }, { media_address: '127.0.0.1', media_port: 40000 });
      const initiate = (routeId: number, dryRun = false) =>
        postJson(env.app, `${PATHS.initiateCall(env.f.agentUuid)}${dryRun ? '?dry_run=true' : ''}`, { phone_number: '+12025550123', telephony_configuration_id: routeId }, { key: env.f.apiKey });
      const refused = assertProblem(await initiate(env.routeId), 422, 'machine_detection_unsupported');
      assert.match(String(refused.detail), /media_address sends the call's audio to your own media server/);
      // The same agent through a route without media_address is admitted (a dry run creates nothing).
      const relayed = await createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: env.f.orgId, name: 'Relayed', provider: 'sip', callerIds: ['+12025550100'], settings: { host: BARESIP_ADDRESS, port: 5060 } }, Date.now());
      const admitted = await initiate(relayed.id, true);
      assert.equal(admitted.statusCode, 200, admitted.body);
      // Dispatch reads the same from the decoded routes: only the relayed one detects.
      const capabilityOf = async (id: number) => {
        const decoded = env.deps.routes.decode(await env.deps.store.db.selectFrom('telephony_configurations').selectAll().where('id', '=', id).executeTakeFirstOrThrow());
        assert.ok(decoded.ok);
        return decoded.route.capabilities.supportsMachineDetection;
      };
      assert.equal(await capabilityOf(env.routeId), false);
      assert.equal(await capabilityOf(relayed.id), true);
      // leave_message needs speech Dialtone cannot play on a SIP call: refused, not silently dropped (a campaign's own settings here).
      const campaign = { name: 'Drive', agent_uuid: env.f.agentUuid, mode: 'published', telephony_configuration_id: relayed.id };
      const leave = await postJson(env.app, CAMPAIGNS, { ...campaign, answering_machine: { detect: 'message_end', on_machine: 'leave_message', message: 'Call us back.' } }, { key: env.f.apiKey });
      assert.match(String(assertProblem(leave, 422, 'machine_detection_unsupported').detail), /cannot leave a message on a SIP call/);
      const hangUp = await postJson(env.app, CAMPAIGNS, { ...campaign, answering_machine: { detect: 'message_end', on_machine: 'hangup' } }, { key: env.f.apiKey });
      assert.equal(hangUp.statusCode, 201, hangUp.body);
      assert.equal((await env.deps.store.db.selectFrom('workflow_runs').select('id').execute()).length, 0);
    });
  });
}
