// Every message the Media Streams bridge (src/telephony/media/media-stream-bridge.ts) sends, checked
// against the shapes Twilio documents for its Media Streams
// (https://www.twilio.com/docs/voice/media-streams/websocket-messages), written down in
// helpers/media-streams-fixture.ts: `connected`, `start`, `media`, `dtmf`, `mark` and `stop`, every
// field, its type (sequence numbers, chunks and timestamps strings of digits) and its nesting. And
// what an existing Twilio runtime relies on: Pipecat's Twilio serializer and runner
// (pipecat-ai/pipecat, src/pipecat/serializers/twilio.py and src/pipecat/runner/utils.py, as
// docs/agent-runtime.md describes) read the `start` message's streamSid, callSid and
// customParameters, `media.payload` as 8 kHz μ-law and `dtmf.digit` as one of its keypad keys, and
// send `media` with payloads of any length and `clear`.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { systemClock } from '../src/shared/clock.js';
import { MediaStreamBridge } from '../src/telephony/media/media-stream-bridge.js';
import { assertDocumentedMessage, FROM_TWILIO } from './helpers/media-streams-fixture.js';
import { startTestRuntime, type RuntimeStream } from './helpers/test-runtime.js';

const SETTINGS = { customParameters: { run_id: '42', token: 'tok' }, connectTimeoutMs: 5000, maxMessageBytes: 65536, maxQueuedMs: 10_000, catchUpMs: 100 };
/** Pipecat's KeypadEntry (src/pipecat/audio/dtmf/types.py): the keys its serializer turns into DTMF frames. */
const PIPECAT_KEYS = new Set(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '*', '#']);

async function bridged(t: TestContext, settings: Partial<typeof SETTINGS> = {}) {
  const runtime = await startTestRuntime(t);
  const played: Uint8Array[] = [];
  const warnings: string[] = [];
  const bridge = new MediaStreamBridge({ url: runtime.url, ...SETTINGS, ...settings }, { callSid: 'a1b2c3@dialtone.example', accountSid: '7' }, systemClock, {
    play: (frame) => played.push(frame),
    runtimeClosed: () => undefined,
    runtimeUnreachable: () => undefined,
    warn: (message) => warnings.push(message),
  });
  t.after(() => bridge.stop());
  const stream = await runtime.stream(0);
  return { bridge, stream, played, warnings };
}

/** The raw text of what the runtime receives, parsed: the test runtime keeps the parsed messages. */
const events = (stream: RuntimeStream) => stream.messages.map((m) => m.event);

