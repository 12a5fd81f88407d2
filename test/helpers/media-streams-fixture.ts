// Twilio's Media Streams messages as its documentation writes them
// (https://www.twilio.com/docs/voice/media-streams/websocket-messages): every field of each message,
// with the type the documentation's examples give it ('string' for sequenceNumber, chunk and
// timestamp, which Twilio sends as strings of digits), or the literal value it always has. The
// media tests check every message Dialtone sends, and every message the test runtime sends, against
// these shapes: no field missing, none added, each of its documented type.
import assert from 'node:assert/strict';

type Shape = 'string' | 'digits' | 'base64' | 'string map' | { literal: string | number } | { arrayOf: Shape } | { object: Record<string, Shape> };

const digits: Shape = 'digits';

/** Messages Twilio sends to the WebSocket server (the agent runtime). */
export const FROM_TWILIO: Record<string, Record<string, Shape>> = {
  connected: { event: { literal: 'connected' }, protocol: { literal: 'Call' }, version: { literal: '1.0.0' } },
  start: {
    event: { literal: 'start' },
    sequenceNumber: digits,
    start: {
      object: {
        accountSid: 'string',
        streamSid: 'string',
        callSid: 'string',
        tracks: { arrayOf: 'string' },
        customParameters: 'string map',
        mediaFormat: { object: { encoding: { literal: 'audio/x-mulaw' }, sampleRate: { literal: 8000 }, channels: { literal: 1 } } },
      },
    },
    streamSid: 'string',
  },
  media: {
    event: { literal: 'media' },
    sequenceNumber: digits,
    media: { object: { track: 'string', chunk: digits, timestamp: digits, payload: 'base64' } },
    streamSid: 'string',
  },
  dtmf: { event: { literal: 'dtmf' }, streamSid: 'string', sequenceNumber: digits, dtmf: { object: { track: { literal: 'inbound_track' }, digit: 'string' } } },
  mark: { event: { literal: 'mark' }, sequenceNumber: digits, streamSid: 'string', mark: { object: { name: 'string' } } },
  stop: { event: { literal: 'stop' }, sequenceNumber: digits, stop: { object: { accountSid: 'string', callSid: 'string' } }, streamSid: 'string' },
};

/** Messages the WebSocket server sends to Twilio (bidirectional streams). */
export const TO_TWILIO: Record<string, Record<string, Shape>> = {
  media: { event: { literal: 'media' }, streamSid: 'string', media: { object: { payload: 'base64' } } },
  mark: { event: { literal: 'mark' }, streamSid: 'string', mark: { object: { name: 'string' } } },
  clear: { event: { literal: 'clear' }, streamSid: 'string' },
};

function check(value: unknown, shape: Shape, path: string): void {
  if (shape === 'string') assert.equal(typeof value, 'string', `${path} is a string`);
  else if (shape === 'digits') {
    assert.equal(typeof value, 'string', `${path} is a string`);
    assert.match(value as string, /^\d+$/, `${path} is a string of digits`);
  }
  else if (shape === 'base64') assert.ok(typeof value === 'string' && /^[A-Za-z0-9+/]*={0,2}$/.test(value), `${path} is base64`);
  else if (shape === 'string map') {
    assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), `${path} is an object`);
    for (const [key, entry] of Object.entries(value)) assert.equal(typeof entry, 'string', `${path}.${key} is a string`);
  } else if ('literal' in shape) assert.equal(value, shape.literal, `${path} is ${JSON.stringify(shape.literal)}`);
  else if ('arrayOf' in shape) {
    assert.ok(Array.isArray(value), `${path} is an array`);
    value.forEach((item, index) => check(item, shape.arrayOf, `${path}[${index}]`));
  } else {
    assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), `${path} is an object`);
    assert.deepEqual(Object.keys(value).sort(), Object.keys(shape.object).sort(), `${path} has exactly the documented fields`);
    for (const [key, field] of Object.entries(shape.object)) check((value as Record<string, unknown>)[key], field, `${path}.${key}`);
  }
}

/** Asserts `message` is one of `messages`' documented shapes, exactly. */
export function assertDocumentedMessage(messages: Record<string, Record<string, Shape>>, message: unknown): void {
  const event = (message as { event?: unknown } | null)?.event;
  const shape = typeof event === 'string' ? messages[event] : undefined;
  assert.ok(shape, `a documented event: ${JSON.stringify(message)}`);
  check(message, { object: shape }, event as string);
}
