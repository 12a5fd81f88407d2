// What reaches the edge of the HTTP server that no well-behaved client sends: bodies nested
// thousands deep, bytes that are not HTTP behind a valid request, requests without Host, odd
// Expect values, stalled bodies, other charsets and compressed bodies, a plugin's own refusals,
// the wrong method. Every answer is problem+json, and nothing is created that the client was told
// was refused.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { build, getJson, postJson } from './helpers/app.js';
import { countRuns, createOrgFixture, PATHS } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { assertRawProblem, exchange, initiateCallBytes, listening, parseResponses, rawSocket, untilClosed } from './helpers/raw-http.js';

const deepArray = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;
const deepObject = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;

describe('Bodies nested deeper than the limit', () => {
  for (const [shape, deep] of [
    ['arrays', deepArray],
    ['objects', deepObject],
  ] as const) {
    it(`answers 422 validation_failed at /initial_context to ${shape} 5,000 levels deep (a few KB), and creates nothing`, async (t) => {
      const { app, deps } = await build(t, 'sqlite');
      const f = await createOrgFixture(deps);
      for (const levels of [10, 5_000, 10_000]) {
        const raw = `{"phone_number":"+12025550123","initial_context":{"a":${deep(levels)}}}`;
        assert.ok(raw.length < 64 * 1024, 'under the body limit, so the depth check is what refuses it');
        const problem = assertProblem(await postJson(app, PATHS.initiateCall(f.agentUuid), undefined, { key: f.apiKey, raw }), 422, 'validation_failed');
        assert.deepEqual(problem.errors?.map((e) => e.pointer), ['/initial_context']);
      }
      assert.equal(await countRuns(deps), 0);
    });
  }

  it('accepts an initial_context exactly INITIAL_CONTEXT_MAX_DEPTH deep and refuses one level more', async (t) => {
    const { app, deps } = await build(t, 'sqlite', { env: { INITIAL_CONTEXT_MAX_DEPTH: '3' } });
    const f = await createOrgFixture(deps);
    const send = (context: string) =>
      postJson(app, PATHS.initiateCall(f.agentUuid), undefined, { key: f.apiKey, raw: `{"phone_number":"+12025550123","initial_context":${context}}` });
    assert.equal((await send('{"a":{"b":[1]}}')).statusCode, 200);
    assertProblem(await send('{"a":{"b":[[1]]}}'), 422, 'validation_failed');
    assert.equal(await countRuns(deps), 1);
  });

  it('refuses a deep body on the cancel route too, before anything walks it', async (t) => {
    const { app, deps } = await build(t, 'sqlite');
    const f = await createOrgFixture(deps);
    const response = await postJson(app, '/api/v1/public/workflow-runs/1/cancel', undefined, { key: f.apiKey, raw: deepArray(20_000) });
    assertProblem(response, 422, 'validation_failed');
  });
});

describe('Refusals by plugins and by Node keep their status', () => {
  it('answers 403 forbidden (not 500) to a traversal path under the docs\' static files', async (t) => {
    const { app } = await build(t, 'sqlite');
    const response = await app.inject({ method: 'GET', url: '/docs/static/..%5c..%5cpackage.json' });
    assertProblem(response, 403, 'forbidden');
    assert.doesNotMatch(response.body, /package\.json|node_modules/);
  });

  it('answers 405 method_not_allowed with Allow to a GET on a POST route, and 404 to an unknown path', async (t) => {
    const { app, deps } = await build(t, 'sqlite');
    const f = await createOrgFixture(deps);
    const wrongMethod = await getJson(app, PATHS.initiateCall(f.agentUuid), f.apiKey);
    assertProblem(wrongMethod, 405, 'method_not_allowed');
    assert.equal(wrongMethod.headers.allow, 'POST');
    const cancel = await getJson(app, '/api/v1/public/workflow-runs/7/cancel', f.apiKey);
    assertProblem(cancel, 405, 'method_not_allowed');
    assertProblem(await getJson(app, '/api/v1/public/nothing-here', f.apiKey), 404, 'not_found');
  });
});

