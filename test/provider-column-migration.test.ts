// Migration 019 takes the provider CHECK off telephony_configurations, on a database that already
// holds routes, runs and campaigns pointing at them: nothing is lost, the foreign keys, the one-
// default index and the id sequence still hold, and a name the registry adds can be stored.
import assert from 'node:assert/strict';
import pino from 'pino';
import { buildApp } from '../src/app.js';
import { buildDeps, type Deps } from '../src/deps.js';
import { sql } from '../src/store/engine/kysely.js';
import { migrateTo, migrateToLatest } from '../src/store/schema/migrate.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson, testConfig } from './helpers/app.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { copyRows } from './helpers/old-schema.js';
import { createTestDatabase, openTestStore, storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

/** A route row as raw SQL writes it, naming any provider: what the CHECK judged. */
function insertRoute(deps: Deps, orgId: number, provider: string, isDefault: 0 | 1) {
  const now = deps.clock.now();
  return sql`insert into telephony_configurations (org_id, name, provider, settings, caller_ids, is_default, calls_per_second, max_concurrent_calls, status, created_at, updated_at)
    values (${orgId}, ${`${provider} route`}, ${provider}, '{}', '[]', ${isDefault}, 1, 1, 'active', ${now}, ${now})`.execute(deps.store.db);
}

const routes = (deps: Deps) => deps.store.db.selectFrom('telephony_configurations').selectAll().orderBy('id').execute();

for (const store of await storeCases()) {
  describe(`Migration 019, provider names unchecked (${store.kind})`, { skip: store.skip }, () => {
    it('keeps every route and what refers to them, drops the CHECK, and keeps the foreign keys, the one-default index and the ids', async (t) => {
      const database = await createTestDatabase(store.kind, { empty: true });
      const raw = openTestStore(database);
      t.after(async () => {
        await raw.close();
        await database.drop();
      });
      // Written by today's service at the latest schema, then copied into a database at 018
      // (helpers/old-schema.ts): today's writes touch columns 018 does not have.
      const source = await createTestDatabase(store.kind, { empty: true });
      const sourceStore = openTestStore(source);
      t.after(async () => {
        await sourceStore.close();
        await source.drop();
      });
      await migrateToLatest(sourceStore);
      const writer = buildDeps(testConfig(source.url), { store: sourceStore, logger: pino({ level: 'silent' }) });
      const app = await buildApp(writer);
      t.after(() => app.close());
      const f = await createOrgFixture(writer);
      const sip = await createTelephonyConfiguration(writer.store, writer.cipher, { orgId: f.orgId, name: 'Trunk', provider: 'sip', settings: { host: 'trunk.example', transport: 'tcp' }, credentials: { username: 'u', password: 'p' } }, writer.clock.now());
      const created = await postJson(app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123' }, { key: f.apiKey });
      assert.equal(created.statusCode, 200, created.body);
      const runId = created.json().workflow_run_id as number;

      await migrateTo(raw, '018_answered_by');
      await copyRows(store.kind, sourceStore, raw);
      const deps = buildDeps(testConfig(database.url), { store: raw, logger: pino({ level: 'silent' }) });
      await assert.rejects(insertRoute(deps, f.orgId, 'fake', 0), 'before 019 the CHECK refuses a provider it does not list');
      const before = await routes(deps);

      await migrateToLatest(raw);

      assert.deepEqual(await routes(deps), before, 'every route, column by column');
      const run = await deps.store.db.selectFrom('workflow_runs').select('telephony_configuration_id').where('id', '=', runId).executeTakeFirstOrThrow();
      assert.equal(run.telephony_configuration_id, f.telephonyId);
      await insertRoute(deps, f.orgId, 'fake', 0);
      const fake = (await routes(deps)).at(-1);
      assert.equal(fake?.provider, 'fake');
      assert.ok(fake.id > sip.id, `a new route takes the next id (${fake.id} after ${sip.id})`);
      await assert.rejects(insertRoute(deps, f.orgId, 'fake', 1), 'still one default route per organization');
      await assert.rejects(
        deps.store.db.updateTable('workflow_runs').set({ telephony_configuration_id: 999_999 }).where('id', '=', runId).execute(),
        'a run still refers to an existing route only',
      );
      await assert.rejects(deps.store.db.deleteFrom('telephony_configurations').where('id', '=', f.telephonyId).execute(), 'a route with runs cannot be deleted');
      if (store.kind === 'sqlite') {
        const check = await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(deps.store.db);
        assert.equal(check.rows[0]?.foreign_keys, 1, 'foreign keys are enforced again after the rebuild');
        const table = await sql<{ sql: string }>`select sql from sqlite_master where name = 'telephony_configurations'`.execute(deps.store.db);
        assert.doesNotMatch(table.rows[0]?.sql ?? '', /provider in/);
        assert.match(table.rows[0]?.sql ?? '', /status in \('active', 'inactive'\)/, 'the other checks stay');
      }
    });
  });
}
