// A SIP call's media, from the offer to the hang-up: the call's own RTP port (rtp-session.ts), the
// codec the answer chose (sdp.ts), and, once answered, the bridge to the agent runtime
// (media-stream-bridge.ts). The callee's audio becomes 20 ms μ-law frames for the bridge (PCMA is
// transcoded, packets of another duration are re-cut) and its RFC 4733 key presses `dtmf`
// messages; what the runtime plays goes back in the answer's codec.
//
// What arrives passes a short reorder buffer first (reorder.ts). A callee that sends no RTP for
// the media timeout after the answer (or after its last packet) is reported, unless the call is on
// hold. A callee's re-INVITE (`reoffer`) may move its media, hold the call (we stop sending) or
// resume it; it is answered with the same port and codec and the direction mirrored.
import type { Clock } from '../../../shared/clock.js';
import { fromMulaw, toMulaw } from '../../media/g711.js';
import { MediaStreamBridge, type BridgeSettings } from '../../media/media-stream-bridge.js';
import { FRAME_BYTES, Playout } from '../../media/playout.js';
import { ReorderBuffer } from './reorder.js';
import { RtpSession, type ReceivedRtp, type RtpPortRange } from './rtp-session.js';
import { answerDirection, parseSdpAnswer, receives, sdpAnswer, sdpOffer, type SdpAnswer } from './sdp.js';

/** RFC 4733 section 3.2's events 0-15: the digits, *, # and A-D. */
const DTMF_EVENTS = '0123456789*#ABCD';
/** A digit sent as an event: 8 packets 20 ms apart (160 ms of tone), then a 60 ms gap before the next. */
const DIGIT_PACKETS = 8;
const DIGIT_GAP_MS = 60;
const PACKET_MS = 20;
/** RTP's clock for G.711 and telephone-event: 8,000 samples a second. */
const SAMPLES_PER_MS = 8;

export interface CallMediaEvents {
  /** The runtime closed the stream: hang up. */
  runtimeClosed(detail: string): void;
  /** The runtime could not be reached: end the call failed. */
  runtimeUnreachable(detail: string): void;
  /** The runtime took the stream but stopped answering (media-stream-bridge.ts): end the call failed. */
  runtimeStalled(detail: string): void;
  /** No RTP from the callee for the media timeout while the call is not on hold: end the call failed. */
  mediaTimeout(detail: string): void;
  warn(message: string, error?: Error): void;
}

export interface CallMediaOptions {
  /** How long a packet after a hole waits for the missing one (SIP_RTP_REORDER_MS); 0 passes packets in arrival order. */
  reorderMs: number;
  /** How long the callee may send no RTP while the call is up and not on hold (SIP_MEDIA_TIMEOUT_MS); 0: no limit. */
  mediaTimeoutMs: number;
}

/** What CallMedia.open uses when told nothing: the defaults of SIP_RTP_REORDER_MS and SIP_MEDIA_TIMEOUT_MS. */
export const DEFAULT_CALL_MEDIA_OPTIONS: CallMediaOptions = { reorderMs: 60, mediaTimeoutMs: 30_000 };

export class CallMedia {
  private answer: SdpAnswer | undefined;
  private bridge: MediaStreamBridge | undefined;
  /** Callee audio not yet a whole 20 ms frame (a callee whose packets are not 20 ms long). */
  private pending: Buffer = Buffer.alloc(0);
  private pendingTimestamp = 0;
  /** The RTP timestamp of the last key press reported: an event's packets share it (RFC 4733 section 2.5). */
  private lastDtmfTimestamp: number | undefined;
  private readonly reorder: ReorderBuffer<ReceivedRtp>;
  /** The SDP's session id and version (o=): a re-INVITE's answer is the next version of the same session. */
  private session = { id: 0, version: 0 };
  /** When the callee's last packet came (or the answer, or the resume); the media timeout counts from it. */
  private lastHeard = 0;
  private watchdog: ReturnType<typeof setTimeout> | undefined;
  private closed = false;
  /** Audio of Dialtone's own being played to the callee (a message left on a voicemail), paced as the runtime's is. */
  private own: Playout | undefined;

