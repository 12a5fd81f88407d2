// The console speaks to the API through @dialtone/client (console/api.js), not fetch() of its own.
// To see that from outside, the browser is handed, in place of the client's `core` entry, a module
// that re-exports the real one with createDialtoneCore wrapped: every client it makes sends each
// request with one more header (x-through-client). A request the console made with fetch() of its
// own would lack it. Every request to the API is recorded at the network (request interception),
// through the sign-in, the lists, the live stream, a test call started from its page and its run's page,
// and api() itself called in the page for what the pages do on demand: a CSV import, a 204 answer
// and a refusal (which must come back as the console's ApiError, code and field errors included).
// And without the client's module the console does not start at all.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type { HTTPRequest, Page } from 'puppeteer-core';
import { chromiumSkip, launchBrowser, openPage, signIn, type BrowserHandle } from './helpers/browser.js';
import { buildWithDispatcher } from './helpers/dispatch.js';
import { createOrgFixture, type OrgFixture } from './helpers/fixtures.js';
import { after, before, describe, it } from './helpers/suite.js';

const CORE = '/console/assets/vendor/dialtone-client/core.js';
const REAL_CORE = '/console/assets/vendor/dialtone-client/core-as-served.js';

/** Stands in for the client's core entry: the real one, with every client it makes marking its requests. */
const MARKING_CORE = `
export * from './core-as-served.js';
import { createDialtoneCore as createReal } from './core-as-served.js';
export function createDialtoneCore(options) {
  const send = options.fetch ?? ((input, init) => fetch(input, init));
  return createReal({ ...options, fetch: (input, init) => {
    const request = new Request(input, init);
    request.headers.set('x-through-client', 'yes');
    return send(request);
  } });
}
`;

interface Seen {
  method: string;
  path: string;
  throughClient: boolean;
  contentType: string | undefined;
  accept: string | undefined;
}

let chrome: BrowserHandle | undefined;

async function serve(t: TestContext): Promise<{ url: string; f: OrgFixture }> {
  const env = await buildWithDispatcher(t, 'sqlite', { env: { SIMULATOR_RING_MS: '200', SIMULATOR_TALK_MS: '200', STREAM_POLL_INTERVAL_MS: '50' } });
  const url = await env.app.listen({ host: '127.0.0.1', port: 0 });
  return { url, f: await createOrgFixture(env.deps, 'Acme') };
}

/** Serves MARKING_CORE for the client's entry and the real entry under another name; records every API request. */
async function markClientRequests(page: Page, url: string): Promise<Seen[]> {
  const realCore = await (await fetch(`${url}${CORE}`)).text();
  assert.match(realCore, /export function createDialtoneCore/, 'the real entry is served');
  const seen: Seen[] = [];
  await page.setRequestInterception(true);
  page.on('request', (request: HTTPRequest) => {
    const path = new URL(request.url()).pathname;
    if (path === CORE) return void request.respond({ status: 200, contentType: 'text/javascript', body: MARKING_CORE });
    if (path === REAL_CORE) return void request.respond({ status: 200, contentType: 'text/javascript', body: realCore });
    if (path.startsWith('/api/')) {
      const headers = request.headers();
      seen.push({ method: request.method(), path, throughClient: headers['x-through-client'] === 'yes', contentType: headers['content-type'], accept: headers.accept });
    }
    void request.continue();
  });
  return seen;
}

describe('The console and @dialtone/client (chromium, service on SQLite)', { skip: chromiumSkip() }, () => {
  before(async () => {
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
  });

  it('makes every API request through the client: sign-in, lists, the live stream, a test call started and its page, a CSV import, a 204 and a refusal as its ApiError', async (t) => {
    const { url, f } = await serve(t);
    const { page, problems } = await openPage(t, chrome);
    const seen = await markClientRequests(page, url);

    await signIn(page, url, f.apiKey);
    await page.locator('::-p-text(Live)').wait();
    await page.locator('::-p-aria([name="Test call"][role="link"])').click();
    await page.waitForFunction("document.querySelector('#agent')?.value !== ''");
    await page.locator('::-p-aria(Phone number)').fill('+12025550100');
    await page.locator('::-p-aria([name="Start test call"][role="button"])').click();
    await page.waitForFunction(String.raw`/^\/console\/runs\/\d+$/.test(location.pathname)`);
    await page.waitForSelector('[data-testid="run-state"]');

    // api() as the pages call it, from the module the app loaded (the same URL is the same module).
    const calls = (await page.evaluate(`(async () => {
      const { api, ApiError } = await import('/console/assets/api.js');
      const imported = await api('/suppressions/import', { method: 'POST', csv: 'phone_number,reason\\n+12025550111,asked\\n' });
      const listed = await api('/suppressions');
      const removed = await api('/suppressions/%2B12025550111', { method: 'DELETE' });
      let refusal = 'none';
      try {
        await api('/suppressions/%2B12025550112', { method: 'PUT', body: { reason: 42 } });
      } catch (e) {
        refusal = { isApiError: e instanceof ApiError, status: e.status, code: e.code, pointers: [...new Set(e.errors.map((x) => x.pointer))] };
      }
      return { imported, listed, removed, refusal };
    })()`)) as { imported: unknown; listed: { data: { phone_number: string; reason: string }[] }; removed: unknown; refusal: unknown };
    assert.ok(calls.imported && typeof calls.imported === 'object', 'the import answered its report');
    assert.deepEqual(calls.listed.data.map((s) => [s.phone_number, s.reason]), [['+12025550111', 'asked']], 'the CSV was imported');
    assert.equal(calls.removed, null, 'a 204 answers null');
    assert.deepEqual(calls.refusal, { isApiError: true, status: 422, code: 'validation_failed', pointers: ['/reason'] });

    const notThrough = seen.filter((s) => !s.throughClient);
    assert.deepEqual(notThrough, [], 'every API request went through @dialtone/client');
    const kinds = (predicate: (s: Seen) => boolean) => seen.filter(predicate).length > 0;
    assert.ok(kinds((s) => s.method === 'GET' && s.path === '/api/v1/public/stream' && s.accept === 'text/event-stream'), 'the live stream');
    assert.ok(kinds((s) => s.method === 'POST' && /^\/api\/v1\/public\/agent\/test\//.test(s.path) && s.contentType === 'application/json'), 'the test call, JSON');
    assert.ok(kinds((s) => s.method === 'POST' && s.path === '/api/v1/public/suppressions/import' && s.contentType === 'text/csv'), 'the import, CSV');
    assert.ok(kinds((s) => s.method === 'DELETE'), 'the 204');
    // The browser logs the 422 it was answered; nothing else went wrong.
    assert.ok(problems.every((p) => p.includes('422')), problems.join('\n'));
  });

  it('does not start without the client: with its module missing the sign-in form never shows', async (t) => {
    const { url } = await serve(t);
    const { page, problems } = await openPage(t, chrome);
    await page.setRequestInterception(true);
    let withheld = false;
    page.on('request', (request: HTTPRequest) => {
      if (new URL(request.url()).pathname !== CORE) return void request.continue();
      withheld = true;
      void request.respond({ status: 404, contentType: 'text/plain', body: 'withheld' });
    });
    // The page's load event waits for its module scripts; a graph with a failed module never runs any of them.
    await page.goto(`${url}/console`, { waitUntil: 'load' });
    assert.ok(withheld, 'the console asked for the client');
    assert.equal(await page.$('input'), null, 'no sign-in form');
    assert.ok(problems.some((p) => p.includes('404')), problems.join('\n'));
  });
});
