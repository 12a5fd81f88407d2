// The console's call page lists the call's webhook deliveries however many deliveries its
// endpoints have had since (it read each endpoint's latest 100 and said "No webhook deliveries for
// this call" for an older one); it reads them by run (GET /webhook-deliveries?run_id=).
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type { Page } from 'puppeteer-core';
import { insertDelivery } from '../src/store/statements/webhook-statements.js';
import { postJson } from './helpers/app.js';
import { chromiumSkip, launchBrowser, watchProblems, type BrowserHandle } from './helpers/browser.js';
import { buildWithDispatcher, ended, waitForRun } from './helpers/dispatch.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { after, before, describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';
import { WEBHOOK_TEST_ENV } from './helpers/webhooks.js';

let chrome: BrowserHandle | undefined;

async function openPage(t: TestContext): Promise<{ page: Page; problems: string[] }> {
  assert.ok(chrome);
  const context = await chrome.browser.createBrowserContext();
  t.after(() => context.close());
  const page = await context.newPage();
  return { page, problems: watchProblems(page) };
}

describe("The console's call page", { skip: chromiumSkip() }, () => {
  before(async () => {
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
  });

  it("lists a call's deliveries to every endpoint after 150 newer deliveries to each", async (t) => {
    // No delivery worker: every delivery stays pending, and the endpoints are never reached.
    const env = await buildWithDispatcher(t, 'sqlite', { env: WEBHOOK_TEST_ENV, webhooks: false });
    const url = await env.app.listen({ host: '127.0.0.1', port: 0 });
    const f = await createOrgFixture(env.deps);
    const endpoints: number[] = [];
    for (const path of ['a', 'b']) {
      const response = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: `https://93.184.216.34/${path}` }, { key: f.apiKey });
      assert.equal(response.statusCode, 201, response.body);
      endpoints.push((response.json() as { id: number }).id);
    }
    const call = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550100' }, { key: f.apiKey });
    assert.equal(call.statusCode, 200, call.body);
    const runId = (call.json() as { workflow_run_id: number }).workflow_run_id;
    await waitForRun(env, runId, ended);
    for (const endpointId of endpoints) {
      for (let i = 0; i < 150; i++) await insertDelivery(env.deps.store, { endpointId, messageId: `msg_test_${endpointId}_${i}`, eventType: 'webhook.test', payload: '{}', at: Date.now() });
    }
    const expected = await env.deps.store.db.selectFrom('webhook_deliveries').select('id').where('run_id', '=', runId).execute();
    assert.equal(expected.length, 10, 'five messages to each endpoint');

    const { page, problems } = await openPage(t);
    await page.goto(`${url}/console`);
    await page.locator('::-p-aria(API key)').fill(f.apiKey);
    await page.locator('::-p-aria([name="Sign in"][role="button"])').click();
    await page.locator('::-p-aria([name="Console"][role="navigation"])').wait();
    await page.goto(`${url}/console/runs/${runId}`);
    await page.waitForFunction(`document.querySelectorAll('[data-testid="delivery-row"]').length === ${expected.length}`, { timeout: scaledTimeout(10_000) });
    const listed = await page.$$eval('[data-testid="delivery-row"]', (rows) => rows.map((row) => [Number(row.getAttribute('data-delivery-id')), row.querySelector('.url')?.textContent ?? '']));
    assert.deepEqual(listed.map(([id]) => id).sort(), expected.map((d) => d.id).sort());
    // Each row names its endpoint's URL.
    assert.deepEqual([...new Set(listed.map(([, endpointUrl]) => endpointUrl))].sort(), ['https://93.184.216.34/a', 'https://93.184.216.34/b']);
    assert.equal(await page.$('::-p-text(No webhook deliveries for this call.)'), null);
    assert.deepEqual(problems, []);
  });
});
