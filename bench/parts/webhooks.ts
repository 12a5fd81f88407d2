// The `webhooks` part: what a subscribed endpoint costs run creation, the time from an event to
// its message's first attempt with free capacity, and deliveries per second of a backlog to one
// endpoint, against a receiver in this process.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { buildDeps } from '../../src/deps.js';
import type { Store } from '../../src/store/engine/store.js';
import { testConfig } from '../../test/helpers/app.js';
import { createOrgFixture } from '../../test/helpers/fixtures.js';
import type { ServiceProcess } from '../../test/helpers/service-process.js';
import type { StoreKind } from '../../test/helpers/stores.js';
import { DELIVERIES, INSTANT_SIMULATOR, ROUNDS, SECONDS, WEBHOOK_RATE } from '../knobs.js';
import { closedLoop, initiationTarget, openLoop, percentile, round, summarize, type LoadSample, type Target } from '../load.js';
import { setUp, startBenchService, waitUntilDialed } from '../services.js';

/** A webhook receiver in this process that answers 204 at once and counts what it got. */
async function startBenchReceiver(): Promise<{ url: string; received: () => number; close(): Promise<void> }> {
  let received = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received++;
      res.statusCode = 204;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received: () => received,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

/** Registers an endpoint of the setup's organization, subscribed to every message type. */
async function subscribeEndpoint(service: ServiceProcess, apiKey: string, url: string): Promise<void> {
  const response = await fetch(`${service.url}/api/v1/public/webhook-endpoints`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({ url }),
  });
  if (response.status !== 201) throw new Error(`registering the bench endpoint failed: ${response.status} ${await response.text()}`);
}

