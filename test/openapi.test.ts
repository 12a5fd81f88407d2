import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { build } from './helpers/app.js';

interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean;
}
interface MediaType {
  schema: Schema;
}
interface Operation {
  operationId: string;
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string; required?: boolean }[];
  requestBody?: { required?: boolean; content: Record<string, MediaType> };
  responses: Record<string, { description: string; content?: Record<string, MediaType> }>;
}
interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, unknown> };
}

const OPERATIONS = [
  { path: '/api/v1/public/agent/{uuid}', operationId: 'initiateCall', param: 'uuid' },
  { path: '/api/v1/public/agent/test/{uuid}', operationId: 'initiateCallTest', param: 'uuid' },
  { path: '/api/v1/public/agent/workflow/{workflow_uuid}', operationId: 'initiateCallByWorkflowUuid', param: 'workflow_uuid' },
  { path: '/api/v1/public/agent/test/workflow/{workflow_uuid}', operationId: 'initiateCallTestByWorkflowUuid', param: 'workflow_uuid' },
] as const;

const PROBLEM_STATUSES = ['400', '401', '404', '409', '413', '415', '422', '429', '503'];

async function openApi(app: FastifyInstance): Promise<OpenApiDocument> {
  const response = await app.inject({ method: 'GET', url: '/openapi.json' });
  assert.equal(response.statusCode, 200);
  assert.match(String(response.headers['content-type']), /^application\/json/);
  return response.json();
}

describe('GET /openapi.json', () => {
  it('is an OpenAPI 3.1 document with the four Initiate Call operations under their contract paths and operation ids', async (t) => {
    const { app } = await build(t, 'sqlite');
    const doc = await openApi(app);
    assert.match(doc.openapi, /^3\.1\./);
    assert.equal(doc.info.title, 'Dialtone');
    for (const op of OPERATIONS) {
      const item = doc.paths[op.path];
      assert.ok(item, `${op.path} is documented (paths: ${Object.keys(doc.paths).join(', ')})`);
      assert.deepEqual(Object.keys(item), ['post'], `${op.path} is POST only`);
      assert.equal(item.post?.operationId, op.operationId);
      assert.deepEqual(
        item.post?.parameters?.map((p) => [p.in, p.name, p.required]),
        [
          ['path', op.param, true],
          ['header', 'idempotency-key', false],
        ],
      );
      const ok = item.post?.responses?.['200'] as { headers?: Record<string, unknown> } | undefined;
      assert.deepEqual(Object.keys(ok?.headers ?? {}).sort(), ['Idempotent-Replayed', 'RateLimit', 'RateLimit-Policy']);
      const limited = item.post?.responses?.['429'] as { headers?: Record<string, unknown> } | undefined;
      assert.deepEqual(Object.keys(limited?.headers ?? {}).sort(), ['RateLimit', 'RateLimit-Policy', 'Retry-After']);
    }
  });

  it('documents the request body: phone_number required, initial_context and telephony_configuration_id optional, no other fields', async (t) => {
    const { app } = await build(t, 'sqlite');
    const doc = await openApi(app);
    for (const op of OPERATIONS) {
      const body = doc.paths[op.path]?.post?.requestBody;
      assert.equal(body?.required, true, op.operationId);
      assert.deepEqual(Object.keys(body?.content ?? {}), ['application/json']);
      const schema = body?.content['application/json']?.schema;
      assert.equal(schema?.type, 'object');
      assert.equal(schema?.additionalProperties, false, 'unknown fields are refused');
      assert.deepEqual(Object.keys(schema?.properties ?? {}).sort(), ['initial_context', 'phone_number', 'telephony_configuration_id']);
      assert.deepEqual(schema?.required, ['phone_number']);
      assert.equal(schema?.properties?.phone_number?.type, 'string');
      assert.deepEqual(schema?.properties?.initial_context?.type, ['object', 'null']);
      assert.deepEqual(schema?.properties?.telephony_configuration_id?.type, ['integer', 'null']);
    }
  });

  it('documents the 200 response and every problem status as application/problem+json', async (t) => {
    const { app } = await build(t, 'sqlite');
    const doc = await openApi(app);
    for (const op of OPERATIONS) {
      const responses = doc.paths[op.path]?.post?.responses ?? {};
      const ok = responses['200']?.content?.['application/json']?.schema;
      assert.deepEqual(Object.keys(ok?.properties ?? {}).sort(), ['status', 'workflow_run_id', 'workflow_run_name'], op.operationId);
      assert.equal(ok?.properties?.workflow_run_id?.type, 'integer');
      assert.deepEqual(Object.keys(responses).sort(), ['200', ...PROBLEM_STATUSES].sort());
      for (const status of PROBLEM_STATUSES) {
        const content = responses[status]?.content ?? {};
        assert.deepEqual(Object.keys(content), ['application/problem+json'], `${op.operationId} ${status}`);
        const problem = content['application/problem+json']?.schema;
        for (const member of ['type', 'title', 'status', 'detail', 'code', 'request_id']) {
          assert.ok(problem?.required?.includes(member), `${op.operationId} ${status} problem requires ${member}`);
        }
        assert.ok(problem?.properties?.errors, 'validation errors are documented');
      }
    }
  });

  it('declares the ApiKey security scheme (header X-API-Key) and requires it on every public operation', async (t) => {
    const { app } = await build(t, 'sqlite');
    const doc = await openApi(app);
    assert.deepEqual(doc.components.securitySchemes.ApiKey, { type: 'apiKey', in: 'header', name: 'X-API-Key' });
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        // The agent runtime's read is authorized by the per-run token instead.
        const expected = path.startsWith('/api/v1/runtime/') ? [{ RunToken: [] }] : [{ ApiKey: [] }];
        assert.deepEqual(operation.security, expected, `${method.toUpperCase()} ${path}`);
      }
    }
    assert.deepEqual(doc.components.securitySchemes.RunToken, {
      type: 'http',
      scheme: 'bearer',
      description: 'The per-run token handed to the agent runtime with an answered call.',
    });
  });

  it('leaves the operational endpoints and the provider callbacks out of the public document, and documents the runtime read', async (t) => {
    const { app } = await build(t, 'sqlite');
    const doc = await openApi(app);
    for (const path of ['/healthz', '/readyz', '/metrics', '/openapi.json']) assert.equal(doc.paths[path], undefined, path);
    assert.ok(
      Object.keys(doc.paths).every((path) => path.startsWith('/api/v1/public/') || path === '/api/v1/runtime/runs/{id}'),
      Object.keys(doc.paths).join(', '),
    );
    assert.equal(doc.paths['/api/v1/runtime/runs/{id}']?.get?.operationId, 'getRuntimeRun');
  });
});

