// Tenant isolation and safe failure, on both stores. Another organization's agents, workflows,
// telephony configurations and runs are "not found" (never "forbidden"): a key learns nothing
// about rows it does not own, and a 5xx never shows how the service is built.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { revokeApiKey } from '../src/auth/api-keys.js';
import type { ErrorCode } from '../src/errors.js';
import { build, getJson, postJson } from './helpers/app.js';
import { countRuns, createOrgFixture, OPERATION_CASES } from './helpers/fixtures.js';
import { assertProblem, type Problem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const OK_BODY = { phone_number: '+12025550123' };
const UNKNOWN_KEY = `dt_live_${'A'.repeat(10)}_${'B'.repeat(32)}`;
const PROBLEM_MEMBERS = ['code', 'detail', 'request_id', 'status', 'title', 'type'];
const runUrl = (id: number | string) => `/api/v1/public/workflow-runs/${id}`;

/** Two refusals that must not tell their targets apart: the same body once the named id is masked. */
function assertIndistinguishable(a: Problem, aId: string, b: Problem, bId: string): void {
  const mask = ({ request_id: _id, ...rest }: Problem, id: string) => ({ ...rest, detail: rest.detail.split(id).join('<id>') });
  assert.deepEqual(mask(a, aId), mask(b, bId));
}

for (const store of await storeCases()) {
  describe(`Security (${store.kind})`, { skip: store.skip }, () => {
    describe('another organization\'s rows are not found, never forbidden', () => {
      for (const op of OPERATION_CASES) {
        const code: ErrorCode = op.target === 'agent' ? 'agent_not_found' : 'workflow_not_found';

        it(`${op.name}: answers 404 ${code} to another organization's ${op.target} UUID, exactly as to an unknown one, and creates nothing`, async (t) => {
          const { app, deps } = await build(t, store.kind);
          const a = await createOrgFixture(deps, 'A');
          const b = await createOrgFixture(deps, 'B');
          const foreignUuid = op.target === 'agent' ? a.agentUuid : a.workflowUuid;
          const unknownUuid = randomUUID();

          const foreign = assertProblem(await postJson(app, op.path(a), OK_BODY, { key: b.apiKey }), 404, code);
          const unknown = assertProblem(await postJson(app, op.path({ agentUuid: unknownUuid, workflowUuid: unknownUuid }), OK_BODY, { key: b.apiKey }), 404, code);
          assertIndistinguishable(foreign, foreignUuid, unknown, unknownUuid);
          assert.equal(await countRuns(deps), 0, 'nothing was created');

          const own = await postJson(app, op.path(a), OK_BODY, { key: a.apiKey });
          assert.equal(own.statusCode, 200, 'the owner can still use it');
        });

        it(`${op.name}: answers 404 telephony_configuration_not_found to another organization's telephony configuration id, and creates nothing`, async (t) => {
          const { app, deps } = await build(t, store.kind);
          const a = await createOrgFixture(deps, 'A');
          const b = await createOrgFixture(deps, 'B');
          const unknownId = a.telephonyId + b.telephonyId + 1000;

          const foreign = assertProblem(
            await postJson(app, op.path(b), { ...OK_BODY, telephony_configuration_id: a.telephonyId }, { key: b.apiKey }),
            404,
            'telephony_configuration_not_found',
          );
          const unknown = assertProblem(
            await postJson(app, op.path(b), { ...OK_BODY, telephony_configuration_id: unknownId }, { key: b.apiKey }),
            404,
            'telephony_configuration_not_found',
          );
          assertIndistinguishable(foreign, String(a.telephonyId), unknown, String(unknownId));
          assert.equal(await countRuns(deps), 0, 'nothing was created');
        });
      }

      it('GET workflow-runs answers 404 workflow_run_not_found to another organization\'s run, exactly as to an unknown id', async (t) => {
        const { app, deps } = await build(t, store.kind);
        const a = await createOrgFixture(deps, 'A');
        const b = await createOrgFixture(deps, 'B');
        const created = await postJson(app, OPERATION_CASES[0].path(a), OK_BODY, { key: a.apiKey });
        assert.equal(created.statusCode, 200, created.body);
        const runId: number = created.json().workflow_run_id;
        const unknownId = runId + 1000;

        assert.equal((await getJson(app, runUrl(runId), a.apiKey)).statusCode, 200, 'the owner reads its run');
        const foreign = assertProblem(await getJson(app, runUrl(runId), b.apiKey), 404, 'workflow_run_not_found');
        const unknown = assertProblem(await getJson(app, runUrl(unknownId), b.apiKey), 404, 'workflow_run_not_found');
        assertIndistinguishable(foreign, String(runId), unknown, String(unknownId));
        assert.equal(await countRuns(deps), 1);
      });
    });

    describe('GET /api/v1/public/workflow-runs/{id}', () => {
      it('answers 401 without a key or with an unknown or revoked key, the same whether the run exists or not', async (t) => {
        const { app, deps } = await build(t, store.kind);
        const a = await createOrgFixture(deps, 'A');
        const created = await postJson(app, OPERATION_CASES[0].path(a), OK_BODY, { key: a.apiKey });
        const runId: number = created.json().workflow_run_id;
        const revoked = await createOrgFixture(deps, 'Revoked');
        await revokeApiKey(deps.store, revoked.apiKeyId, deps.clock.now());

        const cases: [string | undefined, ErrorCode][] = [
          [undefined, 'missing_api_key'],
          [UNKNOWN_KEY, 'invalid_api_key'],
          ['not-a-key', 'invalid_api_key'],
          [revoked.apiKey, 'invalid_api_key'],
        ];
        for (const [key, code] of cases) {
          const existing = assertProblem(await getJson(app, runUrl(runId), key), 401, code);
          const missing = assertProblem(await getJson(app, runUrl(runId + 1000), key), 401, code);
          const { request_id: _a, ...existingRest } = existing;
          const { request_id: _b, ...missingRest } = missing;
          assert.deepEqual(existingRest, missingRest, `key ${key ?? '(none)'}: nothing about the run is revealed`);
        }
      });

      it('answers 404 workflow_run_not_found for ids that are not positive integers', async (t) => {
        const { app, deps } = await build(t, store.kind);
        const a = await createOrgFixture(deps, 'A');
        const created = await postJson(app, OPERATION_CASES[0].path(a), OK_BODY, { key: a.apiKey });
        assert.equal(created.statusCode, 200, created.body);
        for (const id of ['abc', '0', '-1', '1.5', '1e0', '0x1', '%201', '1%20OR%201%3D1', '9'.repeat(16)]) {
          assertProblem(await getJson(app, runUrl(id), a.apiKey), 404, 'workflow_run_not_found');
        }
      });

      it('answers 404 problem+json with a request id for a URL the router cannot match (over-long segment, bad percent-encoding)', async (t) => {
        const { app, deps } = await build(t, store.kind);
        const a = await createOrgFixture(deps, 'A');
        const urls = [runUrl('9'.repeat(400)), runUrl('%E0%A4%A'), `/api/v1/public/agent/${'a'.repeat(400)}`];
        for (const url of urls) {
          for (const key of [a.apiKey, undefined]) {
            const response = await getJson(app, url, key);
            const body = assertProblem(response, 404, 'not_found');
            assert.deepEqual(Object.keys(body).sort(), PROBLEM_MEMBERS);
            assert.ok(!response.body.includes('FST_'), `no framework internals: ${response.body}`);
          }
          const post = await postJson(app, url, OK_BODY, { key: a.apiKey });
          assertProblem(post, 404, 'not_found');
        }
        assert.equal(await countRuns(deps), 0);
      });
    });

    describe('a 5xx never reveals internals', () => {
      it('answers a request against an unreachable store with 503 unavailable, Retry-After and only the request id to trace it', async (t) => {
        const { app, deps } = await build(t, store.kind);
        const a = await createOrgFixture(deps, 'A');
        await deps.store.close();

        const requests = [
          () => postJson(app, OPERATION_CASES[0].path(a), OK_BODY, { key: a.apiKey, headers: { 'x-request-id': 'trace-closed-store' } }),
          () => app.inject({ method: 'GET', url: runUrl(1), headers: { 'x-api-key': a.apiKey, 'x-request-id': 'trace-closed-store' } }),
        ];
        for (const send of requests) {
          const response = await send();
          assert.equal(response.statusCode, 503, response.body);
          assert.match(String(response.headers['content-type']), /^application\/problem\+json(;|$)/);
          const body = response.json() as Problem;
          assert.equal(body.code, 'unavailable');
          assert.equal(body.status, response.statusCode);
          assert.equal(body.request_id, 'trace-closed-store', 'the caller\'s request id, to find the logged cause');
          assert.equal(response.headers['x-request-id'], 'trace-closed-store');
          assert.deepEqual(Object.keys(body).sort(), PROBLEM_MEMBERS, 'no extra members (stack, cause, query)');
          assert.equal(response.headers['retry-after'], '1', '503 carries Retry-After');
          const text = response.body.toLowerCase();
          for (const leak of ['stack', 'error:', ' at ', 'select', 'insert', 'sql', 'kysely', 'driver', 'destroyed', 'pool', 'postgres', 'sqlite', 'node_modules', '/work/', '.ts']) {
            assert.ok(!text.includes(leak), `the body mentions "${leak}": ${response.body}`);
          }
        }
      });
    });
  });
}
