// Each node keeps what it read about keys, agents and routes for LOOKUP_CACHE_TTL_MS: a change
// takes effect on every node within that time, never later. Time is a fake clock, moved by hand.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { describe, it } from './helpers/suite.js';
import pino from 'pino';
import { buildApp } from '../src/app.js';
import { revokeApiKey } from '../src/auth/api-keys.js';
import { buildDeps } from '../src/deps.js';
import type { Clock } from '../src/shared/clock.js';
import { migrateToLatest } from '../src/store/schema/migrate.js';
import { setTelephonyStatus } from '../src/telephony/configurations.js';
import { archiveWorkflow, publishDraft, saveDraft } from '../src/workflows/workflows.js';
import { postJson, testConfig, type TestEnv } from './helpers/app.js';
import { createOrgFixture, definition, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { createTestDatabase, openTestStore, storeCases, type StoreKind } from './helpers/stores.js';

const TTL_MS = 1_000;
const START = Date.UTC(2026, 10, 23, 12);

class FakeClock implements Clock {
  constructor(public at = START) {}
  now(): number {
    return this.at;
  }
}

/** `nodes` apps on one fresh database, each with its own deps (and so its own cache), sharing one fake clock. */
async function nodesOnOneDatabase(t: TestContext, kind: StoreKind, nodes: number): Promise<{ envs: TestEnv[]; clock: FakeClock }> {
  const database = await createTestDatabase(kind);
  const clock = new FakeClock();
  const envs: TestEnv[] = [];
  for (let i = 0; i < nodes; i++) {
    const store = openTestStore(database);
    const deps = buildDeps(testConfig(database.url, { LOOKUP_CACHE_TTL_MS: String(TTL_MS) }), { store, clock, logger: pino({ level: 'silent' }) });
    if (i === 0) await migrateToLatest(store);
    const app = await buildApp(deps);
    envs.push({ app, deps, close: async () => { await app.close(); await deps.rateLimits.close(); await store.close(); } });
  }
  t.after(async () => {
    for (const env of envs) await env.close();
    await database.drop();
  });
  return { envs, clock };
}

const call = (env: TestEnv, f: OrgFixture, path = PATHS.initiateCall(f.agentUuid)) => postJson(env.app, path, { phone_number: '+12025550123' }, { key: f.apiKey });

for (const store of await storeCases()) {
  describe(`Lookup cache (${store.kind})`, { skip: store.skip }, () => {
    it('honours a revoked key until LOOKUP_CACHE_TTL_MS has passed since the node read it, and refuses it after', async (t) => {
      const { envs: [node], clock } = await nodesOnOneDatabase(t, store.kind, 1);
      assert.ok(node);
      const f = await createOrgFixture(node.deps);
      assert.equal((await call(node, f)).statusCode, 200);
      await revokeApiKey(node.deps.store, f.apiKeyId, clock.now());
      clock.at += TTL_MS - 1;
      assert.equal((await call(node, f)).statusCode, 200, 'within the TTL the node still uses what it read');
      clock.at += 2;
      assertProblem(await call(node, f), 401, 'invalid_api_key');
    });

    it('stops serving an archived agent, and a disabled route, within LOOKUP_CACHE_TTL_MS', async (t) => {
      const { envs: [node], clock } = await nodesOnOneDatabase(t, store.kind, 1);
      assert.ok(node);
      const f = await createOrgFixture(node.deps);
      assert.equal((await call(node, f)).statusCode, 200);
      await setTelephonyStatus(node.deps.store, f.telephonyId, 'inactive', clock.now());
      clock.at += TTL_MS + 1;
      assertProblem(await call(node, f), 422, 'telephony_not_configured');
      await archiveWorkflow(node.deps.store, f.workflowUuid, clock.now());
      clock.at += TTL_MS + 1;
      assertProblem(await call(node, f), 404, 'agent_not_found');
    });

    if (store.kind === 'postgres') {
      it('takes a new published version, a revoked key and an archived agent into account on every node within LOOKUP_CACHE_TTL_MS', async (t) => {
        const { envs: [a, b], clock } = await nodesOnOneDatabase(t, store.kind, 2);
        assert.ok(a && b);
        const f = await createOrgFixture(a.deps, 'Acme', definition({ greeting: 'v1' }));
        const version = async (env: TestEnv) => {
          const response = await call(env, f);
          assert.equal(response.statusCode, 200, response.body);
          const run = await env.deps.store.db.selectFrom('workflow_runs as r').innerJoin('workflow_definitions as d', 'd.id', 'r.definition_id').select('d.version').where('r.id', '=', response.json().workflow_run_id).executeTakeFirstOrThrow();
          return run.version;
        };
        assert.equal(await version(a), 1);
        assert.equal(await version(b), 1);
        // Node A publishes version 2 (keeping the agent UUID); node B has read version 1.
        await saveDraft(a.deps.store, f.workflowUuid, definition({ greeting: 'v2', triggerUuid: f.agentUuid }), clock.now());
        await publishDraft(a.deps.store, f.workflowUuid, clock.now());
        clock.at += TTL_MS + 1;
        assert.equal(await version(b), 2, 'node B runs the new version once its copy is older than the TTL');
        assert.equal(await version(a), 2);

        await revokeApiKey(a.deps.store, f.apiKeyId, clock.now());
        clock.at += TTL_MS + 1;
        assertProblem(await call(b, f), 401, 'invalid_api_key');
        assertProblem(await call(a, f), 401, 'invalid_api_key');
      });

      it('stops serving an agent archived on one node on the other within LOOKUP_CACHE_TTL_MS', async (t) => {
        const { envs: [a, b], clock } = await nodesOnOneDatabase(t, store.kind, 2);
        assert.ok(a && b);
        const f = await createOrgFixture(a.deps);
        assert.equal((await call(b, f)).statusCode, 200);
        await archiveWorkflow(a.deps.store, f.workflowUuid, clock.now());
        clock.at += TTL_MS + 1;
        assertProblem(await call(b, f), 404, 'agent_not_found');
      });
    }
  });
}
