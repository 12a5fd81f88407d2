// Debian's chromium driven by puppeteer-core, one browser per test file. Without chromium the
// browser tests are skipped with a counted reason, unless DIALTONE_TEST_REQUIRE_CHROMIUM=1 (set by
// .ci/run), which makes a missing chromium fail the suite instead.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

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
