// What the media part's processes (bench/media-generator.ts, bench/media-runtime.ts,
// bench/media-floor.ts) share: the frames they carry and how each one is stamped, RTP's fixed
// header as the generator and the floor write and read it, and the clock all of them read.
//
// Every frame is 20 ms of μ-law (160 bytes) whose first bytes say which call and which frame it
// is and when it left: the generator writes the call, the frame and its send time, the runtime
// its own send time when it echoes the frame back. A PCMU call carries μ-law untouched both ways
// (telephony/media/g711.ts), so the stamps come back as they left; each side reads the one-way
// latency of its direction from them. μ-law has no invalid byte: the stamps are noise to a
// listener, nothing more.

import { percentile, round } from './load.js';

/** One frame: 20 ms at 8 kHz, one μ-law byte a sample. */
export const FRAME_BYTES = 160;
export const PACKET_MS = 20;
/** RTP's payload type for PCMU (RFC 3551). */
export const PCMU = 0;
/** μ-law's digital silence: what fills a frame past its stamps. */
const SILENCE = 0xff;

/**
 * Now, in ms, on CLOCK_MONOTONIC (process.hrtime): one clock for every process of the machine, so a
 * time written by one process can be subtracted from a time read by another. performance.now()
 * counts from each process's own start and cannot.
 */
export const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

export interface Stamp {
  /** The generator's index of the call (or floor stream) the frame belongs to. */
  call: number;
  /** The frame's index within its call's play. */
  frame: number;
  /** The round of play it belongs to (modulo 256): an echo of an earlier round is told apart. */
  round: number;
  /** Counted in latency figures (false during a round's warm-up). */
  measured: boolean;
  /** When the generator sent it (nowMs). */
  sentAt: number;
  /** When the runtime echoed it (nowMs), 0 on the way in. */
  echoedAt: number;
}

/** A frame stamped by the generator: call (u32), frame (u32), measured (u8), round (u8), send time (f64 at 16). */
export function stampedFrame({ call, frame, round, measured, sentAt }: Omit<Stamp, 'echoedAt'>): Buffer {
  const payload = Buffer.alloc(FRAME_BYTES, SILENCE);
  payload.writeUInt32BE(call, 0);
  payload.writeUInt32BE(frame, 4);
  payload.writeUInt8(measured ? 1 : 0, 8);
  payload.writeUInt8(round & 0xff, 9);
  payload.writeDoubleBE(sentAt, 16);
  payload.writeDoubleBE(0, 24);
  return payload;
}

/** The runtime's send time, written into the frame it echoes (f64 at 24). */
export function stampEcho(payload: Buffer, echoedAt: number): void {
  payload.writeDoubleBE(echoedAt, 24);
}

export function readStamp(payload: Buffer): Stamp | undefined {
  if (payload.length < 32) return undefined;
  return { call: payload.readUInt32BE(0), frame: payload.readUInt32BE(4), measured: payload.readUInt8(8) === 1, round: payload.readUInt8(9), sentAt: payload.readDoubleBE(16), echoedAt: payload.readDoubleBE(24) };
}

/** An RTP packet (RFC 3550 section 5.1): version 2, no padding, extension or CSRC. */
export function rtpPacket(fields: { payloadType: number; marker: boolean; sequence: number; timestamp: number; ssrc: number }, payload: Buffer): Buffer {
  const packet = Buffer.allocUnsafe(12 + payload.length);
  packet[0] = 0x80;
  packet[1] = (fields.marker ? 0x80 : 0) | (fields.payloadType & 0x7f);
  packet.writeUInt16BE(fields.sequence & 0xffff, 2);
  packet.writeUInt32BE(fields.timestamp >>> 0, 4);
  packet.writeUInt32BE(fields.ssrc >>> 0, 8);
  payload.copy(packet, 12);
  return packet;
}

export interface RtpFields {
  payloadType: number;
  marker: boolean;
  sequence: number;
  timestamp: number;
  ssrc: number;
  payload: Buffer;
}

/** An RTP packet's fixed header and payload (after any CSRCs and header extension); undefined when it is not RTP version 2. */
export function parseRtp(packet: Buffer): RtpFields | undefined {
  if (packet.length < 12 || packet[0] === undefined || packet[0] >> 6 !== 2) return undefined;
  const csrcs = packet[0] & 0x0f;
  let offset = 12 + 4 * csrcs;
  if (packet[0] & 0x10 && packet.length >= offset + 4) offset += 4 + 4 * packet.readUInt16BE(offset + 2);
  let end = packet.length;
  if (packet[0] & 0x20) end -= packet[packet.length - 1] ?? 0;
  if (offset > end) return undefined;
  return {
    payloadType: (packet[1] ?? 0) & 0x7f,
    marker: ((packet[1] ?? 0) & 0x80) !== 0,
    sequence: packet.readUInt16BE(2),
    timestamp: packet.readUInt32BE(4),
    ssrc: packet.readUInt32BE(8),
    payload: packet.subarray(offset, end),
  };
}

/** p50, p99 and max of `values` (ms, two decimals); NaN when there are none. */
export function latencyFigures(values: number[]): { samples: number; p50: number; p99: number; max: number } {
  const sorted = Float64Array.from(values).sort();
  const at = (p: number) => round(percentile(sorted, p));
  return { samples: sorted.length, p50: at(50), p99: at(99), max: at(100) };
}
