// GET /api/v1/public/stream: the organization's run events, webhook delivery attempts and campaign
// state changes as Server-Sent Events, resumable by event id, with a heartbeat, a bounded buffer
// per connection, and events from other nodes.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import pino from 'pino';
import { buildApp } from '../src/app.js';
import { buildDeps } from '../src/deps.js';
import { packageInfo } from '../src/package-info.js';
import { DeliveryWorker } from '../src/webhooks/delivery-worker.js';
import { build, postJson, testConfig, type TestEnv } from './helpers/app.js';
import { buildWithDispatcher } from './helpers/dispatch.js';
import { act, addContacts, createCampaign } from './helpers/campaigns.js';
import { runCampaignTick } from '../src/campaigns/scheduler.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { request } from 'node:http';
import { createApiKey } from '../src/auth/api-keys.js';
import { Hold, holdingStore } from './helpers/holds.js';
import { SseClient } from './helpers/sse-client.js';
import { createTestDatabase, openTestStore, storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { Receiver, startReceiver, WEBHOOK_TEST_ENV } from './helpers/webhooks.js';

const FAST_STREAM = { STREAM_POLL_INTERVAL_MS: '20', MAX_QUEUED_RUNS_PER_ORG: '100000' };

async function listen(env: Pick<TestEnv, 'app'>): Promise<string> {
  return env.app.listen({ host: '127.0.0.1', port: 0 });
}

async function call(env: Pick<TestEnv, 'app'>, f: OrgFixture): Promise<number> {
  const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123' }, { key: f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return (response.json() as { workflow_run_id: number }).workflow_run_id;
}

async function cancel(env: Pick<TestEnv, 'app'>, f: OrgFixture, runId: number): Promise<void> {
  const response = await env.app.inject({ method: 'POST', url: `/api/v1/public/workflow-runs/${runId}/cancel`, headers: { 'x-api-key': f.apiKey } });
  assert.equal(response.statusCode, 200, response.body);
}

/** The organization's event ids in the store, in order. */
async function storedEventIds(env: Pick<TestEnv, 'deps'>, orgId: number, afterId = 0): Promise<number[]> {
  const rows = await env.deps.store.db
    .selectFrom('run_events as e')
    .innerJoin('workflow_runs as r', 'r.id', 'e.run_id')
    .select('e.id')
    .where('r.org_id', '=', orgId)
    .where('e.id', '>', afterId)
    .orderBy('e.id')
    .execute();
  return rows.map((r) => Number(r.id));
}

/** The organization's stream ids in the store, of every kind (run events, delivery attempts, campaign changes), in order. */
async function storedStreamIds(env: Pick<TestEnv, 'deps'>, orgId: number, afterId = 0): Promise<number[]> {
  const deliveries = await env.deps.store.db.selectFrom('webhook_delivery_events').select('id').where('org_id', '=', orgId).where('id', '>', afterId).execute();
  const campaigns = await env.deps.store.db.selectFrom('campaign_events').select('id').where('org_id', '=', orgId).where('id', '>', afterId).execute();
  return [...(await storedEventIds(env, orgId, afterId)), ...deliveries.map((r) => Number(r.id)), ...campaigns.map((r) => Number(r.id))].sort((a, b) => a - b);
}

async function subscribeEndpoint(env: Pick<TestEnv, 'app'>, f: OrgFixture, url: string): Promise<{ id: number; secret: string }> {
  const response = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url }, { key: f.apiKey });
  assert.equal(response.statusCode, 201, response.body);
  return response.json() as { id: number; secret: string };
}

/** Waits (without a fixed sleep) until `done` holds. */
async function until(done: () => Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The TCP connections the node's server holds open. */
function openSockets(env: Pick<TestEnv, 'app'>): Promise<number> {
  return new Promise((resolve, reject) => env.app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))));
}

/** A metric's value (summed over the series matching `labels`), as the node would report it. */
async function metricValue(env: Pick<TestEnv, 'deps'>, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = env.deps.metrics.registry.getSingleMetric(name);
  assert.ok(metric, `${name} is registered`);
  const { values } = await metric.get();
  return values.filter((v) => Object.entries(labels).every(([label, value]) => v.labels[label] === value)).reduce((sum, v) => sum + v.value, 0);
}

function open(t: TestContext, url: string, key: string, options: Parameters<typeof SseClient.open>[2] = {}): Promise<SseClient> {
  return SseClient.open(url, key, options).then((client) => {
    t.after(() => client.close());
    return client;
  });
}

