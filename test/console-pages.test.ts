// /console as HTTP serves it: the app's page for every console path, its static files from the
// package, strict security headers on all of them, and a JavaScript budget.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { buildApp } from '../src/app.js';
import { CONSOLE_CSP } from '../src/http/routes/console.js';
import { build, getJson } from './helpers/app.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { describe, it } from './helpers/suite.js';

/** index.html's one inline script, its import map: the text, and the module each bare specifier names. */
function importMap(html: string): { text: string; imports: Record<string, string> } {
  const found = [...html.matchAll(/<script type="importmap">([\s\S]*?)<\/script>/g)];
  assert.equal(found.length, 1, 'one import map');
  const text = (found[0] as RegExpMatchArray)[1] as string;
  return { text, imports: (JSON.parse(text) as { imports: Record<string, string> }).imports };
}

describe('GET /console', () => {
  it('answers the app\'s page for every console path, with a strict Content-Security-Policy, X-Frame-Options DENY and nosniff', async (t) => {
    const { app } = await build(t, 'sqlite');
    for (const url of ['/console', '/console/', '/console/runs/42', '/console/test-call', '/console/overview', '/console/webhooks', '/console/suppressions', '/console/campaigns', '/console/organization', '/console/audit-log', '/console/agents', '/console/agents/new', '/console/agents/6f1c7a52-0c1e-4c8e-9f3a-2b7d9c0e4a11', '/console/routes', '/console/routes/new', '/console/routes/7']) {
      const response = await app.inject({ method: 'GET', url });
      assert.equal(response.statusCode, 200, url);
      assert.match(String(response.headers['content-type']), /^text\/html/);
      assert.equal(response.headers['content-security-policy'], CONSOLE_CSP);
      assert.equal(response.headers['x-frame-options'], 'DENY');
      assert.equal(response.headers['x-content-type-options'], 'nosniff');
      assert.equal(response.headers['referrer-policy'], 'no-referrer');
      assert.match(response.body, /<script type="module" src="\/console\/assets\/app\.js"><\/script>/);
    }
    // The one inline script allowed is the import map, by the hash of its text (routes/console.ts).
    const { text } = importMap(readFileSync(new URL('../console/index.html', import.meta.url), 'utf8'));
    const mapHash = `'sha256-${createHash('sha256').update(text).digest('base64')}'`;
    for (const directive of ["default-src 'none'", `script-src 'self' ${mapHash}`, "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"]) {
      assert.ok(CONSOLE_CSP.split('; ').includes(directive), directive);
    }
    assert.doesNotMatch(CONSOLE_CSP, /unsafe-inline|unsafe-eval|https?:|\*/, 'no inline code, no eval, no other origin');
  });

  it('has no inline script but its import map, no inline style or handler attribute in its page, and refers to nothing outside /console/assets', async (t) => {
    const { app } = await build(t, 'sqlite');
    const html = (await app.inject({ method: 'GET', url: '/console' })).body;
    assert.doesNotMatch(html.replace(/<script type="importmap">[\s\S]*?<\/script>/, ''), /<script(?![^>]*\ssrc=)[^>]*>/, 'every other script has a src');
    assert.doesNotMatch(html, /<style|\sstyle=|\son[a-z]+=/i);
    for (const [, url] of html.matchAll(/(?:src|href)="([^"]+)"/g)) assert.match(url ?? '', /^\/console\/assets\//);
    const { imports } = importMap(html);
    assert.deepEqual(Object.keys(imports).sort(), ['@dialtone/client/core', 'eventsource-parser', 'openapi-fetch']);
    for (const url of Object.values(imports)) assert.match(url, /^\/console\/assets\/vendor\//);
  });

  it('serves its files from the package with their types and the same headers, a 404 problem for anything else, and imports nothing from the network', async (t) => {
    const { app } = await build(t, 'sqlite');
    const { imports } = importMap((await app.inject({ method: 'GET', url: '/console' })).body);
    // The app, htm with Preact, and @dialtone/client (its core entry and the modules it imports) with its dependencies, as the import map names them.
    const clientModules = ['core.js', 'client.js', 'errors.js', 'retry.js', 'stream.js'].map((name) => `vendor/dialtone-client/${name}`);
    const scripts = readdirSync(new URL('../console/', import.meta.url))
      .filter((name) => name.endsWith('.js'))
      .concat('vendor-htm-preact.js', 'vendor-uplot.js', ...clientModules, ...Object.values(imports).map((url) => url.slice('/console/assets/'.length)));
    let gzipped = 0;
    for (const name of [...scripts, 'console.css', 'vendor-uplot.css', 'favicon.svg']) {
      const response = await app.inject({ method: 'GET', url: `/console/assets/${name}` });
      assert.equal(response.statusCode, 200, name);
      assert.equal(response.headers['content-security-policy'], CONSOLE_CSP);
      assert.equal(response.headers['x-frame-options'], 'DENY');
      assert.match(String(response.headers['content-type']), name.endsWith('.js') ? /^text\/javascript/ : name.endsWith('.css') ? /^text\/css/ : /^image\/svg\+xml/);
      if (name.endsWith('.js')) {
        gzipped += gzipSync(response.rawPayload).length;
        // Each module imports from beside itself, or a package the import map names (served here too).
        for (const [, specifier] of response.body.matchAll(/(?:^|[;\s])(?:import|export)\s[^'"]*?\sfrom\s*['"]([^'"]+)['"]/g)) {
          assert.ok(/^\.\/[a-z-]+\.js$/.test(specifier ?? '') || Object.hasOwn(imports, specifier ?? ''), `${name} imports ${specifier} from beside itself or through the import map`);
        }
        // The app's own code renders every value as text: it never hands a string to the HTML parser.
        if (!name.startsWith('vendor')) assert.doesNotMatch(response.body, /innerHTML|dangerouslySetInnerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/, `${name} never writes HTML`);
      }
    }
    assert.ok(gzipped < 150 * 1024, `the console's JavaScript is ${gzipped} bytes gzipped, under 150 KB`);
    const missing = await app.inject({ method: 'GET', url: '/console/assets/../../package.json' });
    assert.notEqual(missing.statusCode, 200);
    // What only type-checks the console is not served: the browser never asks for it.
    // Nor the client's main entry or its webhook verification: they import standardwebhooks, CommonJS.
    for (const name of ['tsconfig.json', 'vendor-htm-preact.d.ts', 'vendor-uplot.d.ts', 'vendor/dialtone-client/index.js', 'vendor/dialtone-client/webhooks.js', 'vendor/dialtone-client/core.d.ts']) assert.equal((await app.inject({ method: 'GET', url: `/console/assets/${name}` })).statusCode, 404, name);
    const unknown = await app.inject({ method: 'GET', url: '/console/assets/nope.js' });
    assert.equal(unknown.statusCode, 404);
    assert.match(String(unknown.headers['content-type']), /^application\/problem\+json/);
  });
});

describe('GET /console with @dialtone/client not built', () => {
  it('still serves its page, its own files and the API, and answers each of the client\'s modules with a 404 problem saying it is not built and to run npm run build', async (t) => {
    const { deps } = await build(t, 'sqlite');
    // The client's entry in an empty directory: what an install whose build never ran (npm ci
    // --omit=dev runs the sources through tsx) serves, the real build left alone.
    const empty = mkdtempSync(join(tmpdir(), 'dialtone-console-unbuilt-'));
    t.after(() => rmSync(empty, { recursive: true, force: true }));
    const app = await buildApp(deps, { console: { clientCore: pathToFileURL(join(empty, 'core.js')) } });
    t.after(() => app.close());

    const page = await app.inject({ method: 'GET', url: '/console/' });
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.equal(page.headers['content-security-policy'], CONSOLE_CSP);
    for (const name of ['app.js', 'console.css', 'vendor-htm-preact.js', 'vendor/openapi-fetch.js']) {
      assert.equal((await app.inject({ method: 'GET', url: `/console/assets/${name}` })).statusCode, 200, name);
    }
    for (const name of ['core.js', 'client.js']) {
      const response = await app.inject({ method: 'GET', url: `/console/assets/vendor/dialtone-client/${name}` });
      const problem = assertProblem(response, 404, 'not_found');
      assert.equal(problem.detail, `No console asset assets/vendor/dialtone-client/${name}: @dialtone/client is not built (npm run build).`);
      assert.equal(response.headers['content-security-policy'], CONSOLE_CSP, 'the same headers as every console answer');
    }
    // Any other file missing is only missing.
    assert.equal(assertProblem(await app.inject({ method: 'GET', url: '/console/assets/nope.js' }), 404, 'not_found').detail, 'No console asset assets/nope.js.');
    const f = await createOrgFixture(deps, 'Acme');
    assert.equal((await getJson(app, '/api/v1/public/api-keys/current', f.apiKey)).statusCode, 200, 'the API serves');
  });
});

describe('GET /', () => {
  it('sends a browser on to the console with a 302, and tells an API client where the console and the API reference are in a 404 problem', async (t) => {
    const { app } = await build(t, 'sqlite');
    // What Chromium and Firefox send when navigating to an address.
    const browser = await app.inject({ method: 'GET', url: '/', headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' } });
    assert.equal(browser.statusCode, 302);
    assert.equal(browser.headers.location, '/console/');
    const landed = await app.inject({ method: 'GET', url: String(browser.headers.location) });
    assert.equal(landed.statusCode, 200);
    assert.match(String(landed.headers['content-type']), /^text\/html/);

    for (const accept of [undefined, '*/*', 'application/json']) {
      const client = await app.inject({ method: 'GET', url: '/', headers: accept === undefined ? {} : { accept } });
      const problem = assertProblem(client, 404, 'not_found');
      assert.match(problem.detail, /\/console\//);
      assert.match(problem.detail, /\/docs\b/);
    }
  });
});
