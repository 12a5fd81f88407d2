import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import pino from 'pino';
import { buildApp } from '../src/app.js';
import { buildDeps } from '../src/deps.js';
import { lazySerializers, lazyValidators } from '../src/http/lazy-schemas.js';
import { migrateToLatest } from '../src/store/schema/migrate.js';
import { testConfig } from './helpers/app.js';
import { createTestDatabase, openTestStore } from './helpers/stores.js';

describe('Request validators and response serializers compiled on first use', () => {
  it('every request and response schema of every route still compiles, as Fastify compiles them at start-up without lazy compilers', async (t) => {
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
      const app = await buildApp(deps, { publicApi, compileSchemasAtStart: true });
      // A schema that cannot be compiled throws here (FST_ERR_SCH_VALIDATION_BUILD, FST_ERR_SCH_SERIALIZATION_BUILD).
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

  it('validates each request part with the schema on first use, header names matched in lowercase as Fastify matches them', async (t) => {
    const app = Fastify({ schemaController: { compilersFactory: { buildValidator: lazyValidators, buildSerializer: lazySerializers } }, ajv: { customOptions: { removeAdditional: false, coerceTypes: false, allErrors: true } } });
    t.after(() => app.close());
    app.post(
      '/things/:id',
      {
        schema: {
          params: { type: 'object', properties: { id: { type: 'string', pattern: '^[0-9]+$' } }, required: ['id'] },
          querystring: { type: 'object', properties: { dry_run: { type: 'string', enum: ['true', 'false'] } }, additionalProperties: false },
          headers: { type: 'object', properties: { 'X-Thing-Token': { type: 'string', minLength: 3 } }, required: ['X-Thing-Token'] },
          body: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'], additionalProperties: false },
        },
      },
      async (request) => ({ id: (request.params as { id: string }).id }),
    );
    await app.ready();
    const send = (url: string, headers: Record<string, string>, body: unknown) => app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json', ...headers }, payload: JSON.stringify(body) });

    const ok = await send('/things/42?dry_run=true', { 'x-thing-token': 'abc' }, { name: 'a' });
    assert.equal(ok.statusCode, 200, ok.body);
    assert.deepEqual(ok.json(), { id: '42' });
    for (const [what, response, part] of [
      ['params', await send('/things/x', { 'x-thing-token': 'abc' }, { name: 'a' }), 'params'],
      ['querystring', await send('/things/1?other=1', { 'x-thing-token': 'abc' }, { name: 'a' }), 'querystring'],
      ['a missing header', await send('/things/1', {}, { name: 'a' }), 'headers'],
      ['a short header', await send('/things/1', { 'X-Thing-Token': 'ab' }, { name: 'a' }), 'headers'],
      ['body', await send('/things/1', { 'x-thing-token': 'abc' }, { name: 'a', extra: 1 }), 'body'],
    ] as const) {
      assert.equal(response.statusCode, 400, `${what}: ${response.body}`);
      assert.match(response.json().message, new RegExp(`^${part}`), what);
    }
  });

  it('refuses at start-up a headers schema whose names it cannot lowercase', async (t) => {
    const app = Fastify({ schemaController: { compilersFactory: { buildValidator: lazyValidators } } });
    t.after(() => app.close());
    app.get('/nested', { schema: { headers: { type: 'object', allOf: [{ properties: { 'X-A': { type: 'string' } } }] } } }, async () => 'ok');
    await assert.rejects(async () => app.ready(), /headers schema of GET \/nested is not a flat object of header names \(allOf\)/);
  });

  it('fails a request whose schema cannot compile on first use, naming the route and part', async (t) => {
    const lines: string[] = [];
    const sink = new Writable({ write: (chunk: Buffer, _encoding, done) => (lines.push(chunk.toString()), done()) });
    const app = Fastify({ loggerInstance: pino({ level: 'error' }, sink), schemaController: { compilersFactory: { buildValidator: lazyValidators } } });
    t.after(() => app.close());
    app.post('/broken', { schema: { body: { type: 'object', properties: { id: { $ref: 'Nowhere#' } } } } }, async () => 'ok');
    await app.ready();
    const response = await app.inject({ method: 'POST', url: '/broken', headers: { 'content-type': 'application/json' }, payload: '{}' });
    assert.equal(response.statusCode, 500);
    const logged = lines.map((line) => JSON.parse(line) as { err?: { message?: string } }).find((entry) => entry.err?.message?.includes('schema of'));
    assert.match(logged?.err?.message ?? lines.join(''), /^The body schema of POST \/broken cannot be compiled: /);
  });
});
