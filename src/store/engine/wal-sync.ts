// Makes SQLite's committed write-ahead log durable off the event loop.
//
// better-sqlite3 is synchronous: with synchronous=FULL every durable commit's fsync ran on the main
// thread, and while the disk flushed (0.5 ms typically, tens of ms at worst) no request, timer or
// provider event was served. Durable transactions now commit at synchronous=NORMAL, which writes
// the WAL frames into the file without flushing them, and their callers are answered only after
// `fdatasync` of the WAL file, run on libuv's thread pool, has returned. That is the flush
// synchronous=FULL does at commit (SQLite syncs the WAL file, not the database, when a WAL
// transaction commits), so a durable commit survives power loss exactly as before; only the thread
// that waits for the disk changed. Checkpoints are unaffected: at NORMAL SQLite still syncs the WAL
// before copying it into the database, and the database after.
//
// Syncs coalesce like a group commit: a request made while a sync runs may not be covered by it
// (its frames may have been written after that sync began), so it waits for the next one, which
// starts when the running one ends and serves every request made in between. No library does this
// for better-sqlite3's WAL file; it is a few lines over node:fs.
//
// The WAL file stays the same file while the service's connection is open: SQLite deletes it only
// when the last connection to the database closes, and truncation (journal_size_limit, checkpoint
// TRUNCATE) keeps the file. So one handle, opened at the first sync, serves the store's lifetime.
//
// A failed flush is fatal, as PostgreSQL makes it: the transaction has committed (others can read
// it, the dispatcher may dial it) but may not be on the disk, and after a failed fdatasync the
// kernel may have dropped the pages, so a later flush that succeeds proves nothing. The store's
// owner is told (production exits the process, answering no one), and every flush after it fails.
//
// Closing: the connection's close checkpoints the WAL into the database (syncing both) and, as the
// last connection, deletes it. Flushes asked for after the close began wait for it, then flush the
// WAL if it is still there (another process kept it) or find it gone (checkpointed): either way the
// frames are on the disk, and no handle is opened on a file the close removed.
import { open, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { performance } from 'node:perf_hooks';

/** Flushes a file's data to the disk (fdatasync); replaceable in tests. */
export type FlushFile = (handle: FileHandle) => Promise<void>;

const fdatasync: FlushFile = (handle) => handle.datasync();

export class WalSync {
  private handle: Promise<FileHandle> | undefined;
  private running: Promise<void> | undefined;
  private next: Promise<void> | undefined;
  private failure: unknown;
  private closing: { done: Promise<void>; finish(): void } | undefined;
  /** Durable commits made, and how many of them a finished flush covers. */
  private committed = 0;
  private durableUpTo = 0;
  /** Syncs begun; tests read it. */
  syncs = 0;

  constructor(
    private readonly walPath: string,
    private readonly flush: FlushFile = fdatasync,
    /** Told once, when a flush fails (production: exits the process). */
    private readonly onFailure: (error: unknown) => void = () => undefined,
    /** Told how long each flush took, in seconds (production: a metric; the disk's latency bounds every durable commit's). */
    private readonly onFlushed: (seconds: number) => void = () => undefined,
  ) {}

  /** A durable transaction has committed: its frames are in the WAL, maybe not yet on the disk. */
  committedOne(): void {
    this.committed++;
  }

  /** Resolves once every WAL frame written before this call is on the disk. */
  sync(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    // A sync queued behind the running one has not begun yet: it covers this caller too.
    if (this.next !== undefined) return this.next;
    if (this.running === undefined) return this.begin();
    // The running sync may have begun before this caller's frames were written: wait for the next.
    this.next = this.running.then(
      () => this.beginNext(),
      () => this.beginNext(),
    );
    return this.next;
  }

  /**
   * Resolves once every durable commit made so far is on the disk: at once when flushes already
   * cover them all. For readers that show committed data to the outside world (a replayed answer,
   * a webhook message, the event stream) before its writer's own answer may have gone out.
   */
  durable(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    return this.durableUpTo >= this.committed ? Promise.resolve() : this.sync();
  }

  /** The connection is about to close: flushes from now on wait for the close (finishClose). */
  beginClose(): void {
    let finish = (): void => undefined;
    const done = new Promise<void>((resolve) => (finish = resolve));
    this.closing = { done, finish };
  }

  /** The connection has closed: queued flushes end, and the handle is let go. */
  async finishClose(): Promise<void> {
    this.closing?.finish();
    await Promise.allSettled([this.running, this.next]);
    const handle = this.handle;
    this.handle = undefined;
    if (handle) await (await handle.catch(() => undefined))?.close().catch(() => undefined);
  }

  private beginNext(): Promise<void> {
    this.next = undefined;
    return this.begin();
  }

  private begin(): Promise<void> {
    this.syncs++;
    const covers = this.committed;
    const running = this.flushOnce().then(
      () => {
        this.durableUpTo = Math.max(this.durableUpTo, covers);
      },
      (error: unknown) => {
        if (this.failure === undefined) {
          this.failure = error;
          this.onFailure(error);
        }
        throw this.failure;
      },
    );
    const tracked = running.finally(() => {
      if (this.running === tracked) this.running = undefined;
    });
    this.running = tracked;
    return tracked;
  }

  private async flushOnce(): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    if (this.closing) {
      await this.closing.done;
      return flushIfPresent(this.walPath, this.flush);
    }
    this.handle ??= openWal(this.walPath).catch((error: unknown) => {
      this.handle = undefined;
      throw error;
    });
    const handle = await this.handle;
    const started = performance.now();
    await this.flush(handle);
    this.onFlushed((performance.now() - started) / 1000);
  }
}

/**
 * Opens the WAL file for flushing (read-only suffices: fdatasync needs no write access), and
 * flushes its directory once, so the file's own entry survives power loss too.
 */
async function openWal(walPath: string): Promise<FileHandle> {
  const handle = await open(walPath, 'r');
  const directory = await open(dirname(walPath), 'r');
  try {
    await directory.sync();
  } finally {
    await directory.close();
  }
  return handle;
}

/** After the close: flushes the WAL if another connection kept it; gone, it was checkpointed (and synced) into the database. */
async function flushIfPresent(walPath: string, flush: FlushFile): Promise<void> {
  let handle: FileHandle;
  try {
    handle = await open(walPath, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  try {
    await flush(handle);
  } finally {
    await handle.close();
  }
}
