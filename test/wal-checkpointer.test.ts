// SQLite's WAL checkpoints (store/wal-checkpointer.ts): run by a worker thread with its own
// connection every so many commits, not by the service's connection inside a commit on the event
// loop; the worker starts with the first checkpoint and ends when idle; a failure on I/O is fatal.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { sql } from 'kysely';
import { openStore } from '../src/store/store.js';
import { BACKSTOP_PAGES, CHECKPOINT_AFTER_COMMITS, checkpointWorker, IDLE_MS, WalCheckpointer, type CheckpointResult, type CheckpointThread } from '../src/store/wal-checkpointer.js';

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-checkpoint-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

type Reply = Awaited<ReturnType<CheckpointThread['checkpoint']>>;

/** A thread that answers what the test scripts, recording checkpoints asked and closes. */
function scriptedThread(replies: Reply[]) {
  const record = { started: 0, checkpoints: 0, closed: 0 };
  const start = (): CheckpointThread => {
    record.started++;
    return {
      checkpoint: async () => {
        record.checkpoints++;
        return replies.shift() ?? { ok: true, result: { busy: 0, log: 1, checkpointed: 1 } };
      },
      close: async () => {
        record.closed++;
      },
    };
  };
  return { start, record };
}

/** Lets the checkpoint under way (a chain of promise reactions) finish. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('SQLite WAL checkpoints off the event loop', () => {
  it('has a worker thread checkpoint the WAL every CHECKPOINT_AFTER_COMMITS commits, copying every frame into the database file, while the service connection only checkpoints past the backstop', async (t) => {
    const dir = tempDir(t);
    const file = join(dir, 'db.sqlite');
    const replies: Reply[] = [];
    let threads = 0;
    const store = openStore(`sqlite:${file}`, {
      checkpointThread: (path) => {
        threads++;
        const real = checkpointWorker(path);
        return { checkpoint: async () => real.checkpoint().then((reply) => (replies.push(reply), reply)), close: () => real.close() };
      },
    });
    t.after(() => store.close());
    const [autocheckpoint] = (await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(store.db)).rows;
    assert.equal(autocheckpoint?.wal_autocheckpoint, BACKSTOP_PAGES);
    await sql`create table notes (id integer primary key, body text not null)`.execute(store.db);
    const sizeBefore = statSync(file).size;

    for (let i = 0; i < CHECKPOINT_AFTER_COMMITS * 2; i++) {
      await store.transaction('durable', (trx) => sql`insert into notes (body) values (${'x'.repeat(2_000)})`.execute(trx));
    }
    for (let i = 0; i < 500 && replies.length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 10));

    assert.equal(threads, 1, 'one worker serves every checkpoint');
    assert.equal(replies.length, 2, 'a checkpoint per CHECKPOINT_AFTER_COMMITS commits');
    const last = replies.at(-1);
    assert.ok(last?.ok, `the checkpoint ran: ${JSON.stringify(last)}`);
    const result = (last as { result: CheckpointResult }).result;
    assert.ok(result.log > 0, 'the WAL held frames');
    assert.equal(result.checkpointed, result.log, 'every frame went into the database');
    assert.ok(statSync(file).size > sizeBefore + CHECKPOINT_AFTER_COMMITS * 2_000, 'the rows are in the database file itself');
  });

  it('starts no worker for a store that is only read or barely written', async (t) => {
    const dir = tempDir(t);
    let threads = 0;
    const store = openStore(`sqlite:${join(dir, 'db.sqlite')}`, {
      checkpointThread: (path) => {
        threads++;
        return checkpointWorker(path);
      },
    });
    t.after(() => store.close());
    await sql`create table notes (id integer primary key)`.execute(store.db);
    for (let i = 0; i < CHECKPOINT_AFTER_COMMITS - 1; i++) await store.transaction('relaxed', (trx) => sql`insert into notes default values`.execute(trx));
    await store.ping();
    assert.equal(threads, 0);
  });

  it('ends the worker after IDLE_MS without a checkpoint and starts a new one for the next', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { start, record } = scriptedThread([]);
    const checkpointer = new WalCheckpointer(start, undefined, undefined, 1);
    checkpointer.committed();
    await settle();
    assert.deepEqual(record, { started: 1, checkpoints: 1, closed: 0 });
    t.mock.timers.tick(IDLE_MS - 1);
    await settle();
    assert.equal(record.closed, 0, 'still within IDLE_MS');
    t.mock.timers.tick(1);
    await settle();
    assert.equal(record.closed, 1, 'idle for IDLE_MS: the worker ends');
    checkpointer.committed();
    await settle();
    assert.deepEqual(record, { started: 2, checkpoints: 2, closed: 1 });
    await checkpointer.close();
    assert.equal(record.closed, 2);
  });

  it('runs one checkpoint at a time: commits made while one runs do not start another', async () => {
    let release: (reply: Reply) => void = () => undefined;
    let asked = 0;
    const checkpointer = new WalCheckpointer(() => ({
      checkpoint: () => {
        asked++;
        return new Promise<Reply>((resolve) => (release = resolve));
      },
      close: async () => undefined,
    }), undefined, undefined, 1);
    checkpointer.committed();
    checkpointer.committed();
    checkpointer.committed();
    await settle();
    assert.equal(asked, 1);
    release({ ok: true, result: { busy: 0, log: 3, checkpointed: 3 } });
    await settle();
    checkpointer.committed();
    await settle();
    assert.equal(asked, 2, 'the next commit after it ended starts the next');
    release({ ok: true, result: { busy: 0, log: 1, checkpointed: 1 } });
    await checkpointer.close();
  });

  it('reports a worker that died and starts a new one for the next checkpoint', async () => {
    const { start, record } = scriptedThread([{ ok: false, code: 'WORKER_EXITED', message: 'the checkpoint worker exited with code 1' }]);
    const troubles: Error[] = [];
    const failures: unknown[] = [];
    const checkpointer = new WalCheckpointer(start, (error) => failures.push(error), (error) => troubles.push(error), 1);
    checkpointer.committed();
    await settle();
    checkpointer.committed();
    await settle();
    assert.equal(record.started, 2, 'a fresh worker');
    assert.equal(record.checkpoints, 2);
    assert.equal(troubles.length, 1);
    assert.match(troubles[0]?.message ?? '', /exited with code 1/);
    assert.deepEqual(failures, [], 'not fatal');
    await checkpointer.close();
  });

  it('treats a busy database as trouble, not failure: the next checkpoint runs on the same worker', async () => {
    const { start, record } = scriptedThread([{ ok: false, code: 'SQLITE_BUSY', message: 'database is locked' }]);
    const troubles: Error[] = [];
    const failures: unknown[] = [];
    const checkpointer = new WalCheckpointer(start, (error) => failures.push(error), (error) => troubles.push(error), 1);
    checkpointer.committed();
    await settle();
    checkpointer.committed();
    await settle();
    assert.deepEqual(record, { started: 1, checkpoints: 2, closed: 0 });
    assert.equal(troubles.length, 1);
    assert.deepEqual(failures, []);
    await checkpointer.close();
  });

  it('makes a checkpoint that fails on I/O fatal: reported once, and no checkpoint runs after it', async () => {
    const { start, record } = scriptedThread([{ ok: false, code: 'SQLITE_IOERR_FSYNC', message: 'disk I/O error' }]);
    const failures: unknown[] = [];
    const checkpointer = new WalCheckpointer(start, (error) => failures.push(error), undefined, 1);
    checkpointer.committed();
    await settle();
    checkpointer.committed();
    checkpointer.committed();
    await settle();
    assert.equal(failures.length, 1);
    assert.equal((failures[0] as { code?: string }).code, 'SQLITE_IOERR_FSYNC');
    assert.equal(record.checkpoints, 1);
    await checkpointer.close();
  });

  it('ends the worker when the store closes, and the closing connection still checkpoints and removes the WAL', async (t) => {
    const dir = tempDir(t);
    const file = join(dir, 'db.sqlite');
    let closed = 0;
    const store = openStore(`sqlite:${file}`, {
      checkpointThread: (path) => {
        const real = checkpointWorker(path);
        return { checkpoint: () => real.checkpoint(), close: () => real.close().then(() => void closed++) };
      },
    });
    await sql`create table notes (id integer primary key)`.execute(store.db);
    for (let i = 0; i < CHECKPOINT_AFTER_COMMITS + 5; i++) await store.transaction('durable', (trx) => sql`insert into notes default values`.execute(trx));
    await store.close();
    assert.equal(closed, 1);
    assert.throws(() => statSync(`${file}-wal`), /ENOENT/);
    const reopened = openStore(`sqlite:${file}`);
    t.after(() => reopened.close());
    const [row] = (await sql<{ n: number }>`select count(*) as n from notes`.execute(reopened.db)).rows;
    assert.equal(row?.n, CHECKPOINT_AFTER_COMMITS + 5);
  });
});
