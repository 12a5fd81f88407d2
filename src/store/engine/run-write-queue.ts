// The write-behind queue of a run's relaxed writes (call progress: the dial recorded, ringing,
// answered, ended). runs/lifecycle.ts hands them here; each caller is answered once the write has
// committed, so nothing that depends on a write (the node's next step, a webhook, the event
// stream) sees it before it is in the store.
//
// On PostgreSQL every statement is a network round trip and, for a statement this small, most of
// its cost: the writes that arrive while the store is busy are gathered and written with one
// statement per kind (writeTransitionsOnPostgres for each shape of transition,
// setDialsRecordedOnPostgres for the dials), inside one relaxed group commit (group-commit.ts),
// so a draining dispatcher pays a few statements per batch instead of four per call. A batch
// stays open until its group commit starts, so it grows exactly while the store is busy.
//
// Per run, writes are applied in the order they were made: a write of a run whose previous write
// has not committed waits for it, so a batch holds at most one write per run and two batches in
// flight never touch the same run. If a batch's transaction fails (a deadlock with another writer,
// a bad value), nothing of it committed, and each of its writes is tried again alone.
//
// On SQLite a statement is a function call: each write goes to the group commit alone, as it did
// before this queue existed.
import type { DialRecordedRow, DialValues, TransitionWrite, TransitionWritten } from '../statements/run-writes.js';
import { lockRunsInIdOrder, setDialRecorded, setDialsRecordedOnPostgres, transitionShape, writeTransition, writeTransitionsOnPostgres } from '../statements/run-writes.js';
import type { Store, StoreTransaction } from './store.js';

/** Most writes one batch carries (one statement per kind and shape holds them). */
const MAX_BATCH = 500;

type Write = { kind: 'transition'; write: TransitionWrite } | { kind: 'dial'; runId: number; dial: DialValues };

interface Queued {
  write: Write;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

export class RunWriteQueue {
  private open: Queued[] | undefined;
  /** Per run, the settling of its latest write: the next one waits for it. */
  private readonly tails = new Map<number, Promise<void>>();

  constructor(private readonly store: Store) {}

  /** Writes a transition; undefined when its guard did not hold (nothing written). */
  transition(write: TransitionWrite): Promise<TransitionWritten | undefined> {
    if (this.store.dialect !== 'postgres') return this.store.batched((trx) => writeOne(trx, { kind: 'transition', write }) as Promise<TransitionWritten | undefined>);
    return this.enqueue(write.runId, { kind: 'transition', write }) as Promise<TransitionWritten | undefined>;
  }

  /** Records the dial the provider took; the run's row after it, undefined when it no longer exists. */
  dialRecorded(runId: number, dial: DialValues): Promise<DialRecordedRow | undefined> {
    if (this.store.dialect !== 'postgres') return this.store.batched((trx) => writeOne(trx, { kind: 'dial', runId, dial }) as Promise<DialRecordedRow | undefined>);
    return this.enqueue(runId, { kind: 'dial', runId, dial }) as Promise<DialRecordedRow | undefined>;
  }

  private enqueue(runId: number, write: Write): Promise<unknown> {
    const previous = this.tails.get(runId);
    const written = new Promise<unknown>((resolve, reject) => {
      const queued = { write, resolve, reject };
      if (previous) void previous.then(() => this.add(queued));
      else this.add(queued);
    });
    const tail = written.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(runId, tail);
    void tail.then(() => {
      if (this.tails.get(runId) === tail) this.tails.delete(runId);
    });
    return written;
  }

  private add(queued: Queued): void {
    if (this.open && this.open.length < MAX_BATCH) {
      this.open.push(queued);
      return;
    }
    const batch: Queued[] = [queued];
    this.open = batch;
    this.store
      .batched((trx) => {
        // From now on new writes start the next batch.
        if (this.open === batch) this.open = undefined;
        return writeBatch(trx, batch.map((q) => q.write));
      })
      .then(
        (results) => batch.forEach((q, i) => q.resolve(results[i])),
        () => {
          if (this.open === batch) this.open = undefined;
          // Nothing of the batch committed: each write alone, so one bad write fails only itself.
          for (const q of batch) this.store.batched((trx) => writeOne(trx, q.write)).then(q.resolve, q.reject);
        },
      );
  }
}

function writeOne(trx: StoreTransaction, write: Write): Promise<unknown> {
  if (write.kind === 'dial') return setDialRecorded(trx, write.runId, write.dial);
  const { runId, columns, guard, event } = write.write;
  return writeTransition(trx, runId, columns, guard, event);
}

/** One statement per kind of write (and shape of transition) in the batch; a write alone keeps its own statement. */
async function writeBatch(trx: StoreTransaction, writes: readonly Write[]): Promise<unknown[]> {
  const results: unknown[] = new Array(writes.length);
  if (trx.dialect === 'postgres') await lockRunsInIdOrder(trx, writes.map((write) => (write.kind === 'dial' ? write.runId : write.write.runId)));
  const groups = new Map<string, number[]>();
  writes.forEach((write, i) => {
    const key = write.kind === 'dial' ? 'dial' : transitionShape(write.write);
    if (key === undefined) {
      groups.set(`alone:${i}`, [i]);
      return;
    }
    const group = groups.get(key);
    if (group) group.push(i);
    else groups.set(key, [i]);
  });
  for (const indexes of groups.values()) {
    const first = writes[indexes[0] as number] as Write;
    let written: unknown[];
    if (indexes.length === 1) written = [await writeOne(trx, first)];
    else if (first.kind === 'dial') written = await setDialsRecordedOnPostgres(trx, indexes.map((i) => writes[i] as Extract<Write, { kind: 'dial' }>));
    else written = await writeTransitionsOnPostgres(trx, indexes.map((i) => (writes[i] as Extract<Write, { kind: 'transition' }>).write));
    indexes.forEach((index, j) => (results[index] = written[j]));
  }
  return results;
}
