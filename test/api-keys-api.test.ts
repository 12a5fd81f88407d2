// Managing API keys over the API (docs/api.md, "Management"): an admin key creates a key (the
// secret once), lists and revokes them; another organization's key is not found; each change is in
// the audit log, which never holds a secret.
import assert from 'node:assert/strict';
import { selectAuditEvents } from '../src/store/statements/audit-statements.js';
import { build, getJson, postJson } from './helpers/app.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const KEYS = '/api/v1/public/api-keys';

interface KeyJson {
  id: number;
  name: string;
  prefix: string;
  scopes: string[];
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  key?: string | null;
}

for (const store of await storeCases()) {
  describe(`API key management (${store.kind})`, { skip: store.skip }, () => {
    it('creates a key that works with only its scopes, shows its secret once, lists and revokes it, and audits each change without the secret', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const created = await postJson(env.app, KEYS, { name: 'crm', scopes: ['calls'] }, { key: f.apiKey, headers: { 'idempotency-key': 'crm-key' } });
      assert.equal(created.statusCode, 201, created.body);
      const key = created.json() as KeyJson;
      assert.match(key.key ?? '', /^dt_live_[A-Za-z0-9]{10}_[A-Za-z0-9]{32}$/);
      assert.deepEqual({ ...key, key: undefined, created_at: undefined }, { id: key.id, name: 'crm', prefix: key.prefix, scopes: ['calls'], created_at: undefined, last_used_at: null, revoked_at: null, key: undefined });
      const secret = key.key as string;

      // The new key places calls and reads runs, and nothing else.
      assert.equal((await getJson(env.app, '/api/v1/public/workflow-runs', secret)).statusCode, 200);
      assert.equal((await getJson(env.app, '/api/v1/public/campaigns', secret)).statusCode, 403);
      assert.equal((await getJson(env.app, KEYS, secret)).statusCode, 403);

      // A retry under the same Idempotency-Key creates nothing and does not show the secret again.
      const replay = await postJson(env.app, KEYS, { name: 'crm', scopes: ['calls'] }, { key: f.apiKey, headers: { 'idempotency-key': 'crm-key' } });
      assert.equal(replay.statusCode, 201);
      assert.equal(replay.headers['idempotent-replayed'], 'true');
      assert.deepEqual(replay.json(), { ...key, key: null });

      const listed = await getJson(env.app, KEYS, f.apiKey);
      assert.equal(listed.statusCode, 200);
      assert.ok(!listed.body.includes(secret.slice(key.prefix.length + 1)), 'the listing never shows the secret');
      assert.ok(!listed.body.includes('hash'), 'nor a hash');
      assert.deepEqual((listed.json() as { data: KeyJson[] }).data.map((k) => [k.name, k.scopes]), [['test key', ['calls', 'campaigns', 'webhooks', 'admin']], ['crm', ['calls']]]);

      const revoked = await postJson(env.app, `${KEYS}/${key.id}/revoke`, {}, { key: f.apiKey });
      assert.equal(revoked.statusCode, 200, revoked.body);
      assert.ok((revoked.json() as KeyJson).revoked_at);
      assert.equal((await getJson(env.app, '/api/v1/public/workflow-runs', secret)).statusCode, 401, 'a revoked key is refused');
      const again = await postJson(env.app, `${KEYS}/${key.id}/revoke`, {}, { key: f.apiKey });
      assert.equal((again.json() as KeyJson).revoked_at, (revoked.json() as KeyJson).revoked_at, 'revoking again keeps the first time');

      const entries = await selectAuditEvents(env.deps.store, f.orgId, { targetType: 'api_key' }, 10);
      assert.deepEqual(
        entries.map((e) => [e.action, e.actor, e.actor_key_id === null ? null : Number(e.actor_key_id), e.actor_key_name, e.target_id]),
        [
          ['api_key.revoked', 'api_key', f.apiKeyId, 'test key', String(key.id)],
          ['api_key.created', 'api_key', f.apiKeyId, 'test key', String(key.id)],
          ['api_key.created', 'cli', null, null, String(f.apiKeyId)],
        ],
        'one entry per change, by the key that made it (the fixture\'s own key was made as the CLI makes one)',
      );
      const written = JSON.stringify(await env.deps.store.db.selectFrom('audit_events').selectAll().execute());
      assert.ok(!written.includes(secret.slice(key.prefix.length + 1)), 'no audit entry holds the secret');
      assert.deepEqual(JSON.parse(entries[1]?.after ?? '{}'), { id: key.id, name: 'crm', prefix: key.prefix, scopes: ['calls'], created_at: Date.parse(key.created_at), last_used_at: null, revoked_at: null });
      assert.deepEqual(JSON.parse(entries[0]?.before ?? '{}').revoked_at, null);
    });

    it('pages the keys by id, and answers 404 for another organization\'s key, changing nothing', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const other = await createOrgFixture(env.deps, 'Other');
      for (const name of ['a', 'b', 'c']) assert.equal((await postJson(env.app, KEYS, { name, scopes: ['webhooks'] }, { key: f.apiKey })).statusCode, 201);
      const names: string[] = [];
      let url = `${KEYS}?limit=2`;
      for (let pages = 0; pages < 5; pages++) {
        const page = (await getJson(env.app, url, f.apiKey)).json() as { data: KeyJson[]; next_after: number | null };
        names.push(...page.data.map((k) => k.name));
        if (page.next_after === null) break;
        url = `${KEYS}?limit=2&after=${page.next_after}`;
      }
      assert.deepEqual(names, ['test key', 'a', 'b', 'c']);

      for (const [method, url] of [['GET', `${KEYS}/${other.apiKeyId}`], ['POST', `${KEYS}/${other.apiKeyId}/revoke`]] as const) {
        const answer = await env.app.inject({ method, url, headers: { 'x-api-key': f.apiKey } });
        assert.equal(answer.statusCode, 404, `${method} ${url}`);
        assert.equal((answer.json() as { code: string }).code, 'api_key_not_found');
      }
      assert.equal((await getJson(env.app, '/api/v1/public/workflow-runs', other.apiKey)).statusCode, 200, 'the other organization\'s key still works');
      assert.deepEqual((await selectAuditEvents(env.deps.store, other.orgId, { action: 'api_key.revoked' }, 10)).length, 0);
    });

    it('tells any valid key, whatever its scopes, what it is and may do at /api-keys/current (never its secret), and refuses no key or a revoked one', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const secrets: Record<string, string> = {};
      for (const scope of ['calls', 'campaigns', 'webhooks'] as const) {
        const made = await postJson(env.app, KEYS, { name: `only <b>${scope}</b>`, scopes: [scope] }, { key: f.apiKey });
        secrets[scope] = (made.json() as KeyJson).key as string;
      }
      for (const [scope, secret] of Object.entries(secrets)) {
        const answer = await getJson(env.app, `${KEYS}/current`, secret);
        assert.equal(answer.statusCode, 200, `${scope}: ${answer.body}`);
        const current = answer.json() as KeyJson;
        assert.equal(current.name, `only <b>${scope}</b>`);
        assert.deepEqual(current.scopes, [scope]);
        assert.ok(secret.startsWith(current.prefix));
        assert.ok(!answer.body.includes(secret.slice(current.prefix.length + 1)), 'never the secret');
        assert.equal(current.key, undefined);
      }
      const admin = (await getJson(env.app, `${KEYS}/current`, f.apiKey)).json() as KeyJson;
      assert.deepEqual([admin.id, admin.scopes], [f.apiKeyId, ['calls', 'campaigns', 'webhooks', 'admin']]);
      // `current` is not an id: the route is its own, not a lookup of a key named so.
      assert.equal((await getJson(env.app, `${KEYS}/current`, 'dt_live_wrong')).statusCode, 401);
      assert.equal((await env.app.inject({ method: 'GET', url: `${KEYS}/current` })).statusCode, 401);
      const calls = ((await getJson(env.app, `${KEYS}/current`, secrets.calls as string)).json() as KeyJson).id;
      assert.equal((await postJson(env.app, `${KEYS}/${calls}/revoke`, {}, { key: f.apiKey })).statusCode, 200);
      assert.equal((await getJson(env.app, `${KEYS}/current`, secrets.calls as string)).statusCode, 401);
    });

    it('refuses a key without a name or scopes, or with an unknown scope, listing every problem, and creates nothing', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const refused = await postJson(env.app, KEYS, { name: '', scopes: ['calls', 'everything'] }, { key: f.apiKey });
      assert.equal(refused.statusCode, 422, refused.body);
      const problem = refused.json() as { code: string; errors: { pointer: string }[] };
      assert.equal(problem.code, 'validation_failed');
      assert.deepEqual([...new Set(problem.errors.map((e) => e.pointer))].sort(), ['/name', '/scopes/1']);
      assert.equal(((await getJson(env.app, KEYS, f.apiKey)).json() as { data: unknown[] }).data.length, 1);
    });
  });
}