async function waitForDeliveries(store: Store, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const row = await store.db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<number>().as('n')).where('status', '=', 'pending').executeTakeFirstOrThrow();
    if (Number(row.n) === 0) return;
    if (Date.now() > deadline) throw new Error(`${row.n} webhook deliveries still pending after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const WEBHOOK_ENV = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' };

export async function webhookBench(kind: StoreKind) {
  const receiver = await startBenchReceiver();
  try {
    // 1. What subscribing costs run creation: one API-only service, two organizations, one of them
    // with an endpoint (its deliveries are written with each run and left pending: no node here
    // delivers), in alternating rounds.
    process.stdout.write(`\n[${kind}] webhooks: run creation with one subscribed endpoint against none, ${ROUNDS} alternating rounds\n`);
    const creation = await setUp(kind);
    const apiNode = await startBenchService({ ...INSTANT_SIMULATOR, ...WEBHOOK_ENV, DATABASE_URL: creation.url, DIALTONE_ROLE: 'api' });
    let costOfSubscribing;
    try {
      const deps = buildDeps(testConfig(creation.url), { store: creation.store, logger: pino({ level: 'silent' }) });
      const subscribedOrg = await createOrgFixture(deps, 'Subscribed');
      await subscribeEndpoint(apiNode, subscribedOrg.apiKey, receiver.url);
      const plain = initiationTarget(apiNode, creation);
      const subscribed: Target = {
        url: `${apiNode.url}/api/v1/public/agent/${subscribedOrg.agentUuid}`,
        headers: () => ({ 'content-type': 'application/json', 'x-api-key': subscribedOrg.apiKey }),
        body: JSON.stringify({ phone_number: '+12025550123', initial_context: { name: 'Ada' } }),
      };
      await closedLoop(plain, 1);
      await closedLoop(subscribed, 1);
      const none: LoadSample[] = [];
      const one: LoadSample[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        none.push(await closedLoop(plain, SECONDS / ROUNDS));
        one.push(await closedLoop(subscribed, SECONDS / ROUNDS));
      }
      const [noneSummary, oneSummary] = [summarize(none), summarize(one)];
      costOfSubscribing = { without_endpoint: noneSummary, with_endpoint: oneSummary, throughput_ratio: round(oneSummary.initiations_per_second / noneSummary.initiations_per_second, 2) };
    } finally {
      apiNode.child.kill('SIGTERM');
      await apiNode.exited;
      await creation.drop();
    }

    // 2. Event to first attempt, with free capacity: calls at a paced rate (a fraction of what one
    // endpoint takes, measured next) on a node that delivers; each delivery's first attempt against
    // the event it reports (both on the service's clock). A run's messages go out one after the
    // other (per-run order), so its last waits for the ones before it.
    process.stdout.write(`[${kind}] webhooks: event to first attempt, ${WEBHOOK_RATE} calls/s for ${SECONDS} s, each reported to one endpoint\n`);
    const paced = await setUp(kind);
    const node = await startBenchService({ ...INSTANT_SIMULATOR, ...WEBHOOK_ENV, DATABASE_URL: paced.url });
    let firstAttempt;
    try {
      await subscribeEndpoint(node, paced.fixture.apiKey, receiver.url);
      await openLoop(initiationTarget(node, paced), WEBHOOK_RATE, SECONDS);
      await waitUntilDialed(paced.store, 60_000);
      await waitForDeliveries(paced.store, 120_000);
      const rows = await paced.store.db
        .selectFrom('webhook_deliveries as d')
        .innerJoin('webhook_attempts as a', 'a.delivery_id', 'd.id')
        .select(['d.id', 'd.created_at', (eb) => eb.fn.min('a.at').as('first')])
        .groupBy(['d.id', 'd.created_at'])
        .execute();
      const delays = rows.map((r) => Number(r.first) - r.created_at).sort((a, b) => a - b);
      firstAttempt = { calls_per_second: WEBHOOK_RATE, messages: delays.length, p50_ms: percentile(delays, 50), p99_ms: percentile(delays, 99), max_ms: delays[delays.length - 1] };
    } finally {
      node.child.kill('SIGTERM');
      await node.exited;
      await paced.drop();
    }

    // 3. Delivery throughput: a backlog of pending messages to one endpoint (its default
    // concurrency, WEBHOOK_ENDPOINT_CONCURRENCY) drained by one dispatcher node.
    process.stdout.write(`[${kind}] webhooks: delivering ${DELIVERIES} pending messages to one endpoint\n`);
    const drain = await setUp(kind);
    let throughput;
    try {
      const deps = buildDeps(testConfig(drain.url), { store: drain.store, logger: pino({ level: 'silent' }) });
      const now = Date.now();
      const endpoint = await drain.store.db
        .insertInto('webhook_endpoints')
        .values({
          org_id: drain.fixture.orgId, url: receiver.url, description: null, event_filter: '', enabled: 1, disabled_reason: null,
          secret_encrypted: deps.cipher.encrypt(drain.fixture.orgId, { secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/pMSuqlFkFI=' }),
          previous_secret_encrypted: null, previous_secret_expires_at: null, failing_since: null, created_at: now, updated_at: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      for (let offset = 0; offset < DELIVERIES; offset += 500) {
        const rows = Array.from({ length: Math.min(500, DELIVERIES - offset) }, (_, i) => ({
          endpoint_id: endpoint.id, message_id: `msg_bench_${offset + i}`, event_type: 'webhook.test', run_id: null, seq: null,
          payload: JSON.stringify({ type: 'webhook.test', timestamp: new Date(now).toISOString(), data: { endpoint_id: endpoint.id } }),
          status: 'pending' as const, attempt_count: 0, next_attempt_at: now, locked_by: null, locked_until: null, created_at: now, updated_at: now,
        }));
        await drain.store.db.insertInto('webhook_deliveries').values(rows).execute();
      }
      const before = receiver.received();
      const dispatcherNode = await startBenchService({ ...INSTANT_SIMULATOR, ...WEBHOOK_ENV, DATABASE_URL: drain.url, DIALTONE_ROLE: 'dispatcher' });
      const started = Date.now();
      try {
        await waitForDeliveries(drain.store, 600_000);
      } finally {
        dispatcherNode.child.kill('SIGTERM');
        await dispatcherNode.exited;
      }
      const seconds = (Date.now() - started) / 1000;
      throughput = { deliveries: DELIVERIES, received: receiver.received() - before, seconds: round(seconds), deliveries_per_second: round(DELIVERIES / seconds, 1), endpoint_concurrency: deps.config.WEBHOOK_ENDPOINT_CONCURRENCY };
    } finally {
      await drain.drop();
    }
    return { creation_with_one_endpoint: costOfSubscribing, event_to_first_attempt: firstAttempt, delivery_throughput: throughput };
  } finally {
    await receiver.close();
  }
}
