// Holding a request at one of its asynchronous steps: the step's first call waits until the test
// releases it, so the test can act (say, close the client's socket) while the request is exactly
// there, then let it go on. Nothing here sleeps: the test waits for `arrived`.
import type { Store } from '../../src/store/engine/store.js';

export class Hold {
  readonly arrived: Promise<void>;
  private markArrived: () => void = () => undefined;
  private readonly released: Promise<void>;
  private markReleased: () => void = () => undefined;
  private taken = false;

  constructor(readonly name: string) {
    this.arrived = new Promise((resolve) => (this.markArrived = resolve));
    this.released = new Promise((resolve) => (this.markReleased = resolve));
  }

  /** Resolves once released for the first caller; later callers pass at once. */
  pass(): Promise<void> {
    if (this.taken) return Promise.resolve();
    this.taken = true;
    this.markArrived();
    return this.released;
  }

  release(): void {
    this.markReleased();
  }

  /** `fn` with its first call held here. */
  around<A extends unknown[], R>(fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
    return async (...args: A) => {
      await this.pass();
      return fn(...args);
    };
  }
}

/**
 * A view of `store` whose statements whose SQL matches `armed()`'s pattern wait for its hold first
 * (the first such statement only), and whose `durable()` waits for `durableHold()` when one is armed.
 * Follows Kysely's builder chain like FakeTime's `watch`.
 */
export function holdingStore(store: Store, armed: () => { sql: RegExp; hold: Hold } | undefined, durableHold: () => Hold | undefined): Store {
  const held = <T extends object>(target: T): T =>
    new Proxy(target, {
      get: (object, property) => {
        const value: unknown = Reflect.get(object, property, object);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          if (typeof property === 'string' && property.startsWith('execute')) {
            const rule = armed();
            const sql = sqlOf(object, args);
            if (rule && sql !== undefined && rule.sql.test(sql)) return rule.hold.pass().then(() => Reflect.apply(value, object, args));
          }
          const result: unknown = Reflect.apply(value, object, args);
          return isChainable(result) ? held(result) : result;
        };
      },
    });
  return {
    db: held(store.db),
    dialect: store.dialect,
    embedded: store.embedded,
    idsCommitOutOfOrder: store.idsCommitOutOfOrder,
    transactionsAtOnce: store.transactionsAtOnce,
    transaction: (durability, work) => store.transaction(durability, work),
    batched: (work) => store.batched(work),
    relaxed: (work) => store.relaxed((db) => work(held(db))),
    announce: (channel) => store.announce(channel),
    listen: (channel, onNotify, onError) => store.listen(channel, onNotify, onError),
    durable: () => durableHold()?.pass().then(() => store.durable()) ?? store.durable(),
    betweenBulkWrites: () => store.betweenBulkWrites(),
    ping: () => store.ping(),
    backup: (path, options) => store.backup(path, options),
    truncateWal: () => store.truncateWal(),
    close: () => store.close(),
  };
}

/** The SQL a call will run: a builder's own, or a compiled query handed to `executeQuery`. */
function sqlOf(object: object, args: unknown[]): string | undefined {
  const compile = (object as { compile?: unknown }).compile;
  if (typeof compile === 'function') return (compile.call(object) as { sql: string }).sql;
  const [query] = args;
  if (query !== null && typeof query === 'object' && typeof (query as { sql?: unknown }).sql === 'string') return (query as { sql: string }).sql;
  return undefined;
}

function isChainable(value: unknown): value is object {
  return typeof value === 'object' && value !== null && !(value instanceof Promise) && typeof (value as { execute?: unknown }).execute === 'function';
}
