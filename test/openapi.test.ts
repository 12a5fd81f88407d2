import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { ERROR_CODES, type ErrorCode } from '../src/errors.js';
import { PROBLEMS } from '../src/http/problems.js';
import { build } from './helpers/app.js';

interface Schema {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean;
}
interface MediaType {
  schema: Schema;
  examples?: Record<string, { summary?: string; value: { code?: string; type?: string; status?: number } }>;
}
interface Operation {
  operationId: string;
  description?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string; required?: boolean }[];
  requestBody?: { required?: boolean; content: Record<string, MediaType> };
  responses: Record<string, { description: string; content?: Record<string, MediaType>; headers?: Record<string, unknown> }>;
}
interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; license?: { name: string; identifier?: string } };
  servers?: { url: string; description?: string }[];
  tags?: { name: string; description?: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, unknown>; schemas?: Record<string, Schema> };
}

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Every operation of the document, as [method, path, operation]. */
function operationsOf(doc: OpenApiDocument): [string, string, Operation][] {
  return Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]): [string, string, Operation] => [method, path, op]));
}

/** The component a `$ref` names. */
function resolve(doc: OpenApiDocument, schema: Schema | undefined): Schema | undefined {
  const name = schema?.$ref?.replace('#/components/schemas/', '');
  return name === undefined ? schema : doc.components.schemas?.[name];
}

function codesWithStatus(status: number): ErrorCode[] {
  return ERROR_CODES.filter((code) => PROBLEMS[code].status === status);
}

const OPERATIONS = [
  { path: '/api/v1/public/agent/{uuid}', operationId: 'initiateCall', param: 'uuid' },
  { path: '/api/v1/public/agent/test/{uuid}', operationId: 'initiateCallTest', param: 'uuid' },
  { path: '/api/v1/public/agent/workflow/{workflow_uuid}', operationId: 'initiateCallByWorkflowUuid', param: 'workflow_uuid' },
  { path: '/api/v1/public/agent/test/workflow/{workflow_uuid}', operationId: 'initiateCallTestByWorkflowUuid', param: 'workflow_uuid' },
] as const;