for (const store of await storeCases()) {
  describe(`GET /api/v1/public/stream (${store.kind})`, { skip: store.skip }, () => {
    it('starts with a ready message carrying its starting id, then sends each of the organization\'s run events as it is written, never another organization\'s', async (t) => {
      const env = await build(t, store.kind, { env: FAST_STREAM });
      const url = await listen(env);
      const f = await createOrgFixture(env.deps, 'Acme');
      const other = await createOrgFixture(env.deps, 'Other');
      await call(env, f); // before the stream: not sent
      const client = await open(t, url, f.apiKey);
      assert.equal(client.status, 200);
      assert.match(String(client.response.headers['content-type']), /^text\/event-stream/);
      assert.equal(client.response.headers['cache-control'], 'no-store');
      await client.waitFor(() => client.messages.length >= 1);
      const ready = client.messages[0];
      assert.equal(ready?.event, 'ready');
      const [startId] = await storedEventIds(env, f.orgId);
      assert.equal(ready?.id, startId, 'it starts after the last event written before it');

      await call(env, other);
      const runId = await call(env, f);
      await cancel(env, f, runId);
      await client.waitFor(() => client.runEvents.length >= 2);
      assert.deepEqual(client.runEvents.map((e) => [e.run_id, e.seq, e.type]), [[runId, 1, 'queued'], [runId, 2, 'canceled']]);
      assert.match(client.runEvents[0]?.run_name ?? '', /^WR-API-\d+$/);
      const ids = client.messages.filter((m) => m.event === 'run').map((m) => m.id);
      assert.deepEqual(ids, await storedEventIds(env, f.orgId, startId), 'each message\'s id is its event\'s id');
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(client.runEvents.length, 2, 'nothing of the other organization\'s');
    });

    it('resumes after Last-Event-ID (header or last_event_id query) with every event after it, none missing or repeated, then the live ones', async (t) => {
      const env = await build(t, store.kind, { env: FAST_STREAM });
      const url = await listen(env);
      const f = await createOrgFixture(env.deps, 'Acme');
      for (let i = 0; i < 6; i++) await cancel(env, f, await call(env, f));
      const all = await storedEventIds(env, f.orgId);
      assert.equal(all.length, 12);
      const from = all[4] as number;
      for (const options of [{ lastEventId: from }, { query: `?last_event_id=${from}` }]) {
        const client = await open(t, url, f.apiKey, options);
        await client.waitFor(() => client.runEvents.length >= 7, 5_000, 'the backlog');
        assert.equal(client.messages[0]?.event, 'ready');
        assert.equal(client.messages[0]?.id, from);
        const live = await call(env, f);
        await client.waitFor(() => client.runEvents.some((e) => e.run_id === live), 5_000, 'the live event');
        const now = await storedEventIds(env, f.orgId, from);
        assert.deepEqual(client.messages.filter((m) => m.event === 'run').map((m) => m.id), now, 'every event after the cursor, in order, once');
        client.close();
      }
    });

    it('answers a Last-Event-ID above the highest event id (a database restored to an earlier point) with a reset message and the stream from now, so the events written next reach it', async (t) => {
      const env = await build(t, store.kind, { env: FAST_STREAM });
      const url = await listen(env);
      const f = await createOrgFixture(env.deps);
      await cancel(env, f, await call(env, f));
      const highest = (await storedEventIds(env, f.orgId)).at(-1) as number;
      const remembered = highest + 1000;
      const client = await open(t, url, f.apiKey, { lastEventId: remembered });
      assert.equal(client.status, 200);
      await client.waitFor(() => client.messages.length >= 2);
      assert.deepEqual(client.messages.slice(0, 2), [
        { id: highest, event: 'reset', data: { last_event_id: highest, requested_last_event_id: remembered, highest_event_id: highest } },
        { id: highest, event: 'ready', data: { last_event_id: highest } },
      ]);
      const runId = await call(env, f);
      await client.waitFor(() => client.runEvents.some((e) => e.run_id === runId), 5_000, 'the event written after the reset');
      assert.deepEqual(client.messages.slice(2).map((m) => m.id), await storedEventIds(env, f.orgId, highest), 'every event after the reset\'s id, none skipped');

      const ahead = await open(t, url, f.apiKey, { lastEventId: highest });
      await ahead.waitFor(() => ahead.messages.length >= 1);
      assert.equal(ahead.messages[0]?.event, 'ready', 'an id that exists resumes as before, with no reset');
    });

    it('sends a heartbeat comment every STREAM_HEARTBEAT_MS while nothing happens', async (t) => {
      const env = await build(t, store.kind, { env: { ...FAST_STREAM, STREAM_HEARTBEAT_MS: '40' } });
      const url = await listen(env);
      const f = await createOrgFixture(env.deps);
      const client = await open(t, url, f.apiKey);
      await client.waitFor(() => client.comments.filter((c) => c === 'heartbeat').length >= 3, 2_000, 'three heartbeats');
      assert.equal(client.runEvents.length, 0);
    });

    it('refuses a malformed Last-Event-ID and a missing key with problem+json, before streaming anything', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const bad = await env.app.inject({ method: 'GET', url: '/api/v1/public/stream', headers: { 'x-api-key': f.apiKey, 'last-event-id': 'yesterday' } });
      assert.equal(bad.statusCode, 422);
      assert.match(String(bad.headers['content-type']), /^application\/problem\+json/);
      const keyless = await env.app.inject({ method: 'GET', url: '/api/v1/public/stream' });
      assert.equal(keyless.statusCode, 401);
    });

    it('answers 503 with Retry-After past STREAM_MAX_CONNECTIONS streams on the node, logged as a warning without a stack, and serves again once one closes', async (t) => {
      const lines: string[] = [];
      const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
      const env = await build(t, store.kind, { env: { ...FAST_STREAM, STREAM_MAX_CONNECTIONS: '1' }, logger });
      const url = await listen(env);
      const f = await createOrgFixture(env.deps);
      const first = await open(t, url, f.apiKey);
      await first.waitFor(() => first.messages.length >= 1);
      const refused = await fetch(`${url}/api/v1/public/stream`, { headers: { 'x-api-key': f.apiKey } });
      assert.equal(refused.status, 503);
      assert.match(refused.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.equal(refused.headers.get('retry-after'), '5');
      await refused.text();
      const entries = lines.map((line) => JSON.parse(line) as { level: number; msg: string; refused?: string; err?: unknown });
      assert.deepEqual(entries.filter((e) => e.msg.startsWith('event stream refused')).map((e) => [e.level, e.refused, e.err]), [[40, 'node', undefined]], 'a warning, with no error or stack');
      assert.ok(!entries.some((e) => e.level >= 50), 'nothing logged as an error');
      first.close();
      await first.ended;
      const deadline = Date.now() + 5_000;
      for (;;) {
        const again = await open(t, url, f.apiKey);
        if (again.status === 200) break;
        again.close();
        assert.ok(Date.now() < deadline, 'a stream is served again');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    });

    it('gives its slot back when the client leaves at any asynchronous step of the request (authentication, rate limit, the feed\'s start, the backlog read, waiting for it to be durable): the node\'s open streams return to zero and the next stream is served', async (t) => {
      type Step = { name: string; resume?: boolean; arm(hold: Hold, env: TestEnv): void };
      let armed: { sql: RegExp; hold: Hold } | undefined;
      let durableHold: Hold | undefined;
      const steps: Step[] = [
        { name: 'authenticating the key', arm: (hold) => (armed = { sql: /from "api_keys"/, hold }) },
        { name: 'the rate limit', arm: (hold, env) => (env.deps.rateLimits.check = hold.around(env.deps.rateLimits.check.bind(env.deps.rateLimits))) },
        { name: 'the feed\'s start', arm: (hold) => (armed = { sql: /as "last" from "run_events"/, hold }) },
        { name: 'the backlog read', resume: true, arm: (hold) => (armed = { sql: /from "campaign_events" where .*"org_id" =/, hold }) },
        { name: 'waiting for the backlog to be durable', resume: true, arm: (hold) => (durableHold = hold) },
      ];
      for (const step of steps) {
        armed = undefined;
        durableHold = undefined;
        // A node of its own per step, so that nothing a request left running can meet the next step's hold.
        const env = await build(t, store.kind, {
          env: { ...FAST_STREAM, STREAM_MAX_CONNECTIONS: '1' },
          wrapStore: (real) => holdingStore(real, () => armed, () => durableHold),
        });
        const url = await listen(env);
        const f = await createOrgFixture(env.deps);
        await call(env, f); // a backlog for the streams that resume from 0
        const hold = new Hold(step.name);
        step.arm(hold, env);
        const headers: Record<string, string> = { 'x-api-key': f.apiKey };
        if (step.resume) headers['last-event-id'] = '0';
        const leaving = request(`${url}/api/v1/public/stream`, { headers });
        leaving.on('error', () => undefined);
        leaving.end();
        await hold.arrived;
        leaving.destroy();
        await until(async () => (await openSockets(env)) === 0, `the node to see the client leave during ${step.name}`);
        hold.release();
        await until(async () => (await metricValue(env, 'dialtone_stream_requests_total', { outcome: 'served' })) === 1, `the request held at ${step.name} to be given its slot`);
        await until(async () => (await metricValue(env, 'dialtone_stream_connections')) === 0, `the slot taken after ${step.name} to be given back`);
        const next = await open(t, url, f.apiKey);
        assert.equal(next.status, 200, `the node's one slot is free after ${step.name}`);
        await next.waitFor(() => next.messages[0]?.event === 'ready');
      }
    });

    it('caps one API key\'s streams (STREAM_MAX_CONNECTIONS_PER_KEY) and one organization\'s (STREAM_MAX_CONNECTIONS_PER_ORG) with 429 too_many_streams and Retry-After, logged as a warning without a stack, while other organizations are served', async (t) => {
      const lines: string[] = [];
      const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
      const env = await build(t, store.kind, { env: { ...FAST_STREAM, STREAM_MAX_CONNECTIONS_PER_KEY: '2', STREAM_MAX_CONNECTIONS_PER_ORG: '3' }, logger });
      const url = await listen(env);
      const f = await createOrgFixture(env.deps, 'Acme');
      const other = await createOrgFixture(env.deps, 'Other');
      const secondKey = (await createApiKey(env.deps.store, f.orgId, 'second', Date.now())).key;
      const refusal = async (key: string) => {
        const response = await fetch(`${url}/api/v1/public/stream`, { headers: { 'x-api-key': key } });
        assert.equal(response.status, 429);
        assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json/);
        assert.equal(response.headers.get('retry-after'), '5');
        return (await response.json()) as { code: string; scope: string; max_streams: number; detail: string };
      };
      const first = await open(t, url, f.apiKey);
      await open(t, url, f.apiKey);
      const byKey = await refusal(f.apiKey);
      assert.deepEqual([byKey.code, byKey.scope, byKey.max_streams], ['too_many_streams', 'key', 2]);
      assert.match(byKey.detail, /STREAM_MAX_CONNECTIONS_PER_KEY=2/);
      assert.equal((await open(t, url, secondKey)).status, 200, 'another key of the organization, within the organization\'s cap');
      const byOrganization = await refusal(secondKey);
      assert.deepEqual([byOrganization.code, byOrganization.scope, byOrganization.max_streams], ['too_many_streams', 'organization', 3]);
      assert.equal((await open(t, url, other.apiKey)).status, 200, 'another organization is served');

      const refusals = lines.map((line) => JSON.parse(line) as { level: number; msg: string; err?: unknown; refused?: string }).filter((entry) => entry.msg.startsWith('event stream refused'));
      assert.deepEqual(refusals.map((entry) => [entry.level, entry.refused, entry.err]), [[40, 'key', undefined], [40, 'organization', undefined]], 'warnings, with no error or stack');
      assert.ok(!lines.some((line) => JSON.parse(line).level >= 50), 'nothing logged as an error');

      first.close();
      await until(async () => (await metricValue(env, 'dialtone_stream_connections')) === 3, 'the closed stream to be given back');
      assert.equal((await open(t, url, f.apiKey)).status, 200, 'the key is served again once one of its streams closes');
    });

    it('disconnects a reader that leaves more than STREAM_MAX_BUFFER_BYTES unread, and that reader loses nothing by resuming from its last id', async (t) => {
      const lines: string[] = [];
      const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
      const env = await build(t, store.kind, { env: { ...FAST_STREAM, STREAM_MAX_BUFFER_BYTES: '4096' }, logger });
      const url = await listen(env);
      const f = await createOrgFixture(env.deps);
      const runId = await call(env, f);
      const client = await open(t, url, f.apiKey);
      await client.waitFor(() => client.messages.length >= 1);
      client.pause();
      // Far more than the kernel's socket buffers hold: events of 2 KiB each, 16 MiB in all.
      const note = 'x'.repeat(2048);
      for (let batch = 0; batch < 16; batch++) {
        const rows = Array.from({ length: 512 }, (_, i) => ({ run_id: runId, seq: 100 + batch * 512 + i, type: 'note', at: Date.now(), data: JSON.stringify({ note }) }));
        await env.deps.store.db.insertInto('run_events').values(rows).execute();
      }
      const deadline = Date.now() + 20_000;
      while (!lines.some((l) => l.includes('disconnected a reader that fell behind'))) {
        assert.ok(Date.now() < deadline, 'the slow reader is disconnected');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      client.resume();
      await client.ended;
      const got = client.messages.filter((m) => m.event === 'run').map((m) => m.id as number);
      const all = await storedEventIds(env, f.orgId, client.messages[0]?.id);
      assert.ok(got.length < all.length, `the stream was cut short (${got.length} of ${all.length})`);
      assert.deepEqual(got, all.slice(0, got.length), 'what it got came in order without a gap');
      const resumed = await open(t, url, f.apiKey, { lastEventId: client.lastId as number });
      await resumed.waitFor(() => resumed.runEvents.length >= all.length - got.length, 20_000, 'the rest');
      assert.deepEqual([...got, ...resumed.messages.filter((m) => m.event === 'run').map((m) => m.id)], all, 'with the resumed stream, every event exactly once');
    });
  });
}

for (const store of await storeCases()) {
  describe(`Webhook delivery attempts on GET /api/v1/public/stream (${store.kind})`, { skip: store.skip }, () => {
    // The dispatcher stays stopped (runs stay queued) and the test sends the outbox itself.
    const serve = (t: TestContext) => buildWithDispatcher(t, store.kind, { env: { ...FAST_STREAM, ...WEBHOOK_TEST_ENV, WEBHOOK_RETRY_SCHEDULE: '0,0,0' }, start: false });

    it('sends each recorded attempt of the organization\'s deliveries as a webhook.delivery message (a failure to be retried, then the success), never another organization\'s, and never the endpoint\'s URL or secret or the payload', async (t) => {
      const env = await serve(t);
      const url = await listen(env);
      const f = await createOrgFixture(env.deps, 'Acme');
      const other = await createOrgFixture(env.deps, 'Other');
      const receiver = await startReceiver(t);
      receiver.answer = (_message, index) => ({ status: index === 0 ? 503 : 204 });
      const otherReceiver = await startReceiver(t);
      const endpoint = await subscribeEndpoint(env, f, receiver.url);
      const otherEndpoint = await subscribeEndpoint(env, other, otherReceiver.url);
      const client = await open(t, url, f.apiKey);
      await client.waitFor(() => client.messages.length >= 1);
      const runId = await call(env, f);
      await call(env, other);
      assert.equal(await env.webhooks.deliverDue(), 2, 'one delivery per organization');
      assert.equal(await env.webhooks.deliverDue(), 1, 'the failed one again');
      await client.waitFor(() => client.deliveryEvents.length >= 2, 5_000, 'both attempts');
      const [failed, succeeded] = client.deliveryEvents;
      assert.equal(failed?.delivery_id, succeeded?.delivery_id);
      assert.deepEqual(
        client.deliveryEvents.map(({ endpoint_id, message_id, event_type, run_id, attempt, status, http_status, endpoint_disabled }) => ({ endpoint_id, message_id, event_type, run_id, attempt, status, http_status, endpoint_disabled })),
        [
          { endpoint_id: endpoint.id, message_id: `msg_run${runId}_1`, event_type: 'run.queued', run_id: runId, attempt: 1, status: 'pending', http_status: 503, endpoint_disabled: null },
          { endpoint_id: endpoint.id, message_id: `msg_run${runId}_1`, event_type: 'run.queued', run_id: runId, attempt: 2, status: 'succeeded', http_status: 204, endpoint_disabled: null },
        ],
      );
      assert.match(failed?.next_attempt_at ?? '', /^\d{4}-\d\d-\d\dT/, 'the failure says when it is tried again');
      assert.equal(succeeded?.next_attempt_at, null);
      const ids = client.messages.slice(1).map((m) => m.id);
      assert.deepEqual(ids, await storedStreamIds(env, f.orgId, client.messages[0]?.id), 'the run event and both attempts, in id order, each id its row\'s');
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(client.deliveryEvents.length, 2, 'nothing of the other organization\'s');
      assert.ok(!client.deliveryEvents.some((d) => d.endpoint_id === otherEndpoint.id));
      const wire = JSON.stringify(client.messages);
      for (const secret of [endpoint.secret, receiver.url, '"payload"', '"run":{']) assert.ok(!wire.includes(secret), `the stream does not carry ${secret}`);
    });

    it('reports the attempt that disabled the endpoint (410 Gone) as failed for good, with endpoint_disabled gone', async (t) => {
      const env = await serve(t);
      const url = await listen(env);
      const f = await createOrgFixture(env.deps);
      const receiver = await startReceiver(t);
      receiver.answer = () => ({ status: 410 });
      const endpoint = await subscribeEndpoint(env, f, receiver.url);
      const client = await open(t, url, f.apiKey);
      await client.waitFor(() => client.messages.length >= 1);
      await call(env, f);
      assert.equal(await env.webhooks.deliverDue(), 1);
      await client.waitFor(() => client.deliveryEvents.length >= 1, 5_000, 'the attempt');
      assert.deepEqual(
        client.deliveryEvents.map(({ endpoint_id, attempt, status, http_status, next_attempt_at, endpoint_disabled }) => ({ endpoint_id, attempt, status, http_status, next_attempt_at, endpoint_disabled })),
        [{ endpoint_id: endpoint.id, attempt: 1, status: 'failed', http_status: 410, next_attempt_at: null, endpoint_disabled: 'gone' }],
      );
    });

    it('numbers a webhook.test attempt recorded before any run event below the run events written after it, and sends it with no run', async (t) => {
      const env = await serve(t);
      const url = await listen(env);
      const f = await createOrgFixture(env.deps);
      const receiver = await startReceiver(t);
      const endpoint = await subscribeEndpoint(env, f, receiver.url);
      const client = await open(t, url, f.apiKey);
      await client.waitFor(() => client.messages.length >= 1);
      const sent = await postJson(env.app, `/api/v1/public/webhook-endpoints/${endpoint.id}/test`, {}, { key: f.apiKey });
      assert.equal(sent.statusCode, 202, sent.body);
      assert.equal(await env.webhooks.deliverDue(), 1);
      const runId = await call(env, f);
      await client.waitFor(() => client.runEvents.length >= 1, 5_000, 'the run event');
      assert.deepEqual(client.messages.slice(1).map((m) => m.event), ['webhook.delivery', 'run']);
      assert.deepEqual(client.deliveryEvents.map((d) => [d.event_type, d.run_id, d.status]), [['webhook.test', null, 'succeeded']]);
      assert.equal(client.runEvents[0]?.run_id, runId);
      assert.ok((client.deliveryEvents[0]?.id ?? Infinity) < (client.runEvents[0]?.id ?? 0), 'the attempt first, in id order');
    });

    it('resumes after Last-Event-ID with every run event and delivery attempt after it, of both kinds and in one order, none missing or repeated, then the live ones', async (t) => {
      const env = await serve(t);
      const url = await listen(env);
      const f = await createOrgFixture(env.deps, 'Acme');
      const other = await createOrgFixture(env.deps, 'Other');
      const receiver: Receiver = await startReceiver(t);
      await subscribeEndpoint(env, f, receiver.url);
      await subscribeEndpoint(env, other, receiver.url);
      // Run events and attempts of both organizations, interleaved.
      for (let i = 0; i < 4; i++) {
        const runId = await call(env, f);
        await call(env, other);
        await env.webhooks.deliverDue();
        await cancel(env, f, runId);
        await env.webhooks.deliverDue();
      }
      const all = await storedStreamIds(env, f.orgId);
      assert.equal(all.length, 16, 'eight run events and eight attempts');
      assert.equal(new Set(all).size, all.length, 'run events and attempts never share an id');
      const from = all[5] as number;
      const client = await open(t, url, f.apiKey, { lastEventId: from });
      await client.waitFor(() => client.messages.length >= 1 + 10, 5_000, 'the backlog');
      const live = await call(env, f);
      await env.webhooks.deliverDue();
      await client.waitFor(() => client.deliveryEvents.some((d) => d.run_id === live), 5_000, 'the live attempt');
      const received = client.messages.filter((m) => m.event === 'run' || m.event === 'webhook.delivery');
      assert.deepEqual(received.map((m) => m.id), await storedStreamIds(env, f.orgId, from), 'every event of both kinds after the cursor, in order, once');
      assert.ok(received.some((m) => m.event === 'run') && received.some((m) => m.event === 'webhook.delivery'));
    });
  });
}

for (const store of await storeCases()) {
  describe(`Campaign state changes on GET /api/v1/public/stream (${store.kind})`, { skip: store.skip }, () => {
    // The dispatcher stays stopped (attempts stay queued until a pause cancels them); the test ticks the scheduler itself.
    const serve = (t: TestContext) => buildWithDispatcher(t, store.kind, { env: FAST_STREAM, start: false });
    const moved = async (env: Pick<TestEnv, 'app'>, f: OrgFixture, id: number, action: string) => {
      const response = await act(env.app, f, id, action);
      assert.equal(response.statusCode, 200, response.body);
    };
    const summary = (e: { type: string; campaign: { id: number; state: string; paused_reason: string | null } }) => [e.type, e.campaign.id, e.campaign.state, e.campaign.paused_reason];

    it('sends every change of the organization\'s campaigns (created, started, paused with its reason, resumed, canceled; completed and paused at ends_at by the scheduler) as campaign.<change> messages, in one id order with its attempts\' run events, never another organization\'s', async (t) => {
      const env = await serve(t);
      const url = await listen(env);
      const f = await createOrgFixture(env.deps, 'Acme');
      const other = await createOrgFixture(env.deps, 'Other');
      const client = await open(t, url, f.apiKey);
      await client.waitFor(() => client.messages.length >= 1);

      const spring = await createCampaign(env.app, f, { name: 'Spring <b>drive</b>' });
      await addContacts(env.app, f, spring.id, [{ phone_number: '+12025550160' }, { phone_number: '+12025550161' }]);
      const theirs = await createCampaign(env.app, other, { name: 'Theirs' });
      await moved(env, other, theirs.id, 'start');
      await moved(env, f, spring.id, 'start');
      assert.equal((await runCampaignTick(env.deps)).created, 2, 'two attempts queued');
      await moved(env, f, spring.id, 'pause'); // cancels both queued attempts
      await moved(env, f, spring.id, 'resume');
      await moved(env, f, spring.id, 'cancel');
      // A running campaign with nothing to call completes on the next tick.
      const empty = await createCampaign(env.app, f, { name: 'Empty' });
      await moved(env, f, empty.id, 'start');
      // One whose ends_at passes is paused by the tick.
      const brief = await createCampaign(env.app, f, { name: 'Brief', ends_at: new Date(Date.now() + 600).toISOString() });
      await addContacts(env.app, f, brief.id, [{ phone_number: '+12025550162' }]);
      await moved(env, f, brief.id, 'start');
      await new Promise((resolve) => setTimeout(resolve, 700));
      await runCampaignTick(env.deps);
      await runCampaignTick(env.deps);

      await client.waitFor(() => client.campaignEvents.length >= 11, 5_000, 'every change');
      assert.deepEqual(client.campaignEvents.map(summary), [
        ['campaign.created', spring.id, 'draft', null],
        ['campaign.started', spring.id, 'running', null],
        ['campaign.paused', spring.id, 'paused', 'request'],
        ['campaign.resumed', spring.id, 'running', null],
        ['campaign.canceled', spring.id, 'canceled', null],
        ['campaign.created', empty.id, 'draft', null],
        ['campaign.started', empty.id, 'running', null],
        ['campaign.created', brief.id, 'draft', null],
        ['campaign.started', brief.id, 'running', null],
        ['campaign.completed', empty.id, 'completed', null],
        ['campaign.paused', brief.id, 'paused', 'ends_at'],
      ]);
      const campaignMessages = client.messages.filter((m) => m.event?.startsWith('campaign.'));
      assert.ok(campaignMessages.every((m) => (m.data as { type: string; id: number }).type === m.event && (m.data as { id: number }).id === m.id), 'the event names the change; data.id is the message id');
      assert.equal(client.campaignEvents[0]?.campaign.name, 'Spring <b>drive</b>', 'the name as the change left it');
      assert.match(client.campaignEvents[0]?.at ?? '', /^\d{4}-\d\d-\d\dT/);

      // The attempts' run events name their campaign and fall between the changes that made and ended them.
      const label = (m: (typeof client.messages)[number]) => (m.event === 'run' ? `run.${(m.data as { type: string }).type}` : m.event);
      const springs = client.messages.slice(1).filter((m) => m.event === 'run' || (m.data as { campaign?: { id: number } }).campaign?.id === spring.id);
      assert.deepEqual(springs.map(label), ['campaign.created', 'campaign.started', 'run.queued', 'run.queued', 'campaign.paused', 'run.canceled', 'run.canceled', 'campaign.resumed', 'campaign.canceled']);
      const attempts = client.runEvents;
      assert.equal(attempts.length, 4);
      assert.ok(attempts.every((e) => e.campaign_id === spring.id), 'each attempt\'s run event carries its campaign_id');
      assert.deepEqual(client.messages.slice(1).map((m) => m.id), await storedStreamIds(env, f.orgId, client.messages[0]?.id), 'every event of every kind, in id order, each id its row\'s');
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.ok(!client.campaignEvents.some((e) => e.campaign.id === theirs.id), 'nothing of the other organization\'s');
    });

    it('resumes after Last-Event-ID with every campaign change, run event and delivery attempt after it, in one order, none missing or repeated, then the live ones', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: { ...FAST_STREAM, ...WEBHOOK_TEST_ENV }, start: false });
      const url = await listen(env);
      const f = await createOrgFixture(env.deps, 'Acme');
      const other = await createOrgFixture(env.deps, 'Other');
      const receiver = await startReceiver(t);
      await subscribeEndpoint(env, f, receiver.url);
      // Campaign changes, run events and attempts of both organizations, interleaved.
      for (let i = 0; i < 3; i++) {
        const mine = await createCampaign(env.app, f, { name: `Mine ${i}` });
        const theirs = await createCampaign(env.app, other, { name: `Theirs ${i}` });
        await moved(env, f, mine.id, 'start');
        await cancel(env, f, await call(env, f));
        await moved(env, other, theirs.id, 'start');
        await env.webhooks.deliverDue();
        await moved(env, f, mine.id, 'pause');
        await call(env, other);
      }
      const all = await storedStreamIds(env, f.orgId);
      const campaignRows = await env.deps.store.db.selectFrom('campaign_events').select('id').where('org_id', '=', f.orgId).execute();
      assert.equal(campaignRows.length, 9, 'three changes of each of three campaigns');
      assert.equal(new Set(all).size, all.length, 'no two events share an id');
      const from = all[4] as number;
      const client = await open(t, url, f.apiKey, { lastEventId: from });
      await client.waitFor(() => client.messages.length >= all.length - 5 + 1, 5_000, 'the backlog');
      const live = await createCampaign(env.app, f, { name: 'Live' });
      await client.waitFor(() => client.campaignEvents.some((e) => e.campaign.id === live.id), 5_000, 'the live change');
      const received = client.messages.slice(1);
      assert.deepEqual(received.map((m) => m.id), await storedStreamIds(env, f.orgId, from), 'every event of every kind after the cursor, in order, once');
      assert.ok(['run', 'webhook.delivery', 'campaign.started', 'campaign.paused'].every((kind) => received.some((m) => m.event === kind)), received.map((m) => m.event).join(', '));
    });
  });
}

