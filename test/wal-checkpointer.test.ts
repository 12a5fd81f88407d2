// SQLite's WAL checkpoints (store/engine/wal-checkpointer.ts): run by a worker thread with its own
// connection once CHECKPOINT_PAGES frames wait in the WAL (read from the WAL-index,
// store/engine/wal-index.ts), not by the service's connection inside a commit on the event loop; the
// worker starts with the first checkpoint and ends when idle; a failure on I/O is fatal, other
// troubles are reported and retried.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { sql } from 'kysely';
import { openStore } from '../src/store/engine/store.js';
import { BACKSTOP_PAGES, CATCH_UP_PAGES, CHECKPOINT_PAGES, checkpointWorker, IDLE_MS, WalCheckpointer, type CheckpointResult, type CheckpointThread } from '../src/store/engine/wal-checkpointer.js';
import { WalIndex } from '../src/store/engine/wal-index.js';

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

/** Always past the threshold: every commit may start a checkpoint. */
const full = () => CHECKPOINT_PAGES;

/** Lets the checkpoint under way (a chain of promise reactions) finish. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Two commits past the threshold, the first checkpoint answered with `reply`: what the worker saw and what was reported. */
async function afterTwoCheckpoints(reply: Reply) {
  const { start, record } = scriptedThread([reply]);
  const troubles: Error[] = [];
  const failures: unknown[] = [];
  const checkpointer = new WalCheckpointer(start, full, (error) => failures.push(error), (error) => troubles.push(error));
  checkpointer.committed();
  await settle();
  checkpointer.committed();
  await settle();
  return { checkpointer, record, troubles, failures };
}

/** A store whose worker's answers the test sees. */
function observedStore(t: TestContext, file: string) {
  const replies: Reply[] = [];
  let threads = 0;
  const store = openStore(`sqlite:${file}`, {
    checkpointThread: (path) => {
      threads++;
      const real = checkpointWorker(path);
      return { checkpoint: () => real.checkpoint().then((reply) => (replies.push(reply), reply)), close: () => real.close() };
    },
  });
  t.after(() => store.close());
  return { store, replies, threads: () => threads };
}

const waitFor = async (check: () => boolean) => {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
};

