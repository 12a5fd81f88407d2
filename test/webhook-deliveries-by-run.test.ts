// A run's webhook deliveries, across the organization's endpoints (GET /webhook-deliveries?run_id=):
// every one of them however many other deliveries the endpoints have had since (the console's call
// page used to read each endpoint's latest 100 and miss older runs), read through the run's index.
import assert from 'node:assert/strict';
import { explainRunDeliveries, insertDelivery } from '../src/store/statements/webhook-statements.js';
import { getJson, postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { WEBHOOK_TEST_ENV } from './helpers/webhooks.js';

const DELIVERIES = '/api/v1/public/webhook-deliveries';

interface DeliveryJson {
  id: number;
  endpoint_id: number;
  run_id: number | null;
  event_type: string;
  status: string;
}

async function register(env: DispatchEnv, f: OrgFixture, path: string): Promise<number> {
  // Never reached: the delivery worker does not run in these tests, so every delivery stays pending.
  const response = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: `https://93.184.216.34/${path}` }, { key: f.apiKey });
  assert.equal(response.statusCode, 201, response.body);
  return (response.json() as { id: number }).id;
}

async function endedCall(env: DispatchEnv, f: OrgFixture): Promise<number> {
  const response = await postJson(env.app, `/api/v1/public/agent/${f.agentUuid}`, { phone_number: '+12025550100' }, { key: f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  const runId = (response.json() as { workflow_run_id: number }).workflow_run_id;
  await waitForRun(env, runId, ended);
  return runId;
}

for (const store of await storeCases()) {
  describe(`A run's webhook deliveries (${store.kind})`, { skip: store.skip }, () => {
    it("lists every delivery of a run to every endpoint, newest first and page by page, after 150 newer deliveries to each endpoint, and nothing of another organization's run", async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV, webhooks: false });
      const f = await createOrgFixture(env.deps);
      const [first, second] = [await register(env, f, 'a'), await register(env, f, 'b')];
      const runId = await endedCall(env, f);
      const later = await endedCall(env, f);
      for (const endpointId of [first, second]) {
        for (let i = 0; i < 150; i++) await insertDelivery(env.deps.store, { endpointId, messageId: `msg_test_${endpointId}_${i}`, eventType: 'webhook.test', payload: '{}', at: Date.now() });
      }
      const expected = await env.deps.store.db.selectFrom('webhook_deliveries').select(['id', 'endpoint_id', 'event_type']).where('run_id', '=', runId).orderBy('id', 'desc').execute();
      // queued, dialing, ringing, in_progress, ended: to each endpoint.
      assert.equal(expected.length, 10);

      const listed: DeliveryJson[] = [];
      let url = `${DELIVERIES}?run_id=${runId}&limit=3`;
      for (let pages = 0; ; pages++) {
        assert.ok(pages < 10, 'the pages end');
        const response = await getJson(env.app, url, f.apiKey);
        assert.equal(response.statusCode, 200, response.body);
        const page = response.json() as { data: DeliveryJson[]; next_after: number | null };
        listed.push(...page.data);
        if (page.next_after === null) break;
        url = `${DELIVERIES}?run_id=${runId}&limit=3&after=${page.next_after}`;
      }
      assert.deepEqual(
        listed.map((d) => [d.id, d.endpoint_id, d.event_type, d.run_id]),
        expected.map((d) => [d.id, d.endpoint_id, d.event_type, runId]),
      );
      // The other run's deliveries are not among them; a status filter narrows the list.
      assert.ok(!listed.some((d) => d.run_id === later));
      assert.equal((await getJson(env.app, `${DELIVERIES}?run_id=${runId}&status=succeeded`, f.apiKey)).json().data.length, 0);
      assert.equal((await getJson(env.app, `${DELIVERIES}?run_id=${runId}&status=pending&limit=100`, f.apiKey)).json().data.length, 10);

      const other = await createOrgFixture(env.deps, 'Other');
      assert.deepEqual((await getJson(env.app, `${DELIVERIES}?run_id=${runId}`, other.apiKey)).json(), { data: [], next_after: null });
    });

    it('refuses a list without run_id, or with a malformed one, with 422 validation_failed', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV, start: false });
      const f = await createOrgFixture(env.deps);
      for (const query of ['', '?run_id=', '?run_id=0', '?run_id=abc', '?run_id=1&limit=101', '?run_id=1&colour=red']) {
        assertProblem(await getJson(env.app, `${DELIVERIES}${query}`, f.apiKey), 422, 'validation_failed');
      }
      assertProblem(await getJson(env.app, `${DELIVERIES}?run_id=1`), 401, 'missing_api_key');
    });

    it("reads a run's deliveries through the run's index, not an endpoint's history", async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV, start: false });
      const plan = await explainRunDeliveries(env.deps.store, { orgId: 1, runId: 1, limit: 21 });
      assert.match(plan, /webhook_deliveries_run_idx/, plan);
      assert.doesNotMatch(plan, /webhook_deliveries_endpoint_idx|SCAN d\b|Seq Scan on webhook_deliveries/, plan);
    });
  });
}
