// Group commit: writes queued in the same turn of the event loop run in order inside one
// transaction, at most `maxConcurrent` batches at a time (one on SQLite, which has one writer
// anyway; a few on PostgreSQL, where each statement is a network round trip), and each caller is
// answered only once the transaction that holds its write has committed.
//
// Two flavours, for two kinds of write:
// - relaxed writes (call progress: ringing, answered, ended) arrive as many small writes; committed
//   one by one, each pays a commit and rewrites the same index pages. If a shared transaction
//   fails (a bad write, or a deadlock between two batches), each of its writes is retried alone, so
//   no write is lost and none takes the others down with it.
// - durable writes on SQLite (a run accepted with a 200, a claim that allows a dial): each commit
//   is an fsync on the one connection, and the fsync, not the insert, is what a request waits for.
//   One fsync for every write of the moment is as durable for each of them. Each write runs inside
//   a savepoint of its own, so a write that refuses (a cap reached, a conflict) rolls back only
//   itself and its caller gets its own error, while the others commit. No write is ever run twice:
//   when the shared transaction itself fails, every caller in it gets that failure.
import { sql } from './kysely.js';
import type { Transaction } from 'kysely';
import type { Database } from '../schema/schema.js';

// Generic over the transaction its caller hands out (the store's, which carries its dialect).
type Work<T, Trx extends Transaction<Database> = Transaction<Database>> = (trx: Trx) => Promise<T>;

interface Pending<Trx extends Transaction<Database>> {
  work: Work<unknown, Trx>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

export type RunTransaction<Trx extends Transaction<Database> = Transaction<Database>> = <T>(work: Work<T, Trx>) => Promise<T>;

/** How a batch isolates its writes from each other. */
export type Isolation = 'retry-alone' | 'savepoint';

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

export class GroupCommit<Trx extends Transaction<Database> = Transaction<Database>> {
  private queue: Pending<Trx>[] = [];
  private flushers = 0;
  private drainScheduled = false;

  constructor(
    private readonly transaction: RunTransaction<Trx>,
    private readonly maxBatch: number,
    private readonly maxConcurrent: number,
    private readonly isolation: Isolation = 'retry-alone',
  ) {}

  run<T>(work: Work<T, Trx>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.drainScheduled && this.flushers < this.maxConcurrent) {
        this.drainScheduled = true;
        // Let the rest of this turn's writes join the batch.
        setImmediate(() => {
          this.drainScheduled = false;
          void this.drain();
        });
      }
    });
  }

  private async drain(): Promise<void> {
    this.flushers++;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        await (this.isolation === 'savepoint' ? this.flushIsolated(batch) : this.flush(batch));
      }
    } finally {
      this.flushers--;
    }
  }

  private async flush(batch: Pending<Trx>[]): Promise<void> {
    try {
      const results = await this.transaction(async (trx) => {
        const out: unknown[] = [];
        for (const item of batch) out.push(await item.work(trx));
        return out;
      });
      batch.forEach((item, i) => item.resolve(results[i]));
    } catch {
      for (const item of batch) {
        try {
          item.resolve(await this.transaction(item.work));
        } catch (error) {
          item.reject(error);
        }
      }
    }
  }

  private async flushIsolated(batch: Pending<Trx>[]): Promise<void> {
    let outcomes: Outcome[];
    try {
      outcomes = await this.transaction(async (trx) => {
        // A lone write needs no savepoint: its failure rolls the transaction back.
        if (batch.length === 1) return [{ ok: true, value: await (batch[0] as Pending<Trx>).work(trx) }];
        const out: Outcome[] = [];
        for (const item of batch) out.push(await inSavepoint(trx, item.work));
        return out;
      });
    } catch (error) {
      for (const item of batch) item.reject(error);
      return;
    }
    batch.forEach((item, i) => {
      const outcome = outcomes[i] as Outcome;
      if (outcome.ok) item.resolve(outcome.value);
      else item.reject(outcome.error);
    });
  }
}

/** Runs one write of a shared transaction so that its failure undoes only its own changes. */
async function inSavepoint<Trx extends Transaction<Database>>(trx: Trx, work: Work<unknown, Trx>): Promise<Outcome> {
  await sql`savepoint dialtone_write`.execute(trx);
  try {
    const value = await work(trx);
    await sql`release dialtone_write`.execute(trx);
    return { ok: true, value };
  } catch (error) {
    // If even the rollback fails, the shared transaction is broken: it fails for everyone in it.
    await sql`rollback to dialtone_write`.execute(trx);
    await sql`release dialtone_write`.execute(trx);
    return { ok: false, error };
  }
}