describe('The Media Streams messages Dialtone sends, against Twilio\'s documentation', () => {
  it('sends connected, start, media, dtmf, mark and stop, each with exactly the fields, types and nesting Twilio documents', async (t) => {
    const { bridge, stream } = await bridged(t);
    for (let n = 0; n < 3; n += 1) bridge.inbound(new Uint8Array(160).fill(0x10 + n), 5000 + n * 160);
    bridge.dtmf('5');
    stream.play(Buffer.alloc(160, 0x22), 160);
    stream.mark('first');
    await stream.waitFor('the mark back', (m) => m.event === 'mark');
    bridge.stop();
    await stream.waitForClose();
    assert.deepEqual(events(stream), ['connected', 'start', 'media', 'media', 'media', 'dtmf', 'mark', 'stop']);
    for (const message of stream.messages) assertDocumentedMessage(FROM_TWILIO, message);
    assert.deepEqual(stream.problems, []);
    // The values, beyond the shapes: sequence numbers count every message after connected, chunks count media, timestamps are ms.
    assert.deepEqual(stream.messages.slice(1).map((m) => m.sequenceNumber), ['1', '2', '3', '4', '5', '6', '7']);
    assert.deepEqual(stream.media.map((m) => [m.chunk, m.timestamp]), [['1', '0'], ['2', '20'], ['3', '40']]);
    assert.equal(new Set(stream.messages.slice(1).map((m) => m.streamSid)).size, 1, 'one streamSid on every message');
  });

  it('would catch a message off Twilio\'s shape: a number where a string of digits belongs, a missing field, a field too many', () => {
    const media = { event: 'media', sequenceNumber: '3', media: { track: 'inbound', chunk: '1', timestamp: '0', payload: 'AAAA' }, streamSid: 'MZ1' };
    assertDocumentedMessage(FROM_TWILIO, media);
    assert.throws(() => assertDocumentedMessage(FROM_TWILIO, { ...media, sequenceNumber: 3 }), /sequenceNumber is a string/);
    assert.throws(() => assertDocumentedMessage(FROM_TWILIO, { ...media, media: { ...media.media, chunk: 'one' } }), /chunk is a string of digits/);
    assert.throws(() => assertDocumentedMessage(FROM_TWILIO, { event: 'stop', sequenceNumber: '9', streamSid: 'MZ1', stop: { callSid: 'c' } }), /exactly the documented fields/);
    assert.throws(() => assertDocumentedMessage(FROM_TWILIO, { event: 'connected', protocol: 'Call', version: '1.0.0', extra: 1 }), /exactly the documented fields/);
  });

  it('gives Pipecat\'s Twilio runner and serializer what they read, and takes what they send: media of any length and clear', async (t) => {
    const { bridge, stream, played } = await bridged(t);
    // The runner reads the first two messages and takes the stream for Twilio's when `start` has start.streamSid and start.callSid.
    const [first, second] = stream.messages;
    assert.equal(first?.event, 'connected');
    assert.equal(second?.event, 'start');
    assert.equal(typeof second?.start?.streamSid, 'string');
    assert.equal(typeof second?.start?.callSid, 'string');
    assert.deepEqual(second?.start?.customParameters, { run_id: '42', token: 'tok' }, 'its body: the custom parameters, strings');
    // The serializer reads media.payload as 8 kHz μ-law (160 bytes per 20 ms) and dtmf.digit as a keypad key.
    bridge.inbound(new Uint8Array(160).fill(0x7e), 0);
    for (const digit of ['1', '#', '*']) bridge.dtmf(digit);
    await stream.waitFor('the last digit', (m) => m.event === 'dtmf' && m.dtmf?.digit === '*');
    assert.equal(Buffer.from(stream.media[0]?.payload ?? '', 'base64').length, 160);
    assert.ok(stream.messages.filter((m) => m.event === 'dtmf').every((m) => PIPECAT_KEYS.has(m.dtmf?.digit ?? '')));
    // What the serializer sends: {event: media, streamSid, media: {payload}} in chunks of whatever its resampler gave (80 bytes here).
    for (let n = 0; n < 4; n += 1) stream.socket.send(JSON.stringify({ event: 'media', streamSid: second?.start?.streamSid, media: { payload: Buffer.alloc(80, 0x30 + n).toString('base64') } }));
    stream.mark('played');
    await stream.waitFor('the mark after the audio', (m) => m.event === 'mark' && m.mark?.name === 'played');
    assert.deepEqual(played.map((frame) => [frame.length, frame[0], frame[159]]), [[160, 0x30, 0x31], [160, 0x32, 0x33]], 'two 20 ms frames, in order');
    // An interruption: {event: clear, streamSid}. Five seconds (250 frames) queued, cleared: a mark after it comes back
    // without them played first (uncleared, the mark would wait for the last of them), however slow the machine.
    stream.socket.send(JSON.stringify({ event: 'media', streamSid: second?.start?.streamSid, media: { payload: Buffer.alloc(40_000, 0x44).toString('base64') } }));
    stream.socket.send(JSON.stringify({ event: 'clear', streamSid: second?.start?.streamSid }));
    stream.mark('after-clear');
    await stream.waitFor('the mark after clear', (m) => m.event === 'mark' && m.mark?.name === 'after-clear');
    assert.ok(played.filter((frame) => frame[0] === 0x44).length < 250, 'the cleared audio was not played first');
    assert.deepEqual(stream.problems, []);
  });

  it('drops the audio a runtime sends beyond the queue\'s limit and warns once, with the limit, whichever provider\'s setting it came from', async (t) => {
    const { stream, warnings } = await bridged(t, { maxQueuedMs: 1_000 });
    // Two seconds, twice, against a one-second queue; then clear and a mark, answered once both are read.
    stream.play(Buffer.alloc(16_000, 0x55), 16_000);
    stream.play(Buffer.alloc(16_000, 0x55), 16_000);
    stream.socket.send(JSON.stringify({ event: 'clear', streamSid: stream.messages[1]?.start?.streamSid }));
    stream.mark('read');
    await stream.waitFor('the mark', (m) => m.event === 'mark' && m.mark?.name === 'read');
    assert.deepEqual(warnings, ['the agent runtime sent more audio than the stream queues (MAX_QUEUED_MS, 1000 ms): the excess was dropped']);
  });
});
