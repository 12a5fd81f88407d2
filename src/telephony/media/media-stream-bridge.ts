// One answered call (a SIP call, or a simulated one: simulator/stream.ts) relayed to the agent
// runtime: a WebSocket client to AGENT_RUNTIME_URL (the `ws` package) speaking Twilio's Media
// Streams messages (media-streams.ts). The callee's audio goes out as `media` messages of 20 ms
// of μ-law each; the runtime's `media` is queued and paced out to the callee (playout.ts), its
// `mark`s are answered once played, its `clear` drops the queue.
//
// The bridge knows nothing of SIP: the provider gives it μ-law frames and a sink for what to play,
// and is told when the runtime has gone (hang up), could not be reached or stalls (end the call failed).
//
// A stall: a runtime may listen for long without saying anything (no audio to play yet), so silence
// alone is no sign. But a live WebSocket peer answers a ping with a pong (RFC 6455 section 5.5.2;
// every WebSocket library does it for the application), so once nothing at all (message or pong)
// has come from the runtime for `idleTimeoutMs`, pinged meanwhile, its process is stuck or gone.
// And a runtime that does not read lets what we send pile up in the socket's send buffer: past
// `maxBufferedBytes` it is stalled too.
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import type { Clock } from '../../shared/clock.js';
import { MEDIA_FORMAT, parseInbound, type OutboundMessage, type StreamIdentity } from './media-streams.js';
import { FRAME_MS, Playout, type PlayoutSink } from './playout.js';

export interface BridgeSettings {
  /** AGENT_RUNTIME_URL. */
  url: string;
  /** The `start` message's customParameters: the run id and its token. */
  customParameters: Record<string, string>;
  /** How long the runtime has to accept the WebSocket (SIP_MEDIA_STREAM_CONNECT_TIMEOUT_MS). */
  connectTimeoutMs: number;
  /** Largest message taken from the runtime (SIP_MEDIA_STREAM_MAX_MESSAGE_BYTES). */
  maxMessageBytes: number;
  /** Most audio queued to play, in ms (SIP_MEDIA_STREAM_MAX_QUEUED_MS, SIMULATOR_STREAM_MAX_QUEUED_MS). */
  maxQueuedMs: number;
  /** How far behind real time the runtime's audio may fall and still be caught up, in ms (SIP_MEDIA_STREAM_CATCH_UP_MS, SIMULATOR_STREAM_CATCH_UP_MS; playout.ts says why). */
  catchUpMs: number;
  /** Nothing from the runtime (no message, no pong to our pings) for this long: stalled (SIP_MEDIA_STREAM_IDLE_TIMEOUT_MS). Unset or 0: not watched. */
  idleTimeoutMs?: number;
  /** Bytes waiting in the socket's send buffer past which the runtime is stalled, not reading (SIP_MEDIA_STREAM_MAX_BUFFERED_BYTES). Unset or 0: not watched. */
  maxBufferedBytes?: number;
}

export interface BridgeEvents {
  /** A μ-law frame to send to the callee now (playout.ts). */
  play: PlayoutSink['frame'];
  /** The runtime closed the stream: the call is hung up. */
  runtimeClosed(detail: string): void;
  /** The runtime could not be reached (refused, timed out, not a WebSocket): the call ends failed. */
  runtimeUnreachable(detail: string): void;
  /** The runtime took the stream but stopped answering or reading: the call ends failed. Without it, runtimeClosed is told. */
  runtimeStalled?(detail: string): void;
  /** Something worth a log line that ends nothing (audio dropped for the queue's limit). */
  warn(message: string): void;
  /** The stream is open and `start` sent: audio given to `inbound` from now on reaches the runtime (the simulator starts its callee's voice here). */
  opened?(): void;
}

/** Twilio's stream ids are `MZ` and 32 hex digits; ours have the same shape. */
const streamSid = () => `MZ${randomBytes(16).toString('hex')}`;

