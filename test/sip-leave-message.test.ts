// A message left on a SIP call's voicemail (on_machine "leave_message", issue 34), end to end:
// baresip (Debian baresip-core) answers as a voicemail box, playing a machine's greeting and its
// beep from the labelled set (test/helpers/amd-labelled-set.ts) and recording what it hears (its
// sndfile module); Dialtone detects the machine from the call's audio, stops the agent runtime's
// stream, speaks the rendered message with SIP_SPEECH_COMMAND (Debian's espeak-ng) after the beep,
// and hangs up: the run completes voicemail_left. What baresip heard is measured with sox. A speech
// command that fails ends the run failed (voicemail_failed) at once; without SIP_SPEECH_COMMAND
// leave_message is refused before anything is dialed.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson } from './helpers/app.js';
import alawmulaw from 'alawmulaw';
import { labelledSet, labelledSetSkip, writeClipWav } from './helpers/amd-labelled-set.js';
import { pcmWav } from './helpers/audio.js';
import { BARESIP_ADDRESS, baresipSkip, startBaresip, type Baresip } from './helpers/baresip.js';
import { CAMPAIGNS } from './helpers/campaigns.js';
import { ended, waitForRun } from './helpers/dispatch.js';
import { definition, PATHS } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { callOverRoute as call, sipRouteEnv, type SipRouteEnv } from './helpers/sip-route.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { startTestRuntime, type TestRuntime } from './helpers/test-runtime.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

const MACHINE = 'machine greeting 1 (en-us, 175 wpm, beep 1000 Hz 500 ms)';
const SPEECH_COMMAND = 'espeak-ng --stdin --stdout';
const MESSAGE = 'Hi {{name | there}}, this is Acme about your appointment on Tuesday. Please call us back.';
const RENDERED = 'Hi there, this is Acme about your appointment on Tuesday. Please call us back.';
const LEAVE = { detect: 'message_end', on_machine: 'leave_message', message: MESSAGE };

type LeaveEnv = SipRouteEnv & { runtime: TestRuntime };

/** Dialtone with a SIP route to `callee` (no media_address), relaying to a test runtime, its agent leaving MESSAGE on machines. */
async function leaveEnv(t: TestContext, kind: StoreKind, callee: { port: number }, env: Record<string, string>): Promise<LeaveEnv> {
  const runtime = await startTestRuntime(t);
  const routeEnv = await sipRouteEnv(t, kind, { host: BARESIP_ADDRESS, port: callee.port }, { webhooks: false, env: { AGENT_RUNTIME_URL: runtime.url, ...env }, definition: { ...definition(), answering_machine: LEAVE } });
  return { ...routeEnv, runtime };
}

/**
 * baresip answering as a voicemail box: the greeting and its beep, then 40 s of silence (a box
 * recording; baresip hangs up when its source file ends), or only `hangUpAfterBeepMs` of it,
 * recording what it hears. `greetingMs`: from the answer to the beep's end, as sox measures the
 * greeting (its trailing silence trimmed).
 */
async function voicemailBox(t: TestContext, hangUpAfterBeepMs?: number): Promise<Baresip & { dir: string; recordings: string; greetingMs: number }> {
  const clip = labelledSet().find((c) => c.name === MACHINE);
  assert.ok(clip, `no clip named ${MACHINE}`);
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-voicemail-'));
  const greeting = join(dir, 'greeting.wav');
  writeClipWav(greeting, clip);
  const greetingMs = soxStat(greeting, ['reverse', 'silence', '1', '0.05', '1%', 'reverse']).seconds * 1000;
  const source = join(dir, 'box.wav');
  const linear = alawmulaw.mulaw.decode(clip.mulaw);
  if (hangUpAfterBeepMs === undefined) {
    const withSilence = new Int16Array(linear.length + 8000 * 40);
    withSilence.set(linear);
    writeFileSync(source, pcmWav(withSilence));
  } else {
    writeFileSync(source, pcmWav(linear.subarray(0, Math.round(((greetingMs + hangUpAfterBeepMs) * 8000) / 1000))));
  }
  const recordings = join(dir, 'heard');
  mkdirSync(recordings);
  return { ...(await startBaresip(t, { source, record: recordings })), dir, recordings, greetingMs };
}

