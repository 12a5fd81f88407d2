// SIP media when the network or the runtime misbehaves (issue 34), on node:test's fake timers: the
// reorder buffer on received RTP (reorder.ts, packets crafted with rtp.js), the media timeout and a
// callee's re-INVITE offers (hold, resume, a new address) in call-media.ts, and the bridge's watch
// for a runtime that stalls (media-stream-bridge.ts). The same behaviours against real peers are in
// test/sip-media-peers.test.ts.
import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { RtpPacket } from 'rtp.js/packets';
import { nodeBufferToDataView } from 'rtp.js/utils';
import { WebSocketServer, type WebSocket } from 'ws';
import { systemClock } from '../src/shared/clock.js';
import { MediaStreamBridge } from '../src/telephony/media/media-stream-bridge.js';
import { CallMedia } from '../src/telephony/sip/media/call-media.js';
import { ReorderBuffer } from '../src/telephony/sip/media/reorder.js';
import { RtpPortRange } from '../src/telephony/sip/media/rtp-session.js';
import { startTestRuntime } from './helpers/test-runtime.js';
import { scaledTimeout } from './helpers/timeouts.js';

/** Waits on real I/O while setTimeout and Date are fake: polls with setImmediate, against performance.now(). */
async function until(what: string, condition: () => boolean): Promise<void> {
  const deadline = performance.now() + scaledTimeout(5_000);
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** The fake timers run, per tick, only the timers due before it began: time moves a millisecond at a time. */
function fakeTime(t: TestContext): (ms: number) => void {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
  return (ms) => {
    for (let i = 0; i < ms; i += 1) t.mock.timers.tick(1);
  };
}

describe('The reorder buffer on received RTP', () => {
  function buffer(t: TestContext, depthMs = 60) {
    const advance = fakeTime(t);
    const passed: number[] = [];
    const reorder = new ReorderBuffer<{ sequenceNumber: number; ssrc: number }>(depthMs, systemClock, (packet) => passed.push(packet.sequenceNumber));
    t.after(() => reorder.close());
    const push = (...sequence: number[]) => sequence.forEach((sequenceNumber) => reorder.push({ sequenceNumber, ssrc: 7 }));
    return { passed, push, advance, reorder };
  }

  it('passes packets that arrive in order at once, and puts packets that arrive out of order back in sequence order as soon as the missing one comes', (t) => {
    const { passed, push } = buffer(t);
    push(10, 11);
    assert.deepEqual(passed, [10, 11], 'in order: no wait');
    push(13, 14);
    assert.deepEqual(passed, [10, 11], '13 and 14 wait for 12');
    push(12);
    assert.deepEqual(passed, [10, 11, 12, 13, 14]);
    push(16, 15, 17);
    assert.deepEqual(passed, [10, 11, 12, 13, 14, 15, 16, 17]);
  });

  it('drops duplicates, of packets passed on and of packets waiting', (t) => {
    const { passed, push } = buffer(t);
    push(1, 2, 2, 1, 4, 4, 3, 3, 4);
    assert.deepEqual(passed, [1, 2, 3, 4]);
  });

  it('skips a gap longer than its depth instead of waiting for it, and drops the missing packet if it comes after', (t) => {
    const { passed, push, advance } = buffer(t, 60);
    push(1, 3, 4);
    advance(59);
    assert.deepEqual(passed, [1], 'waits up to 60 ms for 2');
    advance(1);
    assert.deepEqual(passed, [1, 3, 4], 'then goes on without it');
    push(2);
    push(5);
    assert.deepEqual(passed, [1, 3, 4, 5], 'the late 2 is dropped');
  });

  it('counts each packet\'s wait from its own arrival, skipping one gap at a time', (t) => {
    const { passed, push, advance } = buffer(t, 60);
    push(1, 3);
    advance(40);
    push(6);
    advance(20);
    assert.deepEqual(passed, [1, 3], '2 given up on; 4 and 5 still awaited for 6');
    advance(39);
    assert.deepEqual(passed, [1, 3]);
    push(5);
    advance(1);
    assert.deepEqual(passed, [1, 3, 5, 6], '4 given up on once 6 has waited 60 ms');
  });

  it('follows the sequence across its wrap from 65535 to 0', (t) => {
    const { passed, push } = buffer(t);
    push(65534, 0, 65535, 1);
    assert.deepEqual(passed, [65534, 65535, 0, 1]);
  });

  it('starts over on a new SSRC or a jump far ahead, passing what waited first', (t) => {
    const { passed, push, reorder } = buffer(t);
    push(100, 102);
    reorder.push({ sequenceNumber: 5000, ssrc: 8 });
    assert.deepEqual(passed, [100, 102, 5000]);
    push(20_000);
    push(20_001);
    assert.deepEqual(passed, [100, 102, 5000, 20_000, 20_001]);
  });

  it('with a depth of 0, passes packets in arrival order, still dropping duplicates and late ones', (t) => {
    const { passed, push } = buffer(t, 0);
    push(1, 3, 2, 3, 4);
    assert.deepEqual(passed, [1, 3, 4]);
  });
});

async function udpPeer(t: TestContext): Promise<{ socket: Socket; port: number; received: Buffer[] }> {
  const socket = createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  t.after(() => socket.close());
  const received: Buffer[] = [];
  socket.on('message', (message) => received.push(message));
  return { socket, port: socket.address().port, received };
}

function rtp(sequenceNumber: number, fill = 0x7f): Buffer {
  const packet = new RtpPacket();
  packet.setPayloadType(0);
  packet.setSequenceNumber(sequenceNumber);
  packet.setTimestamp(sequenceNumber * 160);
  packet.setSsrc(99);
  packet.setPayload(nodeBufferToDataView(Buffer.alloc(160, fill)));
  const view = packet.getView();
  return Buffer.from(view.buffer, view.byteOffset, view.byteLength);
}

const sdp = (port: number, extra: string[] = [], address = '127.0.0.1') =>
  ['v=0', `o=- 1 1 IN IP4 ${address}`, 's=-', `c=IN IP4 ${address}`, 't=0 0', `m=audio ${port} RTP/AVP 0 101`, 'a=rtpmap:101 telephone-event/8000', ...extra, ''].join('\r\n');

describe('A call\'s media timeout and the callee\'s re-INVITEs', () => {
  async function answeredCall(t: TestContext, mediaTimeoutMs: number) {
    const callee = await udpPeer(t);
    const timeouts: { at: number; detail: string }[] = [];
    const media = await CallMedia.open(
      new RtpPortRange(30_000 + 2 * Math.floor(Math.random() * 10_000), 49_999),
      '127.0.0.1',
      '127.0.0.1',
      systemClock,
      {
        runtimeClosed: () => undefined,
        runtimeUnreachable: () => undefined,
        runtimeStalled: () => undefined,
        mediaTimeout: (detail) => timeouts.push({ at: Date.now() - 1_000_000, detail }),
        warn: () => undefined,
      },
      { reorderMs: 60, mediaTimeoutMs },
    );
    t.after(() => media.close());
    const advance = fakeTime(t);
    media.offer(500);
    assert.equal(media.answered(sdp(callee.port)), undefined);
    return { media, callee, timeouts, advance };
  }

  it('reports a media timeout when the callee sends no RTP for SIP_MEDIA_TIMEOUT_MS after the answer, or after its last packet', async (t) => {
    const { media, callee, timeouts, advance } = await answeredCall(t, 1000);
    advance(800);
    callee.socket.send(rtp(1), media.port, '127.0.0.1');
    await until('the packet is heard', () => media.lastHeardAt === 1_000_800);
    advance(999);
    assert.deepEqual(timeouts, [], '1.8 s after the answer, but 999 ms after the last packet');
    advance(1);
    assert.deepEqual(timeouts, [{ at: 1800, detail: 'no RTP from the callee for 1000 ms' }]);
  });

  it('reports it SIP_MEDIA_TIMEOUT_MS after the answer when no packet ever came', async (t) => {
    const silent = await answeredCall(t, 1000);
    silent.advance(999);
    assert.deepEqual(silent.timeouts, []);
    silent.advance(1);
    assert.equal(silent.timeouts.length, 1);
  });

  it('has no media timeout with SIP_MEDIA_TIMEOUT_MS 0', async (t) => {
    const { timeouts, advance } = await answeredCall(t, 0);
    advance(5000);
    assert.deepEqual(timeouts, []);
  });

  it('answers a hold (sendonly, inactive, c=0.0.0.0) with the mirrored direction on the same port and the next SDP version, never times out while held, and times out again after a resume', async (t) => {
    const { media, callee, timeouts, advance } = await answeredCall(t, 1000);
    advance(500);
    const held = media.reoffer(sdp(callee.port, ['a=sendonly']));
    assert.ok('sdp' in held, JSON.stringify(held));
    assert.match(held.sdp, /\r\na=recvonly\r\n/);
    assert.match(held.sdp, new RegExp(`\\r\\nm=audio ${media.port} RTP/AVP 0 101\\r\\n`), 'the same port, the call\'s codec and telephone-event');
    assert.match(held.sdp, /^v=0\r\no=dialtone 500 501 IN IP4 127\.0\.0\.1\r\n/, 'the same session, its next version');
    assert.equal(media.onHold, true);
    advance(5000);
    assert.equal(timeouts.length, 0, 'no media timeout on hold');
    const inactive = media.reoffer(sdp(callee.port, ['a=inactive']));
    assert.ok('sdp' in inactive && /\r\na=inactive\r\n/.test(inactive.sdp) && /o=dialtone 500 502 /.test(inactive.sdp));
    const oldStyle = media.reoffer(sdp(callee.port, [], '0.0.0.0'));
    assert.ok('sdp' in oldStyle && /\r\na=recvonly\r\n/.test(oldStyle.sdp), 'c=0.0.0.0: the callee takes nothing, we only listen');
    advance(5000);
    assert.equal(timeouts.length, 0);
    const resumed = media.reoffer(sdp(callee.port, ['a=sendrecv']));
    assert.ok('sdp' in resumed && /\r\na=sendrecv\r\n/.test(resumed.sdp));
    assert.equal(media.onHold, false);
    advance(999);
    assert.equal(timeouts.length, 0, 'the timeout counts from the resume');
    advance(1);
    assert.deepEqual(timeouts.map((t) => t.at), [11_500]);
  });

  it('keeps the call\'s codec when a re-INVITE still offers it, and takes the other law when it offers only that', async (t) => {
    const { media, callee } = await answeredCall(t, 0);
    const both = media.reoffer(['v=0', 'o=- 1 2 IN IP4 127.0.0.1', 's=-', 'c=IN IP4 127.0.0.1', 't=0 0', `m=audio ${callee.port} RTP/AVP 8 0`, ''].join('\r\n'));
    assert.ok('sdp' in both && new RegExp(`m=audio ${media.port} RTP/AVP 0\r\na=rtpmap:0 PCMU/8000`).test(both.sdp), 'PCMU kept, though PCMA comes first; no telephone-event, as none was offered');
    const alaw = media.reoffer(['v=0', 'o=- 1 3 IN IP4 127.0.0.1', 's=-', 'c=IN IP4 127.0.0.1', 't=0 0', `m=audio ${callee.port} RTP/AVP 8 101`, 'a=rtpmap:101 telephone-event/8000', ''].join('\r\n'));
    assert.ok('sdp' in alaw && new RegExp(`m=audio ${media.port} RTP/AVP 8 101\r\na=rtpmap:8 PCMA/8000`).test(alaw.sdp));
    assert.equal(media.codec, 'PCMA');
    assert.equal(media.sendsTelephoneEvents, true);
  });

  it('refuses a re-INVITE offer it cannot take (no G.711) and keeps the call as it was; an offer without SDP is answered with our offer as it stands', async (t) => {
    const { media, callee } = await answeredCall(t, 0);
    const refused = media.reoffer(['v=0', 'o=- 1 2 IN IP4 127.0.0.1', 's=-', 'c=IN IP4 127.0.0.1', 't=0 0', 'm=audio 4000 RTP/AVP 9', 'a=rtpmap:9 G722/8000', ''].join('\r\n'));
    assert.deepEqual(refused, { problem: 'the answer takes neither PCMU nor PCMA (payload types 9)' });
    assert.equal(media.onHold, false);
    const empty = media.reoffer(undefined);
    assert.ok('sdp' in empty && /\r\na=sendrecv\r\n/.test(empty.sdp) && new RegExp(`m=audio ${media.port} RTP/AVP 0 101`).test(empty.sdp));
    assert.ok(callee.port > 0);
  });
});

describe('Received RTP reordered on its way to the runtime', () => {
  it('relays packets that arrive out of order and twice in sequence order, once each', async (t) => {
    const runtime = await startTestRuntime(t);
    const callee = await udpPeer(t);
    const media = await CallMedia.open(
      new RtpPortRange(30_000 + 2 * Math.floor(Math.random() * 10_000), 49_999),
      '127.0.0.1',
      '127.0.0.1',
      systemClock,
      { runtimeClosed: () => undefined, runtimeUnreachable: () => undefined, runtimeStalled: () => undefined, mediaTimeout: () => undefined, warn: () => undefined },
      { reorderMs: 60, mediaTimeoutMs: 0 },
    );
    t.after(() => media.close());
    assert.equal(media.answered(sdp(callee.port)), undefined);
    media.connect({ url: runtime.url, customParameters: { run_id: '1', token: 't' }, connectTimeoutMs: 5000, maxMessageBytes: 65536, maxQueuedMs: 10_000, catchUpMs: 100 }, { callSid: 'c', accountSid: '1' });
    const stream = await runtime.stream(0);
    for (const sequence of [1, 3, 2, 2, 5, 4, 6]) callee.socket.send(rtp(sequence, sequence), media.port, '127.0.0.1');
    await stream.waitFor('six frames', () => stream.media.length >= 6);
    assert.deepEqual(stream.media.map((m) => Buffer.from(m.payload, 'base64')[0]), [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(stream.media.map((m) => m.timestamp), ['0', '20', '40', '60', '80', '100']);
    // Closed within the test: a WebSocket close left to the teardown would clear its timer under the next test's fake timers.
    media.close();
    await stream.waitForClose();
  });
});

describe('A runtime that stalls', () => {
  /** A WebSocket server whose connections `stall` (stop reading, so pings go unanswered) or just listen. */
  async function runtime(t: TestContext, behaviour: 'stall' | 'listen') {
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((resolve) => server.once('listening', resolve));
    const pings: number[] = [];
    server.on('connection', (socket: WebSocket & { _socket?: { pause(): void } }) => {
      if (behaviour === 'stall') socket._socket?.pause();
      socket.on('ping', () => pings.push(Date.now()));
    });
    t.after(() => new Promise<void>((resolve) => {
      for (const client of server.clients) client.terminate();
      server.close(() => resolve());
    }));
    return { url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/media`, pings };
  }

  function bridge(t: TestContext, url: string, settings: { idleTimeoutMs?: number; maxBufferedBytes?: number }) {
    const ends: string[] = [];
    const advance = fakeTime(t);
    const bridge = new MediaStreamBridge(
      { url, customParameters: { run_id: '1', token: 't' }, connectTimeoutMs: 5000, maxMessageBytes: 65536, maxQueuedMs: 10_000, catchUpMs: 100, ...settings },
      { callSid: 'call-1', accountSid: '1' },
      systemClock,
      {
        play: () => undefined,
        runtimeClosed: (detail) => ends.push(`closed: ${detail}`),
        runtimeUnreachable: (detail) => ends.push(`unreachable: ${detail}`),
        runtimeStalled: (detail) => ends.push(`stalled: ${detail}`),
        warn: () => undefined,
      },
    );
    t.after(() => bridge.stop());
    return { bridge, ends, advance };
  }

  it('ends the stream as stalled when the runtime neither sends anything nor answers pings for SIP_MEDIA_STREAM_IDLE_TIMEOUT_MS', async (t) => {
    const server = await runtime(t, 'stall');
    const { bridge: stream, ends, advance } = bridge(t, server.url, { idleTimeoutMs: 3000 });
    await until('the stream opens', () => stream.isOpen);
    advance(2999);
    assert.deepEqual(ends, []);
    advance(1);
    assert.deepEqual(ends, ['stalled: the agent runtime sent nothing and answered no ping for 3000 ms']);
    assert.equal(stream.isOpen, false);
  });

  it('keeps a runtime that listens without saying anything: its pongs show it is alive', async (t) => {
    const server = await runtime(t, 'listen');
    const { bridge: stream, ends, advance } = bridge(t, server.url, { idleTimeoutMs: 3000 });
    await until('the stream opens', () => stream.isOpen);
    for (let second = 1; second <= 9; second += 1) {
      advance(1000);
      await until(`ping ${second} answered`, () => stream.lastHeardAt === Date.now() || ends.length > 0);
    }
    assert.deepEqual(ends, [], 'nine seconds with nothing but pongs: not stalled');
    assert.ok(server.pings.length >= 8, `pinged while quiet (${server.pings.length})`);
  });

  it('ends the stream as stalled when the runtime does not read and SIP_MEDIA_STREAM_MAX_BUFFERED_BYTES wait to be sent', async (t) => {
    const server = await runtime(t, 'stall');
    const { bridge: stream, ends } = bridge(t, server.url, { maxBufferedBytes: 65_536 });
    await until('the stream opens', () => stream.isOpen);
    const frame = new Uint8Array(160).fill(0x55);
    // The kernel's socket buffers fill first; then the bytes wait in the WebSocket's own buffer.
    for (let n = 0; n < 200_000 && ends.length === 0; n += 1) {
      stream.inbound(frame, n * 160);
      if (n % 1000 === 999) await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal(ends.length, 1, 'stalled');
    assert.match(ends[0] ?? '', /^stalled: the agent runtime is not reading the media stream: \d+ bytes wait to be sent$/);
  });
});
