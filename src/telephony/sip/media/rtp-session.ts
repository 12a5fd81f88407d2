// One SIP call's RTP (RFC 3550): a UDP socket on a port of its own from the configured range, the
// packets the callee sends (parsed by the `rtp.js` package, kept when they carry the negotiated
// codec or telephone-event) and the packets Dialtone sends, with one random SSRC, a sequence number
// and timestamp that start at random values and advance per packet (160 samples per 20 ms), and
// the marker bit on the first packet of each talkspurt.
//
// Symmetric RTP (RFC 4961, what SBCs call "latching"): packets go to the address in the callee's SDP
// until its first packet arrives, then to wherever that packet came from, so a callee behind NAT
// (whose SDP names a private address) still hears us. Only the first packet's source is latched:
// a later stranger cannot take the stream over. A re-INVITE naming a new address (setRemote with
// `relatch`) moves the stream there and latches again on the first packet that follows.
//
// On hold (`sending` false) nothing is sent, but the timestamp keeps following the clock, so the
// audio after the hold carries the time that passed (RFC 3550 section 5.1).
import { randomInt } from 'node:crypto';
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { RtpPacket, isRtp } from 'rtp.js/packets';
import { nodeBufferToDataView } from 'rtp.js/utils';
import type { SdpAnswer } from './sdp.js';

/** The ports this process hands out to calls: each call's is its own until the call releases it. */
export class RtpPortRange {
  private readonly taken = new Set<number>();
  private next: number;

  constructor(
    readonly min: number,
    readonly max: number,
  ) {
    if (min > max) throw new Error(`SIP_RTP_PORT_MIN (${min}) must not exceed SIP_RTP_PORT_MAX (${max})`);
    // RTP takes even ports (RFC 3550 section 11: RTCP, when used, is the odd port above).
    this.next = min + (min % 2);
    if (this.next > max) throw new Error(`SIP_RTP_PORT_MIN-SIP_RTP_PORT_MAX (${min}-${max}) holds no even port for RTP`);
  }

