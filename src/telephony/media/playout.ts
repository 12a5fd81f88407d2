// What the agent runtime sends to be played to the callee, paced out at real time: the runtime may
// send audio in chunks of any size, as fast as it likes (a text-to-speech engine is faster than
// speech); the callee must get one 20 ms packet every 20 ms. The queue also holds the runtime's
// marks, each answered once the audio queued before it has been played, and `clear` empties it
// (barge-in), answering the marks it drops, as Twilio's Media Streams do.
//
// The schedule is kept against the clock, per talkspurt: its n-th frame is due n × 20 ms after its
// first, whatever the timers did. Playout may fall behind that schedule by up to `catchUpMs`, and
// sends what is overdue at once to catch up. Why: a runtime that sends at real time (relaying live
// audio, or echoing) has its frames arrive just when they are due, so any stall (of this node's
// event loop, of the runtime, of the network) leaves a few of them late, then arriving together.
// Restarting the schedule from the first late frame would play the rest one by one behind it and
// keep that delay for the rest of the call, one more stall's worth at every stall. Within
// `catchUpMs` the frames are sent as they come and the delay is not kept; beyond it (a longer
// pause of the runtime: a new talkspurt, or a stall of our own longer than that: the excess is
// given up), the schedule moves on. The price is a burst of at most `catchUpMs` of audio after a
// short gap, which the callee's jitter buffer absorbs.
import type { Clock } from '../../shared/clock.js';
import { MULAW_SILENCE } from './g711.js';

export const FRAME_MS = 20;
/** Samples in 20 ms at 8 kHz: one G.711 frame, and the RTP timestamp step between frames. */
export const SAMPLES_PER_FRAME = 160;
/** Bytes of one 20 ms μ-law frame. */
export const FRAME_BYTES = SAMPLES_PER_FRAME;
/** Most frames the simulated callee's voice sends at once when its timer fired late; beyond that its schedule starts again (simulator/stream.ts). */
export const MAX_CATCH_UP = 5;

/** Each frame knows when it was queued: a frame that was there when it was due was late by our doing, not the runtime's. */
type Item = { kind: 'audio'; frame: Uint8Array; queuedAt: number } | { kind: 'mark'; name: string };

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
    /** How far behind its schedule playout may fall and still catch up, in ms (at least a frame's). */
    private readonly catchUpMs: number,
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
    const now = this.clock.now();
    for (; offset + FRAME_BYTES <= data.length; offset += FRAME_BYTES) {
      if (this.queuedFrames >= this.maxQueuedFrames) dropped = true;
      else this.push({ kind: 'audio', frame: data.slice(offset, offset + FRAME_BYTES), queuedAt: now });
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
    this.push({ kind: 'audio', frame, queuedAt: this.clock.now() });
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
    for (;;) {
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
      const next = this.queue[0];
      if (next?.kind !== 'audio') return; // idle: the next audio is placed when it comes
      const starts = this.placeOnSchedule(next.queuedAt, now);
      if (!starts.talkspurt && this.playedUntil !== undefined && this.playedUntil > now) {
        // Not due yet: the frame playing has not ended.
        this.schedule(this.playedUntil - now);
        return;
      }
      this.queue.shift();
      this.queuedFrames -= 1;
      if (starts.talkspurt) {
        this.talkspurtStart = now;
        this.sentInTalkspurt = 0;
      }
      this.sink.frame(next.frame, starts.talkspurt, starts.skippedSamples);
      this.sentInTalkspurt += 1;
      this.playedUntil = this.talkspurtStart + this.sentInTalkspurt * FRAME_MS;
      if (this.playedUntil > now) {
        this.schedule(this.playedUntil - now);
        return;
      }
      // Overdue, within catchUpMs: the next frame goes at once too.
    }
  }

  /**
   * Where the frame at the head falls: in the talkspurt being played (due when the frame before it
   * ends, sent at once while playout is behind by no more than catchUpMs), or starting a new one
   * after the silence `skippedSamples` long.
   */
  private placeOnSchedule(queuedAt: number, now: number): { talkspurt: boolean; skippedSamples: number } {
    if (this.playedUntil === undefined) return { talkspurt: true, skippedSamples: 0 };
    const behind = now - this.playedUntil;
    if (behind <= this.catchUpMs) return { talkspurt: false, skippedSamples: 0 };
    if (queuedAt <= this.playedUntil) {
      // The frame was here when due: the delay is ours (a stalled event loop), not a pause of the
      // runtime's. The talkspurt goes on, but what is beyond catchUpMs is given up, not kept.
      this.talkspurtStart += behind - this.catchUpMs;
      this.playedUntil = now - this.catchUpMs;
      return { talkspurt: false, skippedSamples: 0 };
    }
    // The runtime paused longer than catchUpMs: what comes next is a talkspurt of its own.
    return { talkspurt: true, skippedSamples: Math.round((behind * SAMPLES_PER_FRAME) / FRAME_MS) };
  }
}
