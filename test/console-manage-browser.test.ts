// The console's admin pages in a real browser (Debian's chromium, headless): organization settings
// (calling hours edited day by day, the per-number cap, a 422's problems beside their fields), the
// audit log (the change just made, with who and its before and after), neither shown to a key
// without `admin`, and an HTML/script payload in every name an operator sets that these pages show
// rendered as text. The pages read the store through the API only, so these run on SQLite (the
// API's own tests, organization-settings-api and audit-events-api, cover both stores).
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type { Page } from 'puppeteer-core';
import { createApiKey } from '../src/auth/api-keys.js';
import { build, getJson, postJson, type TestEnv } from './helpers/app.js';
import { assertInert, chromiumSkip, launchBrowser, openPage, screenshot, signIn, XSS, type BrowserHandle } from './helpers/browser.js';
import { createOrgFixture, definition, type OrgFixture } from './helpers/fixtures.js';
import { after, before, describe, it } from './helpers/suite.js';

let chrome: BrowserHandle | undefined;

async function serve(t: TestContext, orgName = 'Acme'): Promise<{ env: TestEnv; url: string; f: OrgFixture }> {
  const env = await build(t, 'sqlite');
  const url = await env.app.listen({ host: '127.0.0.1', port: 0 });
  return { env, url, f: await createOrgFixture(env.deps, orgName) };
}

/** Sets an input's value as typed, replacing what it holds. */
async function type(page: Page, selector: string, value: string): Promise<void> {
  await page.locator(selector).fill(value);
}

interface Settings {
  max_queued_runs: number | null;
  number_cap: { max_calls: number; window_seconds: number } | null;
  calling_hours: { timezone: string; outside: string; windows: Record<string, string[]> } | null;
}