  /** Binds a UDP socket on a free even port of the range; rejects when every port is in use. */
  async bind(address: string): Promise<{ socket: Socket; port: number; release: () => void }> {
    for (let tried = 0; tried <= (this.max - this.min) / 2; tried += 1) {
      const port = this.next;
      this.next = port + 2 > this.max ? this.min + (this.min % 2) : port + 2;
      if (this.taken.has(port)) continue;
      this.taken.add(port);
      const socket = createSocket('udp4');
      const bound = await new Promise<Error | undefined>((resolve) => {
        socket.once('error', resolve);
        socket.bind(port, address, () => {
          socket.removeListener('error', resolve);
          resolve(undefined);
        });
      });
      if (!bound) return { socket, port, release: () => this.taken.delete(port) };
      // Taken by another process (EADDRINUSE): try the next one.
      this.taken.delete(port);
      socket.close();
      if ((bound as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw bound;
    }
    throw new Error(`no free RTP port in ${this.min}-${this.max} on ${address}`);
  }
}

/** A packet the callee sent, as the bridge needs it. */
export interface ReceivedRtp {
  payloadType: number;
  ssrc: number;
  sequenceNumber: number;
  timestamp: number;
  marker: boolean;
  payload: Buffer;
}

export class RtpSession {
  private remote: { address: string; port: number } | undefined;
  private latched = false;
  private readonly ssrc = randomInt(0, 2 ** 32);
  private sequence = randomInt(0, 2 ** 16);
  private readonly timestampBase = randomInt(0, 2 ** 32);
  /** Samples sent since the session started, the timestamp's offset from its base. */
  private sentSamples = 0;
  private closed = false;

  constructor(
    private readonly socket: Socket,
    readonly port: number,
    private readonly release: () => void,
    private readonly onPacket: (packet: ReceivedRtp) => void,
    onError: (error: Error) => void,
  ) {
    socket.on('message', (message, from) => this.receive(message, from));
    socket.on('error', onError);
  }

  /** False while the callee holds the call (or takes no audio from us): packets are not sent. */
  sending = true;

  /**
   * Where to send until the callee's own packets say otherwise: its SDP answer. `relatch` (a
   * re-INVITE moved the media) sends to the new address at once and latches again on the next packet.
   */
  setRemote(answer: Pick<SdpAnswer, 'address' | 'port'>, relatch = false): void {
    if (relatch) this.latched = false;
    if (!this.latched) this.remote = { address: answer.address, port: answer.port };
  }

  /** Where packets go now (the SDP's address, or the latched source). */
  get destination(): { address: string; port: number } | undefined {
    return this.remote;
  }

  private receive(message: Buffer, from: RemoteInfo): void {
    if (this.closed || message.length < 12) return;
    const view = nodeBufferToDataView(message);
    if (!isRtp(view)) return;
    if (!this.latched) {
      this.latched = true;
      this.remote = { address: from.address, port: from.port };
    } else if (from.address !== this.remote?.address || from.port !== this.remote.port) {
      return; // not the source we latched onto
    }
    const packet = new RtpPacket(view);
    const payload = packet.getPayload();
    this.onPacket({
      payloadType: packet.getPayloadType(),
      ssrc: packet.getSsrc(),
      sequenceNumber: packet.getSequenceNumber(),
      timestamp: packet.getTimestamp(),
      marker: packet.getMarker(),
      payload: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
    });
  }

  /**
   * Sends one frame. `marker` starts a talkspurt (RFC 3551 section 4.1); `skippedSamples` is the
   * silence since the last frame sent, which the timestamp advances by (RFC 3550 section 5.1:
   * the timestamp follows the sampling clock, sent or not).
   */
  send(payloadType: number, payload: Uint8Array, options: { marker: boolean; skippedSamples?: number }): void {
    if (this.closed || !this.remote) return;
    this.sentSamples += options.skippedSamples ?? 0;
    if (!this.sending) {
      this.sentSamples += payload.byteLength;
      return;
    }
    const packet = new RtpPacket();
    packet.setPayloadType(payloadType);
    packet.setSequenceNumber(this.sequence);
    packet.setTimestamp((this.timestampBase + this.sentSamples) % 2 ** 32);
    packet.setSsrc(this.ssrc);
    packet.setMarker(options.marker);
    packet.setPayload(new DataView(payload.buffer, payload.byteOffset, payload.byteLength));
    const view = packet.getView();
    this.socket.send(new Uint8Array(view.buffer, view.byteOffset, view.byteLength), this.remote.port, this.remote.address);
    this.sequence = (this.sequence + 1) % 2 ** 16;
    this.sentSamples += payload.byteLength;
  }

  /**
   * One RFC 4733 telephone-event packet of the event that started `startedAt` samples into the
   * session (section 2.3: every packet of an event carries the event's start as its timestamp, the
   * duration so far in its payload, the marker on the first, the E bit on the last three). The
   * session's clock is moved past the event by `advance` once it ends.
   */
  sendEvent(payloadType: number, event: { code: number; durationSamples: number; end: boolean; first: boolean; startedAt: number }): void {
    if (this.closed || !this.remote || !this.sending) return;
    // Section 2.3: event, E bit, reserved bit and volume (10: -10 dBm0, a usual level), duration.
    const payload = new Uint8Array([event.code, (event.end ? 0x80 : 0) | 10, (event.durationSamples >> 8) & 0xff, event.durationSamples & 0xff]);
    const packet = new RtpPacket();
    packet.setPayloadType(payloadType);
    packet.setSequenceNumber(this.sequence);
    packet.setTimestamp((this.timestampBase + event.startedAt) % 2 ** 32);
    packet.setSsrc(this.ssrc);
    packet.setMarker(event.first);
    packet.setPayload(new DataView(payload.buffer));
    const view = packet.getView();
    this.socket.send(new Uint8Array(view.buffer, view.byteOffset, view.byteLength), this.remote.port, this.remote.address);
    this.sequence = (this.sequence + 1) % 2 ** 16;
  }

  /** Samples sent or skipped since the session started: where an event sent now begins. */
  get clockSamples(): number {
    return this.sentSamples;
  }

  /** Moves the session's clock on by time nothing was sent in (an event's duration, a pause). */
  advance(samples: number): void {
    this.sentSamples += samples;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.close();
    this.release();
  }
}
