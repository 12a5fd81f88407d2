// A short reorder buffer on the RTP a callee sends: UDP may deliver packets out of order, and the
// runtime must hear the audio in the order it was spoken. Packets are passed on in sequence-number
// order (RFC 3550 section 5.1: the sequence number counts packets, modulo 2^16); one that comes
// ahead of a missing one waits at most `depthMs` for it, then the gap is skipped (a lost packet is
// not waited for longer); a duplicate, or a packet older than one already passed on, is dropped.
//
// Not a jitter buffer: packets that arrive in order pass at once, so in-order audio gains no
// latency; only what follows a hole waits, and at most `depthMs`.
import type { Clock } from '../../../shared/clock.js';

/** RFC 3550 appendix A.1: a jump of more than this many packets is the sender starting over, not a gap. */
const MAX_DROPOUT = 3000;
/** ... and a packet more than this many behind is one too (a restarted sequence), not a late duplicate. */
const MAX_MISORDER = 100;
/** Most packets held at once, whatever the depth: a hole cannot make the buffer grow without bound. */
const MAX_HELD = 64;

export interface Sequenced {
  sequenceNumber: number;
  ssrc: number;
}

/** How far `b` is after `a` in a 16-bit sequence space: negative when it is before. */
function distance(a: number, b: number): number {
  const d = (b - a + 0x10000) % 0x10000;
  return d >= 0x8000 ? d - 0x10000 : d;
}

export class ReorderBuffer<T extends Sequenced> {
  /** The sequence number the next packet passed on should carry; undefined before the first. */
  private expected: number | undefined;
  private ssrc: number | undefined;
  /** Packets ahead of a hole, by sequence number, with when they arrived. */
  private readonly held = new Map<number, { packet: T; at: number }>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;

  constructor(
    private readonly depthMs: number,
    private readonly clock: Clock,
    private readonly deliver: (packet: T) => void,
  ) {}

  push(packet: T): void {
    if (this.closed) return;
    if (this.expected === undefined || packet.ssrc !== this.ssrc) return this.restart(packet);
    const ahead = distance(this.expected, packet.sequenceNumber);
    if (ahead > MAX_DROPOUT || ahead < -MAX_MISORDER) return this.restart(packet);
    if (ahead < 0) return; // late: its place has been passed (a duplicate, or a gap already skipped)
    if (ahead === 0) {
      this.pass(packet);
      this.drain();
      return;
    }
    if (this.held.has(packet.sequenceNumber)) return; // a duplicate of one waiting
    this.held.set(packet.sequenceNumber, { packet, at: this.clock.now() });
    if (this.depthMs <= 0 || this.held.size > MAX_HELD) this.skipGap();
    else this.schedule();
  }

  close(): void {
    this.closed = true;
    this.held.clear();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** A new source (another SSRC, or a sequence that jumped): what waits goes first, in order, then this one. */
  private restart(packet: T): void {
    while (this.held.size > 0) this.skipGap();
    this.ssrc = packet.ssrc;
    this.pass(packet);
  }

  private pass(packet: T): void {
    this.expected = (packet.sequenceNumber + 1) % 0x10000;
    this.deliver(packet);
  }

  /** Passes on what waited for the packet just passed, up to the next hole. */
  private drain(): void {
    for (let next = this.held.get(this.expected ?? -1); next; next = this.held.get(this.expected ?? -1)) {
      this.held.delete(next.packet.sequenceNumber);
      this.pass(next.packet);
    }
    if (this.held.size === 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** Gives up on the hole before the earliest packet held: it is passed on, and what follows it in order. */
  private skipGap(): void {
    let earliest: number | undefined;
    for (const sequence of this.held.keys()) if (earliest === undefined || distance(earliest, sequence) < 0) earliest = sequence;
    if (earliest === undefined) return;
    this.expected = earliest;
    this.drain();
  }

  /** Wakes when the packet that has waited longest has waited `depthMs`. */
  private schedule(): void {
    if (this.timer || this.held.size === 0) return;
    let oldest = Infinity;
    for (const { at } of this.held.values()) oldest = Math.min(oldest, at);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const now = this.clock.now();
      // Every hole whose next packet has waited its time is skipped; what is left waits on.
      for (;;) {
        let waitedLongest = 0;
        for (const { at } of this.held.values()) waitedLongest = Math.max(waitedLongest, now - at);
        if (this.held.size === 0 || waitedLongest < this.depthMs) break;
        this.skipGap();
      }
      this.schedule();
    }, Math.max(0, oldest + this.depthMs - this.clock.now()));
  }
}