describe('GET /api/v1/public/stream on PostgreSQL, where event ids can become visible out of order', { skip: (await storeCases()).find((c) => c.kind === 'postgres')?.skip ?? false }, () => {
  const insertEvent = (db: TestEnv['deps']['store']['db'], runId: number, seq: number) =>
    db.insertInto('run_events').values({ run_id: runId, seq, type: 'note', at: Date.now(), data: JSON.stringify({ seq }) }).returning('id').executeTakeFirstOrThrow();

  it('holds back an event whose lower id belongs to a transaction still open, then sends both in id order once it commits', async (t) => {
    const env = await build(t, 'postgres', { env: { ...FAST_STREAM, STREAM_GAP_WAIT_MS: '10000' } });
    const url = await listen(env);
    const f = await createOrgFixture(env.deps);
    const runId = await call(env, f);
    const client = await open(t, url, f.apiKey);
    await client.waitFor(() => client.messages.length >= 1);
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let drawn = (_id: number) => {};
    const lowerId = new Promise<number>((resolve) => (drawn = resolve));
    const slow = env.deps.store.db.transaction().execute(async (trx) => {
      drawn(Number((await insertEvent(trx, runId, 100)).id));
      await held;
    });
    const lower = await lowerId;
    const higher = Number((await insertEvent(env.deps.store.db, runId, 101)).id);
    assert.ok(higher > lower);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(client.runEvents.filter((e) => e.seq >= 100), [], 'nothing past the open transaction\'s id yet');
    release();
    await slow;
    await client.waitFor(() => client.runEvents.filter((e) => e.seq >= 100).length === 2, 5_000, 'both events');
    assert.deepEqual(client.runEvents.filter((e) => e.seq >= 100).map((e) => [e.id, e.seq]), [[lower, 100], [higher, 101]]);
  });

  it('passes an id whose transaction rolled back once STREAM_GAP_WAIT_MS has gone by', async (t) => {
    const env = await build(t, 'postgres', { env: { ...FAST_STREAM, STREAM_GAP_WAIT_MS: '200' } });
    const url = await listen(env);
    const f = await createOrgFixture(env.deps);
    const runId = await call(env, f);
    const client = await open(t, url, f.apiKey);
    await client.waitFor(() => client.messages.length >= 1);
    await env.deps.store.db
      .transaction()
      .execute(async (trx) => {
        await insertEvent(trx, runId, 100);
        throw new Error('roll back');
      })
      .catch(() => undefined);
    const writtenAt = Date.now();
    const after = Number((await insertEvent(env.deps.store.db, runId, 101)).id);
    await client.waitFor(() => client.runEvents.some((e) => e.id === after), 5_000, 'the event after the hole');
    // The hole was waited for, not stepped over: a load can only make this later, never earlier.
    assert.ok(Date.now() - writtenAt >= 150, `the event after the hole arrived ${Date.now() - writtenAt} ms after it was written, before STREAM_GAP_WAIT_MS (200 ms)`);
    assert.deepEqual(client.runEvents.filter((e) => e.seq >= 100).map((e) => e.seq), [101]);
  });
});

