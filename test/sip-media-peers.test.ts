// SIP media against real peers when things go wrong or change mid-call (issue 34): SIPp answering
// and then sending no RTP (the media timeout hangs up), SIPp sending re-INVITEs (a new media
// address, hold, resume: test/sipp/reinvite-hold.xml), a runtime that accepts the WebSocket and then
// stalls, and baresip (a real user agent) pressing keys as RFC 4733 events, which reach the
// runtime as `dtmf` messages. The fake-timer versions are in test/sip-media-robustness.test.ts.
import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { TestContext } from 'node:test';
import { RtpPacket } from 'rtp.js/packets';
import { nodeBufferToDataView } from 'rtp.js/utils';
import { WebSocketServer, type WebSocket } from 'ws';
import { soxSkip, toneMulaw, toneWav } from './helpers/audio.js';
import { BARESIP_ADDRESS, baresipSkip, startBaresip } from './helpers/baresip.js';
import { ended, waitForRun } from './helpers/dispatch.js';
import { callOverRoute as call, sipRouteEnv, type SipRouteEnv, type SipRouteOptions } from './helpers/sip-route.js';
import { SIPP_ADDRESS, sippSkip, startSipp, type Sipp, type SippOptions } from './helpers/sipp.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { startTestRuntime, type TestRuntime } from './helpers/test-runtime.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

type PeerEnv = SipRouteEnv & { runtime: TestRuntime };

/** Dialtone with a SIP route (no media_address) to `callee`, relaying to the test's runtime (or `runtimeUrl`). */
type PeerOptions = SipRouteOptions & { runtimeUrl?: string };

async function peerEnv(t: TestContext, kind: StoreKind, callee: { host: string; port: number }, options: PeerOptions = {}): Promise<PeerEnv> {
  const runtime = await startTestRuntime(t);
  const env = await sipRouteEnv(t, kind, callee, { ...options, env: { AGENT_RUNTIME_URL: options.runtimeUrl ?? runtime.url, ...options.env } });
  return { ...env, runtime };
}


async function sippPassed(sipp: Sipp): Promise<void> {
  assert.equal(await sipp.exited, 0, `SIPp's scenario ran to its end:\n${sipp.output()}`);
}

async function sippEnv(t: TestContext, kind: StoreKind, scenario: string, sippOptions: SippOptions, options: PeerOptions = {}) {
  const sipp = await startSipp(t, scenario, sippOptions);
  const env = await peerEnv(t, kind, { host: SIPP_ADDRESS, port: sipp.port }, options);
  return { sipp, env };
}

/** Dialtone's SDP answers to reinvite-hold.xml's three re-INVITEs, as SIPp logged them, with the port Dialtone offered first. */
function loggedAnswers(sipp: Sipp): { offered: string | undefined; answers: { n: string; session: string; version: number; port: string; direction: string }[] } {
  const log = sipp.output();
  const offered = /offer: m=audio (\d+)/.exec(log)?.[1];
  const answers = [...log.matchAll(/answer (\d): o=dialtone (\d+) (\d+) \| m=audio (\d+) \| a=(\w+)/g)].map((m) => ({ n: m[1] ?? '', session: m[2] ?? '', version: Number(m[3]), port: m[4] ?? '', direction: m[5] ?? '' }));
  return { offered, answers };
}

/** A UDP socket standing for the callee's media: it keeps when each RTP packet came and sends it back (so Dialtone hears RTP from it). */
async function echoingMedia(t: TestContext): Promise<{ port: number; arrivals: number[] }> {
  const socket: Socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, SIPP_ADDRESS, resolve));
  t.after(() => socket.close());
  const arrivals: number[] = [];
  socket.on('message', (message, from) => {
    arrivals.push(performance.now());
    // Echoed with an SSRC and sequence of the callee's own, as a peer would send.
    const packet = new RtpPacket(nodeBufferToDataView(message));
    packet.setSsrc(4242);
    const view = packet.getView();
    socket.send(new Uint8Array(view.buffer, view.byteOffset, view.byteLength), from.port, from.address);
  });
  return { port: socket.address().port, arrivals };
}

