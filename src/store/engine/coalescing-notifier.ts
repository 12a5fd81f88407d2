// Wake-ups for other nodes sent after a commit, not inside it, and coalesced.
//
// Why not inside: PostgreSQL queues a transaction's NOTIFY at commit under one database-wide lock,
// and holds it through that commit's WAL flush. Every run-creating insert that notified therefore
// flushed alone, one after another, instead of sharing flushes with the other commits of the
// moment. A notification sent by a statement of its own writes no WAL before its commit record,
// and PostgreSQL flushes a commit only for a transaction that did (RecordTransactionCommit), so it
// holds that lock only briefly.
//
// Why coalesced: a notification only wakes a listener to look (a dispatcher then claims what is
// due); it carries nothing. So one notification sent after a set of commits covers all of them.
// Sent once per commit, each would cost the server a statement of its own, and wake every
// listening dispatcher to look for one run. `npm run bench` shows the effect in PostgreSQL's CPU
// per request (`postgres_us`); compare with DISPATCH_WAKE_INTERVAL_MS=0. So at most
// one is in flight per channel, the next starts no sooner than `minIntervalMs` after the last one
// started, and every announcement made meanwhile is covered by that next one (sent after those
// commits, so a listener it wakes sees them). A listener hears of a commit late by at most the
// longer of `minIntervalMs` and the notification then in flight, plus a round trip (and the wait
// for a free pooled connection). Hand-written: it is these few lines, and no library does exactly
// this for a database connection.
//
// A notification that fails is reported and not retried: the listeners' polling is what
// guarantees that nothing committed is left waiting; notifications only make it prompt.

export class CoalescingNotifier {
  /** Channels with a notification in flight or spacing out the next, and whether one is owed. */
  private readonly busy = new Map<string, { owed: boolean }>();
  /** The spacing waits under way, cut short by `close`. */
  private readonly waits = new Set<{ timer: NodeJS.Timeout; resolve: () => void }>();
  private readonly settled = new Set<() => void>();
  private closed = false;

  constructor(
    private readonly send: (channel: string) => Promise<void>,
    private readonly onFailure: (error: unknown) => void,
    private readonly minIntervalMs: number,
  ) {}

  /** Wakes the channel's listeners; call it after the commit they should see. */
  announce(channel: string): void {
    if (this.closed) return;
    const state = this.busy.get(channel);
    if (state) {
      state.owed = true;
      return;
    }
    const fresh = { owed: false };
    this.busy.set(channel, fresh);
    void this.sendWhileOwed(channel, fresh);
  }

  /**
   * Sends nothing more, and resolves once no notification is in flight (before the connections
   * close). One owed but not yet sent is dropped: the listeners' polling finds what it covered.
   */
  close(): Promise<void> {
    this.closed = true;
    for (const wait of this.waits) {
      clearTimeout(wait.timer);
      wait.resolve();
    }
    this.waits.clear();
    if (this.busy.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.settled.add(resolve));
  }

  private async sendWhileOwed(channel: string, state: { owed: boolean }): Promise<void> {
    try {
      for (;;) {
        const startedAt = Date.now();
        try {
          await this.send(channel);
        } catch (error) {
          this.reportFailure(error);
        }
        // Never longer than the interval, even if the wall clock stepped back meanwhile.
        const waitMs = Math.min(this.minIntervalMs, startedAt + this.minIntervalMs - Date.now());
        if (waitMs > 0 && !this.closed) await this.pause(waitMs);
        if (!state.owed || this.closed) break;
        state.owed = false;
      }
    } finally {
      this.busy.delete(channel);
      if (this.busy.size === 0) {
        for (const resolve of this.settled) resolve();
        this.settled.clear();
      }
    }
  }

  /** Tells the owner; a report that throws must not leave the channel busy for good. */
  private reportFailure(error: unknown): void {
    try {
      this.onFailure(error);
    } catch {
      // Nothing better to do with it: the notification is lost either way, and polling covers it.
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wait = { timer: setTimeout(() => (this.waits.delete(wait), resolve()), ms), resolve };
      this.waits.add(wait);
    });
  }
}
