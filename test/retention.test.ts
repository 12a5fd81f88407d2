// Retention (docs/operations.md, "Retention"): the maintenance pass deletes ended runs older than
// their organization's window with everything that hangs off them, in bounded batches, each its own
// transaction. Rows are seeded as the service leaves them (a run, its events, their webhook
// deliveries and attempts, the stream's attempt rows, an Idempotency-Key record), and time is a
// fake clock: each pass is given its `now`.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type { Deps } from '../src/deps.js';
import { pruneExpiredRuns } from '../src/dispatch/retention.js';
import { maintain } from '../src/dispatch/maintenance.js';
import { setRetention } from '../src/orgs/organizations.js';
import { sql } from '../src/store/engine/kysely.js';
import type { RunState } from '../src/runs/states.js';
import { build, getJson, type TestEnv } from './helpers/app.js';
import { createOrgFixture, type OrgFixture } from './helpers/fixtures.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

const DAY = 86_400_000;
const NOW = Date.UTC(2026, 10, 27, 12);

const TABLES = [
  'workflow_runs',
  'run_events',
  'webhook_deliveries',
  'webhook_attempts',
  'webhook_delivery_events',
  'idempotency_keys',
  'campaigns',
  'campaign_contacts',
  'campaign_events',
  'suppressions',
] as const;
type Table = (typeof TABLES)[number];

async function counts(deps: Deps): Promise<Record<Table, number>> {
  const out = {} as Record<Table, number>;
  for (const table of TABLES) {
    const row = await deps.store.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    out[table] = Number(row.n);
  }
  return out;
}

function diff(before: Record<Table, number>, after: Record<Table, number>): Partial<Record<Table, number>> {
  const out: Partial<Record<Table, number>> = {};
  for (const table of TABLES) if (before[table] !== after[table]) out[table] = before[table] - after[table];
  return out;
}

interface Seeded {
  deps: Deps;
  f: OrgFixture;
  endpointId: number;
  definition: { id: number; workflow_id: number };
}

async function setUp(t: TestContext, kind: StoreKind, env: Record<string, string> = {}): Promise<Seeded & { app: TestEnv['app'] }> {
  const clock = { now: () => NOW };
  const { app, deps } = await build(t, kind, { clock, env: { RETENTION_DAYS: '30', ...env } });
  const f = await createOrgFixture(deps);
  return { app, ...(await seedBase(deps, f)) };
}

async function seedBase(deps: Deps, f: OrgFixture): Promise<Seeded> {
  const definition = await deps.store.db
    .selectFrom('workflow_definitions as d')
    .innerJoin('workflows as w', 'w.id', 'd.workflow_id')
    .select(['d.id', 'd.workflow_id'])
    .where('w.org_id', '=', f.orgId)
    .executeTakeFirstOrThrow();
  // Disabled, so PostgreSQL's outbox trigger writes no delivery of its own for the seeded events: the test's are the only ones.
  const endpoint = await deps.store.db
    .insertInto('webhook_endpoints')
    .values({ org_id: f.orgId, url: 'https://hooks.example.com/x', description: null, event_filter: '', enabled: 0, disabled_reason: null, secret_encrypted: 'sealed', previous_secret_encrypted: null, previous_secret_expires_at: null, failing_since: null, created_at: NOW - 100 * DAY, updated_at: NOW - 100 * DAY })
    .returning('id')
    .executeTakeFirstOrThrow();
  return { deps, f, endpointId: endpoint.id, definition };
}

interface RunSeed {
  state: RunState;
  /** Days before NOW it ended (ended runs) or was created (live and queued ones). */
  daysAgo: number;
  /** Its last delivery still pending. */
  pending?: boolean;
  campaignId?: number;
}

/**
 * One run as the service leaves it: 2 events, a delivery of each (succeeded, or the last pending),
 * an attempt and a stream row per delivery, an Idempotency-Key record. Ended runs only get the
 * children; live and queued runs get them too, to show they stay.
 */
