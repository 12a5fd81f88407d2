// The event stream's per-node feed (stream/event-feed.ts): where it starts, on PostgreSQL below an
// event id still in flight, and what a stop does to a read under way.
import assert from 'node:assert/strict';
import pino from 'pino';
import { systemClock } from '../src/shared/clock.js';
import type { StreamEventRow } from '../src/store/statements/event-stream-statements.js';
import { EventFeed, startingPoint } from '../src/stream/event-feed.js';
import { build, postJson, type TestEnv } from './helpers/app.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { SseClient } from './helpers/sse-client.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const insertEvent = (db: TestEnv['deps']['store']['db'], runId: number, seq: number) =>
  db.insertInto('run_events').values({ run_id: runId, seq, type: 'note', at: Date.now(), data: JSON.stringify({ seq }) }).returning('id').executeTakeFirstOrThrow();

async function queuedRun(env: TestEnv): Promise<{ runId: number; apiKey: string }> {
  const f = await createOrgFixture(env.deps);
  const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123' }, { key: f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return { runId: (response.json() as { workflow_run_id: number }).workflow_run_id, apiKey: f.apiKey };
}

describe('Where an event feed starts (startingPoint)', () => {
  const now = 1_000_000;
  it('starts past the last event when no id is missing', () => {
    assert.deepEqual(startingPoint(10, [{ id: 11, at: now }, { id: 12, at: now }], now, 2_000), { horizon: 12 });
  });

  it('starts below a missing id whose next event was written within the gap wait, waiting for it from that event\'s time', () => {
    assert.deepEqual(startingPoint(10, [{ id: 11, at: now - 9_000 }, { id: 13, at: now - 500 }, { id: 14, at: now }], now, 2_000), { horizon: 11, gap: { id: 12, since: now - 500 } });
  });

  it('passes a missing id whose next event is older than the gap wait (rolled back, or passed by anyway), and stops at the lowest recent one', () => {
    const events = [{ id: 12, at: now - 60_000 }, { id: 14, at: now - 100 }, { id: 17, at: now - 50 }];
    assert.deepEqual(startingPoint(10, events, now, 2_000), { horizon: 12, gap: { id: 13, since: now - 100 } });
  });

  it('counts a clock ahead of this node\'s as now', () => {
    assert.deepEqual(startingPoint(0, [{ id: 2, at: now + 5_000 }], now, 2_000), { horizon: 0, gap: { id: 1, since: now } });
  });
});

for (const store of await storeCases()) {
  describe(`An event feed stopped while it reads (${store.kind})`, { skip: store.skip }, () => {
    it('hands nothing from a read begun before the stop to a listener that subscribes after it, never moves back from that listener\'s horizon, and reads what comes after it', async (t) => {
      const env = await build(t, store.kind);
      const { runId } = await queuedRun(env);
      const feed = new EventFeed(env.deps.store, systemClock, { pollIntervalMs: 60_000, gapWaitMs: 0, batchSize: 100 }, pino({ level: 'silent' }));
      const first = await feed.subscribe(() => undefined);
      for (let seq = 100; seq < 103; seq++) await insertEvent(env.deps.store.db, runId, seq);
      feed.wake(); // a read of those three is under way …
      first.unsubscribe(); // … when the last listener leaves
      for (let seq = 103; seq < 105; seq++) await insertEvent(env.deps.store.db, runId, seq);
      const got: StreamEventRow[] = [];
      const subscribing = feed.subscribe((rows) => got.push(...rows));
      feed.wake(); // this node wrote something while the new listener starts
      const second = await subscribing;
      t.after(() => second.unsubscribe());
      assert.equal(second.horizon, first.horizon + 5, 'the second listener starts past all five');
      const last = Number((await insertEvent(env.deps.store.db, runId, 105)).id);
      feed.wake();
      const deadline = Date.now() + 5_000;
      while (!got.some((row) => row.id === last)) {
        assert.ok(Date.now() < deadline, 'the event written after it arrives');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.deepEqual(got.map((row) => row.id), [last], 'only what came after its horizon');
      assert.equal(feed.horizon, last);
    });
  });
}

describe('A node\'s first stream on PostgreSQL, with an event id still in flight', { skip: (await storeCases()).find((c) => c.kind === 'postgres')?.skip ?? false }, () => {
  it('sends an event whose transaction was still open when the first stream connected, once it commits, before the later one', async (t) => {
    const env = await build(t, 'postgres', { env: { STREAM_POLL_INTERVAL_MS: '20', STREAM_GAP_WAIT_MS: '10000' } });
    const url = await env.app.listen({ host: '127.0.0.1', port: 0 });
    const { runId, apiKey } = await queuedRun(env);
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let drawn = (_id: number) => {};
    const lowerId = new Promise<number>((resolve) => (drawn = resolve));
    let lower = 0;
    let higher = 0;
    const slow = env.deps.store.db.transaction().execute(async (trx) => {
      drawn(Number((await insertEvent(trx, runId, 100)).id));
      await held;
    });
    // Released whatever happens: the store cannot close while the transaction holds a connection.
    let client: SseClient;
    try {
      lower = await lowerId;
      higher = Number((await insertEvent(env.deps.store.db, runId, 101)).id);
      client = await SseClient.open(url, apiKey);
      t.after(() => client.close());
      await client.waitFor(() => client.messages.length >= 1);
      assert.equal(client.messages[0]?.event, 'ready');
      assert.ok((client.messages[0]?.id ?? Infinity) < lower, 'it starts below the id still in flight');
    } finally {
      release();
      await slow;
    }
    await client.waitFor(() => client.runEvents.filter((e) => e.seq >= 100).length === 2, 5_000, 'both events');
    assert.deepEqual(client.runEvents.filter((e) => e.seq >= 100).map((e) => [e.id, e.seq]), [[lower, 100], [higher, 101]]);
  });

  it('starts past an id that rolled back longer than STREAM_GAP_WAIT_MS ago, sending nothing written before it connected', async (t) => {
    const env = await build(t, 'postgres', { env: { STREAM_POLL_INTERVAL_MS: '20', STREAM_GAP_WAIT_MS: '200' } });
    const url = await env.app.listen({ host: '127.0.0.1', port: 0 });
    const { runId, apiKey } = await queuedRun(env);
    await env.deps.store.db
      .transaction()
      .execute(async (trx) => {
        await insertEvent(trx, runId, 100);
        throw new Error('roll back');
      })
      .catch(() => undefined);
    const after = Number((await insertEvent(env.deps.store.db, runId, 101)).id);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const client = await SseClient.open(url, apiKey);
    t.after(() => client.close());
    await client.waitFor(() => client.messages.length >= 1);
    assert.equal(client.messages[0]?.id, after, 'it starts after the last event');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(client.runEvents, []);
  });
});