/** A runtime that accepts the WebSocket and then stops reading: it sends nothing and answers no ping. */
async function stallingRuntime(t: TestContext): Promise<{ url: string; connections: () => number }> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  let connections = 0;
  server.on('connection', (socket: WebSocket & { _socket?: { pause(): void } }) => {
    connections += 1;
    socket._socket?.pause();
  });
  t.after(() => new Promise<void>((resolve) => {
    for (const client of server.clients) client.terminate();
    server.close(() => resolve());
  }));
  return { url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/media`, connections: () => connections };
}

for (const store of await storeCases()) {
  describe(`SIP media with real peers: media timeout, re-INVITEs, a stalled runtime, DTMF (${store.kind})`, { skip: store.skip || sippSkip() }, () => {
    it('hangs up a call whose callee sends no RTP for SIP_MEDIA_TIMEOUT_MS after the answer: BYE, and the run ends failed with outcome_reason media_timeout', async (t) => {
      const { sipp, env } = await sippEnv(t, store.kind, 'answer-no-rtp.xml', {}, { env: { SIP_MEDIA_TIMEOUT_MS: '1500' } });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, scaledTimeout(15_000)).catch((error: Error) => assert.fail(`${error.message}\n${sipp.output()}`));
      assert.equal(run.state, 'failed');
      assert.equal(run.outcome_reason, 'media_timeout');
      assert.equal(run.raw_provider_status, 'media timeout: no RTP from the callee for 1500 ms');
      assert.ok(run.answered_at && run.ended_at, 'answered, then ended');
      const heldFor = Date.parse(String(run.ended_at)) - Date.parse(String(run.answered_at));
      assert.ok(heldFor >= 1500 - 50, `not before the timeout (${heldFor} ms after the answer)`);
      await sippPassed(sipp);
    });

    it('ends the call failed with outcome_reason agent_runtime_stalled when the runtime accepts the stream but then answers nothing, not even pings, for SIP_MEDIA_STREAM_IDLE_TIMEOUT_MS', async (t) => {
      const runtime = await stallingRuntime(t);
      const { sipp, env } = await sippEnv(t, store.kind, 'answer-no-rtp.xml', {}, { runtimeUrl: runtime.url, env: { SIP_MEDIA_TIMEOUT_MS: '0', SIP_MEDIA_STREAM_IDLE_TIMEOUT_MS: '1500' } });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, scaledTimeout(15_000)).catch((error: Error) => assert.fail(`${error.message}\n${sipp.output()}`));
      assert.equal(run.state, 'failed');
      assert.equal(run.outcome_reason, 'agent_runtime_stalled');
      // The silence it reports is at least the limit; how far past it depends on when the check ran
      // on a loaded machine, so only its lower bound is asserted.
      const reported = /^agent runtime stalled: the agent runtime sent nothing and answered no ping for (\d+) ms$/.exec(String(run.raw_provider_status));
      assert.ok(reported, String(run.raw_provider_status));
      assert.ok(Number(reported[1]) >= 1500, `stalled after ${reported[1]} ms of silence, not before the limit`);
      assert.equal(runtime.connections(), 1);
      await sippPassed(sipp);
    });

    if (store.kind === 'postgres') return;

    it('answers the callee\'s re-INVITEs with 200 OK and the right SDP: sends to the new media address, stops sending on hold (and the media timeout waits), resumes on sendrecv', async (t) => {
      const [before, after] = [await echoingMedia(t), await echoingMedia(t)];
      // The phases, and the media timeout (half the hold), grow on a loaded machine: the first audio must come back within it.
      // Capped: SIPp gives its scenario 20 s in all (helpers/sipp.ts).
      const phaseMs = Math.min(scaledTimeout(1500), 2500);
      const holdMs = 2 * phaseMs;
      const { sipp, env } = await sippEnv(
        t,
        store.kind,
        'reinvite-hold.xml',
        { keys: { old_port: String(before.port), new_port: String(after.port) }, replace: { PHASE_MS: String(phaseMs), HOLD_MS: String(holdMs) } },
        // The hold lasts twice the media timeout: the call must outlive it.
        { env: { SIP_MEDIA_TIMEOUT_MS: String(holdMs / 2) } },
      );
      const runId = await call(env);
      const stream = await env.runtime.stream(0).catch((error: Error) => assert.fail(`${error.message}\n${sipp.output()}`));
      // Twenty seconds of the runtime's audio: it plays through every phase of the scenario.
      stream.play(toneMulaw(1000, 20), 8000);
      await sippPassed(sipp);
      const run = await waitForRun(env, runId, ended, scaledTimeout(15_000));
      assert.equal(run.state, 'completed', `the callee's BYE ended it, not the media timeout: ${run.outcome_reason} ${run.raw_provider_status}`);
      assert.equal(run.raw_provider_status, 'BYE');

      // Our answers: the same port as our offer, the same session with its version counting up, the direction mirrored.
      const { offered, answers } = loggedAnswers(sipp);
      assert.deepEqual(answers.map((a) => [a.n, a.port, a.direction]), [['1', offered, 'sendrecv'], ['2', offered, 'recvonly'], ['3', offered, 'sendrecv']], sipp.output());
      assert.equal(new Set(answers.map((a) => a.session)).size, 1);
      assert.ok(answers.every((a, i) => i === 0 || a.version === (answers[i - 1]?.version ?? 0) + 1), 'o= version up by one per answer');

      // Where the runtime's audio went: the first address until the first re-INVITE, the new one after.
      assert.ok(before.arrivals.length >= 10, `audio at the answer's address first (${before.arrivals.length} packets)`);
      assert.ok(after.arrivals.length >= 10, `then at the re-INVITE's (${after.arrivals.length} packets)`);
      assert.ok((before.arrivals.at(-1) ?? 0) <= (after.arrivals[0] ?? 0), 'none at the old address once the new one was taken');
      // On hold nothing was sent: one silence as long as the hold, with audio before and after it.
      const gaps = after.arrivals.slice(1).map((at, i) => ({ index: i + 1, gap: at - (after.arrivals[i] ?? 0) }));
      const hold = gaps.reduce((longest, gap) => (gap.gap > longest.gap ? gap : longest), { index: 0, gap: 0 });
      assert.ok(hold.gap >= holdMs - 500, `no audio sent while held (longest silence ${Math.round(hold.gap)} ms)`);
      assert.ok(hold.index >= 10 && after.arrivals.length - hold.index >= 10, `audio before the hold and after the resume (${hold.index}, ${after.arrivals.length - hold.index})`);
      assert.deepEqual(stream.problems, []);
    });

    it('answers the same re-INVITEs on a media_address route for its media server: that address and port, the direction mirrored', async (t) => {
      const { sipp, env } = await sippEnv(
        t,
        store.kind,
        'reinvite-hold.xml',
        { keys: { old_port: '5004', new_port: '5006' }, replace: { PHASE_MS: '200', HOLD_MS: '200' } },
        { settings: { media_address: '127.0.0.1', media_port: 40_000 } },
      );
      const runId = await call(env);
      await sippPassed(sipp);
      assert.equal((await waitForRun(env, runId, ended, scaledTimeout(15_000))).raw_provider_status, 'BYE');
      const { offered, answers } = loggedAnswers(sipp);
      assert.equal(offered, '40000');
      assert.deepEqual(answers.map((a) => [a.port, a.direction]), [['40000', 'sendrecv'], ['40000', 'recvonly'], ['40000', 'sendrecv']], sipp.output());
      assert.ok(answers.every((a, i) => i === 0 || a.version === (answers[i - 1]?.version ?? 0) + 1), 'o= version up by one per answer');
      assert.equal(env.runtime.streams.length, 0, 'no stream: the media is the operator\'s');
    });

    it('is held and resumed by a real callee (baresip\'s hold and resume re-INVITEs): the re-INVITEs are answered as baresip expects, and the call outlives a hold longer than the media timeout', { skip: baresipSkip() || soxSkip() }, async (t) => {
      // A minute of tone to send: its default source is 10 s of silence, and baresip hangs up at its end.
      const dir = mkdtempSync(join(tmpdir(), 'dialtone-hold-'));
      t.after(() => rmSync(dir, { recursive: true, force: true }));
      const source = join(dir, 'tone.wav');
      toneWav(source, 440, 60);
      const callee = await startBaresip(t, { source });
      const mediaTimeoutMs = Math.min(scaledTimeout(1000), 5000);
      const env = await peerEnv(t, store.kind, { host: BARESIP_ADDRESS, port: callee.port }, { env: { SIP_MEDIA_TIMEOUT_MS: String(mediaTimeoutMs) } });
      const runId = await call(env);
      const stream = await env.runtime.stream(0).catch((error: Error) => assert.fail(`${error.message}\n${callee.output().slice(-3000)}`));
      await stream.waitFor('audio from the callee', (m) => m.event === 'media');
      await callee.command('hold');
      // baresip stops sending while it holds the call (its a=sendonly stream is paused).
      await callee.waitFor(/call: hold [\s\S]*call: got SDP answer/, scaledTimeout(5_000));
      const heldAt = stream.media.length;
      // Twice the media timeout on hold: a wait for time itself, which is what is tested.
      await new Promise((resolve) => setTimeout(resolve, 2 * mediaTimeoutMs));
      assert.equal((await waitForRun(env, runId, () => true)).state, 'in_progress', `still up after twice the media timeout on hold:\n${callee.output().slice(-3000)}`);
      const duringHold = stream.media.length - heldAt;
      await callee.command('resume');
      await callee.waitFor(/call: resume [\s\S]*call: got SDP answer/, scaledTimeout(5_000));
      await stream.waitFor('audio again after the resume', (m) => m.event === 'media' && Number(m.media?.chunk) > heldAt + duringHold + 10);
      assert.equal((await waitForRun(env, runId, () => true)).state, 'in_progress');
      await callee.hangUp();
      const run = await waitForRun(env, runId, ended, scaledTimeout(15_000));
      assert.equal(run.state, 'completed');
      assert.equal(run.raw_provider_status, 'BYE');
      // A status code stands alone: ports and temporary names in baresip's log hold digit runs such as 34881.
      assert.doesNotMatch(callee.output(), /(?<!\d)488(?!\d)|Not Acceptable|failed to (?:decode|parse) SDP/i);
      t.diagnostic(`media frames while held: ${duringHold}`);
      assert.ok(duringHold <= 10, `baresip sent (almost) nothing while holding (${duringHold} frames)`);
    });

    it('relays the keys a real callee presses (baresip, RFC 4733 events in its RTP) to the runtime as dtmf messages, each once, in order', { skip: baresipSkip() }, async (t) => {
      const callee = await startBaresip(t);
      const env = await peerEnv(t, store.kind, { host: BARESIP_ADDRESS, port: callee.port });
      await call(env);
      const stream = await env.runtime.stream(0).catch((error: Error) => assert.fail(`${error.message}\n${callee.output().slice(-3000)}`));
      await stream.waitFor('audio from the callee', (m) => m.event === 'media');
      await callee.command('sndcode', '19#*');
      await stream.waitFor('the last key', (m) => m.event === 'dtmf' && m.dtmf?.digit === '*').catch((error: Error) => assert.fail(`${error.message}\n${callee.output().slice(-3000)}`));
      await callee.hangUp();
      await stream.waitForClose();
      assert.deepEqual(stream.messages.filter((m) => m.event === 'dtmf').map((m) => m.dtmf?.digit), ['1', '9', '#', '*']);
      assert.deepEqual(stream.problems, [], 'dtmf as Twilio sends it');
    });
  });
}
