// Two nodes delivering from one PostgreSQL outbox: they share the work, never send one delivery
// twice at once, and together keep an endpoint's concurrency limit.
import assert from 'node:assert/strict';
import pino from 'pino';
import { buildDeps } from '../src/deps.js';
import { packageInfo } from '../src/package-info.js';
import { migrateToLatest } from '../src/store/schema/migrate.js';
import { insertEndpoint } from '../src/store/statements/webhook-statements.js';
import { DeliveryWorker } from '../src/webhooks/delivery-worker.js';
import { newWebhookSecret } from '../src/webhooks/signature.js';
import { testConfig } from './helpers/app.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { createTestDatabase, openTestStore, storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { startReceiver } from './helpers/webhooks.js';

const postgres = (await storeCases()).find((c) => c.kind === 'postgres');
const MESSAGES = 300;
const CONCURRENCY = 6;

describe('Webhook delivery on several nodes (postgres)', { skip: postgres?.skip ?? 'no PostgreSQL' }, () => {
  it('sends every message once, and never more than the endpoint concurrency at once in all, when two nodes deliver from one outbox', async (t) => {
    const database = await createTestDatabase('postgres');
    const stores = [openTestStore(database), openTestStore(database)];
    t.after(async () => {
      await Promise.all(stores.map((s) => s.close()));
      await database.drop();
    });
    const env = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_ENDPOINT_CONCURRENCY: String(CONCURRENCY), WEBHOOK_POLL_INTERVAL_MS: '10', WEBHOOK_BATCH_SIZE: '20' };
    const nodes = stores.map((store) => buildDeps(testConfig(database.url, env), { store, logger: pino({ level: 'silent' }) }));
    const [first] = nodes;
    assert.ok(first);
    await migrateToLatest(first.store);
    const receiver = await startReceiver(t);
    let inFlight = 0;
    let maxInFlight = 0;
    receiver.answer = async () => {
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise((resolve) => setTimeout(resolve, 3));
      inFlight -= 1;
      return { status: 200 };
    };
    const f = await createOrgFixture(first);
    const endpoint = await insertEndpoint(first.store, {
      orgId: f.orgId,
      url: receiver.url,
      description: null,
      eventFilter: '',
      secretEncrypted: first.cipher.encrypt(f.orgId, { secret: newWebhookSecret() }),
      at: Date.now(),
    });
    const now = Date.now();
    await first.store.db
      .insertInto('webhook_deliveries')
      .values(
        Array.from({ length: MESSAGES }, (_, i) => ({
          endpoint_id: endpoint.id,
          message_id: `msg_bulk_${i}`,
          event_type: 'webhook.test',
          run_id: null,
          seq: null,
          payload: JSON.stringify({ type: 'webhook.test', timestamp: new Date(now).toISOString(), data: { i } }),
          status: 'pending' as const,
          attempt_count: 0,
          next_attempt_at: now,
          locked_by: null,
          locked_until: null,
          created_at: now,
          updated_at: now,
        })),
      )
      .execute();
    const workers = nodes.map((deps) => new DeliveryWorker({ ...deps, version: packageInfo().version }));
    t.after(() => Promise.all(workers.map((w) => w.stop())));
    for (const w of workers) w.start();
    await receiver.waitFor((all) => all.length >= MESSAGES, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const ids = receiver.received.map((m) => String(m.headers['webhook-id']));
    assert.equal(ids.length, MESSAGES, 'no message sent twice');
    assert.equal(new Set(ids).size, MESSAGES);
    assert.ok(maxInFlight <= CONCURRENCY, `at most ${CONCURRENCY} in flight across both nodes, saw ${maxInFlight}`);
    const claimedBy = await first.store.db
      .selectFrom('webhook_attempts as a')
      .innerJoin('webhook_deliveries as d', 'd.id', 'a.delivery_id')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(claimedBy.n), MESSAGES, 'one attempt per delivery');
    const pending = await first.store.db.selectFrom('webhook_deliveries').select('id').where('status', '!=', 'succeeded').execute();
    assert.deepEqual(pending, []);
  });
});
