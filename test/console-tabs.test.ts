// The console open in many tabs of one browser (Debian's chromium, headless). Chromium opens at
// most six HTTP/1.1 connections to a host; with one event stream per tab, a seventh tab could not
// even sign in. The tabs of one key share one stream: one leader reads it and passes it on.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type { Page } from 'puppeteer-core';
import { postJson, type TestEnv } from './helpers/app.js';
import { chromiumSkip, launchBrowser, watchProblems, type BrowserHandle } from './helpers/browser.js';
import { buildWithDispatcher } from './helpers/dispatch.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { after, before, describe, it } from './helpers/suite.js';

const TABS = 7;

let chrome: BrowserHandle | undefined;

async function call(env: TestEnv, f: OrgFixture, phone: string): Promise<number> {
  const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: phone }, { key: f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return (response.json() as { workflow_run_id: number }).workflow_run_id;
}

/** Streams the node serves now, as its metrics report them. */
async function openStreams(env: TestEnv): Promise<number> {
  const metric = env.deps.metrics.registry.getSingleMetric('dialtone_stream_connections');
  assert.ok(metric);
  return (await metric.get()).values.reduce((sum, v) => sum + v.value, 0);
}

async function until(done: () => Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const role = (page: Page): Promise<string | null> => page.$eval('[data-testid="stream-status"]', (el) => el.getAttribute('data-stream-role')).catch(() => null);

describe('The console in seven tabs of one browser', { skip: chromiumSkip() }, () => {
  before(async () => {
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
  });

  it('signs in and follows calls live in all seven tabs over one stream, and hands the stream to another tab when the leader\'s tab closes', async (t: TestContext) => {
    assert.ok(chrome);
    const env = await buildWithDispatcher(t, 'sqlite', { env: { STREAM_POLL_INTERVAL_MS: '50', SIMULATOR_RING_MS: '800', SIMULATOR_TALK_MS: '800' }, start: true });
    const url = await env.app.listen({ host: '127.0.0.1', port: 0 });
    const f = await createOrgFixture(env.deps);
    // One profile, so the tabs share the browser's connections to the host, as a person's tabs do.
    const context = await chrome.browser.createBrowserContext();
    t.after(() => context.close());
    const tabs: Page[] = [];
    const problems: string[] = [];
    for (let i = 0; i < TABS; i++) {
      const page = await context.newPage();
      page.setDefaultTimeout(15_000);
      problems.push(...watchProblems(page));
      await page.goto(`${url}/console`);
      await page.locator('::-p-aria(API key)').fill(f.apiKey);
      await page.locator('::-p-aria([name="Sign in"][role="button"])').click();
      await page.locator('::-p-aria([name="Calls"][role="heading"])').wait();
      await page.locator('::-p-text(Live)').wait();
      tabs.push(page);
    }
    assert.equal(await openStreams(env), 1, 'one stream serves every tab');
    const roles = await Promise.all(tabs.map(role));
    assert.deepEqual([...roles].sort(), ['follower', 'follower', 'follower', 'follower', 'follower', 'follower', 'leader']);

    const first = await call(env, f, '+12025550100');
    await Promise.all(tabs.map((page) => page.waitForSelector(`tr[data-run-id="${first}"]`)));

    const leader = tabs[roles.indexOf('leader')] as Page;
    const rest = tabs.filter((page) => page !== leader);
    await leader.close();
    await until(async () => (await Promise.all(rest.map(role))).filter((r) => r === 'leader').length === 1, 'another tab to take the stream over');
    await until(async () => (await openStreams(env)) === 1, 'the node to serve the new leader\'s stream alone');
    const second = await call(env, f, '+12025550101');
    await Promise.all(rest.map((page) => page.waitForSelector(`tr[data-run-id="${second}"]`)));
    await Promise.all(rest.map((page) => page.locator('::-p-text(Live)').wait()));
    assert.deepEqual(problems, []);
  });
});
