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
import { open, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';

/** Flushes a file's data to the disk (fdatasync); replaceable in tests. */
export type FlushFile = (handle: FileHandle) => Promise<void>;

const fdatasync: FlushFile = (handle) => handle.datasync();

export class WalSync {
  private handle: Promise<FileHandle> | undefined;
  private running: Promise<void> | undefined;
  private next: Promise<void> | undefined;
  /** Syncs begun; tests read it. */
  syncs = 0;

  constructor(
    private readonly walPath: string,
    private readonly flush: FlushFile = fdatasync,
  ) {}

  /** Resolves once every WAL frame written before this call is on the disk. */
  sync(): Promise<void> {
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

  async close(): Promise<void> {
    const handle = this.handle;
    this.handle = undefined;
    await Promise.allSettled([this.running, this.next]);
    if (handle) await (await handle).close().catch(() => undefined);
  }

  private beginNext(): Promise<void> {
    this.next = undefined;
    return this.begin();
  }

  private begin(): Promise<void> {
    this.syncs++;
    const running = this.flushOnce().finally(() => {
      if (this.running === running) this.running = undefined;
    });
    this.running = running;
    return running;
  }

  private async flushOnce(): Promise<void> {
    this.handle ??= openWal(this.walPath).catch((error: unknown) => {
      this.handle = undefined;
      throw error;
    });
    await this.flush(await this.handle);
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
