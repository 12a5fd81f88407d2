// The SDP of a SIP call's audio (RFC 4566, offer/answer RFC 3264): the offer Dialtone sends in its
// INVITE, what it reads from the callee's answer (and from the offer of a callee's re-INVITE), and
// the answer it gives a re-INVITE (RFC 3264 section 8: hold, resume, a new address). Only what a
// G.711 telephone call needs: one
// audio stream, PCMU (0) and PCMA (8), and RFC 4733 telephone-event. Written here rather than taken
// from a package: the SDP parsers on npm (sdp-transform, the `sdp` package) parse every attribute of
// WebRTC's SDP into their own object model, where this needs four lines of an answer read.
import type { G711Codec } from '../../media/g711.js';

export type { G711Codec };

/** The static payload types of G.711 (RFC 3551 table 4). */
export const PAYLOAD_TYPE: Record<G711Codec, number> = { PCMU: 0, PCMA: 8 };
/** The dynamic payload type Dialtone offers for telephone-event (RFC 4733). */
export const OFFERED_TELEPHONE_EVENT = 101;

export interface SdpOffer {
  /** The address written in `o=` and `c=`. */
  address: string;
  port: number;
  /** The session id and version (`o=`): any number the session keeps. */
  sessionId: number;
}

export function sdpOffer(offer: SdpOffer): string {
  return [
    'v=0',
    `o=dialtone ${offer.sessionId} ${offer.sessionId} IN IP4 ${offer.address}`,
    's=Dialtone',
    `c=IN IP4 ${offer.address}`,
    't=0 0',
    `m=audio ${offer.port} RTP/AVP ${PAYLOAD_TYPE.PCMU} ${PAYLOAD_TYPE.PCMA} ${OFFERED_TELEPHONE_EVENT}`,
    'a=rtpmap:0 PCMU/8000',
    'a=rtpmap:8 PCMA/8000',
    `a=rtpmap:${OFFERED_TELEPHONE_EVENT} telephone-event/8000`,
    `a=fmtp:${OFFERED_TELEPHONE_EVENT} 0-15`,
    'a=ptime:20',
    'a=sendrecv',
    '',
  ].join('\r\n');
}

/** RFC 3264 section 5.1's directions, as the side that wrote the SDP sees them. */
export type MediaDirection = 'sendrecv' | 'sendonly' | 'recvonly' | 'inactive';

/** What the callee's answer (or re-INVITE offer) says of its audio. */
export interface SdpAnswer {
  /** Where the callee says to send RTP (symmetric RTP may move it once its packets arrive). */
  address: string;
  port: number;
  /** The first G.711 codec of its m= line: the one both ends use. */
  codec: G711Codec;
  payloadType: number;
  /** The payload type it gives telephone-event, or undefined when it takes none. */
  telephoneEvent: number | undefined;
  /**
   * The callee's direction (a=sendrecv when none is written, RFC 3264 section 5.1). An address of
   * 0.0.0.0 (RFC 2543's hold, RFC 3264 section 8.4) takes nothing: its `recv` is removed here.
   */
  direction: MediaDirection;
}

const DIRECTIONS: readonly MediaDirection[] = ['sendrecv', 'sendonly', 'recvonly', 'inactive'];

/** Whether the side whose SDP says `direction` sends audio, and receives it. */
export const sends = (direction: MediaDirection) => direction === 'sendrecv' || direction === 'sendonly';
export const receives = (direction: MediaDirection) => direction === 'sendrecv' || direction === 'recvonly';

/** The answerer's direction for an offer's (RFC 3264 section 6.1): sendonly is answered recvonly, and so on. */
export function answerDirection(offered: MediaDirection): MediaDirection {
  return offered === 'sendonly' ? 'recvonly' : offered === 'recvonly' ? 'sendonly' : offered;
}