const PROBLEM_STATUSES = ['400', '401', '404', '408', '409', '413', '415', '422', '429', '431', '500', '503'];

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

  it('documents the 200 response and every problem status as application/problem+json, each with its status\'s problem schema', async (t) => {
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
        const reference = content['application/problem+json']?.schema;
        assert.equal(reference?.$ref, `#/components/schemas/Problem${status}`, `${op.operationId} ${status}`);
        const problem = resolve(doc, reference);
        for (const member of ['type', 'title', 'status', 'detail', 'code', 'request_id']) {
          assert.ok(problem?.required?.includes(member), `${op.operationId} ${status} problem requires ${member}`);
        }
        assert.equal(Boolean(problem?.properties?.errors), status === '422', `${status}: only validation problems list errors`);
      }
    }
  });

  it('declares the ApiKey security scheme (header X-API-Key) and requires it on every public operation', async (t) => {
    const { app } = await build(t, 'sqlite');
    const doc = await openApi(app);
    assert.deepEqual(doc.components.securitySchemes.ApiKey, { type: 'apiKey', in: 'header', name: 'X-API-Key' });
    for (const [method, path, operation] of operationsOf(doc)) {
      // The agent runtime's read is authorized by the per-run token instead; operations take nothing.
      const expected = path.startsWith('/api/v1/runtime/') ? [{ RunToken: [] }] : path.startsWith('/api/v1/public/') ? [{ ApiKey: [] }] : [];
      assert.deepEqual(operation.security, expected, `${method.toUpperCase()} ${path}`);
    }
    assert.deepEqual(doc.components.securitySchemes.RunToken, {
      type: 'http',
      scheme: 'bearer',
      description: 'The per-run token handed to the agent runtime with an answered call.',
    });
  });

  it('documents the public API, the runtime read and the operational endpoints, and leaves out the provider callbacks and /docs', async (t) => {
    const { app } = await build(t, 'sqlite');
    const doc = await openApi(app);
    const operational = ['/healthz', '/readyz', '/metrics', '/openapi.json'];
    for (const path of operational) assert.deepEqual(Object.keys(doc.paths[path] ?? {}), ['get'], path);
    assert.ok(
      Object.keys(doc.paths).every((path) => path.startsWith('/api/v1/public/') || path === '/api/v1/runtime/runs/{id}' || operational.includes(path)),
      Object.keys(doc.paths).join(', '),
    );
    assert.equal(doc.paths['/api/v1/runtime/runs/{id}']?.get?.operationId, 'getRuntimeRun');
  });

  it('names where the service is (servers), the version and licence of package.json, and describes every tag and operation', async (t) => {
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string; license: string };
    const { app } = await build(t, 'sqlite');
    const doc = await openApi(app);
    assert.deepEqual(doc.servers?.map((s) => s.url), ['/'], 'without PUBLIC_BASE_URL, the origin the document came from');
    assert.equal(doc.info.version, pkg.version);
    assert.deepEqual(doc.info.license, { name: 'Apache-2.0', identifier: pkg.license });
    const tags = new Map((doc.tags ?? []).map((tag) => [tag.name, tag.description]));
    for (const [method, path, operation] of operationsOf(doc)) {
      assert.ok(operation.operationId, `${method} ${path} has an operationId`);
      assert.ok(operation.description, `${operation.operationId} is described`);
      for (const tag of operation.tags ?? []) assert.ok(tags.get(tag), `${operation.operationId}: tag ${tag} is declared with a description`);
    }

    const { app: published } = await build(t, 'sqlite', { env: { PUBLIC_BASE_URL: 'https://calls.example.test/' } });
    assert.deepEqual((await openApi(published)).servers?.map((s) => s.url), ['https://calls.example.test']);
  });

  it('declares on every operation the answers any route can give: 400 bad_request, 408 request_timeout, 431 request_header_fields_too_large, 500, 503', async (t) => {
    const { app } = await build(t, 'sqlite');
    const doc = await openApi(app);
    for (const [, , operation] of operationsOf(doc)) {
      for (const [status, code] of [['400', 'bad_request'], ['408', 'request_timeout'], ['431', 'request_header_fields_too_large'], ['500', 'internal_error'], ['503', 'unavailable']]) {
        const examples = operation.responses[status]?.content?.['application/problem+json']?.examples ?? {};
        assert.ok(Object.keys(examples).includes(code as string), `${operation.operationId} declares ${status} ${code}`);
      }
    }
  });

  it('gives each status one problem schema whose code and type list exactly the codes answered with that status', async (t) => {
    const { app } = await build(t, 'sqlite');
    const doc = await openApi(app);
    const schemas = Object.entries(doc.components.schemas ?? {}).filter(([name]) => name.startsWith('Problem'));
    assert.ok(schemas.length > 0);
    for (const [name, schema] of schemas) {
      const status = Number(name.replace('Problem', ''));
      const codes = codesWithStatus(status);
      assert.deepEqual(schema.properties?.code?.enum, codes, name);
      assert.deepEqual(schema.properties?.type?.enum, codes.map((code) => `https://dialtone.dev/problems/${code}`), name);
      assert.deepEqual(schema.properties?.status?.enum, [status], name);
    }
    for (const [, , operation] of operationsOf(doc)) {
      for (const [status, response] of Object.entries(operation.responses)) {
        const reference = response.content?.['application/problem+json']?.schema.$ref;
        if (reference) assert.equal(reference, `#/components/schemas/Problem${status}`, `${operation.operationId} ${status}`);
      }
    }
  });

  it('shows, for every problem response, examples whose code is answered with that status and whose type is under https://dialtone.dev/problems/', async (t) => {
    const { app } = await build(t, 'sqlite');
    const doc = await openApi(app);
    for (const [, , operation] of operationsOf(doc)) {
      for (const [status, response] of Object.entries(operation.responses)) {
        const media = response.content?.['application/problem+json'];
        if (!media) continue;
        const examples = Object.entries(media.examples ?? {});
        assert.ok(examples.length > 0, `${operation.operationId} ${status} has examples`);
        for (const [name, { value }] of examples) {
          const where = `${operation.operationId} ${status} example ${name}`;
          assert.equal(value.code, name, where);
          assert.equal(PROBLEMS[value.code as ErrorCode]?.status, Number(status), `${where}: the code is answered with ${status}`);
          assert.equal(value.status, Number(status), where);
          assert.equal(value.type, `https://dialtone.dev/problems/${value.code}`, where);
        }
      }
    }
    assert.ok(!JSON.stringify(doc).includes('example.com'), 'no placeholder example.com');
  });

  it('declares every code the service answers on some operation, except the Twilio callbacks\' own', async (t) => {
    // A code added to PROBLEMS reaches the per-status schemas by itself; which operations answer it
    // cannot be derived, so a new code fails here until a route lists it (or it is added below).
    const undocumentedOnly: ErrorCode[] = ['invalid_signature'];
    const { app } = await build(t, 'sqlite');
    const doc = await openApi(app);
    const declared = new Set(
      operationsOf(doc).flatMap(([, , operation]) =>
        Object.values(operation.responses).flatMap((response) => Object.keys(response.content?.['application/problem+json']?.examples ?? {})),
      ),
    );
    for (const code of ERROR_CODES) {
      if (undocumentedOnly.includes(code)) assert.ok(!declared.has(code), `${code} is answered by undocumented routes only`);
      else assert.ok(declared.has(code), `${code} (${PROBLEMS[code].status}) is declared by some operation`);
    }
  });

  it('passes `redocly lint` with the recommended rules, without an error or a warning', async (t) => {
    const { app } = await build(t, 'sqlite');
    const served = await app.inject({ method: 'GET', url: '/openapi.json' });
    const dir = await mkdtemp(join(tmpdir(), 'dialtone-openapi-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'openapi.json');
    await writeFile(file, served.body);
    const redocly = join(ROOT, 'node_modules', '.bin', 'redocly');
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
    const run = promisify(execFile);
    // execFile rejects on a non-zero exit; the rejection carries the output to show what failed.
    const { stdout } = await run(redocly, ['lint', file, '--config', join(ROOT, 'redocly.yaml'), '--format', 'json'], { cwd: ROOT, env, timeout: 120_000 }).catch(
      (error: { stdout?: string; stderr?: string; code?: number }) => assert.fail(`redocly lint exited ${error.code}: ${error.stdout}${error.stderr}`),
    );
    const report = JSON.parse(stdout) as { totals: { errors: number; warnings: number; ignored: number }; problems: unknown[] };
    assert.deepEqual(report.problems, []);
    assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 });
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
    for (const [method, url] of [['GET', '/nope'], ['POST', '/api/v1/public/nope'], ['DELETE', '/healthz']] as const) {
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
