// Debian's chromium driven by puppeteer-core, one browser per test file. Without chromium the
// browser tests are skipped with a counted reason, unless DIALTONE_TEST_REQUIRE_CHROMIUM=1 (set by
// .ci/run), which makes a missing chromium fail the suite instead.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { scaledTimeout } from './timeouts.js';

const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter((p): p is string => Boolean(p));
export const CHROMIUM = CANDIDATES.find((p) => existsSync(p));

/** A reason to skip the browser tests, or false. */
export function chromiumSkip(): string | false {
  if (CHROMIUM) return false;
  if (process.env.DIALTONE_TEST_REQUIRE_CHROMIUM === '1') throw new Error('chromium is not installed (apt-get install chromium); DIALTONE_TEST_REQUIRE_CHROMIUM=1 forbids skipping the browser tests');
  process.stderr.write('# skipping browser tests: chromium is not installed (apt-get install chromium)\n');
  return 'chromium is not installed';
}

export interface BrowserHandle {
  browser: Browser;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<BrowserHandle> {
  const profile = mkdtempSync(join(tmpdir(), 'dialtone-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM as string,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--user-data-dir=${profile}`],
  });
  return {
    browser,
    async close() {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Everything the page said went wrong: uncaught errors, console errors (CSP violations among them). */
export function watchProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`pageerror: ${(error as Error).message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  return problems;
}

export const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url);

/** What each payload tries: an element made of it, a handler or a script that runs (see assertInert). */
export const XSS = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script><b>bold</b>';

/** A page in a context of its own (closed after the test), 1280x800, with what went wrong on it. */
export async function openPage(t: TestContext, chrome: BrowserHandle | undefined, options: { downloads?: string } = {}): Promise<{ page: Page; problems: string[] }> {
  assert.ok(chrome, 'the browser was launched');
  const context = await chrome.browser.createBrowserContext(options.downloads ? { downloadBehavior: { policy: 'allow', downloadPath: options.downloads } } : {});
  t.after(() => context.close());
  const page = await context.newPage();
  // Puppeteer's 30 s bound on every wait, scaled to the machine's load (helpers/timeouts.ts).
  page.setDefaultTimeout(scaledTimeout(30_000));
  await page.setViewport({ width: 1280, height: 800 });
  return { page, problems: watchProblems(page) };
}

/** Signs in to the console at `url` with `key` and waits for its navigation. */
export async function signIn(page: Page, url: string, key: string): Promise<void> {
  await page.goto(`${url}/console`);
  await page.locator('::-p-aria(API key)').fill(key);
  await page.locator('::-p-aria([name="Sign in"][role="button"])').click();
  await page.locator('::-p-aria([name="Console"][role="navigation"])').wait();
}

/** A screenshot of the viewport (small enough for docs/), and of the full page at 390 px, into ARTIFACTS. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: new URL(`console-${name}-1280.png`, ARTIFACTS).pathname as `${string}.png` });
  await page.setViewport({ width: 390, height: 844 });
  await page.screenshot({ path: new URL(`console-${name}-390.png`, ARTIFACTS).pathname as `${string}.png`, fullPage: true });
  await page.setViewport({ width: 1280, height: 800 });
}

/** Nothing of an XSS payload became an element, and nothing of it ran. */
export async function assertInert(page: Page): Promise<void> {
  assert.equal(await page.$$eval('main img, main script, main b', (els) => els.length), 0, 'no element made of a payload');
  assert.equal(await page.evaluate('window.pwned'), undefined, 'no handler or script ran');
}
