// The queue cap: an organization cannot queue more than its limit, even when its requests race,
// and a refusal is 429 queue_full with a Retry-After; room made by a canceled run is usable at once.
import assert from 'node:assert/strict';
import { setOrganizationLimits } from '../src/orgs/organizations.js';
import { build, postJson } from './helpers/app.js';
import { countRuns, createOrgFixture, PATHS } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const BODY = { phone_number: '+12025550123' };

for (const store of await storeCases()) {
  describe(`Queue cap (${store.kind})`, { skip: store.skip }, () => {
    it('accepts exactly MAX_QUEUED_RUNS_PER_ORG of 30 concurrent requests and refuses the rest with 429 queue_full and Retry-After', async (t) => {
      const { app, deps } = await build(t, store.kind, { env: { MAX_QUEUED_RUNS_PER_ORG: '7' } });
      const f = await createOrgFixture(deps);
      const other = await createOrgFixture(deps, 'Other');
      const responses = await Promise.all(Array.from({ length: 30 }, () => postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key: f.apiKey })));
      assert.equal(responses.filter((r) => r.statusCode === 200).length, 7);
      for (const refused of responses.filter((r) => r.statusCode !== 200)) {
        const problem = assertProblem(refused, 429, 'queue_full');
        assert.equal(problem.max_queued_runs, 7);
        assert.equal(problem.queued_runs, 7);
        // 100 calls per second drain the queue: one slot opens within the first second.
        assert.equal(refused.headers['retry-after'], '1');
      }
      assert.equal(await countRuns(deps), 7);
      const theirs = await postJson(app, PATHS.initiateCall(other.agentUuid), BODY, { key: other.apiKey });
      assert.equal(theirs.statusCode, 200, 'the cap is per organization');

      const queued = responses.find((r) => r.statusCode === 200)?.json().workflow_run_id as number;
      const cancel = await app.inject({ method: 'POST', url: `/api/v1/public/workflow-runs/${queued}/cancel`, headers: { 'x-api-key': f.apiKey } });
      assert.equal(cancel.statusCode, 200, cancel.body);
      assert.equal((await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key: f.apiKey })).statusCode, 200, 'a canceled run frees its place');
      assertProblem(await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key: f.apiKey }), 429, 'queue_full');
    });

    it('uses an organization\'s own cap over the configured one', async (t) => {
      const { app, deps } = await build(t, store.kind, { env: { MAX_QUEUED_RUNS_PER_ORG: '100' } });
      const f = await createOrgFixture(deps);
      await setOrganizationLimits(deps.store, f.orgId, { max_queued_runs: 2 });
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key: f.apiKey })).statusCode);
      assert.deepEqual(statuses, [200, 200, 429]);
    });
  });
}