describe('SQLite WAL checkpoints off the event loop', () => {
  it('has a worker thread checkpoint the WAL once CHECKPOINT_PAGES frames wait in it, copying every frame into the database file', async (t) => {
    const file = join(tempDir(t), 'db.sqlite');
    const { store, replies, threads } = observedStore(t, file);
    const [autocheckpoint] = (await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(store.db)).rows;
    assert.equal(autocheckpoint?.wal_autocheckpoint, BACKSTOP_PAGES);
    await sql`create table notes (id integer primary key, body text not null)`.execute(store.db);
    const sizeBefore = statSync(file).size;
    const index = new WalIndex(`${file}-shm`);
    t.after(() => index.close());

    // 40 KB a row: about ten pages a commit, so the threshold is passed after about a hundred.
    let commits = 0;
    while (replies.length === 0 && commits < 1_000) {
      await store.transaction('durable', (trx) => sql`insert into notes (body) values (${'x'.repeat(40_000)})`.execute(trx));
      commits++;
      if (commits === 10) assert.ok(index.pendingFrames() >= 10 * 10 && index.pendingFrames() < CHECKPOINT_PAGES, 'the WAL-index counts the frames waiting');
    }
    await waitFor(() => replies.length > 0);
    assert.ok(commits > 50 && commits < 200, `the threshold was passed after ${commits} commits`);
    assert.equal(threads(), 1);
    const first = replies[0];
    assert.ok(first?.ok, `the checkpoint ran: ${JSON.stringify(first)}`);
    const result = (first as { result: CheckpointResult }).result;
    assert.ok(result.log >= CHECKPOINT_PAGES, 'the WAL held the threshold');
    assert.equal(result.checkpointed, result.log, 'every frame went into the database');
    assert.ok(statSync(file).size > sizeBefore + 50 * 40_000, 'the rows are in the database file itself');
  });

  it('keeps up under load (group commits of hundreds of writes): the worker checkpoints, and the WAL never reaches the backstop at which the service connection would', async (t) => {
    const file = join(tempDir(t), 'db.sqlite');
    const { store, replies } = observedStore(t, file);
    await sql`create table notes (id integer primary key, body text not null)`.execute(store.db);
    const index = new WalIndex(`${file}-shm`);
    t.after(() => index.close());
    let mostWaiting = 0;
    // 50 moments of 200 concurrent durable writes of 3 KB: each moment is one group commit of about a thousand pages.
    for (let round = 0; round < 50; round++) {
      await Promise.all(Array.from({ length: 200 }, () => store.transaction('durable', (trx) => sql`insert into notes (body) values (${'x'.repeat(3_000)})`.execute(trx))));
      mostWaiting = Math.max(mostWaiting, index.pendingFrames());
    }
    await waitFor(() => replies.length > 0);
    assert.ok(replies.length >= 3, `the worker checkpointed ${replies.length} times`);
    assert.ok(replies.every((reply) => reply.ok));
    assert.ok(mostWaiting < BACKSTOP_PAGES, `at most ${mostWaiting} frames waited: the service connection never had to checkpoint`);
  });

  it('starts no worker for a store that is only read or barely written', async (t) => {
    const { store, threads } = observedStore(t, join(tempDir(t), 'db.sqlite'));
    await sql`create table notes (id integer primary key)`.execute(store.db);
    for (let i = 0; i < 200; i++) await store.transaction('relaxed', (trx) => sql`insert into notes default values`.execute(trx));
    await store.ping();
    assert.equal(threads(), 0);
  });

  it('ends the worker after IDLE_MS without a checkpoint and starts a new one for the next', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { start, record } = scriptedThread([]);
    const checkpointer = new WalCheckpointer(start, full);
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

  it('makes close wait for a worker the idle timer is already ending, so no connection outlives the store', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    let finish: () => void = () => undefined;
    let closing = 0;
    const checkpointer = new WalCheckpointer(
      () => ({
        checkpoint: async () => ({ ok: true, result: { busy: 0, log: 1, checkpointed: 1 } }),
        close: () => {
          closing++;
          return new Promise<void>((resolve) => (finish = resolve));
        },
      }),
      full,
    );
    checkpointer.committed();
    await settle();
    t.mock.timers.tick(IDLE_MS);
    await settle();
    assert.equal(closing, 1, 'the idle worker is being ended');
    let closed = false;
    const closingStore = checkpointer.close().then(() => (closed = true));
    await settle();
    assert.equal(closed, false, 'close waits while the worker is still open');
    finish();
    await closingStore;
    assert.equal(closing, 1);
  });

  it('runs one checkpoint at a time: commits made while one runs do not start another', async () => {
    let release: (reply: Reply) => void = () => undefined;
    let asked = 0;
    const checkpointer = new WalCheckpointer(
      () => ({
        checkpoint: () => {
          asked++;
          return new Promise<Reply>((resolve) => (release = resolve));
        },
        close: async () => undefined,
      }),
      full,
    );
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

  it('lets a bulk writer that pauses between its transactions (betweenBulkWrites) restart the WAL at CATCH_UP_PAGES, before the backstop at which the service connection would checkpoint', async (t) => {
    /** The most frames the WAL held while 1,300 relaxed commits of about ten pages each were written, one a turn. */
    const mostFrames = async () => {
      const file = join(tempDir(t), 'db.sqlite');
      const { store } = observedStore(t, file);
      await sql`create table notes (id integer primary key, body text not null)`.execute(store.db);
      const index = new WalIndex(`${file}-shm`);
      t.after(() => index.close());
      let most = 0;
      for (let commit = 0; commit < 1_300; commit++) {
        await store.transaction('relaxed', (trx) => sql`insert into notes (body) values (${'x'.repeat(40_000)})`.execute(trx));
        most = Math.max(most, index.frames());
        await settle();
        await store.betweenBulkWrites();
      }
      return most;
    };
    // Without the pauses each of the worker's checkpoints ends behind the writes made while it ran,
    // the WAL is never restarted, and it reaches BACKSTOP_PAGES (10,006 frames, measured).
    const most = await mostFrames();
    assert.ok(most >= CATCH_UP_PAGES && most < CATCH_UP_PAGES + 100, `the WAL held at most ${most} frames`);
  });

  it('catches up on request: waits for the checkpoint under way, then checkpoints until no frame waits, at most four times', async () => {
    const done: Reply = { ok: true, result: { busy: 0, log: 1, checkpointed: 1 } };
    // What the WAL-index shows after each checkpoint: the frames written while it ran, then none.
    const waiting = [CHECKPOINT_PAGES, 120, 0];
    let checkpoints = 0;
    const checkpointer = new WalCheckpointer(
      () => ({ checkpoint: async () => (checkpoints++, waiting.shift(), done), close: async () => undefined }),
      () => waiting[0] ?? 0,
    );
    checkpointer.committed();
    await checkpointer.catchUp();
    assert.equal(checkpoints, 2, 'the one under way, and one for the frames written meanwhile');
    // Other writers keep filling the WAL: four checkpoints, and the bulk writer goes on.
    let endless = 0;
    const busy = new WalCheckpointer(() => ({ checkpoint: async () => (endless++, done), close: async () => undefined }), () => 50);
    await busy.catchUp();
    assert.equal(endless, 4);
    await checkpointer.close();
    await busy.close();
  });

  it('waits for CHECKPOINT_PAGES frames before starting anything', async () => {
    const { start, record } = scriptedThread([]);
    let waiting = CHECKPOINT_PAGES - 1;
    const checkpointer = new WalCheckpointer(start, () => waiting);
    checkpointer.committed();
    await settle();
    assert.equal(record.started, 0);
    waiting = CHECKPOINT_PAGES;
    checkpointer.committed();
    await settle();
    assert.deepEqual(record, { started: 1, checkpoints: 1, closed: 0 });
    await checkpointer.close();
  });

  it('reports a worker that died and starts a new one for the next checkpoint', async () => {
    const { checkpointer, record, troubles, failures } = await afterTwoCheckpoints({ ok: false, code: 'WORKER_EXITED', message: 'the checkpoint worker exited with code 1' });
    assert.equal(record.started, 2, 'a fresh worker');
    assert.equal(record.checkpoints, 2);
    assert.equal(troubles.length, 1);
    assert.match(troubles[0]?.message ?? '', /exited with code 1/);
    assert.deepEqual(failures, [], 'not fatal');
    await checkpointer.close();
  });

  it('reports a worker that cannot start as trouble, never as an unhandled rejection, and tries again at the next commit', async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    try {
      let attempts = 0;
      const troubles: Error[] = [];
      const checkpointer = new WalCheckpointer(
        () => {
          attempts++;
          throw new Error('ERR_WORKER_INIT_FAILED');
        },
        full,
        undefined,
        (error) => troubles.push(error),
      );
      checkpointer.committed();
      await new Promise((resolve) => setTimeout(resolve, 20));
      checkpointer.committed();
      await new Promise((resolve) => setTimeout(resolve, 20));
      assert.deepEqual(rejections, []);
      assert.equal(attempts, 2);
      assert.equal(troubles.length, 2);
      assert.match(troubles[0]?.message ?? '', /could not start: ERR_WORKER_INIT_FAILED/);
      await checkpointer.close();
    } finally {
      process.off('unhandledRejection', onRejection);
    }
  });

  it('treats a busy database as trouble, not failure: the next checkpoint runs on the same worker', async () => {
    const { checkpointer, record, troubles, failures } = await afterTwoCheckpoints({ ok: false, code: 'SQLITE_BUSY', message: 'database is locked' });
    assert.deepEqual(record, { started: 1, checkpoints: 2, closed: 0 });
    assert.equal(troubles.length, 1);
    assert.deepEqual(failures, []);
    await checkpointer.close();
  });

  it('makes a checkpoint that fails on I/O fatal: reported once, and no checkpoint runs after it', async () => {
    const { start, record } = scriptedThread([{ ok: false, code: 'SQLITE_IOERR_FSYNC', message: 'disk I/O error' }]);
    const failures: unknown[] = [];
    const checkpointer = new WalCheckpointer(start, full, (error) => failures.push(error));
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
    const file = join(tempDir(t), 'db.sqlite');
    let closed = 0;
    let checkpoints = 0;
    const store = openStore(`sqlite:${file}`, {
      checkpointThread: (path) => {
        const real = checkpointWorker(path);
        return { checkpoint: () => real.checkpoint().then((reply) => (checkpoints++, reply)), close: () => real.close().then(() => void closed++) };
      },
    });
    await sql`create table notes (id integer primary key, body text not null)`.execute(store.db);
    let rows = 0;
    while (checkpoints === 0 && rows < 1_000) {
      await store.transaction('durable', (trx) => sql`insert into notes (body) values (${'x'.repeat(40_000)})`.execute(trx));
      rows++;
      await settle();
    }
    await store.close();
    assert.equal(closed, 1);
    assert.throws(() => statSync(`${file}-wal`), /ENOENT/);
    const reopened = openStore(`sqlite:${file}`);
    t.after(() => reopened.close());
    const [row] = (await sql<{ n: number }>`select count(*) as n from notes`.execute(reopened.db)).rows;
    assert.equal(row?.n, rows);
  });
});
