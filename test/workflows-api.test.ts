// Managing workflows (agents) over the API (docs/api.md, "Management"): an admin key creates one,
// saves drafts, publishes and archives; any key with `calls` reads them and their versions; a key
// without the scope is refused; another organization's workflow is not found; every change is in
// the audit log with its before and after; concurrent changes of one workflow lose no version.
import assert from 'node:assert/strict';
import { createApiKey } from '../src/auth/api-keys.js';
import type { Scope } from '../src/auth/scopes.js';
import { selectAuditEvents } from '../src/store/statements/audit-statements.js';
import { validateDefinition } from '../src/workflows/definition.js';
import { build, getJson, postJson, type TestEnv } from './helpers/app.js';
import { createOrgFixture, definition, PATHS } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const WORKFLOWS = '/api/v1/public/workflows';

interface VersionJson {
  version: number;
  status: string;
  created_at: string;
  published_at: string | null;
  agent_uuids: string[];
}
interface WorkflowJson {
  workflow_uuid: string;
  name: string;
  status: string;
  published_version: number | null;
  draft_version: number | null;
  agent_uuids: string[];
  draft_agent_uuids: string[];
  published: VersionJson | null;
  draft: VersionJson | null;
}

function put(env: TestEnv, url: string, body: unknown, key: string) {
  return env.app.inject({ method: 'PUT', url, headers: { 'x-api-key': key, 'content-type': 'application/json' }, payload: JSON.stringify(body) });
}

async function keyWith(env: TestEnv, orgId: number, scopes: Scope[]): Promise<string> {
  return (await createApiKey(env.deps.store, orgId, `only ${scopes.join(',')}`, env.deps.clock.now(), { scopes })).key;
}

