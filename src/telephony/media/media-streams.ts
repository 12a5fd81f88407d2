// Twilio's Media Streams messages (https://www.twilio.com/docs/voice/media-streams/websocket-messages),
// the protocol Dialtone speaks to the agent runtime for the calls whose audio it relays, so that a
// runtime written for Twilio's `<Connect><Stream>` serves SIP calls unchanged. The field names and
// types are Twilio's: sequence numbers, chunks and timestamps are strings of decimal digits.

export interface StreamIdentity {
  streamSid: string;
  accountSid: string;
  callSid: string;
}

export type OutboundMessage =
  | { event: 'connected'; protocol: 'Call'; version: '1.0.0' }
  | {
      event: 'start';
      sequenceNumber: string;
      start: {
        accountSid: string;
        streamSid: string;
        callSid: string;
        tracks: ['inbound'];
        customParameters: Record<string, string>;
        mediaFormat: { encoding: 'audio/x-mulaw'; sampleRate: 8000; channels: 1 };
      };
      streamSid: string;
    }
  | { event: 'media'; sequenceNumber: string; media: { track: 'inbound'; chunk: string; timestamp: string; payload: string }; streamSid: string }
  | { event: 'dtmf'; sequenceNumber: string; dtmf: { track: 'inbound_track'; digit: string }; streamSid: string }
  | { event: 'mark'; sequenceNumber: string; mark: { name: string }; streamSid: string }
  | { event: 'stop'; sequenceNumber: string; stop: { accountSid: string; callSid: string }; streamSid: string };

/** What the runtime may send: audio to play, a mark, or clear. Anything else is ignored, as Twilio does. */
export type InboundMessage = { event: 'media'; payload: Buffer } | { event: 'mark'; name: string } | { event: 'clear' };

/** A runtime's message, or undefined for one that is none of the three (or is not JSON). */
export function parseInbound(text: string): InboundMessage | undefined {
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof message !== 'object' || message === null) return undefined;
  const { event, media, mark } = message as { event?: unknown; media?: { payload?: unknown }; mark?: { name?: unknown } };
  if (event === 'media' && typeof media?.payload === 'string') return { event, payload: Buffer.from(media.payload, 'base64') };
  if (event === 'mark' && typeof mark?.name === 'string') return { event, name: mark.name };
  if (event === 'clear') return { event };
  return undefined;
}

export const MEDIA_FORMAT = { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 } as const;
