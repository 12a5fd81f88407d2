// The dials of one telephony configuration on this node, in slot order, one at a time.
//
// A claim hands this node consecutive pacing slots of the configuration (claim-runs.ts), and the
// store moves the configuration's next free slot past them, so the slots of all nodes together are
// spaced 1/calls_per_second apart (with headroom). Here those slots are kept:
//
// - one dial at a time, each at least the spacing after the previous one's due time, so a node
//   that falls behind cannot catch up in a burst of more than `toleranceMs` worth of dials. Timers
//   have a granularity of 1 ms: waits shorter than that are not slept (at 10,000 calls per second
//   the spacing is 0.1 ms), and the due times, not the moments of dialing, keep the count right;
// - a dial more than `toleranceMs` past its slot would eat into the next slots, which may be another
//   node's: then every dial still waiting here whose slot has passed takes a fresh slot, all in ONE
//   store transaction (one row lock per catch-up, not one per late dial, which under backlog
//   queued the nodes behind each other's locks). Dials still on time keep their reserved slots. The
//   store hands fresh slots out as a claim does: a paced campaign's runs also at its own spacing,
//   after its slots already taken (pacing-slots.ts), so a catch-up never bunches them; a claim
//   whose fresh slot would outlast its lease is renewed in the same transaction (claim-runs.ts);
// - fresh slots are worth having only if the node is there in time for them. When they arrive
//   already late (the store took longer than the tolerance to hand them over), the next re-slot
//   asks for slots that far ahead, doubling on each miss in a row (up to `MAX_RESLOT_LEAD_MS`).
//   Asking from `now` every time, a node whose store round trip outlasted the tolerance missed
//   every fresh slot, used up its re-slots and dialed outside any slot, in another node's second;
// - a run re-slotted `maxReslots` times in a row is dialed anyway, and said so: its node is too
//   busy to keep any slot.
//
// Everything this needs from outside (time, waiting, the store's slots, the dial) is handed in, so
// its timing is tested with a fake clock.

/** The furthest ahead a re-slot asks for its slots (a store that slow has bigger problems). */
export const MAX_RESLOT_LEAD_MS = 1_000;

export interface PacedDial {
  runId: number;
  /** The pacing slot: not before this. */
  dialAt: number;
}

export interface PacerDeps<T extends PacedDial> {
  now(): number;
  sleep(ms: number): Promise<void>;
  /**
   * Takes fresh slots of the configuration for these runs (whose slots have passed), in this order
   * (from `now` at the earliest; a campaign's runs also at its own spacing, claim-runs.ts);
   * returns each one's slot.
   */
  takeSlots(items: readonly T[], now: number): Promise<number[]>;
  /** Starts the dial (the pacer does not wait for the provider's answer). */
  dial(item: T): void;
  /** A batch of fresh slots was taken (a metric). */
  onReslot(dials: number): void;
  /** The node kept missing one run's slots and dials it late. */
  onGaveUp(item: T, latenessMs: number): void;
  /** Nothing is left waiting: the dispatcher may claim again. */
  onIdle(): void;
}

export interface PacerSettings {
  spacingMs: number;
  toleranceMs: number;
  maxReslots: number;
}

export class RoutePacer<T extends PacedDial> {
  private readonly queue: T[] = [];
  private reslots = 0;
  /** How far ahead of now the next re-slot asks for its slots; 0 until a fresh slot was missed. */
  private reslotLeadMs = 0;
  /** How long the last re-slot took, from the moment it was found necessary to the slots in hand. */
  private lastReslotMs = 0;
  /** The earliest due time of this node's next dial: the previous one's due time plus the spacing. */
  private nextAllowedAt = Number.NEGATIVE_INFINITY;
  private running: Promise<void> | undefined;

  constructor(
    private settings: PacerSettings,
    private readonly deps: PacerDeps<T>,
  ) {}

  /** Runs waiting for their slot. */
  get pending(): number {
    return this.queue.length;
  }

  /**
   * Whether a new claim for this configuration makes sense now: nothing waits here, or what waits
   * is on time and due within `lookaheadMs`. A node behind its slots claims nothing more, so it
   * never holds more slots than it can keep.
   */
  canTakeMore(now: number, lookaheadMs: number): boolean {
    const head = this.queue[0];
    const tail = this.queue[this.queue.length - 1];
    if (!head || !tail) return true;
    return head.dialAt >= now - this.settings.toleranceMs && tail.dialAt <= now + lookaheadMs;
  }

  /**
   * Takes every run still waiting for its slot out of the pacer, never to be dialed here (a
   * stopping node gives them back to the queue). The loop ends at its next step.
   */
  drain(): T[] {
    return this.queue.splice(0);
  }

  /** Adds claimed runs (with their slots) and returns the loop that dials them, started if idle. */
  add(items: T[], settings: PacerSettings): Promise<void> {
    this.settings = settings;
    this.queue.push(...items);
    this.queue.sort((a, b) => a.dialAt - b.dialAt);
    this.running ??= this.loop().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async loop(): Promise<void> {
    const { deps } = this;
    for (let head = this.queue[0]; head !== undefined; head = this.queue[0]) {
      const { spacingMs, toleranceMs, maxReslots } = this.settings;
      const due = Math.max(head.dialAt, this.nextAllowedAt);
      const wait = due - deps.now();
      if (wait >= 1) await deps.sleep(wait);
      // A claim added while this slept may have put an earlier slot first: start again from it
      // (dialing `head` but taking the new first out of the queue dialed one run twice, another never).
      if (this.queue[0] !== head) continue;
      const now = deps.now();
      const lateness = now - head.dialAt;
      if (lateness > toleranceMs && toleranceMs > 0) {
        if (this.reslots < maxReslots) {
          // A re-slot in a row: the previous fresh slots were missed, by at least the store's round trip.
          if (this.reslots > 0) this.reslotLeadMs = Math.min(MAX_RESLOT_LEAD_MS, Math.max(2 * this.reslotLeadMs, this.lastReslotMs));
          this.reslots++;
          // Only the runs whose slots have passed (or will have, by the time fresh slots start) get
          // new ones. The others keep the slots their claim reserved: a fresh slot comes after
          // every slot already taken, and for a paced campaign's run after its campaign's next
          // one, a full campaign spacing on, so re-slotting a run still on time only delays it
          // (and gives away a reserved slot). A claim added during the store's round trip keeps
          // its slots too (handing it unreserved times could land in another node's slots).
          const from = now + this.reslotLeadMs;
          const late = this.queue.filter((item) => item.dialAt < from);
          const slots = await deps.takeSlots(late, from);
          this.lastReslotMs = deps.now() - now;
          late.forEach((item, i) => (item.dialAt = slots[i] as number));
          this.queue.sort((a, b) => a.dialAt - b.dialAt);
          deps.onReslot(late.length);
          continue;
        }
        deps.onGaveUp(head, lateness);
      }
      this.queue.shift();
      this.reslots = 0;
      this.reslotLeadMs = 0;
      this.nextAllowedAt = Math.max(due, now - toleranceMs) + spacingMs;
      deps.dial(head);
    }
    deps.onIdle();
  }
}
