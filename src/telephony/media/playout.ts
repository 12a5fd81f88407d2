// What the agent runtime sends to be played to the callee, paced out at real time: the runtime may
// send audio in chunks of any size, as fast as it likes (a text-to-speech engine is faster than
// speech); the callee must get one 20 ms packet every 20 ms. The queue also holds the runtime's
// marks, each answered once the audio queued before it has been played, and `clear` empties it
// (barge-in), answering the marks it drops, as Twilio's Media Streams do.
//
// The schedule is kept against the clock, not by adding 20 ms per timer: a timer that fires late
// sends the frames that are due at once (up to MAX_CATCH_UP), so a loaded event loop does not
// slowly stretch the audio.
import type { Clock } from '../../shared/clock.js';
import { MULAW_SILENCE } from './g711.js';

export const FRAME_MS = 20;
/** Samples in 20 ms at 8 kHz: one G.711 frame, and the RTP timestamp step between frames. */
export const SAMPLES_PER_FRAME = 160;
/** Bytes of one 20 ms μ-law frame. */
export const FRAME_BYTES = SAMPLES_PER_FRAME;
/** Most frames sent at once when the timer fired late; beyond that the schedule starts again (the simulated callee's voice paces itself by it too). */
export const MAX_CATCH_UP = 5;

type Item = { kind: 'audio'; frame: Uint8Array } | { kind: 'mark'; name: string };

export interface PlayoutSink {
  /** One 20 ms μ-law frame to send now; `talkspurt` marks the first after silence, `skippedSamples` the silence before it. */
  frame(frame: Uint8Array, talkspurt: boolean, skippedSamples: number): void;
  /** A mark whose audio has been played (or dropped by `clear`). */
  mark(name: string): void;
}

export class Playout {
  private readonly queue: Item[] = [];
  private queuedFrames = 0;
  /** Bytes of a frame not yet complete: the runtime's chunks need not be multiples of 20 ms. */
  private partial: Uint8Array = new Uint8Array(0);
  /** When the partial frame began: with nothing else queued it waits up to a frame's time for the rest. */
  private partialSince = 0;
  /** The timer is waiting for the rest of a partial frame: audio that completes it plays at once. */
  private awaitingRest = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** When the frame being played started, and how many frames have been sent since the talkspurt began. */
  private talkspurtStart = 0;
  private sentInTalkspurt = 0;
  /** When the last frame sent ends (its 20 ms played); undefined before the first. */
  private playedUntil: number | undefined;
  private closed = false;
  /** While digits are sent as RFC 4733 events, the runtime's audio waits (one source of packets at a time). */
  private held = false;

  constructor(
    private readonly sink: PlayoutSink,
    private readonly clock: Clock,
    /** Most audio queued, in frames; audio beyond it is dropped (the runtime is far ahead of real time). */
    private readonly maxQueuedFrames: number,
  ) {}

  /** μ-law audio of any length; false when some of it was dropped for the queue's limit. */
  audio(bytes: Uint8Array): boolean {
    if (this.closed) return true;
    let data = bytes;
    if (this.partial.length > 0) {
      data = new Uint8Array(this.partial.length + bytes.length);
      data.set(this.partial);
      data.set(bytes, this.partial.length);
    }
    let offset = 0;
    let dropped = false;
    for (; offset + FRAME_BYTES <= data.length; offset += FRAME_BYTES) {
      if (this.queuedFrames >= this.maxQueuedFrames) dropped = true;
      else this.push({ kind: 'audio', frame: data.slice(offset, offset + FRAME_BYTES) });
    }
    // A new partial frame (not the old one grown) waits from now.
    if (offset < data.length && (this.partial.length === 0 || offset > 0)) this.partialSince = this.clock.now();
    this.partial = data.slice(offset);
    if (this.awaitingRest && this.queue.length > 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.kick();
    return !dropped;
  }

  mark(name: string): void {
    if (this.closed) return;
    this.flushPartial();
    this.push({ kind: 'mark', name });
    this.kick();
  }

  /** Drops what is queued; the marks among it are answered now. */
  clear(): void {
    this.partial = new Uint8Array(0);
    const dropped = this.queue.splice(0);
    this.queuedFrames = 0;
    for (const item of dropped) if (item.kind === 'mark') this.sink.mark(item.name);
  }

  /** Stops sending until `resume`; what the runtime sends meanwhile is queued. */
  hold(): void {
    this.held = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  resume(): void {
    if (!this.held) return;
    this.held = false;
    // What follows the hold starts a talkspurt of its own.
    this.playedUntil = undefined;
    this.kick();
  }

  close(): void {
    this.closed = true;
    this.queue.length = 0;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private push(item: Item): void {
    this.queue.push(item);
    if (item.kind === 'audio') this.queuedFrames += 1;
  }

  /** A partial frame is played padded with silence once nothing completes it (a mark follows, or the queue ran dry). */
  private flushPartial(): void {
    if (this.partial.length === 0) return;
    const frame = new Uint8Array(FRAME_BYTES).fill(MULAW_SILENCE);
    frame.set(this.partial);
    this.partial = new Uint8Array(0);
    this.push({ kind: 'audio', frame });
  }

  /** Starts playing when idle: at once if nothing is playing, else when the frame playing ends. */
  private kick(): void {
    if (this.timer || this.closed || this.held) return;
    const now = this.clock.now();
    if (this.playedUntil !== undefined && this.playedUntil > now) this.schedule(this.playedUntil - now);
    else this.tick();
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.tick();
    }, Math.max(0, delayMs));
  }

  private tick(): void {
    this.awaitingRest = false;
    if (this.closed || this.held) return;
    const now = this.clock.now();
    for (let sent = 0; sent < MAX_CATCH_UP; sent += 1) {
      // Marks at the head follow audio that has been played to its end.
      while (this.queue[0]?.kind === 'mark') this.sink.mark((this.queue.shift() as { name: string }).name);
      if (this.queue.length === 0 && this.partial.length > 0) {
        // A runtime sending 10 ms chunks at real time completes the frame within 20 ms: padding
        // each half with silence would garble it. The rest is awaited a frame's time, then padded.
        const due = this.partialSince + FRAME_MS;
        if (due > now) {
          this.schedule(due - now);
          this.awaitingRest = true;
          return;
        }
        this.flushPartial();
      }
      const next = this.queue.shift();
      if (!next) return; // idle: the next audio starts a talkspurt
      if (next.kind !== 'audio') continue;
      this.queuedFrames -= 1;
      const continuing = this.playedUntil !== undefined && this.playedUntil >= now - FRAME_MS;
      if (!continuing) {
        this.talkspurtStart = now;
        this.sentInTalkspurt = 0;
      }
      const skipped = continuing || this.playedUntil === undefined ? 0 : Math.round(((now - this.playedUntil) * SAMPLES_PER_FRAME) / FRAME_MS);
      this.sink.frame(next.frame, !continuing, skipped);
      this.sentInTalkspurt += 1;
      this.playedUntil = this.talkspurtStart + this.sentInTalkspurt * FRAME_MS;
      if (this.playedUntil > now) break;
    }
    const due = (this.playedUntil ?? now) - now;
    // Behind by more than MAX_CATCH_UP frames: the schedule starts again from now.
    if (due < 0) {
      this.talkspurtStart = now - this.sentInTalkspurt * FRAME_MS;
      this.playedUntil = now;
    }
    this.schedule(Math.max(0, due));
  }
}