export class MediaStreamBridge {
  private readonly socket: WebSocket;
  private readonly identity: StreamIdentity;
  private readonly playout: Playout;
  private open = false;
  private ended = false;
  private sequence = 0;
  private chunk = 0;
  /** The RTP timestamp of the first frame relayed: `media` timestamps count from it, in ms. */
  private firstTimestamp: number | undefined;
  private warnedDrop = false;
  /** When something (a message, a pong) last came from the runtime. */
  private heardAt = 0;
  private idleTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly settings: BridgeSettings,
    call: { callSid: string; accountSid: string },
    private readonly clock: Clock,
    private readonly events: BridgeEvents,
  ) {
    this.identity = { streamSid: streamSid(), accountSid: call.accountSid, callSid: call.callSid };
    this.playout = new Playout({ frame: events.play, mark: (name) => this.send({ event: 'mark', sequenceNumber: this.next(), mark: { name }, streamSid: this.identity.streamSid }) }, clock, Math.ceil(settings.maxQueuedMs / FRAME_MS), settings.catchUpMs);
    this.socket = new WebSocket(settings.url, { handshakeTimeout: settings.connectTimeoutMs, maxPayload: settings.maxMessageBytes, perMessageDeflate: false });
    this.socket.on('open', () => {
      this.open = true;
      this.heardAt = clock.now();
      this.watchIdle();
      this.send({ event: 'connected', protocol: 'Call', version: '1.0.0' });
      this.send({
        event: 'start',
        sequenceNumber: this.next(),
        start: { ...this.identity, tracks: ['inbound'], customParameters: settings.customParameters, mediaFormat: { ...MEDIA_FORMAT } },
        streamSid: this.identity.streamSid,
      });
      events.opened?.();
    });
    this.socket.on('message', (data, isBinary) => {
      this.heardAt = clock.now();
      if (!isBinary) this.receive(data.toString());
    });
    this.socket.on('pong', () => (this.heardAt = clock.now()));
    this.socket.on('error', (error) => {
      if (!this.open && !this.ended) {
        this.ended = true;
        this.playout.close();
        events.runtimeUnreachable(error.message);
      }
    });
    this.socket.on('close', (code, reason) => {
      this.playout.close();
      this.stopWatching();
      if (this.ended) return;
      this.ended = true;
      if (this.open) events.runtimeClosed(`the agent runtime closed the media stream (${code}${reason.length > 0 ? ` ${reason.toString()}` : ''})`);
      else events.runtimeUnreachable(`the WebSocket closed before it opened (${code})`);
    });
  }

  get streamSid(): string {
    return this.identity.streamSid;
  }

  /** Whether the WebSocket is open (and `connected` and `start` sent). */
  get isOpen(): boolean {
    return this.open && !this.ended;
  }

  /** When the runtime was last heard from (a message or a pong), by the clock; 0 before the stream opened. */
  get lastHeardAt(): number {
    return this.heardAt;
  }

  /**
   * Every third of the idle timeout: a ping when the runtime has been quiet that long, the stall
   * once it has been quiet (unanswered pings included) for the whole timeout.
   */
  private watchIdle(): void {
    const limit = this.settings.idleTimeoutMs ?? 0;
    if (limit <= 0 || this.ended) return;
    const step = Math.max(1, Math.floor(limit / 3));
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.ended) return;
      const quiet = this.clock.now() - this.heardAt;
      if (quiet >= limit) return this.stalled(`the agent runtime sent nothing and answered no ping for ${quiet} ms`);
      if (quiet >= step && this.socket.readyState === WebSocket.OPEN) this.socket.ping();
      this.watchIdle();
    }, step);
  }

  private stopWatching(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  /** The runtime stopped answering or reading: the socket is dropped (no close handshake to wait on) and the call told. */
  private stalled(detail: string): void {
    if (this.ended) return;
    this.ended = true;
    this.playout.close();
    this.stopWatching();
    this.socket.terminate();
    if (this.events.runtimeStalled) this.events.runtimeStalled(detail);
    else this.events.runtimeClosed(detail);
  }

  /** 20 ms of the callee's audio, μ-law, with its RTP timestamp (8 kHz). Dropped until the stream is open. */
  inbound(frame: Uint8Array, rtpTimestamp: number): void {
    if (!this.open || this.ended) return;
    this.firstTimestamp ??= rtpTimestamp;
    // RTP timestamps wrap at 2^32; the distance from the first is taken modulo that.
    const samples = (rtpTimestamp - this.firstTimestamp + 2 ** 32) % 2 ** 32;
    this.chunk += 1;
    this.send({
      event: 'media',
      sequenceNumber: this.next(),
      media: { track: 'inbound', chunk: String(this.chunk), timestamp: String(Math.round(samples / 8)), payload: Buffer.from(frame).toString('base64') },
      streamSid: this.identity.streamSid,
    });
  }

  /** A DTMF digit the callee pressed (RFC 4733), sent as Twilio's `dtmf` message. */
  dtmf(digit: string): void {
    if (!this.open || this.ended) return;
    this.send({ event: 'dtmf', sequenceNumber: this.next(), dtmf: { track: 'inbound_track', digit }, streamSid: this.identity.streamSid });
  }

  /** The runtime's audio waits while something else is sent to the callee (digits). */
  holdPlayout(): void {
    this.playout.hold();
  }

  resumePlayout(): void {
    this.playout.resume();
  }

  /** The call ended on the provider's side: `stop`, then the socket closes. Nothing is reported back. */
  stop(): void {
    if (this.ended) return;
    this.ended = true;
    this.playout.close();
    this.stopWatching();
    if (this.open) {
      this.send({ event: 'stop', sequenceNumber: this.next(), stop: { accountSid: this.identity.accountSid, callSid: this.identity.callSid }, streamSid: this.identity.streamSid });
      this.socket.close(1000, 'call ended');
    } else {
      this.socket.terminate();
    }
  }

  private receive(text: string): void {
    const message = parseInbound(text);
    if (!message || this.ended) return;
    if (message.event === 'media') {
      if (!this.playout.audio(message.payload) && !this.warnedDrop) {
        this.warnedDrop = true;
        // The limit's value, not its setting's name: SIP calls and simulated ones each have their own (SIP_MEDIA_STREAM_MAX_QUEUED_MS, SIMULATOR_STREAM_MAX_QUEUED_MS).
        this.events.warn(`the agent runtime sent more audio than the stream queues (MAX_QUEUED_MS, ${this.settings.maxQueuedMs} ms): the excess was dropped`);
      }
    } else if (message.event === 'mark') this.playout.mark(message.name);
    else this.playout.clear();
  }

  private next(): string {
    this.sequence += 1;
    return String(this.sequence);
  }

  private send(message: OutboundMessage): void {
    if (this.socket.readyState !== WebSocket.OPEN) return;
    this.socket.send(JSON.stringify(message));
    const limit = this.settings.maxBufferedBytes ?? 0;
    if (limit > 0 && this.socket.bufferedAmount > limit && !this.ended) {
      this.stalled(`the agent runtime is not reading the media stream: ${this.socket.bufferedAmount} bytes wait to be sent`);
    }
  }
}