  private constructor(
    private readonly rtp: RtpSession,
    private readonly publicAddress: string,
    private readonly clock: Clock,
    private readonly events: CallMediaEvents,
    private readonly options: CallMediaOptions,
  ) {
    this.reorder = new ReorderBuffer(options.reorderMs, clock, (packet) => this.relay(packet));
  }

  /** Binds the call's RTP port on `bindAddress`; the offer names `publicAddress`. */
  static async open(ports: RtpPortRange, bindAddress: string, publicAddress: string, clock: Clock, events: CallMediaEvents, options = DEFAULT_CALL_MEDIA_OPTIONS): Promise<CallMedia> {
    const { socket, port, release } = await ports.bind(bindAddress);
    let media: CallMedia | undefined;
    const rtp = new RtpSession(socket, port, release, (packet) => media?.receive(packet), (error) => events.warn('RTP socket error', error));
    media = new CallMedia(rtp, publicAddress, clock, events, options);
    return media;
  }

  get port(): number {
    return this.rtp.port;
  }

  offer(sessionId: number): string {
    this.session = { id: sessionId, version: sessionId };
    return sdpOffer({ address: this.publicAddress, port: this.rtp.port, sessionId });
  }

  /** The answer's SDP: where to send and in which codec; a problem when it cannot be used. */
  answered(sdp: string | undefined): string | undefined {
    if (this.answer) return undefined; // a retransmitted 2xx
    const parsed = parseSdpAnswer(sdp ?? '');
    if ('problem' in parsed) return parsed.problem;
    this.answer = parsed;
    this.rtp.setRemote(parsed);
    this.rtp.sending = receives(parsed.direction);
    this.lastHeard = this.clock.now();
    this.watch();
    return undefined;
  }

  /**
   * A callee's re-INVITE offer (RFC 3264 section 8): a new address is sent to at once (and latched
   * again), a hold (sendonly, inactive, c=0.0.0.0) stops what we send and the media timeout, a
   * sendrecv resumes both. Returns the answer's SDP, or why the offer cannot be taken (488).
   * Without SDP (an offer Dialtone must make) the answer is our offer again, as it stands.
   */
  reoffer(sdp: string | undefined): { sdp: string } | { problem: string } {
    const current = this.answer;
    if (!current) return { problem: 'the call has not been answered' };
    if (!sdp || sdp.trim() === '') return { sdp: this.describe(current, 'sendrecv') };
    const offered = parseSdpAnswer(sdp, current.codec);
    if ('problem' in offered) return offered;
    if (offered.address !== current.address || offered.port !== current.port) {
      if (offered.address !== '0.0.0.0') this.rtp.setRemote(offered, true);
    }
    const wasListening = current.direction === 'sendrecv';
    this.answer = offered;
    this.rtp.sending = receives(offered.direction);
    // The media timeout runs only while the callee is meant to send both ways (not on hold).
    if (offered.direction === 'sendrecv' && !wasListening) this.lastHeard = this.clock.now();
    this.watch();
    return { sdp: this.describe(offered, answerDirection(offered.direction)) };
  }

  /** Our side of the session as it stands, the next version (RFC 3264 section 8: o= counts changes). */
  private describe(answer: SdpAnswer, direction: SdpAnswer['direction']): string {
    this.session.version += 1;
    const { codec, payloadType, telephoneEvent } = answer;
    return sdpAnswer({ address: this.publicAddress, port: this.rtp.port, sessionId: this.session.id, version: this.session.version, codec, payloadType, telephoneEvent, direction });
  }

  /** Arms the media timeout while the call is up and not on hold; a check that finds a packet since re-arms. */
  private watch(): void {
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = undefined;
    const limit = this.options.mediaTimeoutMs;
    if (this.closed || limit <= 0 || this.answer?.direction !== 'sendrecv') return;
    this.watchdog = setTimeout(() => {
      this.watchdog = undefined;
      if (this.clock.now() - this.lastHeard >= limit) this.events.mediaTimeout(`no RTP from the callee for ${limit} ms`);
      else this.watch();
    }, Math.max(0, this.lastHeard + limit - this.clock.now()));
  }

