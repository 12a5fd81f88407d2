// SIP calls relayed to the agent runtime (issue 34): each call gets its own RTP port, and once
// answered Dialtone opens a WebSocket to AGENT_RUNTIME_URL speaking Twilio's Media Streams messages.
// The callee is baresip (Debian baresip-core), a real user agent playing a tone made by sox and
// recording what it hears (its sndfile module); the runtime is a WebSocket server in the test
// (helpers/test-runtime.ts), which checks every message against Twilio's documented shapes.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { verifyRunToken } from '../src/runtime/run-token.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson } from './helpers/app.js';
import { decodeMulaw, dominantFrequency, loudness, readWavSamples, soxSkip, toneMulaw, toneWav } from './helpers/audio.js';
import { BARESIP_ADDRESS, baresipSkip, startBaresip, type Baresip, type BaresipOptions } from './helpers/baresip.js';
import { buildWithDispatcher, ended, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { DIALTONE_SIP_ADDRESS, freeUdpPort } from './helpers/sipp.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { startTestRuntime, type RuntimeStream, type TestRuntime } from './helpers/test-runtime.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

/** The tones the callees play and the runtime sends: far enough apart for Goertzel to tell them apart. */
const TONES = [440, 1000, 1700, 2500] as const;

interface MediaEnv extends DispatchEnv {
  f: OrgFixture;
  routeId: number;
  runtime: TestRuntime;
}

/** Dialtone with a SIP route (no media_address) and AGENT_RUNTIME_URL pointing at the test's runtime (or `runtimeUrl`). */
async function mediaEnv(t: TestContext, kind: StoreKind, callee: { port: number }, options: { runtimeUrl?: string; env?: Record<string, string> } = {}): Promise<MediaEnv> {
  const runtime = await startTestRuntime(t);
  // A range of its own per test, so parallel test files rarely meet (a port taken is skipped anyway).
  const rtpBase = 20_000 + 2 * Math.floor(Math.random() * 10_000);
  const env = await buildWithDispatcher(t, kind, {
    env: {
      SIP_BIND_ADDRESS: DIALTONE_SIP_ADDRESS,
      SIP_PUBLIC_ADDRESS: DIALTONE_SIP_ADDRESS,
      SIP_PORT: String(await freeUdpPort(DIALTONE_SIP_ADDRESS)),
      SIP_RTP_PORT_MIN: String(rtpBase),
      SIP_RTP_PORT_MAX: String(rtpBase + 99),
      AGENT_RUNTIME_URL: options.runtimeUrl ?? runtime.url,
      RING_TIMEOUT_MS: '8000',
      MAX_CALL_DURATION_MS: '60000',
      REAPER_GRACE_MS: '5000',
      ...options.env,
    },
  });
  const f = await createOrgFixture(env.deps);
  const route = await createTelephonyConfiguration(
    env.deps.store,
    env.deps.cipher,
    { orgId: f.orgId, name: 'Trunk', provider: 'sip', callerIds: ['+12025550100'], settings: { host: BARESIP_ADDRESS, port: callee.port, transport: 'udp' } },
    Date.now(),
  );
  return { ...env, f, routeId: route.id, runtime };
}

async function call(env: MediaEnv, to = '+12025550123'): Promise<number> {
  const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: to, telephony_configuration_id: env.routeId }, { key: env.f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return response.json().workflow_run_id as number;
}

/** A baresip playing a tone of `frequency` Hz and recording what it hears into a directory of its own. */
async function toneCallee(t: TestContext, frequency: number, options: BaresipOptions = {}): Promise<Baresip & { recordings: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-media-'));
  const source = join(dir, `tone-${frequency}.wav`);
  toneWav(source, frequency, 60);
  const recordings = join(dir, 'heard');
  await import('node:fs').then((fs) => fs.mkdirSync(recordings));
  return { ...(await startBaresip(t, { source, record: recordings, ...options })), recordings };
}

/** What baresip heard (its sndfile `-dec.wav`), once the call's recording is closed. */
async function heardByCallee(callee: { recordings: string }): Promise<Int16Array> {
  const deadline = Date.now() + scaledTimeout(10_000);
  for (;;) {
    const file = readdirSync(callee.recordings).find((name) => name.endsWith('-dec.wav'));
    const samples = file ? readWavSamples(join(callee.recordings, file)) : new Int16Array(0);
    if (samples.length > 0) return samples;
    if (Date.now() > deadline) throw new Error(`baresip recorded nothing in ${callee.recordings}: ${readdirSync(callee.recordings).join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Waits until the stream holds `count` media messages. */
async function mediaCount(stream: RuntimeStream, count: number): Promise<void> {
  await stream.waitFor(`${count} media messages`, () => stream.media.length >= count);
}

/**
 * Frames in order, none lost: every message after `connected` counts up its sequence number by one
 * from 1 (marks and media share the count, as Twilio's do), chunks count up by one, and media
 * timestamps by 20 ms.
 */
function assertContiguous(stream: RuntimeStream): void {
  assert.equal(stream.messages[0]?.event, 'connected');
  stream.messages.slice(1).forEach((message, index) => assert.equal(message.sequenceNumber, String(index + 1), `message ${index + 1} (${message.event}): sequence numbers count up by one`));
  const media = stream.messages.filter((m) => m.event === 'media');
  assert.ok(media.length > 0);
  media.forEach((message, index) => {
    assert.equal(message.media?.chunk, String(index + 1), `media ${index}: chunks count up by one from 1`);
    assert.equal(message.media?.timestamp, String(index * 20), `media ${index}: 20 ms apart, none missing`);
    assert.equal(Buffer.from(message.media?.payload ?? '', 'base64').length, 160, `media ${index}: 20 ms of μ-law`);
  });
}

const skip = baresipSkip() || soxSkip();
for (const store of await storeCases()) {
  describe(`SIP calls relayed to the agent runtime over Media Streams, baresip as the callee (${store.kind})`, { skip: store.skip || skip }, () => {
    it('relays the callee\'s audio to the runtime in order with none lost, plays the runtime\'s audio to the callee, answers its mark after the audio, and sends stop when the callee hangs up', async (t) => {
      const began = Date.now();
      const step = (what: string) => t.diagnostic(`${Date.now() - began} ms: ${what}`);
      const callee = await toneCallee(t, 440);
      const env = await mediaEnv(t, store.kind, callee);
      const runId = await call(env);
      const stream = await env.runtime.stream(0);
      const run = await waitForRun(env, runId, (r) => r.state === 'in_progress', scaledTimeout(15_000));
      step('answered');

      // start: Twilio's fields, the run's id and a token for it, the SIP call id as callSid.
      assert.equal(stream.messages[0]?.event, 'connected');
      assert.equal(stream.messages[1]?.event, 'start');
      const start = stream.start;
      assert.ok(start);
      assert.deepEqual(Object.keys(start.customParameters).sort(), ['run_id', 'token']);
      assert.equal(start.customParameters.run_id, String(runId));
      assert.ok(verifyRunToken(env.deps.cipher, runId, start.customParameters.token ?? '', Date.now()), 'the token opens the run');
      assert.ok(!verifyRunToken(env.deps.cipher, runId + 1, start.customParameters.token ?? '', Date.now()), 'and no other');
      assert.equal(start.callSid, run.provider_call_id);
      assert.equal(start.accountSid, String(env.f.orgId));
      assert.deepEqual(start.tracks, ['inbound']);
      assert.match(start.streamSid, /^MZ[0-9a-f]{32}$/);

      // 2 s of the callee's tone: in order, none lost, and it is the callee's 440 Hz.
      await mediaCount(stream, 100);
      step('100 frames');
      const heard = decodeMulaw(stream.audio().subarray(1600));
      assert.deepEqual(dominantFrequency(heard, TONES), { frequency: 440, clear: true });

      // 1 s of 1000 Hz in chunks of 333 bytes (not a multiple of 20 ms), then a mark: it comes back once played.
      const sentAt = performance.now();
      stream.play(toneMulaw(1000, 1), 333);
      stream.mark('after-tone');
      const markIndex = await stream.waitFor('the mark back', (m) => m.event === 'mark' && m.mark?.name === 'after-tone');
      step('mark back');
      const markDelay = (stream.arrivals[markIndex] ?? 0) - sentAt;
      assert.ok(markDelay >= 1000 - 40, `the mark came back after its 1 s of audio was played (${Math.round(markDelay)} ms)`);

      // The callee hangs up: the runtime gets stop, then the socket closes; the run completes.
      await mediaCount(stream, stream.media.length + 25);
      step('hanging up');
      await callee.hangUp();
      await stream.waitFor('stop', (m) => m.event === 'stop').catch((error: Error) => assert.fail(`${error.message}\n${callee.output().slice(-4000)}`));
      await stream.waitForClose();
      step('stream closed');
      const last = stream.messages.at(-1);
      assert.equal(last?.event, 'stop');
      assert.deepEqual((last as { stop?: unknown }).stop, { accountSid: String(env.f.orgId), callSid: run.provider_call_id });
      const finished = await waitForRun(env, runId, ended, scaledTimeout(15_000));
      assert.equal(finished.state, 'completed');
      assert.equal(finished.raw_provider_status, 'BYE');

      assertContiguous(stream);
      assert.deepEqual(stream.problems, [], 'every message is one of Twilio\'s, exactly');

      // What the callee heard: the runtime's 1000 Hz tone, loud, for about a second.
      const recorded = await heardByCallee(callee);
      const loud = [];
      for (let offset = 0; offset + 160 <= recorded.length; offset += 160) if (loudness(recorded.subarray(offset, offset + 160)) > 1000) loud.push(recorded.subarray(offset, offset + 160));
      assert.ok(loud.length >= 45 && loud.length <= 55, `about 50 loud frames (1 s) heard by the callee, not ${loud.length}`);
      assert.deepEqual(dominantFrequency(Int16Array.from(loud.flatMap((frame) => [...frame])), TONES), { frequency: 1000, clear: true });
    });
  });
}
