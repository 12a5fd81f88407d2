// Checkpoints SQLite's write-ahead log from a worker thread, off the event loop.
//
// SQLite copies the WAL back into the database (a checkpoint) from the connection whose commit
// pushed the WAL past `wal_autocheckpoint` pages, inside that commit: on better-sqlite3 that is
// the main thread. A checkpoint syncs the WAL, writes every page it changed into the database file
// and syncs that too: two fsyncs and hundreds of page writes during which no request, timer or
// provider event is served, several times a second under load (a queued run changes about a dozen
// pages). wal-sync.ts took the commit's own fsync off the event loop; this takes the checkpoint's.
//
// After each commit the service's connection reads how many frames wait in the WAL (wal-index.ts);
// from CHECKPOINT_PAGES on (SQLite's own default threshold), a worker thread with a connection of
// its own runs a PASSIVE checkpoint, which never blocks the writer: SQLite lets one connection
// checkpoint while another appends to the WAL. A checkpoint is as safe from any connection: the
// frames it copies are committed, and it syncs the WAL before writing the database and the
// database before the WAL may be reused. The service's connection keeps `wal_autocheckpoint` at
// BACKSTOP_PAGES, ten times that: it checkpoints itself only if the worker cannot keep up (and
// while the worker holds the checkpoint, SQLite's automatic one gives way at once).
//
// The backstop counts every frame in the WAL, not only those waiting: SQLite restarts the WAL from
// its start only at a write that begins once every frame has been copied. Under a steady stream
// of commits (a million-number import: a transaction every few milliseconds) each of the worker's
// checkpoints ends behind the commits made while it ran, the WAL never restarts, and at
// BACKSTOP_PAGES the service's connection checkpointed on the event loop (50-130 ms stalls every
// few seconds, measured). Such a bulk writer pauses between its transactions once the WAL holds
// CATCH_UP_PAGES frames (Store.betweenBulkWrites): the worker copies the rest, and the writer's
// next commit restarts the WAL.
//
// A worker thread is a V8 isolate, about 17 MB: it starts with the first checkpoint and ends after
// IDLE_MS without one, so an idle node does not carry it. A checkpoint that fails on I/O is fatal,
// as a failed flush is (wal-sync.ts): the database file may hold half of what it was given. A
// busy database, a worker that died or could not start, are not: they are reported, and the next
// commit past the threshold tries again. better-sqlite3 has no asynchronous calls and SQLite no
// checkpoint thread of its own, so this is a few lines over node:worker_threads.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** Frames waiting in the WAL from which the worker checkpoints: SQLite's own default threshold. */
export const CHECKPOINT_PAGES = 1_000;
/** `wal_autocheckpoint` of the service's connection: it checkpoints itself only past this (40 MB of 4 KB pages). */
export const BACKSTOP_PAGES = 10_000;
/**
 * Frames in the WAL (checkpointed or not) from which a bulk writer waits for the worker to copy
 * the WAL whole before its next transaction (Store.betweenBulkWrites): half the backstop.
 */
export const CATCH_UP_PAGES = BACKSTOP_PAGES / 2;
/** Most checkpoints one catch-up runs. */
const CATCH_UP_ROUNDS = 4;
/** The worker ends after this long without a checkpoint to run. */
export const IDLE_MS = 30_000;

/** What `PRAGMA wal_checkpoint` answers: frames in the WAL, and how many of them are now in the database. */
export interface CheckpointResult {
  busy: number;
  log: number;
  checkpointed: number;
}

type Reply = { ok: true; result: CheckpointResult } | { ok: false; code: string; message: string };

/** The thread that checkpoints; replaceable in tests. */
export interface CheckpointThread {
  checkpoint(): Promise<Reply>;
  close(): Promise<void>;
}

/** The worker's code: plain CommonJS, so it runs the same from dist/ and under tsx. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
db.pragma('busy_timeout = 5000');
// A checkpoint syncs as its own connection's setting says: the service's, NORMAL (both syncs).
db.pragma('synchronous = NORMAL');
parentPort.on('message', (message) => {
  if (message === 'close') {
    db.close();
    parentPort.close();
    return;
  }
  try {
    const [result] = db.pragma('wal_checkpoint(PASSIVE)');
    parentPort.postMessage({ ok: true, result });
  } catch (error) {
    parentPort.postMessage({ ok: false, code: String(error.code || 'UNKNOWN'), message: String(error.message) });
  }
});
`;

/** A worker thread with its own connection to the database at `path`. */
export function checkpointWorker(path: string): CheckpointThread {
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { path, driver: createRequire(import.meta.url).resolve('better-sqlite3') },
    // It holds one connection and a few objects; a small heap keeps its cost to the isolate's own.
    resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2 },
  });
  worker.unref();
  const waiting: Array<(reply: Reply) => void> = [];
  let exited = false;
  const fail = (message: string) => {
    for (const answer of waiting.splice(0)) answer({ ok: false, code: 'WORKER_EXITED', message });
  };
  // Referenced only while a checkpoint is under way: an idle worker does not keep the process alive.
  worker.on('message', (reply: Reply) => {
    waiting.shift()?.(reply);
    if (waiting.length === 0) worker.unref();
  });
  worker.on('error', (error) => fail(`the checkpoint worker failed: ${error.message}`));
  worker.on('exit', (code) => {
    exited = true;
    fail(`the checkpoint worker exited with code ${code}`);
  });
  return {
    checkpoint: () =>
      new Promise<Reply>((resolve) => {
        if (exited) return resolve({ ok: false, code: 'WORKER_EXITED', message: 'the checkpoint worker has exited' });
        waiting.push(resolve);
        worker.ref();
        worker.postMessage('checkpoint');
      }),
    close: () =>
      new Promise<void>((resolve) => {
        if (exited) return resolve();
        worker.ref();
        worker.once('exit', () => resolve());
        worker.postMessage('close');
      }),
  };
}

