// Simulated calls streamed to the agent runtime (issue 34 item 4, docs/simulator.md, "Streaming to
// the agent runtime"): with AGENT_RUNTIME_URL set, an answered simulated call opens the same Media
// Streams WebSocket a SIP call does, the simulated callee speaking (a tone pattern, or a file) and
// hearing what the runtime plays, paced out at real time. The runtime is the media tests' own
// (helpers/test-runtime.ts), which checks every message against Twilio's documented shapes.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import alawmulaw from 'alawmulaw';
import { verifyRunToken } from '../src/runtime/run-token.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import type { DecodedRoute } from '../src/telephony/provider.js';
import { routeInputProblems } from '../src/telephony/routes.js';
import { defaultVoice, voiceFromFile } from '../src/telephony/simulator/audio.js';
import { simulatorDefinition } from '../src/telephony/simulator/definition.js';
import { SimulatorProvider, type SimulatorRouteConfig } from '../src/telephony/simulator/provider.js';
import { postJson } from './helpers/app.js';
import { decodeMulaw, dominantFrequency, loudness, pcmWav, readWavSamples } from './helpers/audio.js';
import { buildWithDispatcher, ended, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { startTestRuntime, type RuntimeStream, type TestRuntime } from './helpers/test-runtime.js';
import { scaledTimeout } from './helpers/timeouts.js';

// Captured before any test mocks them: real waits for real sockets while the clock is fake.
const realSetTimeout = globalThis.setTimeout;
const realDelay = (ms: number) => new Promise((resolve) => realSetTimeout(resolve, ms));

/** μ-law of a sine at `frequency` Hz, `ms` long, made here (no sox needed). */
function toneMulaw(frequency: number, ms: number): Buffer {
  const linear = new Int16Array(ms * 8);
  for (let n = 0; n < linear.length; n++) linear[n] = Math.round(12_000 * Math.sin((2 * Math.PI * frequency * n) / 8000));
  return Buffer.from(alawmulaw.mulaw.encode(linear));
}

/** A TCP port nothing listens on: a runtime that cannot be reached. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The callee's audio the stream carried, decoded to linear samples. */
function calleeSamples(stream: RuntimeStream): Int16Array {
  return decodeMulaw(stream.audio());
}

interface StreamEnv extends DispatchEnv {
  f: OrgFixture;
  runtime: TestRuntime;
  recordings: string;
}

/**
 * Dialtone with AGENT_RUNTIME_URL at the test's runtime, a simulated second of 100 ms (so
 * `+120255501NN` talks (NN − 50) tenths of a second) and a long maximum duration.
 */
async function streamEnv(t: TestContext, kind: StoreKind, env: Record<string, string> = {}, runtimeUrl?: string): Promise<StreamEnv> {
  const runtime = await startTestRuntime(t);
  const recordings = mkdtempSync(join(tmpdir(), 'dialtone-sim-heard-'));
  const built = await buildWithDispatcher(t, kind, {
    env: { AGENT_RUNTIME_URL: runtimeUrl ?? runtime.url, SIMULATOR_SECOND_MS: '100', MAX_CALL_DURATION_MS: '60000', RING_TIMEOUT_MS: '5000', SIMULATOR_STREAM_RECORD_DIR: recordings, ...env },
  });
  return { ...built, f: await createOrgFixture(built.deps), runtime, recordings };
}

async function call(env: StreamEnv, to: string, routeId?: number): Promise<number> {
  const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: to, ...(routeId ? { telephony_configuration_id: routeId } : {}) }, { key: env.f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return response.json().workflow_run_id as number;
}

function act(env: StreamEnv, runId: number, action: string, token: string, body: unknown): Promise<LightMyRequestResponse> {
  return env.app.inject({
    method: 'POST',
    url: `/api/v1/runtime/runs/${runId}/${action}`,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
}

/** Talks two simulated seconds of 100 ms each: long enough for a stream that opened late on a loaded machine. */
const TALKS_TWO_SECONDS = '+12025550170';
const TALKS_ON = '+12025550107';

for (const store of await storeCases()) {
  describe(`Simulated calls streamed to the agent runtime (${store.kind})`, { skip: store.skip }, () => {
    it('streams an answered call with start carrying run_id and a valid token, the callee\'s tone in 20 ms frames, the runtime\'s audio played and recorded, and stop when the callee hangs up', async (t) => {
      const env = await streamEnv(t, store.kind);
      const runId = await call(env, TALKS_TWO_SECONDS);
      const stream = await env.runtime.stream(0);
      const start = stream.start;
      assert.ok(start);
      assert.equal(start.customParameters.run_id, String(runId));
      assert.ok(verifyRunToken(env.deps.cipher, runId, start.customParameters.token ?? '', Date.now()), 'the token is the run\'s own');
      const run = await waitForRun(env, runId, (r) => r.provider_call_id !== null);
      assert.equal(start.callSid, run.provider_call_id);
      assert.equal(start.accountSid, String(env.f.orgId));
      // The runtime answers with half a second of 1000 Hz and a mark after it.
      stream.play(toneMulaw(1000, 500), 1234);
      stream.mark('greeting');
      await stream.waitFor('its mark back', (m) => m.event === 'mark' && m.mark?.name === 'greeting');
      await stream.waitFor('stop', (m) => m.event === 'stop');
      await stream.waitForClose();
      const done = await waitForRun(env, runId, ended, scaledTimeout(5000));
      assert.equal(done.state, 'completed');
      assert.equal(done.outcome_reason, 'hangup');
      assert.deepEqual(stream.problems, [], 'every message is one of Twilio\'s, in its documented shape');
      // The callee's voice from the stream's opening to the hang-up, at most 2 s of it, in order:
      // its 440 Hz tone first.
      const media = stream.media;
      assert.ok(media.length >= 10 && media.length <= 101, `${media.length} frames in two seconds of talk`);
      media.forEach((m, i) => assert.equal(m.timestamp, String(i * 20)));
      const heard = calleeSamples(stream);
      assert.deepEqual(dominantFrequency(heard.subarray(0, Math.min(4000, heard.length)), [440, 1000]), { frequency: 440, clear: true });
      // The callee heard the runtime's tone, whole and in order, and nothing else: its recording
      // holds silence (digital zeros: before the tone, after it, and any gap a late timer made in the
      // pacing on a loaded machine, as a SIP callee would hear it) and the tone's samples.
      const recorded = readWavSamples(join(env.recordings, `run-${runId}.wav`));
      const sounds = (samples: Int16Array) => Buffer.from(samples.filter((sample) => sample !== 0).buffer);
      assert.ok(sounds(recorded).equals(sounds(decodeMulaw(toneMulaw(1000, 500)))), 'the recording holds the runtime\'s tone');
      const first = recorded.findIndex((sample) => sample !== 0);
      assert.deepEqual(dominantFrequency(recorded.subarray(first, first + 4000), [440, 1000]), { frequency: 1000, clear: true });
    });

    it('hangs the simulated call up when the runtime closes the stream: completed, stream_closed', async (t) => {
      const env = await streamEnv(t, store.kind);
      const runId = await call(env, TALKS_ON);
      const stream = await env.runtime.stream(0);
      await stream.waitFor('audio', (m) => m.event === 'media');
      stream.socket.close(1000, 'bye');
      const done = await waitForRun(env, runId, ended, scaledTimeout(5000));
      assert.equal(done.state, 'completed');
      assert.equal(done.outcome_reason, 'stream_closed');
      assert.match(done.raw_provider_status ?? '', /closed the media stream \(1000 bye\)/);
    });

    it('ends the call failed, agent_runtime_unreachable, when the runtime cannot be reached', async (t) => {
      const env = await streamEnv(t, store.kind, {}, `ws://127.0.0.1:${await closedPort()}/media`);
      const runId = await call(env, TALKS_ON);
      const done = await waitForRun(env, runId, ended, scaledTimeout(5000));
      assert.equal(done.state, 'failed');
      assert.equal(done.outcome_reason, 'agent_runtime_unreachable');
      assert.match(done.raw_provider_status ?? '', /^agent runtime unreachable: /);
    });

    it('acts on a streamed call through the runtime API: digits recorded, a result stored, and a hang-up that sends stop', async (t) => {
      const env = await streamEnv(t, store.kind);
      const runId = await call(env, TALKS_ON);
      const stream = await env.runtime.stream(0);
      const token = stream.start?.customParameters.token ?? '';
      await waitForRun(env, runId, (r) => r.state === 'in_progress');
      assert.equal((await act(env, runId, 'dtmf', token, { digits: '12#' })).statusCode, 200);
      assert.deepEqual(env.simulator.callControls, [{ runId, digits: '12#' }]);
      assert.equal((await act(env, runId, 'result', token, { data: { outcome: 'booked' } })).statusCode, 200);
      const hangup = await act(env, runId, 'hangup', token, { reason: 'done' });
      assert.equal(hangup.statusCode, 200, hangup.body);
      await stream.waitFor('stop', (m) => m.event === 'stop');
      await stream.waitForClose();
      const done = await waitForRun(env, runId, ended);
      assert.equal(done.state, 'completed');
      assert.equal(done.outcome_reason, 'agent_hangup');
      assert.deepEqual(done.result, { outcome: 'booked' });
    });

    it('ends the stream with stop when a transfer is answered: the call is the target\'s', async (t) => {
      const env = await streamEnv(t, store.kind, { SIMULATOR_RING_MS: '50' });
      const runId = await call(env, TALKS_ON);
      const stream = await env.runtime.stream(0);
      const token = stream.start?.customParameters.token ?? '';
      await waitForRun(env, runId, (r) => r.state === 'in_progress');
      assert.equal((await act(env, runId, 'transfer', token, { to: '+12025550177' })).statusCode, 200);
      await stream.waitFor('stop', (m) => m.event === 'stop');
      const done = await waitForRun(env, runId, ended);
      assert.equal(done.state, 'completed');
      assert.equal(done.outcome_reason, 'transferred');
    });

    it('plays SIMULATOR_STREAM_AUDIO\'s file as the callee\'s voice, once, then silence', async (t) => {
      const dir = mkdtempSync(join(tmpdir(), 'dialtone-sim-voice-'));
      const file = join(dir, 'voice.ulaw');
      writeFileSync(file, toneMulaw(1000, 300));
      const env = await streamEnv(t, store.kind, { SIMULATOR_STREAM_AUDIO: file });
      await call(env, TALKS_TWO_SECONDS);
      const stream = await env.runtime.stream(0);
      await stream.waitFor('stop', (m) => m.event === 'stop');
      const heard = calleeSamples(stream);
      assert.ok(heard.length > 2400, `${heard.length} samples heard`);
      assert.deepEqual(dominantFrequency(heard.subarray(0, 2400), [440, 1000]), { frequency: 1000, clear: true });
      assert.equal(loudness(heard.subarray(2400)), 0, 'digital silence after the file');
    });

    it('does not stream the calls of a route whose stream setting is false, nor any with SIMULATOR_STREAM=false', async (t) => {
      const env = await streamEnv(t, store.kind);
      const route = await createTelephonyConfiguration(
        env.deps.store,
        env.deps.cipher,
        { orgId: env.f.orgId, name: 'Quiet', provider: 'simulator', callerIds: ['+12025550100'], settings: { stream: false } },
        Date.now(),
      );
      const quiet = await waitForRun(env, await call(env, '+12025550153', route.id), ended);
      assert.equal(quiet.state, 'completed');
      assert.equal(quiet.outcome_reason, 'hangup');
      // The default route streams (the runtime hears of it), so the silence above was the setting's.
      await call(env, '+12025550153');
      await env.runtime.stream(0);
      assert.equal(env.runtime.streams.length, 1);

      const off = await streamEnv(t, store.kind, { SIMULATOR_STREAM: 'false' });
      const byRoute = await createTelephonyConfiguration(
        off.deps.store,
        off.deps.cipher,
        { orgId: off.f.orgId, name: 'Loud', provider: 'simulator', callerIds: ['+12025550100'], settings: { stream: 'true' } },
        Date.now(),
      );
      assert.equal((await waitForRun(off, await call(off, '+12025550153'), ended)).state, 'completed');
      assert.equal(off.runtime.streams.length, 0, 'SIMULATOR_STREAM=false: no stream');
      await call(off, '+12025550153', byRoute.id);
      await off.runtime.stream(0);
    });
  });
}

describe('Simulated streams on a fake clock', () => {
  const route: DecodedRoute<SimulatorRouteConfig> = { id: 1, orgId: 7, provider: 'simulator', capabilities: simulatorDefinition.capabilities, callerIds: [], ringTimeoutMs: undefined, config: {} };

  it('sends one frame of the callee\'s voice per 20 ms of the clock, paces the runtime\'s audio out one frame per 20 ms, and sends stop when the talk time ends', async (t) => {
    const runtime = await startTestRuntime(t);
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
    const events: string[] = [];
    const simulator = new SimulatorProvider(
      { latencyMs: 0, ringMs: 0, talkMs: 1_000, secondMs: 100 },
      { now: () => Date.now() },
      (event) => void events.push(event.kind),
      undefined,
      undefined,
      undefined,
      {
        streaming: {
          runtime: { url: runtime.url, parameters: (runId) => ({ run_id: String(runId), token: 'not-checked-here' }) },
          byDefault: true,
          limits: { connectTimeoutMs: 5_000, maxMessageBytes: 1_048_576, maxQueuedMs: 120_000, catchUpMs: 100 },
          voice: defaultVoice(),
          recordDir: undefined,
        },
        warn: () => undefined,
      },
    );
    t.after(() => simulator.close());
    const { providerCallId } = await simulator.dial({ runId: 5, to: '+12025550123', from: null, ringTimeoutMs: 30_000, route });
    t.mock.timers.tick(0); // ringing
    t.mock.timers.tick(0); // answered: the stream opens (real sockets, fake time standing still)
    assert.deepEqual(events, ['ringing', 'answered']);
    const counts = () => (simulator as unknown as { streams: Map<string, { counts: { sent: number; heard: number } }> }).streams.get(providerCallId)?.counts;
    const deadline = performance.now() + scaledTimeout(10_000);
    const waitReal = async (what: string, done: () => boolean) => {
      while (!done()) {
        if (performance.now() > deadline) throw new Error(`never: ${what}`);
        await realDelay(5);
      }
    };
    // At the opening, the voice's first frame goes at once.
    await waitReal('the stream opens', () => (counts()?.sent ?? 0) === 1);
    const stream = runtime.streams[0] as RuntimeStream;
    assert.equal(stream.start?.streamSid, stream.messages[1]?.streamSid);
    // The runtime sends 200 ms of audio at once: the first frame plays on arrival, then one per 20 ms.
    stream.play(toneMulaw(1000, 200), 1600);
    await waitReal('the runtime\'s audio arrives', () => counts()?.heard === 1);
    for (let step = 1; step <= 12; step++) {
      t.mock.timers.tick(20);
      assert.equal(counts()?.sent, 1 + step, `${step * 20} ms: one more frame of the voice`);
      assert.equal(counts()?.heard, Math.min(10, 1 + step), `${step * 20} ms: one more frame of the runtime's audio, until its 10 are played`);
    }
    // The talk time (1 s) ends: stop, and the call completes.
    for (let ms = 12 * 20; ms < 1_000; ms += 20) t.mock.timers.tick(20);
    assert.deepEqual(events, ['ringing', 'answered', 'completed']);
    assert.equal(counts(), undefined, 'the stream is over');
    await waitReal('stop', () => stream.messages.some((m) => m.event === 'stop'));
    assert.equal(stream.media.length, 50, 'a second of voice: 50 frames');
    t.mock.timers.reset();
  });

  it('refuses a stream setting that is not true or false, naming it', () => {
    const problems = routeInputProblems('simulator', { settings: { stream: 'yes' }, credentials: null });
    assert.deepEqual(problems, [{ pointer: '/settings/stream', detail: 'Must be true or false: whether answered calls stream to AGENT_RUNTIME_URL, in place of SIMULATOR_STREAM.' }]);
  });

  it('refuses a voice file it cannot play at start-up, saying why', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dialtone-sim-bad-'));
    const stereo = join(dir, 'stereo.wav');
    const wav = pcmWav(new Int16Array(1600));
    wav.writeUInt16LE(2, 22);
    writeFileSync(stereo, wav);
    assert.throws(() => voiceFromFile(stereo), /2 channel\(s\) at 8000 Hz; the simulator plays 8000 Hz mono/);
  });
});
