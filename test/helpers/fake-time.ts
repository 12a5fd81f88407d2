// Fake time for timer-driven tests. node:test's mock timers stand in for setTimeout and Date, so
// the dispatcher's clock (systemClock reads Date.now) and timers, and the simulator's, move only
// when the test moves them. The store still does real I/O, so time moves on only while the store
// has nothing in flight: what the test sees depends on the code, not on how fast the machine is.
import type { TestContext } from 'node:test';
import type { Store } from '../../src/store/engine/store.js';

// Captured before any test replaces them: the guard against a store that never goes idle runs in real time.
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;

/** How long (real time) the store may stay busy before the test gives up on it. */
const STORE_BUSY_LIMIT_MS = 30_000;

export class FakeTime {
  private inFlight = 0;
  private idle: (() => void)[] = [];
  private running = false;

  constructor(private readonly t: TestContext) {}

  /** A view of `store` whose statements, transactions and batched writes the fake time waits for. */
  readonly watch = (store: Store): Store => ({
    db: this.watched(store.db),
    dialect: store.dialect,
    embedded: store.embedded,
    idsCommitOutOfOrder: store.idsCommitOutOfOrder,
    transactionsAtOnce: store.transactionsAtOnce,
    transaction: (durability, work) => this.track(store.transaction(durability, work)),
    batched: (work) => this.track(store.batched(work)),
    relaxed: (work) => this.track(store.relaxed(work)),
    announce: (channel) => store.announce(channel),
    listen: (channel, onNotify, onError) => store.listen(channel, onNotify, onError),
    durable: () => this.track(store.durable()),
    betweenBulkWrites: () => this.track(store.betweenBulkWrites()),
    ping: () => this.track(store.ping()),
    backup: (path, options) => store.backup(path, options),
    truncateWal: () => store.truncateWal(),
    close: () => store.close(),
  });

  /** From now on setTimeout and Date are fake, starting at the current time, until `stop()`. */
  start(): void {
    this.t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: Date.now() });
    this.running = true;
  }

  /** Real timers again (pending fake ones are dropped). */
  stop(): void {
    if (!this.running) return;
    this.t.mock.timers.reset();
    this.running = false;
  }

  /**
   * Moves time on one millisecond at a time, each step once the store is idle, until `done()`
   * holds at a step; fails when it does not within `limitMs` of fake time.
   */
  async runUntil(done: () => boolean, limitMs: number): Promise<void> {
    const end = Date.now() + limitMs;
    for (;;) {
      await this.settled();
      if (done()) return;
      if (Date.now() >= end) throw new Error(`still not done after ${limitMs} ms of fake time`);
      this.t.mock.timers.tick(1);
    }
  }

  /** Resolves once the store has nothing in flight and the work it woke has run up to its next wait. */
  private async settled(): Promise<void> {
    for (;;) {
      // setImmediate is real: it runs after every pending promise reaction, and after the store's
      // group commit, which gathers a turn's writes with setImmediate.
      await new Promise((resolve) => setImmediate(resolve));
      if (this.inFlight === 0) return;
      await new Promise<void>((resolve, reject) => {
        const guard = realSetTimeout(() => reject(new Error(`the store stayed busy for ${STORE_BUSY_LIMIT_MS} ms`)), STORE_BUSY_LIMIT_MS);
        this.idle.push(() => {
          realClearTimeout(guard);
          resolve();
        });
      });
    }
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inFlight++;
    return work.finally(() => {
      if (--this.inFlight > 0) return;
      for (const wake of this.idle.splice(0)) wake();
    });
  }

  /**
   * Kysely builders are immutable: every method returns a new one. This proxy follows the chain
   * from the store's `db` and tracks whatever is executed at its end (`execute`,
   * `executeTakeFirst`, `executeTakeFirstOrThrow`, a transaction's `execute`).
   */
  private watched<T extends object>(target: T): T {
    return new Proxy(target, {
      get: (object, property) => {
        const value: unknown = Reflect.get(object, property, object);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          const result: unknown = Reflect.apply(value, object, args);
          if (typeof property === 'string' && property.startsWith('execute') && result instanceof Promise) return this.track(result);
          if (isChainable(result)) return this.watched(result);
          return result;
        };
      },
    });
  }
}

function isChainable(value: unknown): value is object {
  return typeof value === 'object' && value !== null && !(value instanceof Promise) && typeof (value as { execute?: unknown }).execute === 'function';
}
