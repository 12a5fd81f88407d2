// Upgrades: a database created and filled by an earlier schema migrates forward and every row is
// still there and readable; a database migrated by a newer version is refused, naming what this
// one does not know (docs/operations.md, "Upgrades").
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it, type TestContext } from 'node:test';
import pino from 'pino';
import { buildApp } from '../src/app.js';
import { buildDeps } from '../src/deps.js';
import { sql } from '../src/store/engine/kysely.js';
import type { Store } from '../src/store/engine/store.js';
import { migrateTo, migrateToLatest, migrationStatus } from '../src/store/schema/migrate.js';
import { DatabaseNewerError } from '../src/store/engine/operator-errors.js';
import { getJson, postJson, testConfig } from './helpers/app.js';
import { addContacts, CAMPAIGNS, createCampaign } from './helpers/campaigns.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { copyRows } from './helpers/old-schema.js';
import { createTestDatabase, openTestStore, storeCases, type StoreKind } from './helpers/stores.js';
import { WEBHOOK_TEST_ENV } from './helpers/webhooks.js';

/** The newest migration of the previous schema: the fixture is the database as that version left it. */
const PREVIOUS = '016_webhook_deliveries_by_run';
const API = '/api/v1/public';

async function emptyStore(t: TestContext, kind: StoreKind): Promise<{ store: Store; url: string }> {
  const database = await createTestDatabase(kind, { empty: true });
  const store = openTestStore(database);
  t.after(async () => {
    await store.close();
    await database.drop();
  });
  return { store, url: database.url };
}

/** The service's tables (Kysely's own bookkeeping aside), by name. */
async function tables(store: Store): Promise<string[]> {
  const found = await store.db.introspection.getTables();
  return found.map((table) => table.name).filter((name) => !name.startsWith('kysely_')).sort();
}

/** Every row of every table, in a stable order: what an upgrade must keep. */
async function dump(store: Store, names: string[]): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {};
  for (const name of names) out[name] = (await sql<Record<string, unknown>>`select * from ${sql.table(name)} order by 1`.execute(store.db)).rows;
  return out;
}

/** `after`'s rows with only the columns `before` had: a later migration may add columns. */
function project(after: Record<string, unknown[]>, before: Record<string, unknown[]>): Record<string, unknown[]> {
  const out: Record<string, unknown[]> = {};
  for (const [table, rows] of Object.entries(after)) {
    const columns = Object.keys((before[table]?.[0] ?? {}) as object);
    out[table] = rows.map((row) => Object.fromEntries(columns.map((c) => [c, (row as Record<string, unknown>)[c]])));
  }
  return out;
}