describe('The console\'s admin pages in a browser', { skip: chromiumSkip() }, () => {
  before(async () => {
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
  });

  it('changes calling hours and the per-number cap, shows a 422\'s problems beside their fields, reads the change back, and lists it in the audit log with who and before and after', async (t) => {
    const { env, url, f } = await serve(t);
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Organization"][role="link"])').click();
    await page.locator('::-p-aria([name="Organization settings"][role="heading"])').wait();
    // Empty limits show the service's defaults.
    assert.match(await page.$eval('#org-max_queued_runs', (el) => (el as unknown as { placeholder: string }).placeholder), /^default: \d+$/);

    await page.click('input[name="cap_on"]');
    await type(page, '#org-max-calls', '3');
    await type(page, '#org-window', '86400');
    await page.click('input[name="hours_on"]');
    await type(page, '#org-timezone', 'America/New_York');
    await page.select('#org-outside', 'defer');
    // A window ending before it starts: the service's problem is shown beside Monday.
    await type(page, '#org-day-mon', '09:00-12:00, 17:00-09:00');
    await type(page, '#org-day-tue', '09:00-20:00');
    await page.locator('::-p-aria([name="Save settings"][role="button"])').click();
    const problem = await page.locator('[data-testid="field-problem"][data-pointer="/calling_hours/windows/mon"]').map((el) => el.textContent ?? '').wait();
    assert.match(problem, /^1: /, `the second window's problem: ${problem}`);
    assert.equal((await getJson(env.app, '/api/v1/public/organization', f.apiKey)).json().calling_hours, null, 'nothing changed');

    await type(page, '#org-day-mon', '09:00-12:00, 13:00-20:00');
    await page.locator('::-p-aria([name="Save settings"][role="button"])').click();
    await page.waitForFunction(`document.querySelector('[data-testid="settings-status"]')?.textContent === 'Saved.'`);
    assert.equal(await page.$('[data-testid="field-problem"]'), null, 'the problems are gone');
    const stored = (await getJson(env.app, '/api/v1/public/organization', f.apiKey)).json() as Settings;
    assert.deepEqual(stored.number_cap, { max_calls: 3, window_seconds: 86_400 });
    assert.deepEqual(stored.calling_hours, { timezone: 'America/New_York', outside: 'defer', windows: { mon: ['09:00-12:00', '13:00-20:00'], tue: ['09:00-20:00'] } });
    assert.equal(stored.max_queued_runs, null, 'what was not touched still follows the default');

    // Read back after a reload: the form shows what is stored.
    await page.reload();
    await page.waitForSelector('#org-day-mon');
    const shown = (await page.evaluate(`({
      mon: document.querySelector('#org-day-mon').value, tue: document.querySelector('#org-day-tue').value, wed: document.querySelector('#org-day-wed').value,
      zone: document.querySelector('#org-timezone').value, outside: document.querySelector('#org-outside').value,
      max: document.querySelector('#org-max-calls').value, window: document.querySelector('#org-window').value,
    })`)) as Record<string, string>;
    assert.deepEqual(shown, { mon: '09:00-12:00, 13:00-20:00', tue: '09:00-20:00', wed: '', zone: 'America/New_York', outside: 'defer', max: '3', window: '86400' });
    await screenshot(page, 'organization');

    await page.locator('::-p-aria([name="Audit log"][role="link"])').click();
    await page.locator('::-p-aria([name="Audit log"][role="heading"])').wait();
    const entry = await page.waitForSelector('li[data-testid="audit-entry"][data-action="organization.settings_updated"]');
    assert.ok(entry);
    assert.equal(await page.$$eval('li[data-testid="audit-entry"][data-action="organization.settings_updated"]', (els) => els.length), 1, 'the refused change recorded nothing');
    assert.match(await entry.$eval('[data-testid="audit-actor"]', (el) => el.textContent ?? ''), /key test key #\d+/);
    const diff = await entry.$$eval('[data-testid="audit-diff"] tr[data-pointer]', (rows) => rows.map((r) => [r.getAttribute('data-pointer'), r.querySelector('.before')?.textContent, r.querySelector('.after')?.textContent]));
    assert.deepEqual(
      diff.filter(([pointer]) => pointer?.startsWith('/number_cap') || pointer?.startsWith('/calling_hours')),
      [
        ['/number_cap', 'null', '—'],
        ['/calling_hours', 'null', '—'],
        ['/number_cap/max_calls', '—', '3'],
        ['/number_cap/window_seconds', '—', '86400'],
        ['/calling_hours/timezone', '—', '"America/New_York"'],
        ['/calling_hours/outside', '—', '"defer"'],
        ['/calling_hours/windows/mon', '—', '["09:00-12:00","13:00-20:00"]'],
        ['/calling_hours/windows/tue', '—', '["09:00-20:00"]'],
      ],
    );
    assert.equal(diff.length, 8, `only what changed: ${JSON.stringify(diff)}`);
    assert.match(await entry.$eval('[data-testid="audit-after"]', (el) => el.textContent ?? ''), /"outside": "defer"/);
    // Filtered by another action: not listed.
    await type(page, 'input[name="action"]', 'workflow.archived');
    await page.locator('::-p-aria([name="Filter"][role="button"])').click();
    await page.locator('::-p-text(No changes recorded that match.)').wait();
    await type(page, 'input[name="action"]', 'organization.settings_updated');
    await page.locator('::-p-aria([name="Filter"][role="button"])').click();
    await page.waitForSelector('li[data-testid="audit-entry"]');
    await page.click('li[data-testid="audit-entry"] summary');
    await screenshot(page, 'audit-log');
    assert.deepEqual(problems.filter((p) => !/422/.test(p)), [], 'only the refused save');
  });

  it('shows neither page to a key without the admin scope: no link, and a page typed in names the scope it lacks', async (t) => {
    const { env, url, f } = await serve(t);
    const key = (await createApiKey(env.deps.store, f.orgId, 'no admin', Date.now(), { scopes: ['calls', 'campaigns', 'webhooks'] })).key;
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, key);
    assert.deepEqual(await page.$$eval('nav a', (links) => links.map((a) => a.textContent)), ['Calls', 'Test call', 'Overview', 'Webhooks', 'Campaigns', 'Suppressions']);
    for (const path of ['/console/organization', '/console/audit-log']) {
      await page.goto(`${url}${path}`);
      assert.match(await page.locator('[data-testid="missing-scope"]').map((el) => el.textContent ?? '').wait(), /lacks the admin scope/, path);
    }
    assert.deepEqual(problems, [], 'nothing was asked that the key may not read');
  });

  it('shows a script or HTML payload as text in every name these pages show: the organization, a key, a workflow and a route in audit entries, and a settings problem', async (t) => {
    const { env, url, f } = await serve(t, `org ${XSS}`);
    const key = await postJson(env.app, '/api/v1/public/api-keys', { name: `key ${XSS}`, scopes: ['calls', 'admin'] }, { key: f.apiKey });
    assert.equal(key.statusCode, 201, key.body);
    const secret = (key.json() as { key: string }).key;
    const workflow = await postJson(env.app, '/api/v1/public/workflows', { name: `workflow ${XSS}`, definition: definition() }, { key: secret });
    assert.equal(workflow.statusCode, 201, workflow.body);
    const route = await postJson(env.app, '/api/v1/public/telephony-configurations', { name: `route ${XSS}`, provider: 'simulator' }, { key: secret });
    assert.equal(route.statusCode, 201, route.body);

    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.goto(`${url}/console/audit-log`);
    await page.waitForSelector('li[data-testid="audit-entry"][data-action="telephony_configuration.created"]');
    // The three made through the API, newest first (the fixture's own key came before them).
    const entries = (await page.$$eval('li[data-testid="audit-entry"]', (els) => els.map((el) => ({ action: el.getAttribute('data-action'), text: el.textContent ?? '' })))).slice(0, 3);
    assert.deepEqual(entries.map((e) => e.action), ['telephony_configuration.created', 'workflow.created', 'api_key.created'], 'newest first');
    for (const e of entries.slice(0, 2)) assert.ok(e.text.includes(`key key ${XSS}`), `the acting key's name as text: ${e.text}`);
    assert.ok(entries[0]?.text.includes(JSON.stringify(`route ${XSS}`)), 'the route name in before/after');
    assert.ok(entries[1]?.text.includes(JSON.stringify(`workflow ${XSS}`)), 'the workflow name');
    assert.ok(entries[2]?.text.includes(JSON.stringify(`key ${XSS}`)), 'the key name');
    for (const summary of await page.$$('li[data-testid="audit-entry"] summary')) await summary.click();
    await assertInert(page);

    await page.goto(`${url}/console/organization`);
    await page.waitForFunction(`document.querySelector('main p')?.textContent.includes(${JSON.stringify(`org ${XSS}`)})`);
    // What an operator types comes back in a problem's words too.
    await page.click('input[name="hours_on"]');
    await type(page, '#org-timezone', XSS);
    await page.locator('::-p-aria([name="Save settings"][role="button"])').click();
    await page.waitForSelector('[data-testid="field-problem"][data-pointer="/calling_hours/timezone"]');
    await assertInert(page);
    assert.deepEqual(problems.filter((p) => !/422/.test(p)), [], 'only the refused save');
  });
});
