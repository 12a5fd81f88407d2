// Several nodes on one PostgreSQL database: real service processes, real sockets.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import pino from 'pino';
import { buildApp } from '../src/app.js';
import { buildDeps } from '../src/deps.js';
import { Dispatcher } from '../src/dispatch/dispatcher.js';
import { packageInfo } from '../src/package-info.js';
import { getRun } from '../src/runs/read-run.js';
import { DeliveryWorker } from '../src/webhooks/delivery-worker.js';
import { sql } from '../src/store/engine/kysely.js';
import type { Store } from '../src/store/engine/store.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson, testConfig } from './helpers/app.js';
import { FAST_TIMINGS } from './helpers/dispatch.js';
import type { OrgFixture } from './helpers/fixtures.js';
import { prepareDatabase, startServiceProcess, type ServiceProcess } from './helpers/service-process.js';
import { openTestStore, storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { startReceiver, WEBHOOK_TEST_ENV } from './helpers/webhooks.js';

const TERMINAL = ['completed', 'busy', 'no_answer', 'rejected', 'failed', 'canceled', 'expired'];
const postgres = (await storeCases()).find((c) => c.kind === 'postgres');

interface Cluster {
  observer: Store;
  fixture: OrgFixture;
  routeId: number;
  cps: number;
  dialLog: string;
  url: string;
}

async function cluster(t: TestContext, cps: number): Promise<Cluster> {
  const { url, observer, deps, fixture, dir } = await prepareDatabase(t, 'postgres');
  const route = await createTelephonyConfiguration(observer, deps.cipher, { orgId: fixture.orgId, name: 'Shared', provider: 'simulator', callsPerSecond: cps, maxConcurrentCalls: 40 }, Date.now());
  return { observer, fixture, routeId: route.id, cps, dialLog: join(dir, 'dials.jsonl'), url };
}

function nodeEnv(c: Cluster, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: c.url,
    SIMULATOR_DIAL_LOG: c.dialLog,
    SIMULATOR_LATENCY_MS: '5',
    SIMULATOR_RING_MS: '10',
    SIMULATOR_TALK_MS: '20',
    DISPATCH_POLL_INTERVAL_MS: '100',
    REAPER_INTERVAL_MS: '200',
    REAPER_GRACE_MS: '300',
    // Generous next to the simulator's timings: three nodes, PostgreSQL and the load share two cores.
    RING_TIMEOUT_MS: '5000',
    // Calls held by a killed node are ended by the reaper once this (plus the grace) has passed.
    MAX_CALL_DURATION_MS: '3000',
    DISPATCH_LEASE_MS: '10000',
    DIAL_TIMEOUT_MS: '3000',
    DATABASE_POOL_SIZE: '8',
    LOG_LEVEL: 'info',
    ...overrides,
  };
}

/**
 * For a test where no node dies, nothing may end a run but its own call: a node starved of the CPU
 * (three nodes, PostgreSQL and the load on two shared cores) kept some claimed runs waiting in its
 * pacer past the 10 s lease, and another node's reaper ended them dispatch_interrupted, undialed
 * (2,992 of 3,000 dialed). The lease, the reaper's grace and the heartbeat timeout are what bound
 * recovery from a dead node, which this test does not exercise.
 */
const NO_NODE_DIES: Record<string, string> = {
  DISPATCH_LEASE_MS: '120000',
  REAPER_GRACE_MS: '120000',
  NODE_HEARTBEAT_TIMEOUT_MS: '120000',
  RING_TIMEOUT_MS: '30000',
};

