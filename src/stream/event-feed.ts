// One node's feed of stream events (run events, recorded webhook delivery attempts and campaign
// state changes, in their one id order: store/statements/event-stream-statements.ts), for every stream
// connection it serves: while at least one connection listens, it reads the tables past its horizon every
// STREAM_POLL_INTERVAL_MS (and at once when this node wrote something), so events written on any
// node reach every node's streams. Polling, not LISTEN/NOTIFY: a NOTIFY per event would add a statement and a commit-time
// queue lock to every run transition, the hot path; one read per node per interval costs the
// writers nothing.
//
// The horizon is the id up to which every event is known: nothing at or below it can still
// appear. On SQLite writes are serialized, so ids become visible in order and the horizon is the
// last id read. On PostgreSQL an id is drawn before its transaction commits, so id 41 may become
// visible after id 42: the feed stops at a gap and waits for it up to STREAM_GAP_WAIT_MS (an id
// whose transaction rolled back never appears), so a stream resuming after N never skips an event
// committed late below N. A transaction that holds a drawn event id uncommitted for longer than the
// wait would be missed by streams; run transitions, attempt records and campaign moves are short transactions, so
// the wait is set far above their duration.
//
// The same holds when the feed starts: the last id written may have an id below it still in flight,
// so the starting horizon is not simply the last id. The feed looks back START_LOOKBACK_IDS ids
// and starts below the lowest hole that may still fill (one with an event above it written less
// than STREAM_GAP_WAIT_MS ago), then waits for it like any other gap.
import type { Logger } from 'pino';
import type { Clock } from '../shared/clock.js';
import { selectEventsAfter, selectEventTimesAfter, selectLastEventId, type StreamEventRow } from '../store/statements/event-stream-statements.js';
import type { Store } from '../store/engine/store.js';

/**
 * How far below the last id a starting feed looks for ids still in flight (PostgreSQL). A hole
 * deeper than this would need that many ids drawn while one transaction stayed open; ids are only
 * read with their time, once per start, so the look is cheap.
 */
export const START_LOOKBACK_IDS = 5_000;

export interface EventFeedOptions {
  pollIntervalMs: number;
  gapWaitMs: number;
  batchSize: number;
}

export type FeedListener = (events: readonly StreamEventRow[]) => void;

/** A missing id just above the horizon, and since when it has been waited for. */
export interface Gap {
  id: number;
  since: number;
}

/**
 * Where a feed starts on PostgreSQL, from the ids and times of the events above `from` (in id
 * order): below the lowest hole that may still fill, which is one whose next event was written
 * less than `gapWaitMs` before `now` (an older hole is a rolled-back id or one the feed would have
 * passed by anyway); past the last event when there is none.
 */
export function startingPoint(from: number, events: readonly { id: number; at: number }[], now: number, gapWaitMs: number): { horizon: number; gap?: Gap } {
  let expected = from + 1;
  for (const event of events) {
    if (event.id > expected && now - event.at < gapWaitMs) return { horizon: expected - 1, gap: { id: expected, since: Math.min(now, event.at) } };
    expected = event.id + 1;
  }
  return { horizon: expected - 1 };
}

