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
import { decodeMulaw, dominantFrequency, loudness, readWavSamples, soxSkip, toneMulaw, toneWav } from './helpers/audio.js';
import { BARESIP_ADDRESS, BARESIP_USER, baresipSkip, startBaresip, type Baresip, type BaresipOptions } from './helpers/baresip.js';
import { ended, waitForRun } from './helpers/dispatch.js';
import { KAMAILIO_ADDRESS, kamailioSkip, PROXY_SERVER_NAME, startKamailio, testPki } from './helpers/kamailio.js';
import { callOverRoute as call, sipRouteEnv, type SipRouteEnv, type SipRouteOptions } from './helpers/sip-route.js';
import { freeUdpPort } from './helpers/sipp.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { startTestRuntime, type RuntimeStream, type TestRuntime } from './helpers/test-runtime.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

/** The tones the callees play and the runtime sends: far enough apart for Goertzel to tell them apart. */
const TONES = [440, 1000, 1700, 2500] as const;

type MediaEnv = SipRouteEnv & { runtime: TestRuntime };

/** Dialtone with a SIP route (no media_address) to baresip at `callee`, AGENT_RUNTIME_URL pointing at the test's runtime (or `runtimeUrl`). */
async function mediaEnv(t: TestContext, kind: StoreKind, callee: { port: number }, options: SipRouteOptions & { runtimeUrl?: string } = {}): Promise<MediaEnv> {
  const runtime = await startTestRuntime(t);
  const env = await sipRouteEnv(t, kind, { host: BARESIP_ADDRESS, port: callee.port }, { ...options, env: { AGENT_RUNTIME_URL: options.runtimeUrl ?? runtime.url, ...options.env } });
  return { ...env, runtime };
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

/** The frames of `samples` louder than silence (the runtime's tone, not the quiet between). */
function loudFrames(samples: Int16Array): Int16Array[] {
  const loud: Int16Array[] = [];
  for (let offset = 0; offset + 160 <= samples.length; offset += 160) if (loudness(samples.subarray(offset, offset + 160)) > 1000) loud.push(samples.subarray(offset, offset + 160));
  return loud;
}

const joined = (frames: Int16Array[]): Int16Array => Int16Array.from(frames.flatMap((frame) => [...frame]));

/** The port Dialtone's RTP came from, as baresip reports it (symmetric RTP: where it sends too). */
function dialtoneRtpPort(callee: Baresip): number {
  const match = /receiving from 127\.0\.0\.1:(\d+)/.exec(callee.output());
  assert.ok(match, callee.output().slice(-3000));
  return Number(match[1]);
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

      // What the callee heard: the runtime's 1000 Hz tone, loud, for about a second (baresip's
      // jitter buffer keeps the last few frames of a talkspurt until more packets come: not all 50).
      const loud = loudFrames(await heardByCallee(callee));
      assert.ok(loud.length >= 30 && loud.length <= 50, `about 50 loud frames (1 s) heard by the callee, not ${loud.length}`);
      assert.deepEqual(dominantFrequency(joined(loud), TONES), { frequency: 1000, clear: true });
      // The call's own RTP port, from the configured range.
      const port = dialtoneRtpPort(callee);
      assert.ok(port >= env.rtpPorts.min && port <= env.rtpPorts.max && port % 2 === 0, `RTP port ${port} is an even port of ${env.rtpPorts.min}-${env.rtpPorts.max}`);
    });

    if (store.kind === 'postgres') return;

    it('drops the queued audio on clear, answering the marks it dropped: the callee hears the start of the cleared audio, then the next audio at once', async (t) => {
      const callee = await toneCallee(t, 440);
      const env = await mediaEnv(t, store.kind, callee);
      const runId = await call(env);
      const stream = await env.runtime.stream(0);
      await mediaCount(stream, 10);
      stream.play(toneMulaw(1000, 10), 8000);
      stream.mark('end-of-ten-seconds');
      // Half a second of play, counted by the callee's own frames (they arrive at real time).
      await mediaCount(stream, stream.media.length + 25);
      stream.clear();
      const dropped = await stream.waitFor('the dropped mark', (m) => m.event === 'mark' && m.mark?.name === 'end-of-ten-seconds');
      // What comes next plays at once (it also pushes the cleared tone's last frames out of baresip's jitter buffer).
      stream.play(toneMulaw(2500, 1), 160);
      stream.mark('after-clear');
      const after = await stream.waitFor('the mark after clear', (m) => m.event === 'mark' && m.mark?.name === 'after-clear');
      assert.ok(dropped < after);
      await mediaCount(stream, stream.media.length + 25);
      await callee.hangUp();
      await stream.waitForClose();
      assert.equal((await waitForRun(env, runId, ended, scaledTimeout(15_000))).state, 'completed');
      assertContiguous(stream);
      assert.deepEqual(stream.problems, []);
      const tones = loudFrames(await heardByCallee(callee)).map((frame) => dominantFrequency(frame, TONES).frequency);
      const cleared = tones.filter((f) => f === 1000).length;
      const next = tones.filter((f) => f === 2500).length;
      assert.ok(cleared >= 1, `the callee heard the tone before the clear (${tones.join(' ')})`);
      assert.ok(cleared < 250, `and not the 10 s queued behind it: ${cleared} frames of 500`);
      assert.ok(next >= 40, `then the second of 2500 Hz sent after the clear (${next} frames)`);
      assert.ok(tones.lastIndexOf(1000) < tones.indexOf(2500), 'in that order');
    });

    it('keeps two concurrent calls on one route apart: each runtime stream carries its own callee\'s tone, and each callee hears only its own stream', async (t) => {
      const [first, second] = [await toneCallee(t, 440), await toneCallee(t, 1700)];
      const env = await mediaEnv(t, store.kind, first);
      const runs = [await call(env, `sip:${BARESIP_USER}@${BARESIP_ADDRESS}:${first.port}`), await call(env, `sip:${BARESIP_USER}@${BARESIP_ADDRESS}:${second.port}`)];
      const streams = [await env.runtime.stream(0), await env.runtime.stream(1)];
      const byRun = (runId: number) => streams.find((s) => s.start?.customParameters.run_id === String(runId)) as RuntimeStream;
      const [a, b] = [byRun(runs[0] as number), byRun(runs[1] as number)];
      assert.ok(a && b && a !== b, 'one stream per run');
      await Promise.all([mediaCount(a, 60), mediaCount(b, 60)]);
      assert.deepEqual(dominantFrequency(decodeMulaw(a.audio().subarray(1600)), TONES), { frequency: 440, clear: true });
      assert.deepEqual(dominantFrequency(decodeMulaw(b.audio().subarray(1600)), TONES), { frequency: 1700, clear: true });
      a.play(toneMulaw(1000, 1), 160);
      b.play(toneMulaw(2500, 1), 160);
      a.mark('a');
      b.mark('b');
      await Promise.all([a.waitFor('mark a', (m) => m.event === 'mark'), b.waitFor('mark b', (m) => m.event === 'mark')]);
      await first.hangUp();
      await second.hangUp();
      await Promise.all([a.waitForClose(), b.waitForClose()]);
      assertContiguous(a);
      assertContiguous(b);
      assert.deepEqual([...a.problems, ...b.problems], []);
      assert.deepEqual(dominantFrequency(joined(loudFrames(await heardByCallee(first))), TONES), { frequency: 1000, clear: true });
      assert.deepEqual(dominantFrequency(joined(loudFrames(await heardByCallee(second))), TONES), { frequency: 2500, clear: true });
      assert.notEqual(dialtoneRtpPort(first), dialtoneRtpPort(second), 'each call has its own RTP port');
    });

    it('transcodes a call answered in PCMA: the runtime gets μ-law, and the callee hears the runtime in A-law', async (t) => {
      const callee = await toneCallee(t, 440, { codec: 'PCMA' });
      const env = await mediaEnv(t, store.kind, callee);
      const runId = await call(env);
      const stream = await env.runtime.stream(0);
      await mediaCount(stream, 60);
      assert.match(callee.output(), /Set audio decoder: PCMA/);
      assert.deepEqual(dominantFrequency(decodeMulaw(stream.audio().subarray(1600)), TONES), { frequency: 440, clear: true });
      stream.play(toneMulaw(1000, 1), 400);
      stream.mark('played');
      await stream.waitFor('the mark', (m) => m.event === 'mark');
      await callee.hangUp();
      await stream.waitForClose();
      assert.equal((await waitForRun(env, runId, ended, scaledTimeout(15_000))).state, 'completed');
      assertContiguous(stream);
      assert.deepEqual(stream.problems, []);
      const loud = loudFrames(await heardByCallee(callee));
      assert.ok(loud.length >= 30 && loud.length <= 50, `the callee heard the second of tone (${loud.length} frames, less its jitter buffer's last few)`);
      assert.deepEqual(dominantFrequency(joined(loud), TONES), { frequency: 1000, clear: true });
    });

    it('hangs up when the runtime closes the stream: the run completes with outcome_reason stream_closed and the callee gets the BYE', async (t) => {
      const callee = await toneCallee(t, 440);
      const env = await mediaEnv(t, store.kind, callee);
      const runId = await call(env);
      const stream = await env.runtime.stream(0);
      await mediaCount(stream, 10);
      stream.socket.close(1000, 'done');
      const run = await waitForRun(env, runId, ended, scaledTimeout(15_000));
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'stream_closed');
      assert.match(String(run.raw_provider_status), /^the agent runtime closed the media stream \(1000 done\)$/);
      await callee.waitFor(/session closed/, scaledTimeout(10_000));
    });

    it('ends the call failed with outcome_reason agent_runtime_unreachable when the runtime cannot be reached, after hanging it up', async (t) => {
      const callee = await toneCallee(t, 440);
      const closedPort = await freeUdpPort('127.0.0.1'); // nothing listens on it over TCP either, almost surely
      const env = await mediaEnv(t, store.kind, callee, { runtimeUrl: `ws://127.0.0.1:${closedPort}/media` });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, scaledTimeout(15_000)).catch((error: Error) => assert.fail(`${error.message}\n${callee.output().slice(-3000)}`));
      assert.equal(run.state, 'failed');
      assert.equal(run.outcome_reason, 'agent_runtime_unreachable');
      assert.match(String(run.raw_provider_status), /^agent runtime unreachable: .*ECONNREFUSED/);
      assert.ok(run.answered_at, 'it was answered first');
      await callee.waitFor(/Call established[\s\S]*session closed/, scaledTimeout(10_000));
    });

    it('through Kamailio over TLS (signalling only: RTP goes straight to the callee), relays the call both ways the same', { skip: kamailioSkip() }, async (t) => {
      const kamailio = await startKamailio(t);
      const callee = await toneCallee(t, 1700);
      const env = await mediaEnv(t, store.kind, callee, {
        settings: { transport: 'tls', outbound_proxy: `sip:${KAMAILIO_ADDRESS}:${kamailio.tlsPort};transport=tls;lr`, tls_server_name: PROXY_SERVER_NAME, tls_ca_pem: testPki().caPem },
        credentials: { username: 'alice', password: 's3cret' },
      });
      const runId = await call(env);
      const stream = await env.runtime.stream(0).catch((error: Error) => assert.fail(`${error.message}\n${callee.output().slice(-3000)}\n${kamailio.output().slice(-3000)}`));
      assert.equal(stream.start?.customParameters.run_id, String(runId));
      await mediaCount(stream, 60);
      assert.deepEqual(dominantFrequency(decodeMulaw(stream.audio().subarray(1600)), TONES), { frequency: 1700, clear: true });
      stream.play(toneMulaw(440, 1), 1000);
      stream.mark('played');
      await stream.waitFor('the mark', (m) => m.event === 'mark');
      await mediaCount(stream, stream.media.length + 10);
      await callee.hangUp();
      await stream.waitForClose();
      assert.equal((await waitForRun(env, runId, ended, scaledTimeout(15_000))).state, 'completed');
      assertContiguous(stream);
      assert.deepEqual(stream.problems, []);
      assert.deepEqual(dominantFrequency(joined(loudFrames(await heardByCallee(callee))), TONES), { frequency: 440, clear: true });
      assert.deepEqual(kamailio.requests().filter((r) => r.endsWith(' tls')).map((r) => r.split(' ')[0]).slice(0, 3), ['INVITE', 'INVITE', 'ACK']);
    });
  });
}
