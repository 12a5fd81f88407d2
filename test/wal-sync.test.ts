// SQLite's durable commits (store/engine/wal-sync.ts): committed at synchronous=NORMAL, answered only once
// the WAL file has been flushed on the thread pool; flushes coalesce, and none is skipped.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { describe, it, type TestContext } from 'node:test';
import { sql } from 'kysely';
import { buildDeps } from '../src/deps.js';
import { openStore } from '../src/store/engine/store.js';
import { testConfig } from './helpers/app.js';
import { WalSync } from '../src/store/engine/wal-sync.js';

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
    t.after(() => wal.finishClose());
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

  it('rejects the callers of a flush that fails and every caller after them, without flushing again, and tells its owner once', async (t) => {
    const dir = tempDir(t);
    const { flush, gates } = gatedFlush();
    const { writeFileSync } = await import('node:fs');
    writeFileSync(join(dir, 'file'), 'frames');
    const failures: unknown[] = [];
    const wal = new WalSync(join(dir, 'file'), flush, (error) => failures.push(error));
    t.after(() => wal.finishClose());
    const failing = wal.sync();
    await waitFor(() => gates.length === 1);
    const queued = wal.sync();
    gates[0]?.fail(new Error('EIO'));
    await assert.rejects(failing, /EIO/);
    await assert.rejects(queued, /EIO/);
    await assert.rejects(wal.sync(), /EIO/);
    assert.equal(gates.length, 1, 'no flush after the failure');
    assert.equal(failures.length, 1);
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

  it('treats a failed flush as fatal: its owner is told before any caller hears of it, and every flush after it fails too', async (t) => {
    const dir = tempDir(t);
    const heard: string[] = [];
    let fail = false;
    const store = openStore(`sqlite:${join(dir, 'dialtone.db')}`, {
      flushWal: async (handle) => {
        if (fail) throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
        await handle.datasync();
      },
      onFlushFailure: (error) => heard.push(`owner: ${(error as Error).message}`),
    });
    t.after(() => store.close());
    await sql`create table notes (id integer primary key, text text not null)`.execute(store.db);
    fail = true;
    await store.transaction('durable', (trx) => sql`insert into notes (text) values ('x')`.execute(trx)).catch((error: unknown) => heard.push(`caller: ${(error as Error).message}`));
    assert.deepEqual(heard, ['owner: EIO: i/o error, fdatasync', 'caller: EIO: i/o error, fdatasync'], 'the owner (production: exits) first');
    fail = false;
    await assert.rejects(store.transaction('durable', (trx) => sql`insert into notes (text) values ('y')`.execute(trx)), /EIO/, 'a later flush that succeeds would prove nothing');
    await assert.rejects(store.durable(), /EIO/);
    assert.equal(heard.length, 2, 'the owner is told once');
  });

  it('lets readers wait until every durable commit so far is flushed, at no cost once flushes cover them', async (t) => {
    const dir = tempDir(t);
    const { flush, gates } = gatedFlush();
    const store = openStore(`sqlite:${join(dir, 'dialtone.db')}`, { flushWal: flush });
    t.after(() => store.close());
    await sql`create table notes (id integer primary key, text text not null)`.execute(store.db);
    await store.durable();
    assert.equal(gates.length, 0, 'nothing committed durably yet: no flush');
    const write = store.transaction('durable', (trx) => sql`insert into notes (text) values ('x')`.execute(trx));
    await waitFor(() => gates.length === 1);
    const reader = store.durable();
    assert.equal(await settled(reader), false, 'a reader of the committed row waits for its flush');
    gates[0]?.release();
    await waitFor(() => gates.length === 2);
    gates[1]?.release();
    await Promise.all([write, reader]);
    await store.durable();
    assert.equal(gates.length, 2, 'covered already: no further flush');
  });

  it('answers the durable writes waiting for a flush when the store closes (the close checkpoints them), opening nothing the close removed', async (t) => {
    const dir = tempDir(t);
    const path = join(dir, 'dialtone.db');
    const { flush, gates } = gatedFlush();
    const store = openStore(`sqlite:${path}`, { flushWal: async (handle) => { await flush(handle); await handle.datasync(); } });
    await sql`create table notes (id integer primary key, text text not null)`.execute(store.db);
    const first = store.transaction('durable', (trx) => sql`insert into notes (text) values ('one')`.execute(trx));
    await waitFor(() => gates.length === 1);
    const second = store.transaction('durable', (trx) => sql`insert into notes (text) values ('two')`.execute(trx));
    await waitFor(() => existsSync(`${path}-wal`));
    await new Promise((resolve) => setTimeout(resolve, 20)); // the second has committed and waits for the next flush
    const closing = store.close();
    gates[0]?.release();
    await Promise.all([first, second, closing]);
    assert.equal(existsSync(`${path}-wal`), false, 'the close checkpointed the log and removed it');
    assert.equal(gates.length, 1, 'no flush handle was opened on the removed log');
    const reopened = openStore(`sqlite:${path}`);
    t.after(() => reopened.close());
    const rows = await sql<{ text: string }>`select text from notes order by id`.execute(reopened.db);
    assert.deepEqual(rows.rows.map((r) => r.text), ['one', 'two']);
  });

  it('times every flush and reports it as dialtone_sqlite_wal_flush_seconds on the node that opened the store', async (t) => {
    const dir = tempDir(t);
    const deps = buildDeps(testConfig(`sqlite:${join(dir, 'db.sqlite')}`));
    t.after(() => deps.store.close());
    await sql`create table notes (id integer primary key)`.execute(deps.store.db);
    const before = (await deps.metrics.walFlush.get()).values.find((v) => v.metricName === 'dialtone_sqlite_wal_flush_seconds_count')?.value ?? 0;
    await Promise.all([1, 2, 3].map(() => deps.store.transaction('durable', (trx) => sql`insert into notes default values`.execute(trx))));
    await deps.store.transaction('relaxed', (trx) => sql`insert into notes default values`.execute(trx));
    const values = (await deps.metrics.walFlush.get()).values;
    const count = values.find((v) => v.metricName === 'dialtone_sqlite_wal_flush_seconds_count')?.value ?? 0;
    const sum = values.find((v) => v.metricName === 'dialtone_sqlite_wal_flush_seconds_sum')?.value ?? -1;
    assert.equal(count - before, 1, 'the three durable writes of one moment shared one flush; the relaxed one needed none');
    assert.ok(sum > 0 && sum < 10, `a flush took ${sum} s`);
  });

  it('times each durable write from being queued until its flush has covered it, and only writes that committed', async (t) => {
    const dir = tempDir(t);
    const { flush, gates } = gatedFlush();
    const timed: number[] = [];
    const store = openStore(`sqlite:${join(dir, 'dialtone.db')}`, { flushWal: flush, onDurableWrite: (seconds) => timed.push(seconds) });
    t.after(() => store.close());
    await sql`create table notes (id integer primary key, text text not null unique)`.execute(store.db);

    const queuedAt = performance.now();
    const written = store.transaction('durable', (trx) => sql`insert into notes (text) values ('a')`.execute(trx));
    const refused = store.transaction('durable', (trx) => sql`insert into notes (text) values ('a')`.execute(trx));
    await waitFor(() => gates.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(timed, [], 'nothing is timed before the flush ends');
    gates[0]?.release();
    await written;
    await assert.rejects(refused, 'the second insert breaks the unique constraint');
    const elapsed = (performance.now() - queuedAt) / 1000;
    assert.equal(timed.length, 1, 'the refused write is not counted');
    assert.ok((timed[0] ?? 0) >= 0.05 && (timed[0] ?? 0) <= elapsed, `the write took ${timed[0]} s: at least the 50 ms its flush was held, at most the ${elapsed} s since it was queued`);
    await store.transaction('relaxed', (trx) => sql`insert into notes (text) values ('b')`.execute(trx));
    assert.equal(timed.length, 1, 'a relaxed write is not a durable one');
  });

  it('reports durable writes as dialtone_sqlite_durable_write_seconds on the node that opened the store', async (t) => {
    const dir = tempDir(t);
    const deps = buildDeps(testConfig(`sqlite:${join(dir, 'db.sqlite')}`));
    t.after(() => deps.store.close());
    await sql`create table notes (id integer primary key)`.execute(deps.store.db);
    const countOf = async () => (await deps.metrics.durableWrite.get()).values.find((v) => v.metricName === 'dialtone_sqlite_durable_write_seconds_count')?.value ?? 0;
    const before = await countOf();
    await Promise.all([1, 2, 3].map(() => deps.store.transaction('durable', (trx) => sql`insert into notes default values`.execute(trx))));
    assert.equal((await countOf()) - before, 3, 'one observation per durable write, though the three shared a flush');
  });
});