for (const { kind, skip } of await storeCases()) {
  describe(`Upgrades (${kind})`, { skip }, () => {
    it('a database created and filled by the previous schema migrates to the latest, keeps every row of every table, and the service reads them all back', async (t) => {
      // The rows are written by today's service into a database at the latest schema, then copied,
      // column by column, into one at the previous schema: the fixture holds what that schema can
      // hold, without today's code ever writing to an old schema (which breaks as soon as a write
      // touches a newer column).
      const source = await emptyStore(t, kind);
      await migrateToLatest(source.store);
      const deps = buildDeps(testConfig(source.url, WEBHOOK_TEST_ENV), { store: source.store, logger: pino({ level: 'silent' }) });
      const writer = await buildApp(deps);
      t.after(() => writer.close());
      const f = await createOrgFixture(deps);
      const key = f.apiKey;
      const endpoint = await postJson(writer, `${API}/webhook-endpoints`, { url: 'http://127.0.0.1:9/hook', description: 'before the upgrade' }, { key });
      assert.equal(endpoint.statusCode, 201, endpoint.body);
      const suppression = await writer.inject({ method: 'PUT', url: `${API}/suppressions/%2B12025550199`, headers: { 'x-api-key': key, 'content-type': 'application/json' }, payload: '{}' });
      assert.equal(suppression.statusCode < 300, true, suppression.body);
      const runIds: number[] = [];
      for (let i = 0; i < 3; i++) {
        const created = await postJson(writer, PATHS.initiateCall(f.agentUuid), { phone_number: `+1202555012${i}`, initial_context: { name: `Caller ${i}` } }, { key, headers: { 'idempotency-key': randomUUID() } });
        assert.equal(created.statusCode, 200, created.body);
        runIds.push((created.json() as { workflow_run_id: number }).workflow_run_id);
      }
      const campaign = await createCampaign(writer, f);
      await addContacts(writer, f, campaign.id, [{ phone_number: '+12025550150', initial_context: { name: 'Ada' } }, { phone_number: '+12025550151' }]);

      const { store, url } = await emptyStore(t, kind);
      await migrateTo(store, PREVIOUS);
      const pendingAtFixture = (await migrationStatus(store)).pending;
      assert.equal(pendingAtFixture[0], '017_secret_key_check', 'the fixture is at the previous schema');
      await copyRows(kind, source.store, store);
      const app = await buildApp(buildDeps(testConfig(url, WEBHOOK_TEST_ENV), { store, logger: pino({ level: 'silent' }) }));
      t.after(() => app.close());

      const names = await tables(store);
      const before = await dump(store, names);
      for (const table of ['organizations', 'api_keys', 'workflows', 'workflow_definitions', 'telephony_configurations', 'workflow_runs', 'run_events', 'webhook_endpoints', 'webhook_deliveries', 'suppressions', 'campaigns', 'campaign_contacts', 'idempotency_keys']) {
        assert.ok((before[table]?.length ?? 0) > 0, `the fixture has rows in ${table}`);
      }

      assert.deepEqual(await migrateToLatest(store), pendingAtFixture);
      assert.deepEqual(project(await dump(store, names), before), before, 'every row of every table is kept as it was');
      assert.deepEqual((await migrationStatus(store)).pending, []);

      // And the service reads them back.
      const list = await getJson(app, `${API}/workflow-runs?limit=100`, key);
      assert.equal(list.statusCode, 200, list.body);
      assert.deepEqual(((list.json() as { data: { id: number }[] }).data.map((r) => r.id)).sort((a, b) => a - b), runIds);
      let events = 0;
      for (const id of runIds) {
        const run = await getJson(app, `${API}/workflow-runs/${id}`, key);
        assert.equal(run.statusCode, 200, run.body);
        const read = await getJson(app, `${API}/workflow-runs/${id}/events`, key);
        assert.equal(read.statusCode, 200, read.body);
        events += (read.json() as { data: unknown[] }).data.length;
      }
      assert.equal(events, before.run_events?.length, 'every event reads back');
      const endpoints = await getJson(app, `${API}/webhook-endpoints`, key);
      assert.equal((endpoints.json() as { data: { description: string }[] }).data[0]?.description, 'before the upgrade');
      // The runs' deliveries and the campaign's message: every one is the endpoint's.
      const deliveries = await getJson(app, `${API}/webhook-endpoints/${(endpoint.json() as { id: number }).id}/deliveries?limit=100`, key);
      assert.equal(deliveries.statusCode, 200, deliveries.body);
      assert.equal((deliveries.json() as { data: unknown[] }).data.length, before.webhook_deliveries?.length, 'every delivery reads back');
      const suppressed = await getJson(app, `${API}/suppressions/%2B12025550199`, key);
      assert.equal(suppressed.statusCode, 200, suppressed.body);
      const read = await getJson(app, `${CAMPAIGNS}/${campaign.id}`, key);
      assert.equal(read.statusCode, 200, read.body);
      const contacts = await getJson(app, `${CAMPAIGNS}/${campaign.id}/contacts`, key);
      assert.equal((contacts.json() as { data: unknown[] }).data.length, 2);
    });

    it('refuses a database that a newer version has migrated, naming the migrations it does not know, and changes nothing', async (t) => {
      const { store } = await emptyStore(t, kind);
      await migrateTo(store, PREVIOUS);
      await sql`insert into kysely_migration (name, timestamp) values ('999_from_the_future', ${new Date().toISOString()})`.execute(store.db);

      await assert.rejects(migrateToLatest(store), (error: unknown) => {
        assert.ok(error instanceof DatabaseNewerError);
        assert.deepEqual(error.unknown, ['999_from_the_future']);
        assert.match(error.message, /does not know \(999_from_the_future\)/);
        return true;
      });
      const status = await migrationStatus(store);
      assert.equal(status.pending[0], '017_secret_key_check', 'nothing was applied');
      assert.deepEqual(status.unknown.map((m) => m.name), ['999_from_the_future']);
    });

    it('lists applied and pending migrations without creating anything on a fresh database', async (t) => {
      const { store } = await emptyStore(t, kind);
      const fresh = await migrationStatus(store);
      assert.deepEqual(fresh.applied, []);
      assert.equal(fresh.pending[0], '001_initial');
      assert.deepEqual(await tables(store), [], 'the status read created no table');
      await migrateTo(store, '002_dispatch');
      const partial = await migrationStatus(store);
      assert.deepEqual(partial.applied.map((m) => m.name), ['001_initial', '002_dispatch']);
      assert.equal(partial.pending[0], '003_caller_safety');
      assert.ok(partial.applied.every((m) => m.appliedAt instanceof Date && !Number.isNaN(m.appliedAt.getTime())));
    });
  });
}
