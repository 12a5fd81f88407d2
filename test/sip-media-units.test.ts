// The parts of SIP media that need no SIP peer: the SDP answer read (sdp.ts), the pacing of the
// runtime's audio (playout.ts, on node:test's fake timers), RTP's header fields and symmetric RTP
// over real loopback UDP sockets (rtp-session.ts), and a call's media relaying RFC 4733 key presses
// and packets of another length to a runtime (call-media.ts with the test runtime).
import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import { describe, it, type TestContext } from 'node:test';
import { RtpPacket } from 'rtp.js/packets';
import { nodeBufferToDataView } from 'rtp.js/utils';
import { systemClock } from '../src/shared/clock.js';
import { playDigits } from '../src/telephony/sip/dtmf-info.js';
import { CallMedia } from '../src/telephony/sip/media/call-media.js';
import { Playout } from '../src/telephony/media/playout.js';
import { RtpPortRange, RtpSession, type ReceivedRtp } from '../src/telephony/sip/media/rtp-session.js';
import { parseSdpAnswer, sdpOffer } from '../src/telephony/sip/media/sdp.js';
import { startTestRuntime } from './helpers/test-runtime.js';
import { scaledTimeout } from './helpers/timeouts.js';

const answer = (lines: string[]) => ['v=0', 'o=- 1 1 IN IP4 198.51.100.7', 's=-', 't=0 0', ...lines, ''].join('\r\n');

describe('SDP of a SIP call\'s audio', () => {
  it('offers the call\'s own address and port with PCMU, PCMA and telephone-event 101', () => {
    const offer = sdpOffer({ address: '203.0.113.5', port: 40002, sessionId: 7 });
    assert.match(offer, /\r\nc=IN IP4 203\.0\.113\.5\r\n/);
    assert.match(offer, /\r\nm=audio 40002 RTP\/AVP 0 8 101\r\n/);
    assert.match(offer, /\r\na=rtpmap:101 telephone-event\/8000\r\na=fmtp:101 0-15\r\n/);
  });

  it('reads the codec, the telephone-event payload type and the address of an answer, the media-level c= over the session\'s', () => {
    const parsed = parseSdpAnswer(answer(['c=IN IP4 198.51.100.7', 'm=audio 30000 RTP/AVP 8 96', 'c=IN IP4 198.51.100.9', 'a=rtpmap:8 PCMA/8000', 'a=rtpmap:96 telephone-event/8000']));
    assert.deepEqual(parsed, { address: '198.51.100.9', port: 30000, codec: 'PCMA', payloadType: 8, telephoneEvent: 96, direction: 'sendrecv' });
  });

  it('takes a static payload type without rtpmap, and no telephone-event when the answer has none', () => {
    assert.deepEqual(parseSdpAnswer(answer(['c=IN IP4 198.51.100.7', 'm=audio 30000 RTP/AVP 0'])), { address: '198.51.100.7', port: 30000, codec: 'PCMU', payloadType: 0, telephoneEvent: undefined, direction: 'sendrecv' });
  });

  it('says why an answer cannot be used: no audio, the stream rejected, no G.711, no address', () => {
    assert.deepEqual(parseSdpAnswer(answer(['c=IN IP4 198.51.100.7'])), { problem: 'the answer has no audio stream' });
    assert.deepEqual(parseSdpAnswer(answer(['c=IN IP4 198.51.100.7', 'm=audio 0 RTP/AVP 0'])), { problem: 'the answer rejected the audio stream (port 0)' });
    assert.match(String((parseSdpAnswer(answer(['c=IN IP4 198.51.100.7', 'm=audio 3000 RTP/AVP 9', 'a=rtpmap:9 G722/8000'])) as { problem: string }).problem), /neither PCMU nor PCMA/);
    assert.deepEqual(parseSdpAnswer(answer(['m=audio 3000 RTP/AVP 0'])), { problem: 'the answer names no connection address (c=)' });
  });
});