describe('GET /api/v1/public/stream with several nodes on one PostgreSQL database', { skip: (await storeCases()).find((c) => c.kind === 'postgres')?.skip ?? false }, () => {
  async function twoNodes(t: TestContext): Promise<[TestEnv, TestEnv]> {
    const database = await createTestDatabase('postgres');
    const nodes: TestEnv[] = [];
    for (let i = 0; i < 2; i++) {
      const store = openTestStore(database);
      const deps = buildDeps(testConfig(database.url, { ...FAST_STREAM, ...WEBHOOK_TEST_ENV }), { store, logger: pino({ level: 'silent' }) });
      const app = await buildApp(deps);
      nodes.push({ app, deps, close: async () => undefined });
    }
    t.after(async () => {
      for (const node of nodes) {
        await node.app.close();
        await node.deps.rateLimits.close();
        await node.deps.store.close();
      }
      await database.drop();
    });
    return nodes as [TestEnv, TestEnv];
  }

  it('sends a stream on one node the events written through another node', async (t) => {
    const [writer, reader] = await twoNodes(t);
    const f = await createOrgFixture(writer.deps);
    const url = await listen(reader);
    const client = await open(t, url, f.apiKey);
    await client.waitFor(() => client.messages.length >= 1);
    const runId = await call(writer, f);
    await cancel(writer, f, runId);
    await client.waitFor(() => client.runEvents.length >= 2, 5_000, 'the other node\'s events');
    assert.deepEqual(client.runEvents.map((e) => [e.run_id, e.type]), [[runId, 'queued'], [runId, 'canceled']]);
  });

  it('sends a stream on one node the delivery attempts recorded by another node\'s delivery worker', async (t) => {
    const [writer, reader] = await twoNodes(t);
    const f = await createOrgFixture(writer.deps);
    const receiver = await startReceiver(t);
    await subscribeEndpoint(writer, f, receiver.url);
    const url = await listen(reader);
    const client = await open(t, url, f.apiKey);
    await client.waitFor(() => client.messages.length >= 1);
    const runId = await call(writer, f);
    const worker = new DeliveryWorker({ ...writer.deps, version: packageInfo().version });
    assert.equal(await worker.deliverDue(), 1);
    await client.waitFor(() => client.deliveryEvents.length >= 1, 5_000, 'the other node\'s attempt');
    assert.deepEqual(client.deliveryEvents.map((d) => [d.run_id, d.status, d.http_status]), [[runId, 'succeeded', 204]]);
  });

  it('sends a stream on one node the campaign changes made through another node, in order with their attempts\' run events', async (t) => {
    const [writer, reader] = await twoNodes(t);
    const f = await createOrgFixture(writer.deps);
    const url = await listen(reader);
    const client = await open(t, url, f.apiKey);
    await client.waitFor(() => client.messages.length >= 1);
    const campaign = await createCampaign(writer.app, f, { name: 'Elsewhere' });
    await addContacts(writer.app, f, campaign.id, [{ phone_number: '+12025550160' }]);
    assert.equal((await act(writer.app, f, campaign.id, 'start')).statusCode, 200);
    assert.equal((await runCampaignTick(writer.deps)).created, 1);
    assert.equal((await act(writer.app, f, campaign.id, 'pause')).statusCode, 200);
    await client.waitFor(() => client.campaignEvents.length >= 3 && client.runEvents.length >= 2, 5_000, 'the other node\'s changes');
    assert.deepEqual(
      client.messages.slice(1).map((m) => (m.event === 'run' ? `run.${(m.data as { type: string }).type}` : `${m.event} ${(m.data as { campaign: { state: string } }).campaign.state}`)),
      ['campaign.created draft', 'campaign.started running', 'run.queued', 'campaign.paused paused', 'run.canceled'],
    );
    assert.ok(client.runEvents.every((e) => e.campaign_id === campaign.id));
  });
});