describe('Raw HTTP the parser refuses', () => {
  it('answers the valid request first, then 400, when bytes that are not HTTP follow it in the same write', async (t) => {
    const { port, deps } = await listening(t);
    const f = await createOrgFixture(deps);
    const valid = initiateCallBytes(PATHS.initiateCall(f.agentUuid), f.apiKey, { phone_number: '+12025550123' });
    const [accepted, refused, ...more] = parseResponses(await exchange(t, port, `${valid}\u0000\u0001 this is not HTTP\r\n\r\n`));
    assert.equal(accepted?.status, 200, 'the accepted request gets its answer');
    const run = JSON.parse(accepted?.body ?? '{}') as { workflow_run_id: number };
    assertRawProblem(refused, 400, 'bad_request');
    assert.equal(more.length, 0);
    const stored = await deps.store.db.selectFrom('workflow_runs').select('id').execute();
    assert.deepEqual(stored.map((r) => r.id), [run.workflow_run_id], 'the one run created is the one the client was told about');
  });

  it('answers 400 bad_request problem+json to an HTTP/1.1 request without Host, and serves HTTP/1.0 without it', async (t) => {
    const { port } = await listening(t);
    const missing = rawSocket(t, port);
    const refused = untilClosed(missing);
    missing.write('GET /healthz HTTP/1.1\r\n\r\n');
    assertRawProblem(parseResponses((await refused).text)[0], 400, 'bad_request');

    const old = rawSocket(t, port);
    const served = untilClosed(old);
    old.write('GET /healthz HTTP/1.0\r\n\r\n');
    assert.equal(parseResponses((await served).text)[0]?.status, 200);
  });

  it('answers 417 expectation_failed problem+json to an Expect other than 100-continue, and creates nothing', async (t) => {
    const { port, deps } = await listening(t);
    const f = await createOrgFixture(deps);
    const request = initiateCallBytes(PATHS.initiateCall(f.agentUuid), f.apiKey, { phone_number: '+12025550123' }, 'Expect: 200-ok\r\n');
    assertRawProblem(parseResponses(await exchange(t, port, request))[0], 417, 'expectation_failed');
    assert.equal(await countRuns(deps), 0);
  });

  it('answers 408 request_timeout problem+json to a body that stalls past REQUEST_TIMEOUT_MS, and creates nothing', async (t) => {
    const { port, deps } = await listening(t, { env: { REQUEST_TIMEOUT_MS: '1000', HEADERS_TIMEOUT_MS: '500' } });
    const f = await createOrgFixture(deps);
    const socket = rawSocket(t, port);
    const received = untilClosed(socket);
    const startedAt = Date.now();
    socket.write(`POST ${PATHS.initiateCall(f.agentUuid)} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${f.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"phone_`);
    const { text, closedAt } = await received;
    assertRawProblem(parseResponses(text)[0], 408, 'request_timeout');
    assert.ok(closedAt - startedAt >= 900, `not before REQUEST_TIMEOUT_MS (closed after ${closedAt - startedAt} ms)`);
    assert.equal(await countRuns(deps), 0);
  });
});

describe('Charsets and content encodings', () => {
  const cases: { it: string; headers: Record<string, string> }[] = [
    { it: 'a charset other than UTF-8', headers: { 'content-type': 'application/json; charset=utf-16' } },
    { it: 'a quoted latin-1 charset', headers: { 'content-type': 'application/json; charset="ISO-8859-1"' } },
    { it: 'a gzip Content-Encoding', headers: { 'content-encoding': 'gzip' } },
    { it: 'a deflate Content-Encoding', headers: { 'content-encoding': 'deflate' } },
  ];
  for (const c of cases) {
    it(`answers 415 unsupported_media_type to ${c.it}, and creates nothing`, async (t) => {
      const { app, deps } = await build(t, 'sqlite');
      const f = await createOrgFixture(deps);
      const response = await postJson(app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123' }, { key: f.apiKey, headers: c.headers });
      assertProblem(response, 415, 'unsupported_media_type');
      assert.equal(await countRuns(deps), 0);
    });
  }

  it('accepts UTF-8 however it is spelled, and identity encoding', async (t) => {
    const { app, deps } = await build(t, 'sqlite');
    const f = await createOrgFixture(deps);
    const spellings: Record<string, string>[] = [{ 'content-type': 'application/json; charset=UTF-8' }, { 'content-type': 'application/json;charset="utf-8"' }, { 'content-encoding': 'identity' }];
    for (const headers of spellings) {
      const response = await postJson(app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123', initial_context: { name: 'Zoë' } }, { key: f.apiKey, headers });
      assert.equal(response.statusCode, 200, response.body);
    }
    assert.equal(await countRuns(deps), 3);
  });
});
