// Wake-ups for other nodes sent after a commit and coalesced (store/engine/coalescing-notifier.ts), and
// on PostgreSQL the store's `announce` reaching a listener on another connection.
import assert from 'node:assert/strict';
import { CoalescingNotifier } from '../src/store/engine/coalescing-notifier.js';
import { openStore } from '../src/store/engine/store.js';
import { describe, it } from './helpers/suite.js';
import { createTestDatabase, storeCases } from './helpers/stores.js';
import { build, postJson } from './helpers/app.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { WORK_CHANNEL } from '../src/runs/create-run.js';

/** Lets the notifier react to what the test just did (an answer, a timer). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/** A send whose notifications stay in flight until the test answers them. */
function heldSends() {
  const sent: string[] = [];
  const pending: { resolve: () => void; reject: (error: Error) => void }[] = [];
  const send = (channel: string) =>
    new Promise<void>((resolve, reject) => {
      sent.push(channel);
      pending.push({ resolve, reject });
    });
  /** Answers the oldest notification in flight. */
  const answer = async (error?: Error) => {
    const next = pending.shift();
    assert.ok(next, 'a notification is in flight');
    if (error) next.reject(error);
    else next.resolve();
    await settle();
  };
  return { sent, send, answer, inFlight: () => pending.length };
}

describe('Coalescing notifier', () => {
  it('sends a notification at once when none is in flight', () => {
    const sends = heldSends();
    const notifier = new CoalescingNotifier(sends.send, () => assert.fail('no failure'), 0);
    notifier.announce('work');
    assert.deepEqual(sends.sent, ['work']);
  });

  it('covers every announcement made while one is in flight with one more, sent only after it is answered', async () => {
    const sends = heldSends();
    const notifier = new CoalescingNotifier(sends.send, () => assert.fail('no failure'), 0);
    notifier.announce('work');
    for (let i = 0; i < 50; i++) notifier.announce('work');
    assert.deepEqual(sends.sent, ['work'], 'nothing more is sent while the first is in flight');
    await sends.answer();
    assert.deepEqual(sends.sent, ['work', 'work'], 'one more covers the fifty');
    await sends.answer();
    assert.equal(sends.inFlight(), 0, 'nothing was announced since: nothing more is sent');
    notifier.announce('work');
    assert.equal(sends.sent.length, 3, 'a later announcement is sent at once again');
  });

  it('starts the next notification no sooner than the interval after the last one started', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
    const sends = heldSends();
    const notifier = new CoalescingNotifier(sends.send, () => assert.fail('no failure'), 10);
    notifier.announce('work');
    t.mock.timers.tick(2);
    await sends.answer();
    t.mock.timers.tick(1);
    notifier.announce('work');
    notifier.announce('work');
    t.mock.timers.tick(6);
    await settle();
    assert.equal(sends.sent.length, 1, '9 ms after the first started, the next waits');
    t.mock.timers.tick(1);
    await settle();
    assert.equal(sends.sent.length, 2, '10 ms after, one notification covers both announcements');
    await sends.answer();
    t.mock.timers.tick(10);
    await settle();
    assert.equal(sends.sent.length, 2, 'nothing was owed: nothing more is sent');
    notifier.announce('work');
    assert.equal(sends.sent.length, 3, 'once the interval has passed, an announcement is sent at once');
  });

  it('does not wait again when a notification took longer than the interval', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
    const sends = heldSends();
    const notifier = new CoalescingNotifier(sends.send, () => assert.fail('no failure'), 10);
    notifier.announce('work');
    notifier.announce('work');
    t.mock.timers.tick(25);
    await sends.answer();
    assert.equal(sends.sent.length, 2, 'the owed one starts as soon as the first is answered');
  });

  it('never waits longer than the interval, even when the wall clock steps back', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 10_000_000 });
    const sends = heldSends();
    const notifier = new CoalescingNotifier(sends.send, () => assert.fail('no failure'), 10);
    notifier.announce('work');
    notifier.announce('work');
    t.mock.timers.setTime(10_000_000 - 3_600_000);
    await sends.answer();
    t.mock.timers.tick(10);
    await settle();
    assert.equal(sends.sent.length, 2, 'the owed one went out one interval later, not an hour');
  });

  it('keeps sending after a failure report that itself throws', async () => {
    const sends = heldSends();
    const notifier = new CoalescingNotifier(sends.send, () => {
      throw new Error('the logger broke');
    }, 0);
    notifier.announce('work');
    await sends.answer(new Error('connection lost'));
    notifier.announce('work');
    assert.equal(sends.sent.length, 2, 'the channel was not left busy');
    await sends.answer();
    await notifier.close();
  });

  it('coalesces each channel apart', async () => {
    const sends = heldSends();
    const notifier = new CoalescingNotifier(sends.send, () => assert.fail('no failure'), 0);
    notifier.announce('work');
    notifier.announce('webhooks');
    notifier.announce('work');
    assert.deepEqual(sends.sent, ['work', 'webhooks']);
    await sends.answer();
    assert.deepEqual(sends.sent, ['work', 'webhooks', 'work']);
  });

  it('reports a notification that failed, and still sends the one owed after it', async () => {
    const sends = heldSends();
    const failures: unknown[] = [];
    const notifier = new CoalescingNotifier(sends.send, (error) => failures.push(error), 0);
    notifier.announce('work');
    notifier.announce('work');
    await sends.answer(new Error('connection lost'));
    assert.deepEqual(
      failures.map((error) => (error as Error).message),
      ['connection lost'],
    );
    assert.deepEqual(sends.sent, ['work', 'work']);
    await sends.answer();
    assert.equal(failures.length, 1);
  });

  it('closes once the notification in flight is answered, dropping the one owed and sending nothing more', async () => {
    const sends = heldSends();
    const notifier = new CoalescingNotifier(sends.send, () => assert.fail('no failure'), 0);
    await notifier.close();
    const open = new CoalescingNotifier(sends.send, () => assert.fail('no failure'), 0);
    open.announce('work');
    open.announce('work');
    let closed = false;
    void open.close().then(() => (closed = true));
    await settle();
    assert.equal(closed, false, 'a notification is in flight');
    await sends.answer();
    assert.equal(closed, true);
    assert.deepEqual(sends.sent, ['work'], 'the owed one was dropped');
    open.announce('work');
    assert.deepEqual(sends.sent, ['work'], 'nothing is sent once closed');
  });

  it('closes without waiting out the interval', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
    const sends = heldSends();
    const notifier = new CoalescingNotifier(sends.send, () => assert.fail('no failure'), 1_000);
    notifier.announce('work');
    await sends.answer();
    notifier.announce('work');
    let closed = false;
    void notifier.close().then(() => (closed = true));
    await settle();
    await settle();
    assert.equal(closed, true, 'closed with no fake time passing');
    assert.equal(sends.sent.length, 1);
  });
});

