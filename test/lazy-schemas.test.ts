import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import pino from 'pino';
import { buildApp } from '../src/app.js';
import { buildDeps } from '../src/deps.js';
import { lazySerializers } from '../src/http/lazy-schemas.js';
import { migrateToLatest } from '../src/store/migrate.js';
import { testConfig } from './helpers/app.js';
import { createTestDatabase, openTestStore } from './helpers/stores.js';

describe('Response serializers compiled on first use', () => {
  it('every response schema of every route still compiles, as Fastify compiles them at start-up without lazy serializers', async (t) => {
    const database = await createTestDatabase('sqlite');
    const store = openTestStore(database);
    t.after(async () => {
      await store.close();
      await database.drop();
    });
    await migrateToLatest(store);
    const deps = buildDeps(testConfig(database.url), { store, logger: pino({ level: 'silent' }) });
    t.after(() => deps.rateLimits.close());
    for (const publicApi of [true, false]) {
      const app = await buildApp(deps, { publicApi, compileResponsesAtStart: true });
      // A schema that cannot be compiled throws here (FST_ERR_SCH_SERIALIZATION_BUILD).
      await app.ready();
      await app.close();
    }
  });

  it('compiles a route\'s serializer on its first answer with that status; one that cannot compile fails that answer, logged with the route and status', async (t) => {
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk: Buffer, _encoding, done) => (lines.push(chunk.toString()), done()) });
    const app = Fastify({ loggerInstance: pino({ level: 'error' }, sink), schemaController: { compilersFactory: { buildSerializer: lazySerializers } } });
    t.after(() => app.close());
    const answer = { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'] };
    // A reference to nothing: fast-json-stringify refuses it when it compiles.
    const broken = { type: 'object', properties: { id: { $ref: 'Nowhere#' } } };
    app.get('/thing', { schema: { response: { 200: answer, 201: broken } } }, async (request, reply) => {
      reply.code(request.query && (request.query as { created?: string }).created ? 201 : 200);
      return { id: 7, secret: 'not in the schema' };
    });
    // Nothing is compiled while the routes are set up, so the broken schema does not stop the start.
    await app.ready();

    const ok = await app.inject({ method: 'GET', url: '/thing' });
    assert.equal(ok.statusCode, 200);
    assert.deepEqual(ok.json(), { id: 7 }, 'serialized by the schema: fields it does not declare are left out');
    const again = await app.inject({ method: 'GET', url: '/thing' });
    assert.deepEqual(again.json(), { id: 7 });

    const failed = await app.inject({ method: 'GET', url: '/thing?created=1' });
    assert.equal(failed.statusCode, 500);
    assert.doesNotMatch(failed.body, /secret/);
    const logged = lines.map((line) => JSON.parse(line) as { err?: { message?: string } }).find((entry) => entry.err?.message?.includes('response schema'));
    assert.ok(logged, `the failure is logged: ${lines.join('')}`);
    assert.match(logged.err?.message ?? '', /^The 201 response schema of GET \/thing cannot be compiled: /);
  });
});