for (const store of await storeCases()) {
  describe(`Workflow management (${store.kind})`, { skip: store.skip }, () => {
    it('creates a workflow, saves a draft, publishes and archives it, reads its versions, and audits each change with before and after', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const created = await postJson(env.app, WORKFLOWS, { name: 'Reminder', definition: definition({ greeting: 'Hi {{name}}' }) }, { key: f.apiKey, headers: { 'idempotency-key': 'reminder' } });
      assert.equal(created.statusCode, 201, created.body);
      const workflow = created.json() as WorkflowJson;
      assert.equal(workflow.name, 'Reminder');
      assert.equal(workflow.status, 'active');
      assert.equal(workflow.published_version, 1);
      assert.equal(workflow.draft, null);
      assert.equal(workflow.published?.version, 1);
      assert.equal(workflow.agent_uuids.length, 1);
      const uuid = workflow.workflow_uuid;

      // A retry under the same Idempotency-Key answers the same and creates nothing.
      const replay = await postJson(env.app, WORKFLOWS, { name: 'Reminder', definition: definition({ greeting: 'Hi {{name}}' }) }, { key: f.apiKey, headers: { 'idempotency-key': 'reminder' } });
      assert.equal(replay.statusCode, 201);
      assert.equal(replay.headers['idempotent-replayed'], 'true');
      assert.deepEqual(replay.json(), workflow);
      assert.equal(((await getJson(env.app, WORKFLOWS, f.apiKey)).json() as { data: unknown[] }).data.length, 2, 'the fixture\'s workflow and this one');

      // The agent places calls at once.
      assert.equal((await postJson(env.app, PATHS.initiateCall(workflow.agent_uuids[0] ?? ''), { phone_number: '+12025550123' }, { key: f.apiKey })).statusCode, 200);

      // A draft: the body is the definition; trigger nodes keep their agent UUID.
      const drafted = await put(env, `${WORKFLOWS}/${uuid}/draft`, definition({ greeting: 'Hello again {{name}}' }), f.apiKey);
      assert.equal(drafted.statusCode, 200, drafted.body);
      const draft = drafted.json() as { workflow_uuid: string; version: number; status: string; definition: { nodes: { data: Record<string, unknown> }[] } };
      assert.equal(draft.version, 2);
      assert.equal(draft.status, 'draft');
      assert.equal(draft.definition.nodes[0]?.data.trigger_uuid, workflow.agent_uuids[0]);
      const shown = (await getJson(env.app, `${WORKFLOWS}/${uuid}`, f.apiKey)).json() as WorkflowJson;
      assert.deepEqual([shown.published_version, shown.draft_version, shown.draft?.version, shown.published?.version], [1, 2, 2, 1]);

      // Publishing names the draft reviewed: another version is refused and changes nothing.
      const stale = await postJson(env.app, `${WORKFLOWS}/${uuid}/publish`, { version: 1 }, { key: f.apiKey });
      assert.equal(stale.statusCode, 409, stale.body);
      assert.deepEqual([(stale.json() as { code: string }).code, (stale.json() as { draft_version: number }).draft_version], ['workflow_state_conflict', 2]);
      const published = await postJson(env.app, `${WORKFLOWS}/${uuid}/publish`, { version: 2 }, { key: f.apiKey });
      assert.equal(published.statusCode, 200, published.body);
      assert.deepEqual([(published.json() as WorkflowJson).published_version, (published.json() as WorkflowJson).draft], [2, null]);
      const nothing = await postJson(env.app, `${WORKFLOWS}/${uuid}/publish`, {}, { key: f.apiKey });
      assert.equal(nothing.statusCode, 409, 'no draft to publish');

      // Versions, newest first, paged; one version's definition.
      const versions: VersionJson[] = [];
      let url = `${WORKFLOWS}/${uuid}/versions?limit=1`;
      for (let pages = 0; pages < 5; pages++) {
        const page = (await getJson(env.app, url, f.apiKey)).json() as { data: VersionJson[]; next_after: number | null };
        versions.push(...page.data);
        if (page.next_after === null) break;
        url = `${WORKFLOWS}/${uuid}/versions?limit=1&after=${page.next_after}`;
      }
      assert.deepEqual(versions.map((v) => [v.version, v.status]), [[2, 'published'], [1, 'archived']]);
      const first = await getJson(env.app, `${WORKFLOWS}/${uuid}/versions/1`, f.apiKey);
      assert.equal(first.statusCode, 200, first.body);
      assert.equal((first.json() as { definition: { nodes: { data: { greeting?: string } }[] } }).definition.nodes[1]?.data.greeting, 'Hi {{name}}');
      assert.equal((await getJson(env.app, `${WORKFLOWS}/${uuid}/versions/9`, f.apiKey)).statusCode, 404);
      assert.equal((await getJson(env.app, `${WORKFLOWS}/${uuid}/versions/nine`, f.apiKey)).statusCode, 404);

      const archived = await postJson(env.app, `${WORKFLOWS}/${uuid}/archive`, {}, { key: f.apiKey });
      assert.equal(archived.statusCode, 200, archived.body);
      assert.equal((archived.json() as WorkflowJson).status, 'archived');
      assert.equal((await postJson(env.app, `${WORKFLOWS}/${uuid}/archive`, {}, { key: f.apiKey })).statusCode, 200, 'archiving again answers it as it is');
      assert.equal((await put(env, `${WORKFLOWS}/${uuid}/draft`, definition(), f.apiKey)).statusCode, 409, 'an archived workflow is changed no more');
      assert.equal((await postJson(env.app, PATHS.initiateCall(workflow.agent_uuids[0] ?? ''), { phone_number: '+12025550123' }, { key: f.apiKey })).statusCode, 404, 'its agent no longer answers');

      const entries = await selectAuditEvents(env.deps.store, f.orgId, { targetType: 'workflow', targetId: uuid }, 10);
      assert.deepEqual(
        entries.map((e) => [e.action, e.actor, e.actor_key_id === null ? null : Number(e.actor_key_id), e.actor_key_name]),
        [
          ['workflow.archived', 'api_key', f.apiKeyId, 'test key'],
          ['workflow.published', 'api_key', f.apiKeyId, 'test key'],
          ['workflow.draft_saved', 'api_key', f.apiKeyId, 'test key'],
          ['workflow.created', 'api_key', f.apiKeyId, 'test key'],
        ],
        'one entry per change (none for the refused ones, the replay or the second archive)',
      );
      const [archivedEntry, publishedEntry, draftEntry, createdEntry] = entries.map((e) => ({ before: JSON.parse(e.before ?? 'null') as Record<string, unknown> | null, after: JSON.parse(e.after ?? 'null') as Record<string, unknown> | null }));
      assert.equal(createdEntry?.before, null);
      assert.deepEqual({ ...createdEntry?.after, definition: undefined }, { workflow_uuid: uuid, name: 'Reminder', status: 'active', published_version: 1, draft_version: null, definition: undefined });
      assert.deepEqual([draftEntry?.before?.draft_version, draftEntry?.after?.draft_version, draftEntry?.before?.definition], [null, 2, null]);
      assert.equal((draftEntry?.after?.definition as { nodes: { data: { greeting?: string } }[] }).nodes[1]?.data.greeting, 'Hello again {{name}}');
      assert.deepEqual([publishedEntry?.before?.published_version, publishedEntry?.before?.draft_version, publishedEntry?.after?.published_version, publishedEntry?.after?.draft_version], [1, 2, 2, null]);
      assert.deepEqual([archivedEntry?.before?.status, archivedEntry?.after?.status], ['active', 'archived']);
    });

    it('lists every problem of a definition with the validator\'s own JSON Pointers, and creates or saves nothing', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const broken = { nodes: [{ id: 'start', type: 'start', data: { greeting: 42 } }, { id: 'x', type: 'teleport', data: {} }], edges: [{ source: 'start', target: 'nowhere' }] };
      const expected = validateDefinition(broken, { allowMissingTriggerUuids: true });
      assert.ok(!expected.ok && expected.errors.length > 1, 'the example has several problems');

      const drafted = await put(env, `${WORKFLOWS}/${f.workflowUuid}/draft`, broken, f.apiKey);
      assert.equal(drafted.statusCode, 422, drafted.body);
      const problem = drafted.json() as { code: string; errors: { pointer: string; detail: string }[] };
      assert.equal(problem.code, 'validation_failed');
      assert.deepEqual(problem.errors, expected.errors, 'the draft\'s body is the definition: the pointers are the validator\'s exactly');

      const created = await postJson(env.app, WORKFLOWS, { name: 'Broken', definition: broken }, { key: f.apiKey });
      assert.equal(created.statusCode, 422, created.body);
      assert.deepEqual((created.json() as typeof problem).errors, expected.errors.map((e) => ({ pointer: `/definition${e.pointer}`, detail: e.detail })), 'located under /definition in a creation');
      const missing = await postJson(env.app, WORKFLOWS, { definition: definition() }, { key: f.apiKey });
      assert.equal(missing.statusCode, 422);

      const listed = (await getJson(env.app, WORKFLOWS, f.apiKey)).json() as { data: WorkflowJson[] };
      assert.deepEqual(listed.data.map((w) => [w.name, w.draft_version]), [['Acme agent', null]]);
      assert.equal((await selectAuditEvents(env.deps.store, f.orgId, { targetType: 'workflow', actor: 'api_key' }, 10)).length, 0, 'nothing refused was recorded (the fixture\'s workflow was made as the CLI makes one)');
    });

    it('lets a key without admin read workflows but change none, a key without calls read none, and answers 404 for another organization\'s workflow, changing nothing', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const other = await createOrgFixture(env.deps, 'Other');
      await put(env, `${WORKFLOWS}/${other.workflowUuid}/draft`, definition({ greeting: 'other draft' }), other.apiKey);
      const callsOnly = await keyWith(env, f.orgId, ['calls']);
      const adminOnly = await keyWith(env, f.orgId, ['admin']);
      const own = f.workflowUuid;
      const reads = (uuid: string) => [`${WORKFLOWS}/${uuid}`, `${WORKFLOWS}/${uuid}/versions`, `${WORKFLOWS}/${uuid}/versions/1`];
      const changes = (uuid: string): [string, string, unknown][] => [
        ['POST', WORKFLOWS, { name: 'x', definition: definition() }],
        ['PUT', `${WORKFLOWS}/${uuid}/draft`, definition()],
        ['POST', `${WORKFLOWS}/${uuid}/publish`, {}],
        ['POST', `${WORKFLOWS}/${uuid}/archive`, {}],
      ];
      const send = (method: string, url: string, body: unknown, key: string) =>
        env.app.inject({ method: method as 'POST', url, headers: { 'x-api-key': key, 'content-type': 'application/json' }, payload: JSON.stringify(body) });

      for (const url of [WORKFLOWS, ...reads(own)]) {
        assert.equal((await getJson(env.app, url, callsOnly)).statusCode, 200, `calls reads ${url}`);
        const refused = await getJson(env.app, url, adminOnly);
        assert.equal(refused.statusCode, 403, `admin alone does not read ${url}`);
        assert.deepEqual([(refused.json() as { code: string }).code, (refused.json() as { required_scope: string }).required_scope], ['insufficient_scope', 'calls']);
      }
      for (const [method, url, body] of changes(own)) {
        const refused = await send(method, url, body, callsOnly);
        assert.equal(refused.statusCode, 403, `${method} ${url} without admin`);
        assert.equal((refused.json() as { required_scope: string }).required_scope, 'admin');
      }
      for (const url of reads(other.workflowUuid)) {
        const answer = await getJson(env.app, url, f.apiKey);
        assert.equal(answer.statusCode, 404, url);
        assert.equal((answer.json() as { code: string }).code, 'workflow_not_found');
      }
      for (const [method, url, body] of changes(other.workflowUuid).slice(1)) {
        const answer = await send(method, url, body, f.apiKey);
        assert.equal(answer.statusCode, 404, `${method} ${url}`);
        assert.equal((answer.json() as { code: string }).code, 'workflow_not_found');
      }
      const untouched = (await getJson(env.app, `${WORKFLOWS}/${other.workflowUuid}`, other.apiKey)).json() as WorkflowJson;
      assert.deepEqual([untouched.status, untouched.published_version, untouched.draft_version], ['active', 1, 2]);
      assert.deepEqual((await selectAuditEvents(env.deps.store, f.orgId, { targetType: 'workflow', actor: 'api_key' }, 10)).length, 0, 'nothing refused was recorded');
      assert.deepEqual((await selectAuditEvents(env.deps.store, other.orgId, { targetType: 'workflow' }, 10)).map((e) => [e.action, e.actor]), [['workflow.draft_saved', 'api_key'], ['workflow.created', 'cli']]);
    });

    it('loses no version when publishes and draft saves of one workflow race', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const uuid = f.workflowUuid;
      for (let round = 0; round < 3; round++) {
        assert.equal((await put(env, `${WORKFLOWS}/${uuid}/draft`, definition({ greeting: `round ${round}` }), f.apiKey)).statusCode, 200);
        const answers = await Promise.all([
          postJson(env.app, `${WORKFLOWS}/${uuid}/publish`, {}, { key: f.apiKey }),
          postJson(env.app, `${WORKFLOWS}/${uuid}/publish`, {}, { key: f.apiKey }),
          put(env, `${WORKFLOWS}/${uuid}/draft`, definition({ greeting: `round ${round} a` }), f.apiKey),
          put(env, `${WORKFLOWS}/${uuid}/draft`, definition({ greeting: `round ${round} b` }), f.apiKey),
        ]);
        const [publishA, publishB, saveA, saveB] = answers;
        assert.deepEqual([saveA?.statusCode, saveB?.statusCode], [200, 200], `both drafts saved: ${saveA?.body} ${saveB?.body}`);
        // Each publish either published a draft or found none left (the other took it): never an error.
        for (const publish of [publishA, publishB]) assert.ok(publish?.statusCode === 200 || (publish?.statusCode === 409 && (publish.json() as { code: string }).code === 'workflow_state_conflict'), publish?.body);
        assert.ok([publishA, publishB].some((p) => p?.statusCode === 200), 'a draft was there for the first publish');
      }
      const rows = await env.deps.store.db
        .selectFrom('workflow_definitions')
        .innerJoin('workflows', 'workflows.id', 'workflow_definitions.workflow_id')
        .select(['workflow_definitions.version', 'workflow_definitions.status'])
        .where('workflows.workflow_uuid', '=', uuid)
        .orderBy('version')
        .execute();
      // 1 + three rounds of three drafts: every save is a version of its own, numbered without a gap.
      assert.deepEqual(rows.map((r) => Number(r.version)), Array.from({ length: 10 }, (_, i) => i + 1));
      assert.equal(rows.filter((r) => r.status === 'published').length, 1);
      assert.ok(rows.filter((r) => r.status === 'draft').length <= 1);
      const saves = (await selectAuditEvents(env.deps.store, f.orgId, { action: 'workflow.draft_saved' }, 20)).map((e) => (JSON.parse(e.after ?? '{}') as { draft_version: number }).draft_version);
      assert.deepEqual([...saves].sort((a, b) => a - b), Array.from({ length: 9 }, (_, i) => i + 2), 'each save recorded with the version it made');
      const publishes = await selectAuditEvents(env.deps.store, f.orgId, { action: 'workflow.published' }, 20);
      // Each published entry's before is what the previous one's after left: no publish overwrote another unseen.
      const chain = publishes.reverse().map((e) => [(JSON.parse(e.before ?? '{}') as { published_version: number }).published_version, (JSON.parse(e.after ?? '{}') as { published_version: number }).published_version]);
      for (let i = 1; i < chain.length; i++) assert.equal(chain[i]?.[0], chain[i - 1]?.[1], JSON.stringify(chain));
    });
  });
}