describe('Playout of the runtime\'s audio', () => {
  function playout(t: TestContext, maxQueuedFrames = 1000, catchUpMs = 100) {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
    const events: { at: number; kind: string; detail: string | number }[] = [];
    const frames: { at: number; talkspurt: boolean; skipped: number; bytes: Uint8Array }[] = [];
    const player = new Playout(
      {
        frame: (bytes, talkspurt, skipped) => frames.push({ at: Date.now() - 1_000_000, talkspurt, skipped, bytes }),
        mark: (name) => events.push({ at: Date.now() - 1_000_000, kind: 'mark', detail: name }),
      },
      systemClock,
      maxQueuedFrames,
      catchUpMs,
    );
    // The fake timers run, per tick, only the timers due before it began: time moves a millisecond at a time.
    const advance = (ms: number) => {
      for (let i = 0; i < ms; i += 1) t.mock.timers.tick(1);
    };
    return { player, frames, events, advance };
  }

  it('paces audio of any chunk size out in 20 ms frames at real time, padding the last with silence, and answers a mark once the audio before it has played', (t) => {
    const { player, frames, events, advance } = playout(t);
    player.audio(new Uint8Array(700).fill(1));
    player.audio(new Uint8Array(300).fill(2)); // 1000 bytes: six frames and 40 bytes
    player.mark('done');
    assert.equal(frames.length, 1, 'the first frame goes at once');
    advance(200);
    assert.deepEqual(frames.map((f) => f.at), [0, 20, 40, 60, 80, 100, 120]);
    assert.deepEqual(frames.map((f) => f.talkspurt), [true, false, false, false, false, false, false]);
    assert.ok(frames.every((f) => f.bytes.length === 160));
    assert.deepEqual([...(frames[6]?.bytes.subarray(38, 42) ?? [])], [2, 2, 0xff, 0xff], 'the partial frame is padded with μ-law silence');
    assert.deepEqual(events, [{ at: 140, kind: 'mark', detail: 'done' }], 'the mark once the last frame has played its 20 ms');
  });

  it('starts a new talkspurt after silence: the marker, and the silence counted in samples', (t) => {
    const { player, frames, advance } = playout(t);
    player.audio(new Uint8Array(320));
    advance(40);
    advance(1000);
    player.audio(new Uint8Array(160));
    assert.deepEqual(frames.map((f) => [f.at, f.talkspurt, f.skipped]), [[0, true, 0], [20, false, 0], [1040, true, 8000]]);
  });

  it('drops what is queued on clear, answering the marks it drops at once, and plays what comes next', (t) => {
    const { player, frames, events, advance } = playout(t);
    player.audio(new Uint8Array(160 * 50));
    player.mark('fifty');
    advance(100);
    player.clear();
    assert.deepEqual(events, [{ at: 100, kind: 'mark', detail: 'fifty' }]);
    advance(1000);
    assert.equal(frames.length, 6, 'frames 0 to 100 ms, none after the clear');
    player.audio(new Uint8Array(160));
    advance(20);
    assert.equal(frames.length, 7);
  });

  it('waits up to 20 ms for the rest of a partial frame before padding it: 10 ms chunks sent at real time play whole, unpadded', (t) => {
    const { player, frames, advance } = playout(t);
    for (let n = 0; n < 4; n += 1) {
      player.audio(new Uint8Array(80).fill(n + 1));
      advance(10);
    }
    advance(100);
    assert.deepEqual(frames.map((f) => [f.at, f.bytes[0], f.bytes[79], f.bytes[80], f.bytes[159]]), [[10, 1, 1, 2, 2], [30, 3, 3, 4, 4]], 'two whole frames, none padded');
    player.audio(new Uint8Array(80).fill(9));
    advance(19);
    assert.equal(frames.length, 2, 'a lone half frame waits');
    advance(1);
    assert.deepEqual([...(frames[2]?.bytes.subarray(78, 82) ?? [])], [9, 9, 0xff, 0xff], 'then plays, padded with silence');
  });

  it('sends at once the frames a stall of this node left overdue, up to the catch-up, so the audio keeps its place in time', (t) => {
    const { player, frames, advance } = playout(t);
    player.audio(new Uint8Array(160 * 20)); // 400 ms, queued ahead, as text-to-speech sends
    advance(40);
    t.mock.timers.tick(100); // the event loop stalls: the timer due at 60 runs at 140
    advance(400);
    assert.deepEqual(frames.map((f) => f.at), [0, 20, 40, 140, 140, 140, 140, 140, 160, 180, 200, 220, 240, 260, 280, 300, 320, 340, 360, 380], 'the frames due at 60 to 140 go together, then on the first schedule');
    assert.ok(frames.slice(1).every((f) => !f.talkspurt && f.skipped === 0), 'one talkspurt throughout');
  });

  it('gives up only what a stall longer than the catch-up adds beyond it, in the same talkspurt', (t) => {
    const { player, frames, advance } = playout(t);
    player.audio(new Uint8Array(160 * 20));
    advance(40);
    t.mock.timers.tick(300); // due at 60, run at 340: 280 ms behind, 100 of them caught up
    advance(400);
    assert.deepEqual(frames.slice(2, 10).map((f) => f.at), [40, 340, 340, 340, 340, 340, 340, 360]);
    assert.equal(frames.length, 20);
    assert.equal(frames.at(-1)?.at, 560, 'the last frame 180 ms later than on time: the stall less the catch-up');
    assert.ok(frames.slice(1).every((f) => !f.talkspurt && f.skipped === 0));
  });

  it('sends a real-time runtime\'s frames as they come after some arrive late together: the lateness is not kept for the rest of the call', (t) => {
    const { player, frames, advance } = playout(t);
    const sentAt: number[] = [];
    const send = () => {
      sentAt.push(Date.now() - 1_000_000);
      player.audio(new Uint8Array(160));
    };
    for (let n = 0; n < 5; n += 1) {
      send();
      advance(20);
    }
    advance(80); // four frames held up on the way (the runtime or the network stalled)...
    for (let n = 0; n < 4; n += 1) send(); // ...arrive together
    for (let n = 0; n < 10; n += 1) {
      advance(20);
      send();
    }
    advance(100);
    assert.equal(frames.length, sentAt.length);
    assert.deepEqual(frames.map((f) => f.at), sentAt, 'every frame sent the moment it came');
    assert.ok(frames.slice(1).every((f) => !f.talkspurt), 'one talkspurt: the gap was within the catch-up');
  });

  it('starts a new talkspurt when the runtime pauses longer than the catch-up, however it is set', (t) => {
    const { player, frames, advance } = playout(t, 1000, 40);
    player.audio(new Uint8Array(160));
    advance(80); // played until 20; 60 ms of silence by the time the next comes
    player.audio(new Uint8Array(160 * 2));
    advance(40);
    assert.deepEqual(frames.map((f) => [f.at, f.talkspurt, f.skipped]), [[0, true, 0], [80, true, 480], [100, false, 0]]);
  });

  it('answers a mark with nothing queued at once, and keeps at most its limit of frames queued', (t) => {
    const { player, frames, events, advance } = playout(t, 10);
    player.mark('idle');
    assert.deepEqual(events, [{ at: 0, kind: 'mark', detail: 'idle' }]);
    assert.equal(player.audio(new Uint8Array(160 * 20)), false, 'some audio was dropped');
    advance(1000);
    assert.equal(frames.length, 10);
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

function rtp(fields: { payloadType: number; sequenceNumber: number; timestamp: number; payload: Buffer; marker?: boolean }): Buffer {
  const packet = new RtpPacket();
  packet.setPayloadType(fields.payloadType);
  packet.setSequenceNumber(fields.sequenceNumber);
  packet.setTimestamp(fields.timestamp);
  packet.setSsrc(1234);
  packet.setMarker(fields.marker ?? false);
  packet.setPayload(nodeBufferToDataView(fields.payload));
  const view = packet.getView();
  return Buffer.from(view.buffer, view.byteOffset, view.byteLength);
}

async function until(what: string, condition: () => boolean): Promise<void> {
  const deadline = Date.now() + scaledTimeout(5_000);
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('RTP of one call', () => {
  it('hands out even ports of its range, each once, refuses when none is left, and reuses a released one', async () => {
    const base = 30_000 + 2 * Math.floor(Math.random() * 10_000);
    const range = new RtpPortRange(base, base + 3);
    const first = await range.bind('127.0.0.1');
    const second = await range.bind('127.0.0.1');
    assert.deepEqual([first.port, second.port].sort(), [base, base + 2]);
    await assert.rejects(range.bind('127.0.0.1'), new RegExp(`no free RTP port in ${base}-${base + 3} on 127\\.0\\.0\\.1`));
    first.socket.close();
    first.release();
    const third = await range.bind('127.0.0.1');
    assert.equal(third.port, first.port);
    second.socket.close();
    third.socket.close();
    assert.throws(() => new RtpPortRange(5000, 4000), /SIP_RTP_PORT_MIN \(5000\) must not exceed SIP_RTP_PORT_MAX \(4000\)/);
  });

  it('sends with one SSRC, sequence numbers up by one, timestamps up by 160 samples plus any silence, the marker where asked; and latches onto the source of the first packet', async (t) => {
    const range = new RtpPortRange(30_000 + 2 * Math.floor(Math.random() * 10_000), 49_999);
    const { socket, port, release } = await range.bind('127.0.0.1');
    const got: ReceivedRtp[] = [];
    const session = new RtpSession(socket, port, release, (packet) => got.push(packet), () => undefined);
    t.after(() => session.close());
    const callee = await udpPeer(t);
    const natted = await udpPeer(t); // where the callee's packets really come from (its SDP says otherwise)
    const stranger = await udpPeer(t);
    session.setRemote({ address: '127.0.0.1', port: callee.port });
    session.send(0, new Uint8Array(160), { marker: true });
    session.send(0, new Uint8Array(160), { marker: false });
    await until('two packets at the SDP address', () => callee.received.length === 2);

    natted.socket.send(rtp({ payloadType: 0, sequenceNumber: 7, timestamp: 800, payload: Buffer.alloc(160, 0x55) }), port, '127.0.0.1');
    await until('the callee\'s packet', () => got.length === 1);
    assert.deepEqual({ ...got[0], payload: got[0]?.payload.length }, { payloadType: 0, ssrc: 1234, sequenceNumber: 7, timestamp: 800, marker: false, payload: 160 });
    stranger.socket.send(rtp({ payloadType: 0, sequenceNumber: 8, timestamp: 960, payload: Buffer.alloc(160) }), port, '127.0.0.1');
    session.send(8, new Uint8Array(160), { marker: true, skippedSamples: 8000 });
    await until('the packet after latching, at the source of the first', () => natted.received.length === 1);
    assert.equal(got.length, 1, 'a stranger\'s packet is not taken');

    const sent = [...callee.received, ...natted.received].map((buffer) => new RtpPacket(nodeBufferToDataView(buffer)));
    const [a, b, c] = sent.map((p) => ({ ssrc: p.getSsrc(), seq: p.getSequenceNumber(), ts: p.getTimestamp(), marker: p.getMarker(), pt: p.getPayloadType() }));
    assert.ok(a && b && c);
    assert.equal(new Set([a.ssrc, b.ssrc, c.ssrc]).size, 1);
    assert.deepEqual([b.seq, c.seq], [(a.seq + 1) % 65536, (a.seq + 2) % 65536]);
    assert.deepEqual([(b.ts - a.ts + 2 ** 32) % 2 ** 32, (c.ts - b.ts + 2 ** 32) % 2 ** 32], [160, 160 + 8000]);
    assert.deepEqual([a.marker, b.marker, c.marker], [true, false, true]);
    assert.deepEqual([a.pt, c.pt], [0, 8]);
  });
});

describe('A call\'s media relayed to a runtime', () => {
  it('sends each RFC 4733 key press once as a dtmf message, and re-cuts 30 ms packets into 20 ms media frames', async (t) => {
    const runtime = await startTestRuntime(t);
    const callee = await udpPeer(t);
    const warnings: string[] = [];
    const media = await CallMedia.open(new RtpPortRange(30_000 + 2 * Math.floor(Math.random() * 10_000), 49_999), '127.0.0.1', '127.0.0.1', systemClock, {
      runtimeClosed: () => undefined,
      runtimeUnreachable: (detail) => warnings.push(detail),
      runtimeStalled: (detail) => warnings.push(detail),
      mediaTimeout: (detail) => warnings.push(detail),
      warn: (message) => warnings.push(message),
    });
    t.after(() => media.close());
    assert.equal(media.answered(answer(['c=IN IP4 127.0.0.1', `m=audio ${callee.port} RTP/AVP 0 101`, 'a=rtpmap:101 telephone-event/8000'])), undefined);
    media.connect({ url: runtime.url, customParameters: { run_id: '1', token: 't' }, connectTimeoutMs: 5000, maxMessageBytes: 65536, maxQueuedMs: 10_000, catchUpMs: 100 }, { callSid: 'call-1', accountSid: '1' });
    const stream = await runtime.stream(0);
    const send = (packet: Buffer) => callee.socket.send(packet, media.port, '127.0.0.1');
    // Two 30 ms packets of audio: three 20 ms frames.
    send(rtp({ payloadType: 0, sequenceNumber: 1, timestamp: 0, payload: Buffer.alloc(240, 0x11) }));
    send(rtp({ payloadType: 0, sequenceNumber: 2, timestamp: 240, payload: Buffer.alloc(240, 0x22) }));
    // Digit 5: three updates and the end, all with the event's timestamp; then # (event 11).
    let sequence = 3;
    for (const [event, timestamp] of [[5, 480], [11, 2000]] as const) {
      for (const end of [false, false, true, true, true]) send(rtp({ payloadType: 101, sequenceNumber: sequence++, timestamp, payload: Buffer.from([event, end ? 0x8a : 0x0a, 0, 160]), marker: !end && sequence === 4 }));
    }
    await stream.waitFor('the # key', (m) => m.event === 'dtmf' && m.dtmf?.digit === '#');
    assert.deepEqual(stream.messages.filter((m) => m.event === 'dtmf').map((m) => m.dtmf?.digit), ['5', '#']);
    assert.deepEqual(stream.media.map((m) => [m.chunk, m.timestamp, Buffer.from(m.payload, 'base64').toString('hex').slice(0, 4)]), [['1', '0', '1111'], ['2', '20', '1111'], ['3', '40', '2222']]);
    assert.deepEqual(stream.problems, []);
    assert.deepEqual(warnings, []);
  });

  it('sends digits as RFC 4733 events in the call\'s own RTP stream, holding the runtime\'s audio meanwhile and resuming it after, on one SSRC and one sequence', async (t) => {
    const runtime = await startTestRuntime(t);
    const callee = await udpPeer(t);
    const media = await CallMedia.open(new RtpPortRange(30_000 + 2 * Math.floor(Math.random() * 10_000), 49_999), '127.0.0.1', '127.0.0.1', systemClock, {
      runtimeClosed: () => undefined,
      runtimeUnreachable: () => undefined,
      runtimeStalled: () => undefined,
      mediaTimeout: () => undefined,
      warn: () => undefined,
    });
    t.after(() => media.close());
    assert.equal(media.answered(answer(['c=IN IP4 127.0.0.1', `m=audio ${callee.port} RTP/AVP 0 101`, 'a=rtpmap:101 telephone-event/8000'])), undefined);
    assert.equal(media.sendsTelephoneEvents, true);
    media.connect({ url: runtime.url, customParameters: { run_id: '1', token: 't' }, connectTimeoutMs: 5000, maxMessageBytes: 65536, maxQueuedMs: 10_000, catchUpMs: 100 }, { callSid: 'call-1', accountSid: '1' });
    const stream = await runtime.stream(0);
    // Four seconds of the runtime's audio: it is still playing when the digits go, and after.
    stream.play(Buffer.alloc(8000 * 4, 0x33), 8000);
    await until('audio reaches the callee', () => callee.received.length >= 5);
    const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
    await media.withPlayoutHeld(() => playDigits('1#', (digit) => media.sendDigitEvent(digit, wait), wait));
    const afterDigits = callee.received.length;
    await until('audio resumes', () => callee.received.length >= afterDigits + 3);

    const packets = callee.received.map((buffer) => new RtpPacket(nodeBufferToDataView(buffer)));
    const kinds = packets.map((p) => p.getPayloadType());
    const first = kinds.indexOf(101);
    const last = kinds.lastIndexOf(101);
    assert.ok(first > 0 && kinds.slice(0, first).every((k) => k === 0), 'audio before the digits');
    assert.ok(kinds.slice(first, last + 1).every((k) => k === 101), 'no audio packet among the events: the runtime\'s audio was held');
    assert.equal(kinds[last + 1], 0, 'audio after the digits');
    assert.equal(new Set(packets.map((p) => p.getSsrc())).size, 1, 'one SSRC');
    packets.forEach((p, i) => i > 0 && assert.equal(p.getSequenceNumber(), ((packets[i - 1]?.getSequenceNumber() ?? 0) + 1) % 65536, `sequence at ${i}`));

    const events = packets.slice(first, last + 1).map((p) => {
      const payload = Buffer.from(p.getPayload().buffer, p.getPayload().byteOffset, 4);
      return { code: payload[0], end: ((payload[1] ?? 0) & 0x80) !== 0, duration: payload.readUInt16BE(2), timestamp: p.getTimestamp(), marker: p.getMarker() };
    });
    const digits = [1, 11].map((code) => events.filter((e) => e.code === code));
    for (const digit of digits) {
      assert.equal(digit.length, 8 + 3, 'eight updates and the end three times');
      assert.equal(new Set(digit.map((e) => e.timestamp)).size, 1, 'every packet of an event carries its start');
      assert.deepEqual(digit.map((e) => e.marker), [true, ...Array(10).fill(false)]);
      assert.deepEqual(digit.map((e) => e.duration), [160, 320, 480, 640, 800, 960, 1120, 1280, 1280, 1280, 1280]);
      assert.deepEqual(digit.map((e) => e.end), [...Array(8).fill(false), true, true, true]);
    }
    const [one, hash] = digits.map((d) => d[0]?.timestamp ?? 0);
    assert.ok(((hash ?? 0) - (one ?? 0) + 2 ** 32) % 2 ** 32 >= 1280, 'the second event starts after the first one\'s tone');
    const resumed = packets[last + 1];
    assert.ok(resumed?.getMarker(), 'the audio after the digits starts a talkspurt');
    assert.ok((((resumed?.getTimestamp() ?? 0) - (hash ?? 0) + 2 ** 32) % 2 ** 32) >= 1280, 'its timestamp is past the last event');
  });
});
