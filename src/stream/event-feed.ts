// One node's feed of stream events (run events and recorded webhook delivery attempts, in their
// one id order: store/event-stream-statements.ts), for every stream connection it serves: while at
// least one connection listens, it reads both tables past its horizon every
// STREAM_POLL_INTERVAL_MS (and at once when this node wrote something), so events written on any
// node reach every node's streams. Polling, not LISTEN/NOTIFY: a NOTIFY per event would add a
// statement and a commit-time queue lock to every run transition, the hot path; one read per node
// per interval costs the writers nothing.
//
// The horizon is the id up to which every event is known: nothing at or below it can still
// appear. On SQLite writes are serialized, so ids become visible in order and the horizon is the
// last id read. On PostgreSQL an id is drawn before its transaction commits, so id 41 may become
// visible after id 42: the feed stops at a gap and waits for it up to STREAM_GAP_WAIT_MS (an id
// whose transaction rolled back never appears), so a stream resuming after N never skips an event
// committed late below N. A transaction that holds a drawn event id uncommitted for longer than the
// wait would be missed by streams; run transitions and attempt records are short transactions, so
// the wait is set far above their duration.
import type { Logger } from 'pino';
import type { Clock } from '../deps.js';
import { selectEventsAfter, selectLastEventId, type StreamEventRow } from '../store/event-stream-statements.js';
import type { Store } from '../store/store.js';

export interface EventFeedOptions {
  pollIntervalMs: number;
  gapWaitMs: number;
  batchSize: number;
}

export type FeedListener = (events: readonly StreamEventRow[]) => void;

export class EventFeed {
  private readonly listeners = new Set<FeedListener>();
  private horizonId = 0;
  private started: Promise<void> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private polling: Promise<void> | undefined;
  private again = false;
  /** When the gap just above the horizon was first seen (its lower id), on PostgreSQL. */
  private gap: { id: number; since: number } | undefined;

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
   * listener reads the last event id). Returns the function that stops listening.
   */
  async subscribe(listener: FeedListener): Promise<{ horizon: number; unsubscribe: () => void }> {
    this.listeners.add(listener);
    try {
      this.started ??= (async () => {
        this.horizonId = await selectLastEventId(this.store);
      })();
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
        if (this.listeners.size === 0) this.stop();
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

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    // The next first listener reads the horizon afresh: events written while nobody listened are
    // no one's to deliver (a resuming stream reads its own backlog).
    this.started = undefined;
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
    this.polling = (async () => {
      try {
        do {
          this.again = false;
          await this.readOnce();
        } while (this.again && this.listeners.size > 0);
      } catch (error) {
        this.logger.warn({ err: error }, 'event stream: reading new events failed; retrying at the next interval');
      }
    })();
    try {
      await this.polling;
    } finally {
      this.polling = undefined;
      this.schedule();
    }
  }

  /** Reads past the horizon, hands on the events it may, and moves the horizon past them. */
  private async readOnce(): Promise<void> {
    const rows = await selectEventsAfter(this.store, this.horizonId, this.options.batchSize);
    const ready: StreamEventRow[] = [];
    let next = this.horizonId;
    let waiting = false;
    for (const row of rows) {
      if (row.id !== next + 1 && this.store.dialect === 'postgres') {
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