  /** When the callee's last packet came (or the answer, or the resume), by the clock: the media timeout counts from it. */
  get lastHeardAt(): number {
    return this.lastHeard;
  }

  /** Whether the call is on hold (either side not sending both ways), for tests and logs. */
  get onHold(): boolean {
    return this.answer !== undefined && this.answer.direction !== 'sendrecv';
  }

  get codec(): SdpAnswer['codec'] | undefined {
    return this.answer?.codec;
  }

  /** Relays the call to the agent runtime. */
  connect(settings: BridgeSettings, call: { callSid: string; accountSid: string }): void {
    if (!this.answer || this.bridge) return;
    this.bridge = new MediaStreamBridge(settings, call, this.clock, {
      // The codec as it stands: a re-INVITE may have changed it.
      play: (frame, talkspurt, skippedSamples) => {
        const answer = this.answer;
        if (answer) this.rtp.send(answer.payloadType, fromMulaw(answer.codec, frame), { marker: talkspurt, skippedSamples });
      },
      runtimeClosed: (detail) => this.events.runtimeClosed(detail),
      runtimeUnreachable: (detail) => this.events.runtimeUnreachable(detail),
      runtimeStalled: (detail) => this.events.runtimeStalled(detail),
      warn: (message) => this.events.warn(message),
    });
  }

  /** The answer negotiated telephone-event (RFC 4733): digits can go in the media instead of by INFO. */
  get sendsTelephoneEvents(): boolean {
    return this.answer?.telephoneEvent !== undefined;
  }

  /**
   * Runs `send` (digits sent with sendDigitEvent, and pauses) with the runtime's audio held, so the
   * callee gets one stream of packets; the RTP clock is then moved past the time it took, and the
   * audio queued meanwhile plays on as a new talkspurt.
   */
  async withPlayoutHeld(send: () => Promise<void>): Promise<void> {
    this.bridge?.holdPlayout();
    const clockAtStart = this.rtp.clockSamples;
    this.eventClock = { base: clockAtStart, startedMs: this.clock.now() };
    try {
      await send();
    } finally {
      this.rtp.advance(this.eventClockNow() - clockAtStart);
      this.eventClock = undefined;
      this.bridge?.resumePlayout();
    }
  }

  /**
   * One digit as an RFC 4733 event (section 2.5.1): its packets every 20 ms share the event's start
   * as timestamp, the first with the marker, each with the duration so far; the last is sent three
   * times with the E bit (section 2.5.1.4), then a short gap. Only inside withPlayoutHeld.
   */
  async sendDigitEvent(digit: string, wait: (ms: number) => Promise<void>): Promise<void> {
    const payloadType = this.answer?.telephoneEvent;
    const code = DTMF_EVENTS.indexOf(digit);
    if (payloadType === undefined || code < 0 || !this.eventClock) throw new RangeError(`cannot send ${digit} as a telephone event`);
    const startedAt = this.eventClockNow();
    const frame = PACKET_MS * SAMPLES_PER_MS;
    for (let n = 1; n <= DIGIT_PACKETS; n++) {
      this.rtp.sendEvent(payloadType, { code, durationSamples: n * frame, end: false, first: n === 1, startedAt });
      await wait(PACKET_MS);
    }
    for (let copy = 0; copy < 3; copy++) this.rtp.sendEvent(payloadType, { code, durationSamples: DIGIT_PACKETS * frame, end: true, first: false, startedAt });
    await wait(DIGIT_GAP_MS);
  }

  /** While digits are sent: the RTP clock at the hold, and when it began. */
  private eventClock: { base: number; startedMs: number } | undefined;

  private eventClockNow(): number {
    const held = this.eventClock;
    return held ? held.base + Math.round((this.clock.now() - held.startedMs) * SAMPLES_PER_MS) : this.rtp.clockSamples;
  }

