import assert from 'node:assert/strict';
import { publishDraft, saveDraft } from '../src/workflows/workflows.js';
import { build, getJson, postJson } from './helpers/app.js';
import { createOrgFixture, definition, OPERATION_CASES } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const PHONE = '+12025550123';

for (const store of await storeCases()) {
  describe(`Initiate Call operations (${store.kind})`, { skip: store.skip }, () => {
    for (const op of OPERATION_CASES) {
      describe(op.name, () => {
        it('creates a durable queued run and answers 200 with its id and name', async (t) => {
          const { app, deps } = await build(t, store.kind);
          const f = await createOrgFixture(deps);
          const response = await postJson(app, op.path(f), { phone_number: '+1 (202) 555-0123', initial_context: { name: 'Ada', nested: { a: [1, 2] } } }, { key: f.apiKey });

          assert.equal(response.statusCode, 200, response.body);
          const body = response.json();
          assert.equal(body.status, 'queued');
          assert.equal(typeof body.workflow_run_id, 'number');
          assert.equal(body.workflow_run_name, `${op.mode === 'test' ? 'WR-TEST' : 'WR-API'}-${body.workflow_run_id}`);
          assert.deepEqual(Object.keys(body).sort(), ['status', 'workflow_run_id', 'workflow_run_name']);
          assert.match(String(response.headers['x-request-id']), /.+/);

          const run = (await getJson(app, `/api/v1/public/workflow-runs/${body.workflow_run_id}`, f.apiKey)).json();
          assert.equal(run.state, 'queued');
          assert.equal(run.mode, op.mode);
          assert.equal(run.phone_number, PHONE, 'stored in E.164');
          assert.equal(run.workflow_uuid, f.workflowUuid);
          assert.equal(run.agent_uuid, op.target === 'agent' ? f.agentUuid : null);
          assert.equal(run.definition_version, 1);
          assert.equal(run.telephony_configuration_id, f.telephonyId);
          assert.equal(run.caller_id, '+12025550100');
          assert.deepEqual(run.initial_context, { name: 'Ada', nested: { a: [1, 2] } }, 'the caller\'s context, untouched');

          const events = await deps.store.db.selectFrom('run_events').selectAll().where('run_id', '=', body.workflow_run_id).execute();
          assert.deepEqual(events.map((e) => [e.seq, e.type]), [[1, 'queued']]);
        });

        it('uses the explicitly named telephony configuration when one is given', async (t) => {
          const { app, deps } = await build(t, store.kind);
          const f = await createOrgFixture(deps);
          const { createTelephonyConfiguration } = await import('../src/telephony/configurations.js');
          const second = await createTelephonyConfiguration(deps.store, deps.cipher, { orgId: f.orgId, name: 'Second', provider: 'simulator', callerIds: ['+12025550111'] }, deps.clock.now());
          const response = await postJson(app, op.path(f), { phone_number: PHONE, telephony_configuration_id: second.id }, { key: f.apiKey });
          assert.equal(response.statusCode, 200, response.body);
          const run = (await getJson(app, `/api/v1/public/workflow-runs/${response.json().workflow_run_id}`, f.apiKey)).json();
          assert.equal(run.telephony_configuration_id, second.id);
          assert.equal(run.caller_id, '+12025550111');
        });

        if (op.mode === 'published') {
          it('runs the published version, ignores drafts, and pins each run to the version it started with', async (t) => {
            const { app, deps } = await build(t, store.kind);
            const f = await createOrgFixture(deps);
            const start = async () => {
              const response = await postJson(app, op.path(f), { phone_number: PHONE }, { key: f.apiKey });
              assert.equal(response.statusCode, 200, response.body);
              return response.json().workflow_run_id as number;
            };
            const version = async (runId: number) => (await getJson(app, `/api/v1/public/workflow-runs/${runId}`, f.apiKey)).json().definition_version;

            const first = await start();
            await saveDraft(deps.store, f.workflowUuid, definition({ triggerUuid: f.agentUuid, greeting: 'v2' }), deps.clock.now());
            const whileDraft = await start();
            assert.equal(await version(whileDraft), 1, 'a draft is never run by a published operation');

            await publishDraft(deps.store, f.workflowUuid, deps.clock.now());
            const afterPublish = await start();
            assert.equal(await version(afterPublish), 2, 'the newly published version runs');
            assert.equal(await version(first), 1, 'an earlier run stays pinned to its version');
            assert.equal(await version(whileDraft), 1);
          });
        } else {
          it('runs the latest draft when there is one, and the published definition otherwise', async (t) => {
            const { app, deps } = await build(t, store.kind);
            const f = await createOrgFixture(deps);
            const versionOfNewRun = async () => {
              const response = await postJson(app, op.path(f), { phone_number: PHONE }, { key: f.apiKey });
              assert.equal(response.statusCode, 200, response.body);
              assert.match(response.json().workflow_run_name, /^WR-TEST-\d+$/);
              return (await getJson(app, `/api/v1/public/workflow-runs/${response.json().workflow_run_id}`, f.apiKey)).json().definition_version;
            };
            assert.equal(await versionOfNewRun(), 1, 'no draft: the published definition');
            await saveDraft(deps.store, f.workflowUuid, definition({ triggerUuid: f.agentUuid, greeting: 'v2' }), deps.clock.now());
            assert.equal(await versionOfNewRun(), 2, 'the draft');
            await saveDraft(deps.store, f.workflowUuid, definition({ triggerUuid: f.agentUuid, greeting: 'v3' }), deps.clock.now());
            assert.equal(await versionOfNewRun(), 3, 'the latest draft');
            await publishDraft(deps.store, f.workflowUuid, deps.clock.now());
            assert.equal(await versionOfNewRun(), 3, 'published, no draft left');
          });
        }
      });
    }

    it('fills the template context from variable defaults without requiring them in initial_context', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps, 'Defaults', definition({ variables: { topic: { required: true, default: 'billing' } } }));
      const response = await postJson(app, `/api/v1/public/agent/${f.agentUuid}`, { phone_number: PHONE, initial_context: null }, { key: f.apiKey });
      assert.equal(response.statusCode, 200, response.body);
    });
  });
}

for (const store of await storeCases()) {
  describe(`Run names (${store.kind})`, { skip: store.skip }, () => {
    it('names every run after its own id when refused creations share its moment (their writes rolled back)', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const suppressed = '+12025550199';
      const put = await app.inject({ method: 'PUT', url: `/api/v1/public/suppressions/${encodeURIComponent(suppressed)}`, headers: { 'x-api-key': f.apiKey } });
      assert.equal(put.statusCode, 200, put.body);
      const responses = await Promise.all(
        Array.from({ length: 24 }, (_, i) => postJson(app, `/api/v1/public/agent/${f.agentUuid}`, { phone_number: i % 3 === 0 ? suppressed : PHONE }, { key: f.apiKey })),
      );
      const accepted = responses.filter((r) => r.statusCode === 200).map((r) => r.json() as { workflow_run_id: number; workflow_run_name: string });
      assert.equal(accepted.length, 16, 'the suppressed number refused, every other accepted');
      assert.equal(new Set(accepted.map((a) => a.workflow_run_id)).size, 16, 'no id twice');
      for (const a of accepted) assert.equal(a.workflow_run_name, `WR-API-${a.workflow_run_id}`);
      const stored = await deps.store.db.selectFrom('workflow_runs').select(['id', 'name']).execute();
      assert.equal(stored.length, 16);
      for (const row of stored) assert.equal(row.name, `WR-API-${row.id}`);
    });
  });
}
