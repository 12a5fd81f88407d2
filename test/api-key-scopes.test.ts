// API key scopes (docs/api.md, "Scopes"): every route of the public API requires one scope; a key
// without it is refused with 403 insufficient_scope naming it, before anything else about the
// request is looked at, and a key holding it gets past. The table is the app's own list of the
// routes it registered (a route added without a scope fails the app's start: the last test here).
import assert from 'node:assert/strict';
import Fastify from 'fastify';
import { authenticateApiKey, createApiKey, hashKey } from '../src/auth/api-keys.js';
import { SCOPES, type Scope } from '../src/auth/scopes.js';
import { declareScopes, requiresAnyScope, requiresScope, type PublicRoute } from '../src/http/scopes.js';
import { migrateTo, migrateToLatest } from '../src/store/schema/migrate.js';
import { sql } from '../src/store/engine/kysely.js';
import { build } from './helpers/app.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { createTestDatabase, openTestStore, storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const STREAM = '/api/v1/public/stream';

/** A concrete URL for a route pattern: every parameter `1` (the scope is checked before any is read). */
function urlOf(route: PublicRoute): string {
  return route.url.replace(/:[A-Za-z_]+/g, '1').replace(/\*$/, '1');
}

for (const store of await storeCases()) {
  describe(`API key scopes (${store.kind})`, { skip: store.skip }, () => {
    it('refuses every public route with 403 insufficient_scope naming its scope to a key without it, and lets a key with only that scope past', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const routes = env.app.publicRoutes.filter((route) => route.method !== 'HEAD');
      assert.ok(routes.length >= 30, `walked ${routes.length} routes`);
      const without = new Map<Scope, string>();
      const only = new Map<Scope, string>();
      for (const scope of SCOPES) {
        without.set(scope, (await createApiKey(env.deps.store, f.orgId, `all but ${scope}`, Date.now(), { scopes: SCOPES.filter((s) => s !== scope) })).key);
        only.set(scope, (await createApiKey(env.deps.store, f.orgId, `only ${scope}`, Date.now(), { scopes: [scope] })).key);
      }
      const seen = new Set<Scope>();
      for (const route of routes) {
        if (route.scope === 'any') {
          // A route any key may use: every key holding one scope alone gets past.
          for (const [scope, key] of only) {
            const answer = await env.app.inject({ method: route.method as 'GET', url: urlOf(route), headers: { 'x-api-key': key } });
            assert.ok(![401, 403].includes(answer.statusCode), `${route.method} ${route.url} with only ${scope}: ${answer.statusCode} ${answer.body}`);
          }
          continue;
        }
        const scope = route.scope;
        const send = (key: string, query = '') =>
          env.app.inject({
            method: route.method as 'GET',
            url: `${urlOf(route)}${query}`,
            headers: { 'x-api-key': key, ...(route.method === 'GET' || route.method === 'DELETE' ? {} : { 'content-type': 'application/json' }) },
            ...(route.method === 'GET' || route.method === 'DELETE' ? {} : { payload: '{}' }),
          });
        const refused = await send(without.get(scope) as string);
        assert.equal(refused.statusCode, 403, `${route.method} ${route.url} without ${scope}: ${refused.body}`);
        const problem = refused.json() as { code: string; required_scope: string; detail: string };
        assert.equal(problem.code, 'insufficient_scope');
        assert.equal(problem.required_scope, scope);
        assert.match(problem.detail, new RegExp(`"${scope}"`));
        // The stream, let through, would stay open: a malformed cursor makes it answer at once, after the scope.
        const allowed = await send(only.get(scope) as string, route.url === STREAM ? '?last_event_id=nope' : '');
        assert.ok(![401, 403].includes(allowed.statusCode), `${route.method} ${route.url} with only ${scope}: ${allowed.statusCode} ${allowed.body}`);
        seen.add(scope);
      }
      for (const scope of ['calls', 'campaigns', 'webhooks'] as const) assert.ok(seen.has(scope), `some route requires ${scope}`);
      assert.deepEqual(routes.filter((r) => r.scope === 'any').map((r) => `${r.method} ${r.url}`), ['GET /api/v1/public/api-keys/current'], 'only a key\'s reading of itself takes any key');
    });

    it('documents on each operation the scope its route enforces', async (t) => {
      const env = await build(t, store.kind);
      const doc = (await env.app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, { security?: { ApiKey?: string[] }[] }>> };
      for (const route of env.app.publicRoutes.filter((r) => r.method !== 'HEAD')) {
        const path = route.url.replace(/:([A-Za-z_]+)/g, '{$1}');
        assert.deepEqual(doc.paths[path]?.[route.method.toLowerCase()]?.security, [{ ApiKey: route.scope === 'any' ? [] : [route.scope] }], `${route.method} ${route.url}`);
      }
    });

    it('gives every key that existed before scopes every scope, so nothing it could do stops working', async (t) => {
      const database = await createTestDatabase(store.kind, { empty: true });
      const db = openTestStore(database);
      t.after(async () => {
        await db.close();
        await database.drop();
      });
      await migrateTo(db, '025_audit_events');
      // A key as the previous schema wrote it: no scopes column.
      const key = `dt_live_OLDKEY0001_${'a'.repeat(32)}`;
      await sql`insert into organizations (name, created_at) values ('Old', 1)`.execute(db.db);
      await sql`insert into api_keys (org_id, name, prefix, hash, created_at) values (1, 'old key', 'dt_live_OLDKEY0001', ${hashKey(key)}, 1)`.execute(db.db);
      await migrateToLatest(db);
      const auth = await authenticateApiKey(db, key, 2, 60_000);
      assert.deepEqual(auth?.scopes, [...SCOPES]);
    });

    it('creates a key with only the scopes it is given', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const created = await createApiKey(env.deps.store, f.orgId, 'crm', Date.now(), { scopes: ['campaigns', 'calls'] });
      assert.deepEqual(created.scopes, ['calls', 'campaigns']);
      const auth = await authenticateApiKey(env.deps.store, created.key, Date.now(), 60_000);
      assert.deepEqual(auth?.scopes, ['calls', 'campaigns']);
    });
  });
}

describe('Declaring scopes', () => {
  it('refuses, when the app starts, a public route that declares no scope, and records one that takes any key as `any`', async () => {
    const app = Fastify();
    const registered: PublicRoute[] = [];
    await assert.rejects(async () => {
      await app.register(async (api) => {
        declareScopes(api, registered);
        api.get('/scoped', { schema: { security: requiresScope('calls') } }, async () => 'ok');
        api.get('/any-key', { schema: { security: requiresAnyScope() } }, async () => 'ok');
        api.get('/unscoped', { schema: { summary: 'no security requirement at all' } }, async () => 'no');
      });
      await app.ready();
    }, /GET \/unscoped declares no scope/);
    assert.deepEqual(registered.filter((route) => route.method === 'GET'), [{ method: 'GET', url: '/scoped', scope: 'calls' }, { method: 'GET', url: '/any-key', scope: 'any' }]);
  });
});