describe('GET /docs', () => {
  it('serves the interactive documentation as HTML', async (t) => {
    const { app } = await build(t, 'sqlite');
    let url = '/docs';
    let response = await app.inject({ method: 'GET', url });
    for (let hops = 0; response.statusCode >= 300 && response.statusCode < 400 && hops < 5; hops++) {
      url = new URL(String(response.headers.location), `http://localhost${url}`).pathname;
      response = await app.inject({ method: 'GET', url });
    }
    assert.equal(response.statusCode, 200, `${url}: ${response.body.slice(0, 200)}`);
    assert.match(String(response.headers['content-type']), /^text\/html/);
    assert.match(response.body, /<html/i);
  });
});

describe('operational endpoints', () => {
  it('answers GET /healthz and GET /readyz with 200 on a migrated store', async (t) => {
    const { app } = await build(t, 'sqlite');
    const health = await app.inject({ method: 'GET', url: '/healthz' });
    assert.equal(health.statusCode, 200);
    assert.deepEqual(health.json(), { status: 'ok' });
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(ready.statusCode, 200);
    assert.deepEqual(ready.json(), { status: 'ready' });
  });

  it('answers an unknown route with a 404 problem+json, code not_found, carrying the request id', async (t) => {
    const { app } = await build(t, 'sqlite');
    for (const [method, url] of [['GET', '/nope'], ['POST', '/api/v1/public/nope'], ['DELETE', '/nope/healthz']] as const) {
      const response = await app.inject({ method, url });
      assert.equal(response.statusCode, 404, `${method} ${url}`);
      assert.match(String(response.headers['content-type']), /^application\/problem\+json/);
      const problem = response.json();
      assert.equal(problem.code, 'not_found');
      assert.equal(problem.status, 404);
      assert.equal(problem.title, 'Not found');
      assert.equal(problem.request_id, response.headers['x-request-id']);
    }
  });
});