/** An error of the checkpoint that leaves the database file in doubt (I/O, a full disk, corruption). */
function isFatal(code: string): boolean {
  return code.startsWith('SQLITE_IOERR') || code === 'SQLITE_FULL' || code.startsWith('SQLITE_CORRUPT');
}

export class WalCheckpointer {
  private thread: CheckpointThread | undefined;
  private running: Promise<void> | undefined;
  /** A worker being ended (idle, or by close): close waits for it, so no connection outlives the store's. */
  private stopping: Promise<void> | undefined;
  private idleTimer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;

  constructor(
    private readonly startThread: () => CheckpointThread,
    /** Frames written to the WAL and not yet checkpointed (wal-index.ts). */
    private readonly pendingFrames: () => number,
    /** Told once, when a checkpoint fails on I/O (production: exits the process). */
    private readonly onFailure: (error: unknown) => void = () => undefined,
    /** Told when a checkpoint could not run (the worker died, the database was busy); the next one tries again. */
    private readonly onTrouble: (error: Error) => void = () => undefined,
    private readonly thresholdPages = CHECKPOINT_PAGES,
    private readonly idleMs = IDLE_MS,
  ) {}

  /** The service's connection committed a write: once enough frames wait in the WAL, the worker checkpoints them. */
  committed(): void {
    if (this.running || this.closed || this.pendingFrames() < this.thresholdPages) return;
    this.start();
  }

  /**
   * Waits for the checkpoint under way, then has the worker checkpoint until no frame waits (at
   * most CATCH_UP_ROUNDS checkpoints: other writers may keep adding frames). For a writer that
   * pauses for it (Store.betweenBulkWrites): the WAL copied whole, its next commit restarts the WAL.
   */
  async catchUp(): Promise<void> {
    for (let round = 0; round < CATCH_UP_ROUNDS && !this.closed; round++) {
      await this.running;
      if (this.closed || this.pendingFrames() === 0) return;
      this.start();
    }
    await this.running;
  }

  private start(): void {
    // run() reports its own troubles; nothing it does may become an unhandled rejection.
    this.running = this.run()
      .catch((error: unknown) => this.onTrouble(error instanceof Error ? error : new Error(String(error))))
      .finally(() => (this.running = undefined));
  }

  /** Ends the worker (after the checkpoint under way, if any, and a stop already begun). */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.idleTimer);
    await this.running;
    await this.stopThread();
  }

  private async run(): Promise<void> {
    clearTimeout(this.idleTimer);
    // A worker the idle timer is ending is let go; a new one serves this checkpoint.
    if (!this.thread) {
      try {
        this.thread = this.startThread();
      } catch (error) {
        this.onTrouble(Object.assign(new Error(`WAL checkpoint did not run: the worker could not start: ${(error as Error).message}`), { code: 'WORKER_START_FAILED' }));
        return;
      }
    }
    const reply = await this.thread.checkpoint();
    if (!reply.ok && isFatal(reply.code)) {
      this.closed = true;
      this.onFailure(Object.assign(new Error(`WAL checkpoint failed: ${reply.message}`), { code: reply.code }));
      return;
    }
    if (!reply.ok) {
      // A worker that died is started afresh by the next checkpoint; the backstop bounds the WAL meanwhile.
      if (reply.code === 'WORKER_EXITED') this.thread = undefined;
      this.onTrouble(Object.assign(new Error(`WAL checkpoint did not run: ${reply.message}`), { code: reply.code }));
    }
    if (this.closed) return;
    this.idleTimer = setTimeout(() => void this.stopThread(), this.idleMs);
    this.idleTimer.unref();
  }

  private async stopThread(): Promise<void> {
    const thread = this.thread;
    this.thread = undefined;
    if (thread) {
      const stopped = thread.close();
      const previous = this.stopping;
      this.stopping = Promise.allSettled([previous, stopped]).then(() => undefined);
    }
    await this.stopping;
  }
}