async function seedRun(s: Seeded, seed: RunSeed): Promise<number> {
  const { deps, f } = s;
  const at = NOW - seed.daysAgo * DAY;
  const ended = !['queued', 'dialing', 'ringing', 'in_progress'].includes(seed.state);
  const { id } = await deps.store.db
    .insertInto('workflow_runs')
    .values({
      name: null,
      org_id: f.orgId,
      workflow_id: s.definition.workflow_id,
      definition_id: s.definition.id,
      mode: 'published',
      trigger_uuid: null,
      phone_number: '+12025550123',
      caller_id: null,
      telephony_configuration_id: f.telephonyId,
      initial_context: null,
      state: seed.state,
      outcome_reason: null,
      provider_call_id: null,
      created_at: at - 60_000,
      updated_at: at,
      ended_at: ended ? at : null,
      deadline_at: seed.state === 'queued' || ended ? null : at + 3_600_000,
      last_event_seq: 2,
      ...(seed.campaignId !== undefined ? { campaign_id: seed.campaignId } : {}),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  await deps.store.db.updateTable('workflow_runs').set({ name: `WR-API-${id}` }).where('id', '=', id).execute();
  for (const seq of [1, 2]) {
    await deps.store.db.insertInto('run_events').values({ run_id: id, seq, type: seq === 1 ? 'queued' : seed.state, at, data: JSON.stringify({}) }).execute();
    const pending = seed.pending === true && seq === 2;
    const delivery = await deps.store.db
      .insertInto('webhook_deliveries')
      .values({
        endpoint_id: s.endpointId,
        message_id: `msg_run${id}_${seq}`,
        event_type: seq === 1 ? 'run.queued' : 'run.ended',
        run_id: id,
        seq,
        payload: '{}',
        status: pending ? 'pending' : 'succeeded',
        attempt_count: 1,
        next_attempt_at: pending ? at + DAY : null,
        locked_by: null,
        locked_until: null,
        created_at: at,
        updated_at: at,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await deps.store.db.insertInto('webhook_attempts').values({ delivery_id: delivery.id, at, http_status: pending ? 503 : 200, error: null, duration_ms: 5, response_body: null }).execute();
    await deps.store.db
      .insertInto('webhook_delivery_events')
      .values({ org_id: f.orgId, endpoint_id: s.endpointId, delivery_id: delivery.id, message_id: `msg_run${id}_${seq}`, event_type: 'run.ended', run_id: id, attempt: 1, status: pending ? 'pending' : 'succeeded', http_status: pending ? 503 : 200, error: null, next_attempt_at: null, endpoint_disabled: null, at })
      .execute();
  }
  await deps.store.db
    .insertInto('idempotency_keys')
    .values({ org_id: f.orgId, key: `key-${id}`, fingerprint: 'f', state: 'completed', owner: 'o', locked_until: at, response_status: 200, response_body: '{}', run_id: id, created_at: at, expires_at: NOW + 30 * DAY })
    .execute();
  return id;
}

async function runIds(deps: Deps): Promise<number[]> {
  return (await deps.store.db.selectFrom('workflow_runs').select('id').orderBy('id').execute()).map((r) => r.id);
}

async function metricValue(deps: Deps, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = await deps.metrics.registry.getSingleMetric(name)?.get();
  const value = metric?.values.find((v) => Object.entries(labels).every(([k, l]) => (v.labels as Record<string, unknown>)[k] === l));
  return value?.value ?? 0;
}

/** Per run: 1 run, 2 events, 2 deliveries, 2 attempts, 2 stream rows, 1 Idempotency-Key record. */
function perRun(n: number): Partial<Record<Table, number>> {
  return { workflow_runs: n, run_events: 2 * n, webhook_deliveries: 2 * n, webhook_attempts: 2 * n, webhook_delivery_events: 2 * n, idempotency_keys: n };
}

async function seedCampaign(s: Seeded, state: 'running' | 'completed', finishedDaysAgo: number | null): Promise<number> {
  const { deps, f } = s;
  const at = NOW - 60 * DAY;
  const { id } = await deps.store.db
    .insertInto('campaigns')
    .values({
      org_id: f.orgId,
      name: `campaign ${state}`,
      workflow_id: s.definition.workflow_id,
      trigger_uuid: null,
      mode: 'published',
      telephony_configuration_id: f.telephonyId,
      max_concurrent_calls: 1,
      calls_per_second: null,
      starts_at: null,
      ends_at: null,
      schedule: null,
      retry: JSON.stringify({}),
      circuit_breaker: JSON.stringify({}),
      state,
      paused_reason: null,
      breaker_since: null,
      pacing_next_at: null,
      lease_owner: null,
      lease_expires_at: null,
      created_at: at,
      updated_at: at,
      started_at: at,
      finished_at: finishedDaysAgo === null ? null : NOW - finishedDaysAgo * DAY,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  await deps.store.db.insertInto('campaign_events').values({ org_id: f.orgId, campaign_id: id, type: 'campaign.started', name: 'c', state: 'running', paused_reason: null, at }).execute();
  return id;
}

let contactNumber = 0;

async function seedContact(s: Seeded, campaignId: number, status: 'reached' | 'in_progress', lastRunId: number | null): Promise<void> {
  contactNumber += 1;
  await s.deps.store.db
    .insertInto('campaign_contacts')
    .values({ campaign_id: campaignId, phone_number: `+1202555${String(contactNumber).padStart(4, '0')}`, initial_context: null, timezone: null, status, next_attempt_at: NOW, last_run_id: lastRunId, created_at: NOW - 60 * DAY, updated_at: NOW - 40 * DAY })
    .execute();
}

for (const store of await storeCases()) {
  describe(`Retention (${store.kind})`, { skip: store.skip }, () => {
    it('deletes ended runs older than the window with their events, deliveries, attempts, stream rows and Idempotency-Key records; keeps young, live and queued runs, a run with a pending delivery, and suppressions; the metrics move', async (t) => {
      const s = await setUp(t, store.kind);
      const old: number[] = [await seedRun(s, { state: 'completed', daysAgo: 40 }), await seedRun(s, { state: 'failed', daysAgo: 31 })];
      const young = await seedRun(s, { state: 'no_answer', daysAgo: 29 });
      const live = await seedRun(s, { state: 'in_progress', daysAgo: 45 });
      const queued = await seedRun(s, { state: 'queued', daysAgo: 45 });
      const withPending = await seedRun(s, { state: 'busy', daysAgo: 35, pending: true });
      await s.deps.store.db.insertInto('suppressions').values({ org_id: s.f.orgId, phone_number: '+12025550123', reason: 'asked', expires_at: null, created_at: NOW - 400 * DAY, updated_at: NOW - 400 * DAY }).execute();

      const before = await counts(s.deps);
      const pass = await pruneExpiredRuns(s.deps, NOW);
      const after = await counts(s.deps);
      assert.deepEqual(diff(before, after), perRun(2));
      assert.equal(pass.runs, 2);
      const kept = await runIds(s.deps);
      assert.deepEqual(kept, [young, live, queued, withPending].sort((a, b) => a - b));
      assert.ok(old.every((id) => !kept.includes(id)));
      assert.equal(after.suppressions, 1, 'suppressions are never pruned');
      for (const [table, n] of Object.entries(perRun(2))) assert.equal(await metricValue(s.deps, 'dialtone_retention_pruned_rows_total', { table }), n, table);
      assert.equal(await metricValue(s.deps, 'dialtone_retention_oldest_run_age_seconds'), (35 * DAY) / 1000, 'the run held by its pending delivery is the oldest kept');

      // Its delivery settled, the held run goes with the next pass; the oldest kept is then the young one.
      await s.deps.store.db.updateTable('webhook_deliveries').set({ status: 'succeeded' }).where('run_id', '=', withPending).execute();
      await pruneExpiredRuns(s.deps, NOW);
      assert.deepEqual(await runIds(s.deps), [young, live, queued].sort((a, b) => a - b));
      assert.equal(await metricValue(s.deps, 'dialtone_retention_pruned_rows_total', { table: 'workflow_runs' }), 3);
      assert.equal(await metricValue(s.deps, 'dialtone_retention_oldest_run_age_seconds'), (29 * DAY) / 1000);
    });

    it('an organization\'s own window beats RETENTION_DAYS, "off" keeps its runs forever, and RETENTION_DAYS=0 (the default) keeps everything', async (t) => {
      const clock = { now: () => NOW };
      const { deps } = await build(t, store.kind, { clock });
      assert.equal(deps.config.RETENTION_DAYS, 0, 'keep forever by default');
      const byDefault = await seedBase(deps, await createOrgFixture(deps, 'Default'));
      const own = await seedBase(deps, await createOrgFixture(deps, 'Own'));
      const defaultRun = await seedRun(byDefault, { state: 'completed', daysAgo: 4000 });
      const ownOld = await seedRun(own, { state: 'completed', daysAgo: 8 });
      const ownYoung = await seedRun(own, { state: 'completed', daysAgo: 6 });
      await setRetention(deps.store, own.f.orgId, 7);
      await pruneExpiredRuns(deps, NOW);
      assert.deepEqual(await runIds(deps), [defaultRun, ownYoung], 'only the organization with its own 7 days lost a run');
      assert.ok(!(await runIds(deps)).includes(ownOld));

      // With a default of 30 days, an organization turned "off" keeps its runs; another follows the default.
      const { deps: deps30 } = await build(t, store.kind, { clock, env: { RETENTION_DAYS: '30' } });
      const off = await seedBase(deps30, await createOrgFixture(deps30, 'Off'));
      const follows = await seedBase(deps30, await createOrgFixture(deps30, 'Follows'));
      const kept = await seedRun(off, { state: 'completed', daysAgo: 400 });
      await seedRun(follows, { state: 'completed', daysAgo: 31 });
      await setRetention(deps30.store, off.f.orgId, 'off');
      await pruneExpiredRuns(deps30, NOW);
      assert.deepEqual(await runIds(deps30), [kept]);
      await assert.rejects(() => setRetention(deps30.store, off.f.orgId, 0), /whole number of days/);
    });

    it('deletes at most RETENTION_BATCH_SIZE runs per batch and RETENTION_BATCHES_PER_PASS batches per pass, each batch its own transaction; the next pass goes on', async (t) => {
      let transactions = 0;
      const clock = { now: () => NOW };
      const { deps } = await build(t, store.kind, {
        clock,
        env: { RETENTION_DAYS: '30', RETENTION_BATCH_SIZE: '2', RETENTION_BATCHES_PER_PASS: '2' },
        wrapStore: (inner) => ({
          ...inner,
          transaction: (durability, work) => {
            transactions += 1;
            return inner.transaction(durability, work);
          },
        }),
      });
      const s = await seedBase(deps, await createOrgFixture(deps));
      for (let i = 0; i < 7; i++) await seedRun(s, { state: 'completed', daysAgo: 31 + i });
      transactions = 0;
      const first = await pruneExpiredRuns(deps, NOW);
      assert.deepEqual([first.runs, first.batches, transactions], [4, 2, 2], 'two batches of two runs, one transaction each, then the pass stops');
      assert.equal((await runIds(deps)).length, 3);
      transactions = 0;
      const second = await pruneExpiredRuns(deps, NOW);
      assert.deepEqual([second.runs, second.batches, transactions], [3, 2, 2]);
      assert.deepEqual(await runIds(deps), []);
      transactions = 0;
      const third = await pruneExpiredRuns(deps, NOW);
      assert.deepEqual([third.runs, third.batches], [0, 0], 'nothing left: no batch spent');
    });

    it('a batch interrupted mid-way (its node dying) deletes nothing: the run, its events and deliveries still read; the next pass finishes it', async (t) => {
      const s = await setUp(t, store.kind);
      const run = await seedRun(s, { state: 'completed', daysAgo: 40 });
      const before = await counts(s.deps);
      await assert.rejects(
        pruneExpiredRuns(s.deps, NOW, {
          step: (table) => {
            if (table === 'webhook_deliveries') throw new Error('node killed mid-batch');
          },
        }),
        /node killed mid-batch/,
      );
      assert.deepEqual(await counts(s.deps), before, 'the batch rolled back whole');
      const read = await getJson(s.app, `/api/v1/public/workflow-runs/${run}`, s.f.apiKey);
      assert.equal(read.statusCode, 200);
      const events = await getJson(s.app, `/api/v1/public/workflow-runs/${run}/events`, s.f.apiKey);
      assert.equal(events.statusCode, 200);
      assert.equal((events.json() as { data: unknown[] }).data.length, 2);
      const deliveries = await getJson(s.app, `/api/v1/public/webhook-deliveries?run_id=${run}`, s.f.apiKey);
      assert.equal(deliveries.statusCode, 200);
      assert.equal((deliveries.json() as { data: unknown[] }).data.length, 2);

      await pruneExpiredRuns(s.deps, NOW);
      assert.deepEqual(diff(before, await counts(s.deps)), perRun(1));
      assert.equal((await getJson(s.app, `/api/v1/public/workflow-runs/${run}`, s.f.apiKey)).statusCode, 404);
    });

    it('a run that ends while the pass prunes is kept (its end is not older than the window) until a later pass finds it old', async (t) => {
      const s = await setUp(t, store.kind, { RETENTION_BATCH_SIZE: '1' });
      const old = [];
      for (let i = 0; i < 3; i++) old.push(await seedRun(s, { state: 'completed', daysAgo: 40 + i }));
      const live = await seedRun(s, { state: 'in_progress', daysAgo: 45 });
      const [pass] = await Promise.all([pruneExpiredRuns(s.deps, NOW), s.deps.lifecycle.transition(live, 'completed', { at: NOW, reason: 'hangup', durable: true })]);
      assert.equal(pass.runs, 3);
      const kept = await s.deps.store.db.selectFrom('workflow_runs').select(['id', 'state', 'ended_at']).execute();
      assert.deepEqual(kept, [{ id: live, state: 'completed', ended_at: NOW }]);
      await pruneExpiredRuns(s.deps, NOW + 30 * DAY);
      assert.equal((await runIds(s.deps)).length, 1, 'exactly 30 days after its end it is not yet older than the window');
      await pruneExpiredRuns(s.deps, NOW + 30 * DAY + 1);
      assert.deepEqual(await runIds(s.deps), []);
    });

    it('deletes an ended campaign with its contacts and stream rows once its last run is pruned; keeps a running campaign, and an attempt its contact still waits on', async (t) => {
      const s = await setUp(t, store.kind);
      const done = await seedCampaign(s, 'completed', 35);
      const doneRuns = [await seedRun(s, { state: 'completed', daysAgo: 40, campaignId: done }), await seedRun(s, { state: 'no_answer', daysAgo: 36, campaignId: done })];
      for (const run of doneRuns) await seedContact(s, done, 'reached', run);
      await seedContact(s, done, 'reached', null);
      const running = await seedCampaign(s, 'running', null);
      const settled = await seedRun(s, { state: 'completed', daysAgo: 40, campaignId: running });
      const waitedOn = await seedRun(s, { state: 'completed', daysAgo: 40, campaignId: running });
      await seedContact(s, running, 'reached', settled);
      await seedContact(s, running, 'in_progress', waitedOn);
      const young = await seedCampaign(s, 'completed', 10);

      const before = await counts(s.deps);
      await pruneExpiredRuns(s.deps, NOW);
      assert.deepEqual(diff(before, await counts(s.deps)), { ...perRun(3), campaigns: 1, campaign_contacts: 3, campaign_events: 1 });
      assert.deepEqual(await runIds(s.deps), [waitedOn]);
      const campaigns = (await s.deps.store.db.selectFrom('campaigns').select('id').orderBy('id').execute()).map((c) => c.id);
      assert.deepEqual(campaigns, [running, young], 'a running campaign, and one ended within the window, stay');
    });

    it('keeps a run whose delivery is requeued (webhook retry) while the batch takes it: the batch waits for the requeue and reads the delivery again (PostgreSQL; SQLite has one writer)', { skip: store.kind === 'postgres' ? false : 'SQLite runs one write transaction at a time: the requeue cannot interleave' }, async (t) => {
      const s = await setUp(t, store.kind);
      const retried = await seedRun(s, { state: 'completed', daysAgo: 40 });
      const other = await seedRun(s, { state: 'completed', daysAgo: 41 });
      let locked!: () => void;
      let release!: () => void;
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      // As webhook-statements.ts's requeueDelivery does: lock the delivery, then make it pending.
      const requeue = s.deps.store.transaction('durable', async (trx) => {
        await trx.selectFrom('webhook_deliveries').select('id').where('run_id', '=', retried).where('seq', '=', 2).forUpdate().execute();
        locked();
        await released;
        await trx.updateTable('webhook_deliveries').set({ status: 'pending' }).where('run_id', '=', retried).where('seq', '=', 2).execute();
      });
      await isLocked;
      const pass = pruneExpiredRuns(s.deps, NOW);
      const waiting = async () => {
        const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(s.deps.store.db);
        return (rows[0]?.n ?? 0) > 0;
      };
      const deadline = Date.now() + scaledTimeout(20_000);
      while (!(await waiting())) {
        if (Date.now() > deadline) throw new Error('the batch never waited for the requeue\'s lock');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      release();
      await requeue;
      assert.equal((await pass).runs, 1);
      assert.deepEqual(await runIds(s.deps), [retried], 'the run with its requeued (pending) delivery stays');
      assert.ok(!(await runIds(s.deps)).includes(other));
      const pending = await s.deps.store.db.selectFrom('webhook_deliveries').select('seq').where('run_id', '=', retried).where('status', '=', 'pending').execute();
      assert.deepEqual(pending, [{ seq: 2 }]);
    });

    it('runs as a step of the maintenance pass', async (t) => {
      const s = await setUp(t, store.kind);
      await seedRun(s, { state: 'completed', daysAgo: 40 });
      await maintain(s.deps, NOW, { inProcessProviders: [], reaped: async () => undefined, housekeeping: [] });
      assert.deepEqual(await runIds(s.deps), []);
    });
  });
}