  /**
   * Ends the relay to the agent runtime (`stop`, then the WebSocket closes, as Twilio's stream ends
   * when the call's TwiML is replaced); the call and its RTP go on. Nothing of the runtime's is
   * played after this, and its going is not reported as the call's end.
   */
  detachRuntime(): void {
    this.bridge?.stop();
    this.bridge = undefined;
  }

  /**
   * Plays μ-law audio of Dialtone's own to the callee, one 20 ms packet every 20 ms (playout.ts), in
   * the answer's codec; `played` is told once its last packet's time is over. The runtime, if any,
   * must be detached first: one source of packets at a time. `catchUpMs`: how far behind its
   * schedule it may fall and still catch up (SIP_MEDIA_STREAM_CATCH_UP_MS, as the runtime's audio).
   */
  play(mulaw: Uint8Array, catchUpMs: number, played: () => void): void {
    if (this.closed || !this.answer || this.own) return;
    const frames = Math.ceil(mulaw.length / FRAME_BYTES);
    this.own = new Playout(
      {
        frame: (frame, talkspurt, skippedSamples) => {
          const answer = this.answer;
          if (answer) this.rtp.send(answer.payloadType, fromMulaw(answer.codec, frame), { marker: talkspurt, skippedSamples });
        },
        mark: () => played(),
      },
      this.clock,
      frames,
      catchUpMs,
    );
    this.own.audio(mulaw);
    this.own.mark('played');
  }

  /** The call ended: `stop` to the runtime, the port released. */
  close(): void {
    this.closed = true;
    this.own?.close();
    this.own = undefined;
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = undefined;
    this.reorder.close();
    this.bridge?.stop();
    this.bridge = undefined;
    this.rtp.close();
  }

  /** Hears the callee's audio in sequence order, out of the reorder buffer (μ-law, its RTP timestamp), relayed or not: machine detection listens here. */
  onCalleeAudio: ((mulaw: Uint8Array, timestamp: number) => void) | undefined;

  private receive(packet: ReceivedRtp): void {
    if (!this.answer) return;
    this.lastHeard = this.clock.now();
    this.reorder.push(packet);
  }

  /** A packet in sequence order, out of the reorder buffer. */
  private relay(packet: ReceivedRtp): void {
    const answer = this.answer;
    if (!answer) return;
    if (packet.payloadType === answer.payloadType) {
      // Transcoded once (PCMA), for machine detection and the runtime alike.
      const mulaw = toMulaw(answer.codec, packet.payload);
      this.onCalleeAudio?.(mulaw, packet.timestamp);
      this.audio(mulaw, packet.timestamp);
    } else if (this.bridge && packet.payloadType === answer.telephoneEvent && packet.payload.length >= 4) this.keyPress(packet);
  }

  private audio(mulaw: Uint8Array, timestamp: number): void {
    const bridge = this.bridge;
    if (!bridge) return;
    if (mulaw.length === FRAME_BYTES && this.pending.length === 0) {
      bridge.inbound(mulaw, timestamp);
      return;
    }
    if (this.pending.length === 0) this.pendingTimestamp = timestamp;
    this.pending = Buffer.concat([this.pending, mulaw]);
    while (this.pending.length >= FRAME_BYTES) {
      bridge.inbound(this.pending.subarray(0, FRAME_BYTES), this.pendingTimestamp);
      this.pending = this.pending.subarray(FRAME_BYTES);
      this.pendingTimestamp = (this.pendingTimestamp + FRAME_BYTES) % 2 ** 32;
    }
  }

  /** One digit per event: its first packet reports it; the rest (and the end's three copies) share its timestamp. */
  private keyPress(packet: ReceivedRtp): void {
    if (packet.timestamp === this.lastDtmfTimestamp) return;
    this.lastDtmfTimestamp = packet.timestamp;
    const digit = DTMF_EVENTS[packet.payload[0] ?? 255];
    if (digit) this.bridge?.dtmf(digit);
  }
}
