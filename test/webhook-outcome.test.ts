// What an attempt's result makes of its delivery and endpoint, first as a pure function, then
// through the delivery worker driven by a fake clock (no timers, no sleeps).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { packageInfo } from '../src/package-info.js';
import { insertEndpoint, selectEndpoint } from '../src/store/statements/webhook-statements.js';
import { attemptOutcome, type OutcomeInput } from '../src/webhooks/attempt-outcome.js';
import { DeliveryWorker } from '../src/webhooks/delivery-worker.js';
import { sendTestMessage } from '../src/webhooks/endpoints.js';
import { newWebhookSecret } from '../src/webhooks/signature.js';
import { build } from './helpers/app.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { startReceiver } from './helpers/webhooks.js';

const DAY = 86_400_000;
const base: OutcomeInput = {
  result: { httpStatus: 500 },
  attemptsBefore: 0,
  schedule: [0, 5_000, 300_000],
  now: 1_000_000,
  failingSince: null,
  disableAfterMs: 5 * DAY,
  jitter: (ms) => ms,
};

describe('attemptOutcome', () => {
  it('marks a 2xx succeeded and ends the endpoint\'s failing streak', () => {
    for (const httpStatus of [200, 201, 204, 299]) {
      assert.deepEqual(attemptOutcome({ ...base, result: { httpStatus }, failingSince: 5 }), { status: 'succeeded', nextAttemptAt: null, endpoint: { failing_since: null } });
    }
  });

  it('schedules the next attempt after the delay the schedule gives for it, with the jitter applied', () => {
    const first = attemptOutcome({ ...base, jitter: (ms) => ms * 1.1 });
    assert.equal(first.status, 'pending');
    assert.equal(first.nextAttemptAt, base.now + 5_500);
    assert.deepEqual(first.endpoint, { failing_since: base.now });
    const second = attemptOutcome({ ...base, attemptsBefore: 1, failingSince: 10 });
    assert.equal(second.nextAttemptAt, base.now + 300_000);
    assert.deepEqual(second.endpoint, { failing_since: 10 }, 'a streak already running keeps its start');
  });

  it('fails the delivery for good after the last attempt of the schedule', () => {
    assert.deepEqual(attemptOutcome({ ...base, attemptsBefore: 2 }), { status: 'failed', nextAttemptAt: null, endpoint: { failing_since: base.now } });
  });

  it('treats timeouts, connection errors, 3xx and 4xx other than 410 like a 5xx: retried', () => {
    for (const httpStatus of [null, 301, 400, 404, 429]) assert.equal(attemptOutcome({ ...base, result: { httpStatus } }).status, 'pending', String(httpStatus));
  });

  it('disables the endpoint on 410 Gone and fails the delivery without retrying', () => {
    const gone = attemptOutcome({ ...base, result: { httpStatus: 410 } });
    assert.equal(gone.status, 'failed');
    assert.equal(gone.disabled, 'gone');
    assert.equal(gone.endpoint.enabled, 0);
  });

  it('disables an endpoint whose failures have lasted WEBHOOK_DISABLE_AFTER_MS, and not a moment before', () => {
    const justBefore = attemptOutcome({ ...base, failingSince: base.now - 5 * DAY + 1 });
    assert.equal(justBefore.status, 'pending');
    const at = attemptOutcome({ ...base, failingSince: base.now - 5 * DAY });
    assert.equal(at.status, 'failed');
    assert.equal(at.disabled, 'failing');
    assert.equal(at.endpoint.disabled_reason, 'failing');
  });
});

