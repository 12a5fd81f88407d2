// Reading and canceling runs, as a polling client sees them, and who may read /metrics.
import assert from 'node:assert/strict';
import { describe, it } from './helpers/suite.js';
import { build, getJson, postJson, type TestEnv } from './helpers/app.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';

/** A run the app accepted; no dispatcher runs here, so it stays queued until canceled. */
async function queuedRun(env: TestEnv, f: OrgFixture): Promise<number> {
  const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123' }, { key: f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return response.json().workflow_run_id;
}

for (const store of await storeCases()) {
  describe(`Run reads and cancel (${store.kind})`, { skip: store.skip }, () => {
    it('gives a live run\'s last page of events the cursor to poll from, and null only once the run has ended', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const runId = await queuedRun(env, f);
      const events = (after?: number) => getJson(env.app, `/api/v1/public/workflow-runs/${runId}/events${after === undefined ? '' : `?after=${after}`}`, f.apiKey).then((r) => r.json());

      const live = await events();
      assert.deepEqual(live.data.map((e: { type: string }) => e.type), ['queued']);
      assert.equal(live.next_after, 1, 'the run is live: more may come after seq 1');
      const nothingYet = await events(1);
      assert.deepEqual(nothingYet.data, []);
      assert.equal(nothingYet.next_after, 1, 'an empty page of a live run keeps the cursor');

      assert.equal((await postJson(env.app, `/api/v1/public/workflow-runs/${runId}/cancel`, undefined, { key: f.apiKey, raw: '' })).statusCode, 200);
      const ended = await events(1);
      assert.deepEqual(ended.data.map((e: { type: string }) => e.type), ['canceled']);
      assert.equal(ended.next_after, null, 'the run has ended and this page holds its last event');
    });

    it('answers 422 validation_failed to an events page size of 0 or over 1000, and accepts 1 and 1000', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const runId = await queuedRun(env, f);
      const page = (limit: string) => getJson(env.app, `/api/v1/public/workflow-runs/${runId}/events?limit=${limit}`, f.apiKey);
      for (const limit of ['0', '1001', '0005', '-1']) {
        const problem = assertProblem(await page(limit), 422, 'validation_failed');
        assert.deepEqual(problem.errors?.map((e) => e.pointer), ['/limit'], limit);
      }
      assert.equal((await page('1')).json().data.length, 1);
      assert.equal((await page('1000')).statusCode, 200);
    });

    it('records cancel_requested_at on a run canceled while queued', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const runId = await queuedRun(env, f);
      const canceled = (await postJson(env.app, `/api/v1/public/workflow-runs/${runId}/cancel`, undefined, { key: f.apiKey, raw: '' })).json();
      assert.equal(canceled.state, 'canceled');
      assert.equal(typeof canceled.cancel_requested_at, 'string');
      assert.equal(canceled.cancel_requested_at, canceled.ended_at, 'canceled at once, when asked');
    });
  });
}

describe('/metrics', () => {
  const TOKEN = 'metrics-token-0123456789';

  it('with METRICS_TOKEN set, answers 401 invalid_metrics_token without the bearer token or with a wrong one, and serves it with the token', async (t) => {
    const { app } = await build(t, 'sqlite', { env: { METRICS_TOKEN: TOKEN } });
    const scrape = (authorization?: string) => app.inject({ method: 'GET', url: '/metrics', headers: authorization ? { authorization } : {} });
    for (const authorization of [undefined, `Bearer ${TOKEN}x`, TOKEN, `Basic ${TOKEN}`]) {
      const refused = await scrape(authorization);
      assertProblem(refused, 401, 'invalid_metrics_token');
      assert.equal(refused.headers['www-authenticate'], 'Bearer realm="metrics"');
    }
    const served = await scrape(`Bearer ${TOKEN}`);
    assert.equal(served.statusCode, 200);
    assert.match(served.body, /# TYPE dialtone_runs_created_total counter/);
  });

  it('without METRICS_TOKEN, is served to anyone who reaches the port (documented)', async (t) => {
    const { app } = await build(t, 'sqlite');
    assert.equal((await app.inject({ method: 'GET', url: '/metrics' })).statusCode, 200);
  });
});
