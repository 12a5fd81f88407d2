// A problem's `type` URI names documentation the service itself serves (RFC 9457 section 3.1.1):
// /problems/<code>, a page per code saying what it is, when it happens and what to do.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildApp } from '../src/app.js';
import { ERROR_CODES } from '../src/errors.js';
import { PROBLEM_GUIDE } from '../src/http/problem-guide.js';
import { PROBLEMS } from '../src/http/problems.js';
import { build } from './helpers/app.js';
import { assertProblem } from './helpers/problems.js';

/** Undoes the pages' HTML escaping, to compare their text with the tables'. */
const unescape = (html: string) => html.replace(/&#39;/g, "'").replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

describe('GET /problems/{code}', () => {
  it('resolves the type of every problem code, on a listening app, to a page naming its title, status, when it happens and what to do', async (t) => {
    const { app } = await build(t, 'sqlite');
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    // A real problem's type, resolved as a client resolves it: against the URL it asked for.
    const refused = await fetch(`${base}/api/v1/public/workflow-runs`);
    const { type } = (await refused.json()) as { type: string };
    const page = await fetch(new URL(type, refused.url));
    assert.equal(page.status, 200, `${type} resolves`);
    for (const code of ERROR_CODES) {
      // Every code's type, as the problem body and the OpenAPI document give it.
      const response = await fetch(new URL(`/problems/${code}`, `${base}/api/v1/public/agent/x`));
      assert.equal(response.status, 200, code);
      assert.match(String(response.headers.get('content-type')), /^text\/html; charset=utf-8/);
      assert.equal(response.headers.get('x-frame-options'), 'DENY');
      assert.match(String(response.headers.get('content-security-policy')), /default-src 'none'/);
      const text = unescape(await response.text());
      assert.ok(text.includes(`<h1>${PROBLEMS[code].title}</h1>`), `${code}: its title`);
      assert.ok(text.includes(`<code>${code}</code>`), `${code}: its code`);
      assert.ok(text.includes(`<dd>${PROBLEMS[code].status}</dd>`), `${code}: its status`);
      assert.ok(text.includes(PROBLEM_GUIDE[code].when), `${code}: when it happens`);
      assert.ok(text.includes(PROBLEM_GUIDE[code].action), `${code}: what to do`);
    }
  });

  it('answers a code the service does not have with 404 not_found', async (t) => {
    const { app } = await build(t, 'sqlite');
    for (const url of ['/problems/no_such_code', '/problems/NOT_FOUND', '/problems/not_found/x', '/problems/%3Cscript%3E']) {
      assertProblem(await app.inject({ method: 'GET', url }), 404, 'not_found');
    }
  });

  it('lists every code at /problems, each linked to its page', async (t) => {
    const { app } = await build(t, 'sqlite');
    const response = await app.inject({ method: 'GET', url: '/problems' });
    assert.equal(response.statusCode, 200);
    for (const code of ERROR_CODES) assert.ok(response.body.includes(`<a href="/problems/${code}">`), code);
  });

  it('serves the pages on a node without the public API (every node answers problems)', async (t) => {
    const { deps } = await build(t, 'sqlite');
    const operational = await buildApp(deps, { publicApi: false });
    t.after(() => operational.close());
    assert.equal((await operational.inject({ method: 'GET', url: '/problems/unavailable' })).statusCode, 200);
  });
});