describe('The delivery worker, on a fake clock', () => {
  it('retries on the schedule as the clock reaches each attempt, and disables an endpoint that has failed for five days', async (t) => {
    let now = Date.UTC(2026, 0, 5, 12);
    const clock = { now: () => now };
    const env = await build(t, 'sqlite', { clock, env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_SCHEDULE: '0,1m,1h,1d,1d,1d,1d,1d,1d,1d', WEBHOOK_DISABLE_AFTER_MS: String(5 * DAY) } });
    const receiver = await startReceiver(t);
    receiver.answer = () => ({ status: 503 });
    const f = await createOrgFixture(env.deps);
    const endpoint = await insertEndpoint(env.deps.store, {
      orgId: f.orgId,
      url: receiver.url,
      description: null,
      eventFilter: '',
      secretEncrypted: env.deps.cipher.encrypt(f.orgId, { secret: newWebhookSecret() }),
      at: now,
    });
    const worker = new DeliveryWorker({ ...env.deps, version: packageInfo().version });
    const ctx = { store: env.deps.store, cipher: env.deps.cipher, clock, config: env.deps.config, wake: () => undefined };
    await sendTestMessage(ctx, f.orgId, endpoint.id);

    assert.equal(await worker.deliverDue(), 1, 'the first attempt is due at once');
    assert.equal(await worker.deliverDue(), 0, 'the second is not due before its delay');
    const delivery = await env.deps.store.db.selectFrom('webhook_deliveries').selectAll().executeTakeFirstOrThrow();
    // ±10 % jitter around one minute.
    assert.ok(delivery.next_attempt_at !== null && delivery.next_attempt_at >= now + 54_000 && delivery.next_attempt_at <= now + 66_000, String(delivery.next_attempt_at));
    now = delivery.next_attempt_at;
    assert.equal(await worker.deliverDue(), 1, 'due once the clock reaches it');
    assert.equal(receiver.received.length, 2);

    // Days of failures (the schedule outlasts five days whatever the jitter): the endpoint is
    // disabled at the first failure five days or more after the first one.
    const firstFailure = Date.UTC(2026, 0, 5, 12);
    for (let attempt = 0; attempt < 12; attempt++) {
      const row = await env.deps.store.db.selectFrom('webhook_deliveries').select(['status', 'next_attempt_at']).executeTakeFirstOrThrow();
      if (row.status !== 'pending' || row.next_attempt_at === null) break;
      now = row.next_attempt_at;
      assert.equal(await worker.deliverDue(), 1);
    }
    const disabled = await selectEndpoint(env.deps.store, endpoint.id);
    assert.equal(disabled?.enabled, 0);
    assert.equal(disabled?.disabled_reason, 'failing');
    assert.equal(disabled?.failing_since, firstFailure);
    assert.ok(now - firstFailure >= 5 * DAY);
    const final = await env.deps.store.db.selectFrom('webhook_deliveries').select('status').executeTakeFirstOrThrow();
    assert.equal(final.status, 'failed');
  });
});

describe('The delivery worker, sharing a batch between endpoints', () => {
  it("claims for every endpoint with due deliveries, up to its concurrency, so one endpoint's backlog does not hold up another's", async (t) => {
    const env = await build(t, 'sqlite', { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_ENDPOINT_CONCURRENCY: '5', WEBHOOK_BATCH_SIZE: '20' } });
    const slow = await startReceiver(t);
    slow.answer = async () => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return { status: 200 };
    };
    const quick = await startReceiver(t);
    const f = await createOrgFixture(env.deps);
    const endpointFor = (url: string) =>
      insertEndpoint(env.deps.store, { orgId: f.orgId, url, description: null, eventFilter: '', secretEncrypted: env.deps.cipher.encrypt(f.orgId, { secret: newWebhookSecret() }), at: Date.now() });
    const [backlogged, other] = [await endpointFor(slow.url), await endpointFor(quick.url)];
    const ctx = { store: env.deps.store, cipher: env.deps.cipher, clock: env.deps.clock, config: env.deps.config, wake: () => undefined };
    for (let i = 0; i < 100; i++) await sendTestMessage(ctx, f.orgId, backlogged.id);
    await sendTestMessage(ctx, f.orgId, other.id);
    const worker = new DeliveryWorker({ ...env.deps, version: packageInfo().version });
    assert.equal(await worker.deliverDue(), 6, 'five of the backlog (its concurrency) and the other endpoint\'s one');
    assert.equal(quick.received.length, 1);
    assert.equal(slow.received.length, 5);
  });
});