/** What baresip heard (its sndfile `-dec.wav`), once the call is over and the file no longer grows. */
async function heardFile(callee: { recordings: string }): Promise<string> {
  const deadline = Date.now() + scaledTimeout(10_000);
  let last = -1;
  for (;;) {
    const name = readdirSync(callee.recordings).find((n) => n.endsWith('-dec.wav'));
    const size = name ? statSync(join(callee.recordings, name)).size : 0;
    if (name && size > 44 && size === last) return join(callee.recordings, name);
    if (Date.now() > deadline) throw new Error(`baresip recorded nothing in ${callee.recordings}: ${readdirSync(callee.recordings).join(', ')}`);
    last = size;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** sox's `stat` of a file (optionally after `effects`): its length in seconds and RMS amplitude (0 to 1). */
function soxStat(path: string, effects: string[] = []): { seconds: number; rms: number } {
  const result = spawnSync('sox', [path, '-n', ...effects, 'stat'], { encoding: 'utf8' });
  const seconds = Number(/Length \(seconds\):\s+([\d.]+)/.exec(result.stderr)?.[1]);
  const rms = Number(/RMS\s+amplitude:\s+([\d.]+)/.exec(result.stderr)?.[1]);
  assert.ok(Number.isFinite(seconds) && Number.isFinite(rms), `sox stat said: ${result.stderr}`);
  return { seconds, rms };
}

/** Leading and trailing quiet trimmed (below 1 % of full scale for 50 ms): how long the speech itself lasts. */
const TRIM = ['silence', '1', '0.05', '1%', 'reverse', 'silence', '1', '0.05', '1%', 'reverse'];

/** The message as the speech command says it, at the phone's rate: how long its speech lasts. */
function synthesizedSeconds(dir: string): number {
  const wav = join(dir, 'expected.wav');
  const spoken = spawnSync('espeak-ng', ['--stdin', '--stdout'], { input: RENDERED });
  writeFileSync(wav, spoken.stdout);
  const phone = join(dir, 'expected-8k.wav');
  assert.equal(spawnSync('sox', [wav, '-r', '8000', phone]).status, 0);
  return soxStat(phone, TRIM).seconds;
}

/** When the verdict was recorded (its `answered_by` event). */
const verdictTime = async (env: SipRouteEnv, runId: number): Promise<number> => {
  const row = await env.deps.store.db.selectFrom('run_events').select(['at']).where('run_id', '=', runId).where('type', '=', 'answered_by').executeTakeFirstOrThrow();
  return Number(row.at);
};

const skip = baresipSkip() || labelledSetSkip();
for (const store of await storeCases()) {
  describe(`a message left on a SIP call's voicemail, baresip as the box (${store.kind})`, { skip: store.skip || skip }, () => {
    it('speaks the rendered message after the greeting\'s beep, with the runtime\'s stream stopped first, then hangs up: the run completes voicemail_left', async (t) => {
      const callee = await voicemailBox(t);
      const env = await leaveEnv(t, store.kind, callee, { SIP_SPEECH_COMMAND: SPEECH_COMMAND });
      const runId = await call(env);
      const stream = await env.runtime.stream(0);
      const run = await waitForRun(env, runId, ended, scaledTimeout(40_000));
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'voicemail_left');
      assert.equal(run.answered_by, 'machine');
      assert.equal(run.raw_answered_by, 'machine_end_beep');
      assert.match(run.raw_provider_status ?? '', /^message played \(\d+\.\d s\), BYE$/);
      const event = await env.deps.store.db.selectFrom('run_events').select(['data']).where('run_id', '=', runId).where('type', '=', 'answered_by').executeTakeFirstOrThrow();
      const data = (typeof event.data === 'string' ? JSON.parse(event.data) : event.data) as Record<string, unknown>;
      assert.equal(data.action, 'leave_message');
      assert.equal(data.message, RENDERED);

      // The runtime had the call until the verdict, then got `stop` and its stream closed (as Twilio's TwiML update does).
      await stream.waitForClose();
      assert.equal(stream.messages.at(-1)?.event, 'stop');
      assert.deepEqual(stream.problems, []);

      // The verdict came once the greeting and its beep were over; the call went on for the message's length after it.
      const answeredAt = Date.parse(run.answered_at ?? '');
      const verdictAt = await verdictTime(env, runId);
      const endedAt = Date.parse(run.ended_at ?? '');
      const expected = synthesizedSeconds(callee.dir);
      t.diagnostic(`greeting ${callee.greetingMs} ms, verdict ${verdictAt - answeredAt} ms after the answer, end ${endedAt - verdictAt} ms after it; speech ${expected.toFixed(2)} s`);
      assert.ok(verdictAt - answeredAt >= callee.greetingMs - 300, 'the verdict waited for the beep to end');
      assert.ok(endedAt - verdictAt >= expected * 1000 - 100, 'the line stayed up for the message after the verdict');

      // What the box heard: the message alone (Dialtone sent nothing before it: no audio over the greeting), its speech as long as the synthesizer's.
      const heard = await heardFile(callee);
      const whole = soxStat(heard);
      const speech = soxStat(heard, TRIM);
      t.diagnostic(`baresip heard ${whole.seconds} s, ${speech.seconds} s of it speech (RMS ${speech.rms})`);
      assert.ok(speech.rms > 0.02, `speech, not silence (RMS ${speech.rms})`);
      assert.ok(Math.abs(speech.seconds - expected) < 0.3, `the speech heard lasts as long as the synthesized message (${speech.seconds} s, expected ${expected} s)`);
      assert.ok(whole.seconds < expected + 1, `nothing but the message was heard (${whole.seconds} s in all)`);
    });

    it('ends the run failed (voicemail_failed) and hangs up at once when the speech command fails: no message is claimed left', async (t) => {
      const callee = await voicemailBox(t);
      const env = await leaveEnv(t, store.kind, callee, { SIP_SPEECH_COMMAND: 'false' });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, scaledTimeout(30_000));
      assert.equal(run.state, 'failed');
      assert.equal(run.outcome_reason, 'voicemail_failed');
      assert.equal(run.raw_answered_by, 'machine_end_beep');
      assert.match(run.raw_provider_status ?? '', /^speech_command_failed: the speech command exited with status 1$/);
      const stream = env.runtime.streams[0];
      assert.ok(stream);
      await stream.waitForClose();
      assert.equal(stream.messages.at(-1)?.event, 'stop');
    });

    it('gives up a speech command slower than SIP_SPEECH_TIMEOUT_MS: the run ends failed (voicemail_failed, speech_timeout)', async (t) => {
      const callee = await voicemailBox(t);
      const env = await leaveEnv(t, store.kind, callee, { SIP_SPEECH_COMMAND: 'sleep 60', SIP_SPEECH_TIMEOUT_MS: '500' });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, scaledTimeout(30_000));
      assert.equal(run.state, 'failed');
      assert.equal(run.outcome_reason, 'voicemail_failed');
      assert.match(run.raw_provider_status ?? '', /^speech_timeout: the speech command did not finish within 500 ms$/);
    });

    it('ends the run completed, hangup (raw BYE), not voicemail_left, when the box hangs up before the message has been played', async (t) => {
      // The box's file ends half a second after its beep: baresip hangs up then, before the message's end.
      const callee = await voicemailBox(t, 500);
      const env = await leaveEnv(t, store.kind, callee, { SIP_SPEECH_COMMAND: SPEECH_COMMAND });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, scaledTimeout(30_000));
      assert.equal(run.raw_answered_by, 'machine_end_beep');
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'hangup');
      assert.equal(run.raw_provider_status, 'BYE', 'the box hung up, not Dialtone');
    });

    it('refuses leave_message before anything is dialed without SIP_SPEECH_COMMAND (direct calls, dry runs, campaigns), naming the setting, and admits it once set', async (t) => {
      const refusing = await sipRouteEnv(t, store.kind, { host: BARESIP_ADDRESS, port: 5060 }, { webhooks: false, definition: { ...definition(), answering_machine: LEAVE } });
      const initiate = (env: SipRouteEnv, dryRun = false) =>
        postJson(env.app, `${PATHS.initiateCall(env.f.agentUuid)}${dryRun ? '?dry_run=true' : ''}`, { phone_number: '+12025550123', telephony_configuration_id: env.routeId }, { key: env.f.apiKey });
      const campaign = (env: SipRouteEnv) =>
        postJson(env.app, CAMPAIGNS, { name: 'Drive', agent_uuid: env.f.agentUuid, mode: 'published', telephony_configuration_id: env.routeId, answering_machine: LEAVE }, { key: env.f.apiKey });
      for (const response of [await initiate(refusing), await initiate(refusing, true), await campaign(refusing)]) {
        const problem = assertProblem(response, 422, 'machine_detection_unsupported');
        assert.match(String(problem.detail), /cannot leave a message on a SIP call: SIP_SPEECH_COMMAND is not set/);
      }
      assert.equal((await refusing.deps.store.db.selectFrom('workflow_runs').select('id').execute()).length, 0, 'nothing was dialed');
      assert.equal((await refusing.deps.store.db.selectFrom('campaigns').select('id').execute()).length, 0);

      // With the setting the same requests are admitted (a dry run creates nothing; the campaign is created as a draft).
      const speaking = await sipRouteEnv(t, store.kind, { host: BARESIP_ADDRESS, port: 5060 }, { webhooks: false, env: { SIP_SPEECH_COMMAND: SPEECH_COMMAND }, definition: { ...definition(), answering_machine: LEAVE } });
      const admitted = await initiate(speaking, true);
      assert.equal(admitted.statusCode, 200, admitted.body);
      const created = await campaign(speaking);
      assert.equal(created.statusCode, 201, created.body);
      // A route with media_address still cannot: Dialtone never hears its calls.
      const elsewhere = await createTelephonyConfiguration(speaking.deps.store, speaking.deps.cipher, { orgId: speaking.f.orgId, name: 'Media server', provider: 'sip', callerIds: ['+12025550100'], settings: { host: BARESIP_ADDRESS, port: 5060, media_address: '127.0.0.1' } }, Date.now());
      const refused = assertProblem(await initiate({ ...speaking, routeId: elsewhere.id }), 422, 'machine_detection_unsupported');
      assert.match(String(refused.detail), /media_address/);
    });
  });
}