/** Dialtone's answer to a callee's re-INVITE offer: the same address and port, the codec chosen, the direction mirrored. */
export function sdpAnswer(answer: SdpOffer & { version: number; codec: G711Codec; payloadType: number; telephoneEvent: number | undefined; direction: MediaDirection }): string {
  const event = answer.telephoneEvent;
  return [
    'v=0',
    `o=dialtone ${answer.sessionId} ${answer.version} IN IP4 ${answer.address}`,
    's=Dialtone',
    `c=IN IP4 ${answer.address}`,
    't=0 0',
    `m=audio ${answer.port} RTP/AVP ${answer.payloadType}${event === undefined ? '' : ` ${event}`}`,
    `a=rtpmap:${answer.payloadType} ${answer.codec}/8000`,
    ...(event === undefined ? [] : [`a=rtpmap:${event} telephone-event/8000`, `a=fmtp:${event} 0-15`]),
    'a=ptime:20',
    `a=${answer.direction}`,
    '',
  ].join('\r\n');
}

/**
 * The audio of an SDP answer, or why it cannot be used (no audio stream, a port of 0 (rejected), no
 * G.711 codec, no connection address). The m= line's first codec we offered is the one used.
 */
export function parseSdpAnswer(sdp: string, prefer?: G711Codec): SdpAnswer | { problem: string } {
  const lines = sdp.split(/\r?\n/).map((line) => line.trim());
  let sessionAddress: string | undefined;
  let mediaAddress: string | undefined;
  let media: { port: number; formats: number[] } | undefined;
  const rtpmap = new Map<number, string>();
  let sessionDirection: MediaDirection | undefined;
  let mediaDirection: MediaDirection | undefined;
  for (const line of lines) {
    const direction = DIRECTIONS.find((d) => line === `a=${d}`);
    if (direction) {
      // One before any m= line is the session's; one in the audio stream overrides it.
      if (media) mediaDirection = direction;
      else sessionDirection = direction;
    }
    if (line.startsWith('c=')) {
      const address = /^c=IN IP[46] ([^\s/]+)/.exec(line)?.[1];
      // A c= before any m= is the session's; one after the audio m= line is that stream's.
      if (media) mediaAddress ??= address;
      else sessionAddress = address;
    } else if (line.startsWith('m=')) {
      if (media) break; // only the first stream, which must be audio
      const match = /^m=audio (\d+)(?:\/\d+)? RTP\/AVP((?: \d+)+)$/.exec(line);
      if (!match) return { problem: `the answer's first media stream is not RTP/AVP audio: ${line}` };
      media = { port: Number(match[1]), formats: (match[2] ?? '').trim().split(' ').map(Number) };
    } else if (media && line.startsWith('a=rtpmap:')) {
      const match = /^a=rtpmap:(\d+) ([^/\s]+)\/(\d+)/.exec(line);
      if (match) rtpmap.set(Number(match[1]), `${match[2]?.toLowerCase()}/${match[3]}`);
    }
  }
  if (!media) return { problem: 'the answer has no audio stream' };
  if (media.port === 0) return { problem: 'the answer rejected the audio stream (port 0)' };
  const address = mediaAddress ?? sessionAddress;
  if (!address) return { problem: 'the answer names no connection address (c=)' };
  // Static payload types may come without an rtpmap (RFC 3551); a dynamic one needs its rtpmap.
  const nameOf = (pt: number): string | undefined => rtpmap.get(pt) ?? (pt === 0 ? 'pcmu/8000' : pt === 8 ? 'pcma/8000' : undefined);
  const g711 = (pt: number) => nameOf(pt) === 'pcmu/8000' || nameOf(pt) === 'pcma/8000';
  // A re-INVITE keeps the call's codec when it still offers it.
  const chosen = media.formats.find((pt) => prefer !== undefined && nameOf(pt) === `${prefer.toLowerCase()}/8000`) ?? media.formats.find(g711);
  if (chosen === undefined) return { problem: `the answer takes neither PCMU nor PCMA (payload types ${media.formats.join(' ')})` };
  const telephoneEvent = media.formats.find((pt) => nameOf(pt) === 'telephone-event/8000');
  let direction = mediaDirection ?? sessionDirection ?? 'sendrecv';
  if (address === '0.0.0.0') direction = sends(direction) ? 'sendonly' : 'inactive';
  return { address, port: media.port, codec: nameOf(chosen) === 'pcmu/8000' ? 'PCMU' : 'PCMA', payloadType: chosen, telephoneEvent, direction };
}