const postgres = (await storeCases()).find((c) => c.kind === 'postgres');

describe('Announcements on PostgreSQL', { skip: postgres?.skip ?? 'no PostgreSQL case' }, () => {
  it('wake a listener on another connection', { timeout: 20_000 }, async (t) => {
    const database = await createTestDatabase('postgres');
    const announcing = openStore(database.url, { poolSize: 1, announceIntervalMs: 5 });
    const listening = openStore(database.url, { poolSize: 1 });
    let wake: () => void = () => undefined;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    const unlisten = await listening.listen('coalescing_test', () => wake(), (error) => assert.fail(error));
    t.after(async () => {
      await unlisten();
      await announcing.close();
      await listening.close();
      await database.drop();
    });
    announcing.announce('coalescing_test');
    await woken;
  });
});

describe('Announcing a new run', () => {
  it('announces new work once the run has committed, and nothing for a request refused before its insert or by it', async (t) => {
    const announced: string[] = [];
    const { app, deps } = await build(t, 'sqlite', { wrapStore: (store) => ({ ...store, announce: (channel) => void announced.push(channel) }) });
    const f = await createOrgFixture(deps);
    const call = (phone: string) => postJson(app, PATHS.initiateCall(f.agentUuid), { phone_number: phone }, { key: f.apiKey });
    assert.equal((await call('+12025550123')).statusCode, 200);
    assert.deepEqual(announced, [WORK_CHANNEL]);
    assert.equal((await call('12025550123')).statusCode, 422, 'refused before the insert');
    const suppressed = await app.inject({ method: 'PUT', url: `/api/v1/public/suppressions/${encodeURIComponent('+12025550124')}`, headers: { 'x-api-key': f.apiKey } });
    assert.equal(suppressed.statusCode, 200);
    assert.equal((await call('+12025550124')).statusCode, 422, 'refused by the insert');
    assert.deepEqual(announced, [WORK_CHANNEL], 'nothing more was announced');
  });
});
