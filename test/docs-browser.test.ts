// /docs (Swagger UI) in a real browser (Debian's chromium, headless), under its Content-Security-
// Policy: the reference renders every operation and the browser reports no violation.
import assert from 'node:assert/strict';
import type { Page } from 'puppeteer-core';
import { build } from './helpers/app.js';
import { chromiumSkip, launchBrowser, watchProblems, type BrowserHandle } from './helpers/browser.js';
import { after, before, describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

let chrome: BrowserHandle | undefined;

/** Records every CSP violation the page reports, from before its first script runs. */
async function recordViolations(page: Page): Promise<() => Promise<string[]>> {
  // Strings, not functions: they run in the page, and this project's types have no DOM.
  await page.evaluateOnNewDocument(
    "window.cspViolations = []; document.addEventListener('securitypolicyviolation', (e) => window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile + ':' + e.lineNumber))",
  );
  return () => page.evaluate('window.cspViolations') as Promise<string[]>;
}

describe('/docs in a browser', { skip: chromiumSkip() }, () => {
  before(async () => {
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
  });

  it('renders every operation of the document and its logo under the page\'s CSP, with no violation reported', async (t) => {
    assert.ok(chrome);
    const { app } = await build(t, 'sqlite');
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>>; webhooks?: Record<string, Record<string, unknown>> };
    // Swagger UI draws the webhooks' operations like the paths'.
    const operations = [...Object.values(doc.paths), ...Object.values(doc.webhooks ?? {})].reduce((count, item) => count + Object.keys(item).length, 0);

    const context = await chrome.browser.createBrowserContext();
    t.after(() => context.close());
    const page = await context.newPage();
    const problems = watchProblems(page);
    const violations = await recordViolations(page);
    const response = await page.goto(`${base}/docs`, { waitUntil: 'load' });
    assert.match(String(response?.headers()['content-security-policy']), /default-src 'none'/, 'the page is served under its CSP');

    // Swagger UI draws one block per operation once it has fetched and read the document.
    await page.waitForFunction(`document.querySelectorAll('.opblock').length === ${operations}`, { timeout: scaledTimeout(30_000) }).catch(async (error: unknown) => {
      throw new Error(`${String(error)}: ${String(await page.evaluate("document.querySelectorAll('.opblock').length"))} operations drawn, ${operations} expected`);
    });
    const logo = await page.waitForSelector('.topbar img[src^="data:image/svg+xml"]', { timeout: scaledTimeout(10_000) });
    assert.ok(logo, 'the Dialtone logo replaced Swagger UI\'s');
    assert.equal(await page.evaluate("document.querySelector('.topbar img').naturalWidth > 0"), true, 'the logo (a data: image) loaded');
    // Swagger UI's own style sheet applies (a style sheet blocked by the CSP would leave it unstyled).
    const display = await page.evaluate("getComputedStyle(document.querySelector('.opblock-summary')).display");
    assert.equal(display, 'flex');

    assert.deepEqual(await violations(), []);
    assert.deepEqual(problems, []);
  });
});
