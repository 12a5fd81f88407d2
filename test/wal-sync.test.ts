// SQLite's durable commits (store/wal-sync.ts): committed at synchronous=NORMAL, answered only once
// the WAL file has been flushed on the thread pool; flushes coalesce, and none is skipped.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { sql } from 'kysely';
import { openStore } from '../src/store/store.js';
import { WalSync } from '../src/store/wal-sync.js';

/** A flush the test releases by hand, recording each one begun. */
function gatedFlush() {
  const gates: { release(): void; fail(error: Error): void }[] = [];
  const flush = (_handle: FileHandle) =>
    new Promise<void>((resolve, reject) => {
      gates.push({ release: resolve, fail: reject });
    });
  return { flush, gates };
}

const settled = async (promise: Promise<unknown>) => {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  // Let every pending reaction and the thread pool's work run.
  await new Promise((resolve) => setTimeout(resolve, 20));
  return done;
};

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-wal-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Polls for a condition the thread pool brings about (a file opened), for up to 5 s. */
async function waitFor(check: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.ok(check(), 'the condition never held');
}

describe('WAL flush for durable SQLite commits', () => {
  it('makes a caller who asks during a running flush wait for the next one, and serves every such caller with one more flush', async (t) => {
    const dir = tempDir(t);
    const { flush, gates } = gatedFlush();
    const wal = new WalSync(join(dir, 'file'), flush);
    t.after(() => wal.close());
    const { writeFileSync } = await import('node:fs');
    writeFileSync(join(dir, 'file'), 'frames');

    const first = wal.sync();
    await waitFor(() => gates.length === 1);
    const later = [wal.sync(), wal.sync(), wal.sync()];
    assert.equal(await settled(later[0] as Promise<void>), false);
    gates[0]?.release();
    await first;
    assert.equal(await settled(later[0] as Promise<void>), false, 'the first flush may have begun before their frames: it does not answer them');
    await waitFor(() => gates.length === 2);
    gates[1]?.release();
    await Promise.all(later);
    assert.equal(gates.length, 2, 'three callers, one more flush');
    assert.equal(wal.syncs, 2);
  });

  it('rejects the callers of a flush that fails, and flushes again for the next caller', async (t) => {
    const dir = tempDir(t);
    const { flush, gates } = gatedFlush();
    const { writeFileSync } = await import('node:fs');
    writeFileSync(join(dir, 'file'), 'frames');
    const wal = new WalSync(join(dir, 'file'), flush);
    t.after(() => wal.close());
    const failing = wal.sync();
    await waitFor(() => gates.length === 1);
    gates[0]?.fail(new Error('EIO'));
    await assert.rejects(failing, /EIO/);
    const next = wal.sync();
    await waitFor(() => gates.length === 2);
    gates[1]?.release();
    await next;
  });

  it('answers a durable write only after the WAL file itself is flushed, while the event loop keeps running; relaxed writes never wait for a flush', async (t) => {
    const dir = tempDir(t);
    const path = join(dir, 'dialtone.db');
    const { flush, gates } = gatedFlush();
    const flushed: number[] = [];
    const store = openStore(`sqlite:${path}`, {
      flushWal: async (handle) => {
        flushed.push((await handle.stat()).ino);
        await flush(handle);
      },
    });
    t.after(() => store.close());
    await sql`create table notes (id integer primary key, text text not null)`.execute(store.db);

    await store.transaction('relaxed', (trx) => sql`insert into notes (text) values ('relaxed')`.execute(trx));
    await store.batched((trx) => sql`insert into notes (text) values ('batched')`.execute(trx));
    assert.equal(gates.length, 0, 'no flush for relaxed writes');

    const durable = store.transaction('durable', (trx) => sql`insert into notes (text) values ('durable')`.execute(trx));
    await waitFor(() => gates.length === 1);
    let timerRan = false;
    setTimeout(() => (timerRan = true), 1);
    await waitFor(() => timerRan);
    const rows = await sql<{ text: string }>`select text from notes order by id`.execute(store.db);
    assert.deepEqual(rows.rows.map((r) => r.text), ['relaxed', 'batched', 'durable'], 'committed before the flush');
    assert.equal(await settled(durable), false, 'not answered before its flush');
    gates[0]?.release();
    await durable;
    assert.deepEqual(flushed, [statSync(`${path}-wal`).ino], 'the file flushed is the write-ahead log');
  });

  it('flushes for real with fdatasync by default: durable writes of one moment share a flush and all land', async (t) => {
    const dir = tempDir(t);
    const path = join(dir, 'dialtone.db');
    let flushes = 0;
    const store = openStore(`sqlite:${path}`, {
      flushWal: async (handle) => {
        flushes++;
        await handle.datasync();
      },
    });
    t.after(() => store.close());
    await sql`create table notes (id integer primary key, text text not null)`.execute(store.db);
    await Promise.all(Array.from({ length: 50 }, (_, i) => store.transaction('durable', (trx) => sql`insert into notes (text) values (${`n${i}`})`.execute(trx))));
    const count = await sql<{ n: number }>`select count(*) as n from notes`.execute(store.db);
    assert.equal(count.rows[0]?.n, 50);
    assert.ok(flushes >= 1 && flushes <= 3, `50 durable writes of one moment took ${flushes} flushes`);
  });
});
