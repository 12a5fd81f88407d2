// Group commit for relaxed writes. Call progress arrives as many small writes (one per ringing,
// answer, hang-up); committed one by one, each pays a commit and rewrites the same index pages.
// Writes queued in the same turn of the event loop are run in order inside one transaction
// instead, at most `maxConcurrent` batches at a time (one on SQLite, which has one writer anyway;
// a few on PostgreSQL, where each statement is a network round trip). If a shared transaction
// fails (a bad write, or a deadlock between two batches), each of its writes is retried alone, so
// no write is lost and none takes the others down with it.
import type { Transaction } from 'kysely';
import type { Database } from './schema.js';

type Work<T> = (trx: Transaction<Database>) => Promise<T>;

interface Pending {
  work: Work<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

export type RunTransaction = <T>(work: Work<T>) => Promise<T>;

export class GroupCommit {
  private queue: Pending[] = [];
  private flushers = 0;
  private drainScheduled = false;

  constructor(
    private readonly transaction: RunTransaction,
    private readonly maxBatch: number,
    private readonly maxConcurrent: number,
  ) {}

  run<T>(work: Work<T>): Promise<T> {
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
      while (this.queue.length > 0) await this.flush(this.queue.splice(0, this.maxBatch));
    } finally {
      this.flushers--;
    }
  }

  private async flush(batch: Pending[]): Promise<void> {
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
}