export class EventFeed {
  private readonly listeners = new Set<FeedListener>();
  private horizonId = 0;
  private started: Promise<void> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private polling: Promise<void> | undefined;
  /** The poll that was running when the feed last stopped: the next start waits for it. */
  private stopping: Promise<void> | undefined;
  /** Moves on at every stop: a read begun before it hands nothing on and moves nothing. */
  private generation = 0;
  private again = false;
  /** When the gap just above the horizon was first seen (its lower id), on PostgreSQL. */
  private gap: Gap | undefined;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly options: EventFeedOptions,
    private readonly logger: Logger,
  ) {}

  /** Every event with an id at or below this has been handed to the listeners (or preceded them). */
  get horizon(): number {
    return this.horizonId;
  }

  /**
   * Listens from the current horizon on; resolves with that horizon once it is known (the first
   * listener finds where to start). Returns the function that stops listening.
   */
  async subscribe(listener: FeedListener): Promise<{ horizon: number; unsubscribe: () => void }> {
    this.listeners.add(listener);
    try {
      this.started ??= this.start(this.generation);
      await this.started;
    } catch (error) {
      this.listeners.delete(listener);
      this.started = undefined;
      throw error;
    }
    this.schedule();
    return {
      horizon: this.horizonId,
      unsubscribe: () => {
        this.listeners.delete(listener);
        if (this.listeners.size === 0) void this.stop();
      },
    };
  }

  /** Something was written on this node: read now rather than at the next interval. */
  wake(): void {
    if (this.listeners.size === 0) return;
    if (this.polling) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.timer = undefined;
    void this.poll();
  }

  /**
   * Stops reading; resolves once a read under way has finished (it hands nothing on). The next
   * first listener finds its starting point afresh, gap included: events written while nobody
   * listened are no one's to deliver (a resuming stream reads its own backlog).
   */
  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.started = undefined;
    this.gap = undefined;
    this.generation++;
    this.stopping = this.polling;
    await this.stopping;
  }

  private async start(generation: number): Promise<void> {
    await this.stopping;
    const last = await selectLastEventId(this.store);
    let start: { horizon: number; gap?: Gap } = { horizon: last };
    if (this.store.idsCommitOutOfOrder) {
      const from = Math.max(0, last - START_LOOKBACK_IDS);
      start = startingPoint(from, await selectEventTimesAfter(this.store, from), this.clock.now(), this.options.gapWaitMs);
    }
    if (generation !== this.generation) throw new Error('the event feed stopped while starting');
    this.horizonId = start.horizon;
    this.gap = start.gap;
  }

  private schedule(): void {
    if (this.timer || this.polling || this.listeners.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.poll();
    }, this.options.pollIntervalMs);
  }

  private async poll(): Promise<void> {
    if (this.polling) return this.polling;
    const generation = this.generation;
    this.polling = (async () => {
      try {
        do {
          this.again = false;
          await this.readOnce(generation);
          // Not past a stop: the next start waits for this poll, so it must not wait for that start.
        } while (this.again && this.listeners.size > 0 && generation === this.generation);
      } catch (error) {
        this.logger.warn({ err: error }, 'event stream: reading new events failed; retrying at the next interval');
      }
    })();
    try {
      await this.polling;
    } finally {
      this.polling = undefined;
      // A wake that came while a poll from before a stop ran is read now, for the new listeners.
      if (this.again && this.listeners.size > 0) void this.poll();
      else this.schedule();
    }
  }

  /** Reads past the horizon, hands on the events it may, and moves the horizon past them. */
  private async readOnce(generation: number): Promise<void> {
    // Not before the start has found the horizon (a wake can come first).
    if (!this.started) return;
    await this.started;
    const rows = await selectEventsAfter(this.store, this.horizonId, this.options.batchSize);
    // A durable write is readable a moment before its flush ends (SQLite, store/engine/wal-sync.ts): no
    // event goes out before its write is on the disk (at once when flushes cover it already).
    if (rows.length > 0) await this.store.durable();
    // The feed stopped meanwhile: what was read belongs to no one (a new start may have begun).
    if (generation !== this.generation) return;
    const ready: StreamEventRow[] = [];
    let next = this.horizonId;
    let waiting = false;
    for (const row of rows) {
      if (row.id !== next + 1 && this.store.idsCommitOutOfOrder) {
        const now = this.clock.now();
        if (this.gap?.id !== next + 1) this.gap = { id: next + 1, since: now };
        if (now - this.gap.since < this.options.gapWaitMs) {
          waiting = true;
          break;
        }
        this.gap = undefined;
      }
      ready.push(row);
      next = row.id;
    }
    this.horizonId = next;
    if (ready.length > 0) for (const listener of this.listeners) listener(ready);
    // A full batch read to its end: more may be waiting. Stopped at a gap: look again at the next
    // interval (not at once, which would spin while the gap lasts).
    if (!waiting && rows.length === this.options.batchSize) this.again = true;
  }
}