/** Sends `count` initiations round-robin over the nodes, `concurrency` at a time; returns run ids per 200. */
async function initiate(c: Cluster, nodes: () => ServiceProcess[], count: number, concurrency: number, onProgress?: (sent: number) => void): Promise<{ ok: number[]; refused: number }> {
  const ok: number[] = [];
  let refused = 0;
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      onProgress?.(i);
      const live = nodes();
      const node = live[i % live.length] as ServiceProcess;
      try {
        const response = await fetch(`${node.url}/api/v1/public/agent/${c.fixture.agentUuid}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': c.fixture.apiKey },
          body: JSON.stringify({ phone_number: '+12025550123', telephony_configuration_id: c.routeId }),
        });
        const body = (await response.json()) as { workflow_run_id?: number };
        if (response.status === 200 && body.workflow_run_id) ok.push(body.workflow_run_id);
        else refused++;
      } catch {
        refused++; // the node was killed under this request: no 200, so no promise was made
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { ok, refused };
}

async function waitAllTerminal(store: Store, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rows = await store.db.selectFrom('workflow_runs').select(['id', 'state', 'outcome_reason']).execute();
    if (rows.every((r) => TERMINAL.includes(r.state)) || Date.now() > deadline) return rows;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

function readDials(path: string): { runId: number; at: number }[] {
  return readFileSync(path, 'utf8').trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as { runId: number; at: number });
}

/**
 * No one-second window holds more than `cps` dials. This is measured where the contract is kept,
 * so a loaded machine cannot break it by itself: the dial log's `at` is read by the simulator in
 * the same synchronous step in which the pacer found the slot due (route-pacer.ts → the
 * dispatcher's dial → provider.dial), so event-loop lag delays a dial and its timestamp together,
 * as a carrier would see it. (The one store round trip between them, a lease renewal, comes only
 * for a claim older than DISPATCH_LEASE_MS − DIAL_TIMEOUT_MS − 2 s, 5 s here.) Slots are unique across the nodes (taken under the configuration's
 * row lock) and spaced (1 + headroom) / cps apart, and a dial may be at most the tolerance
 * (0.8 × headroom of a second) past its slot, else it takes a fresh one: any second holds at most
 * cps × (1 + 0.8 × headroom) / (1 + headroom) slots' dials (149 at 150 calls per second, one more
 * for a timer firing a millisecond early). A busier second means dials outside their slots, a
 * pacing defect and not jitter (as with re-slots asked from `now`, missed on every try by a node
 * whose store was slower than the tolerance, until it gave up and dialed anyway: route-pacer.ts).
 * So no tolerance is added here.
 */
function assertPaced(dials: { at: number }[], cps: number): void {
  const times = dials.map((d) => d.at).sort((a, b) => a - b);
  let busiest = 0;
  let start = 0;
  for (let end = 0; end < times.length; end++) {
    while ((times[end] as number) - (times[start] as number) >= 1000) start++;
    busiest = Math.max(busiest, end - start + 1);
  }
  assert.ok(busiest <= cps, `busiest one-second window had ${busiest} dials; calls_per_second is ${cps}`);
}

function assertEachOnce(dials: { runId: number }[]): Map<number, number> {
  const counts = new Map<number, number>();
  for (const d of dials) counts.set(d.runId, (counts.get(d.runId) ?? 0) + 1);
  assert.deepEqual([...counts].filter(([, n]) => n > 1), [], 'no run was dialed twice');
  return counts;
}

describe('Several nodes on one PostgreSQL database', { skip: postgres?.skip ?? 'PostgreSQL not configured' }, () => {
  it('wakes a dispatcher on another node through the store as soon as a run is created there', async (t) => {
    const c = await cluster(t, 100);
    const apiStore = openTestStore({ url: c.url, drop: async () => undefined });
    const dispatchStore = openTestStore({ url: c.url, drop: async () => undefined });
    const apiDeps = buildDeps(testConfig(c.url, { DIALTONE_ROLE: 'api' }), { store: apiStore, logger: pino({ level: 'silent' }) });
    const dispatchDeps = buildDeps(testConfig(c.url, { ...FAST_TIMINGS, DISPATCH_POLL_INTERVAL_MS: '60000', REAPER_INTERVAL_MS: '60000', NODE_HEARTBEAT_TIMEOUT_MS: '300000' }), { store: dispatchStore, logger: pino({ level: 'silent' }) });
    const app = await buildApp(apiDeps);
    const dispatcher = new Dispatcher(dispatchDeps);
    dispatcher.start();
    try {
      await new Promise((resolve) => setTimeout(resolve, 300)); // listening, and past its first tick
      const response = await postJson(app, `/api/v1/public/agent/${c.fixture.agentUuid}`, { phone_number: '+12025550123' }, { key: c.fixture.apiKey });
      assert.equal(response.statusCode, 200, response.body);
      const runId = response.json().workflow_run_id as number;
      // A bound far below the 60 s poll, not a latency target: only the notification can dial the
      // run in time (3 s was too short for a loaded machine to fit a claim and a dial in).
      const deadline = Date.now() + 20_000;
      while ((await getRun(c.observer, undefined, runId)).dial_sent_at === null) {
        assert.ok(Date.now() < deadline, 'the other node dialed the run without waiting for its poll');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      // Before the database goes (t.after hooks run in the order they were added).
      await dispatcher.stop();
      await dispatchDeps.providers.simulator.close();
      await app.close();
      await apiStore.close();
      await dispatchStore.close();
    }
  });

  it('wakes a webhook delivery worker on another node through the store once a run created here has written its delivery', async (t) => {
    const c = await cluster(t, 100);
    const receiver = await startReceiver(t);
    const apiStore = openTestStore({ url: c.url, drop: async () => undefined });
    const workerStore = openTestStore({ url: c.url, drop: async () => undefined });
    const apiDeps = buildDeps(testConfig(c.url, { ...WEBHOOK_TEST_ENV, DIALTONE_ROLE: 'api' }), { store: apiStore, logger: pino({ level: 'silent' }) });
    const workerDeps = buildDeps(testConfig(c.url, { ...WEBHOOK_TEST_ENV, WEBHOOK_POLL_INTERVAL_MS: '60000' }), { store: workerStore, logger: pino({ level: 'silent' }) });
    const app = await buildApp(apiDeps);
    const worker = new DeliveryWorker({ ...workerDeps, version: packageInfo().version });
    try {
      const endpoint = await postJson(app, '/api/v1/public/webhook-endpoints', { url: receiver.url }, { key: c.fixture.apiKey });
      assert.equal(endpoint.statusCode, 201, endpoint.body);
      worker.start();
      // Listening (its LISTEN is the session's last statement), and past its first poll.
      const listenDeadline = Date.now() + 20_000;
      for (;;) {
        const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and query ilike 'listen%dialtone_webhooks%'`.execute(c.observer.db);
        if ((rows[0]?.n ?? 0) > 0) break;
        assert.ok(Date.now() < listenDeadline, 'the delivery worker listens for webhook notifications');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
      const response = await postJson(app, `/api/v1/public/agent/${c.fixture.agentUuid}`, { phone_number: '+12025550123' }, { key: c.fixture.apiKey });
      assert.equal(response.statusCode, 200, response.body);
      const runId = response.json().workflow_run_id as number;
      // A bound far below the 60 s poll, not a latency target: only the notification the API node
      // sends after its commit can have the other node deliver in time.
      const received = await receiver.waitFor((messages) => messages.some((m) => m.json.type === 'run.queued'), 20_000);
      assert.deepEqual(received.map((m) => [m.json.type, m.json.data.run?.id]), [['run.queued', runId]]);
    } finally {
      await worker.stop();
      await app.close();
      await apiStore.close();
      await workerStore.close();
    }
  });

  it('spreads 3,000 initiations over three nodes: one run per 200, each dialed once, all ended, calls_per_second never exceeded', async (t) => {
    const c = await cluster(t, 150);
    const nodes = await Promise.all([0, 1, 2].map(() => startServiceProcess(nodeEnv(c, NO_NODE_DIES))));
    t.after(() => nodes.forEach((n) => n.child.kill('SIGKILL')));

    const { ok, refused } = await initiate(c, () => nodes, 3000, 24);
    assert.equal(refused, 0);
    assert.equal(ok.length, 3000);
    assert.equal(new Set(ok).size, 3000, 'every 200 names its own run');

    const rows = await waitAllTerminal(c.observer, 90_000);
    assert.deepEqual(rows.map((r) => r.id).sort((a, b) => a - b), [...ok].sort((a, b) => a - b), 'exactly one run per 200, none other');
    assert.deepEqual(rows.filter((r) => !TERMINAL.includes(r.state)), [], 'every run ended');
    const dials = readDials(c.dialLog);
    const counts = assertEachOnce(dials);
    assert.equal(counts.size, 3000, 'every run was dialed');
    assertPaced(dials, c.cps);
    const notCompleted = rows.filter((r) => r.state !== 'completed').map((r) => `${r.id}:${r.state}:${r.outcome_reason}`);
    assert.deepEqual(notCompleted, [], 'every call completed');
    for (const node of nodes) {
      node.child.kill('SIGTERM');
      assert.equal(await node.exited, 0, node.output());
    }
  });

  it('loses no run and dials none twice when one of three nodes is killed with SIGKILL halfway', async (t) => {
    const c = await cluster(t, 150);
    let nodes = await Promise.all([0, 1, 2].map(() => startServiceProcess(nodeEnv(c))));
    t.after(() => nodes.forEach((n) => n.child.kill('SIGKILL')));
    const victim = nodes[0] as ServiceProcess;

    const { ok } = await initiate(c, () => nodes, 3000, 24, (sent) => {
      if (sent === 1500 && nodes.includes(victim)) {
        victim.child.kill('SIGKILL');
        nodes = nodes.filter((n) => n !== victim);
      }
    });
    assert.equal(await victim.exited, 'SIGKILL');
    assert.ok(ok.length >= 2900, `most initiations were accepted (${ok.length})`);

    const rows = await waitAllTerminal(c.observer, 90_000);
    const ids = new Set(rows.map((r) => r.id));
    assert.deepEqual(ok.filter((id) => !ids.has(id)), [], 'every 200 has its run');
    assert.deepEqual(rows.filter((r) => !TERMINAL.includes(r.state)), [], 'every run ended, including those the dead node held');
    const dials = readDials(c.dialLog);
    assertEachOnce(dials);
    assertPaced(dials, c.cps);
    const reasons = new Set(rows.filter((r) => r.state !== 'completed').map((r) => r.outcome_reason));
    for (const reason of reasons) assert.ok(['dispatch_interrupted', 'provider_silent'].includes(String(reason)), `unexpected end: ${reason}`);
  });
});
