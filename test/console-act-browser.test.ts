// The console's acting pages in a real browser (Debian's chromium, headless): API keys (create with
// scopes, the secret once, revoke after a confirmation), navigation by the key's scopes, a campaign
// created from a CSV upload with its columns mapped and watched to its end on its own page (its
// contacts and a breakdown that adds up), the Calls list exported as CSV safe to open in a
// spreadsheet, and an HTML/script payload in every field an operator sets shown as text. The pages
// read the store through the API only, so these run on SQLite (the API's own tests cover both stores).
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { Page } from 'puppeteer-core';
import { createApiKey } from '../src/auth/api-keys.js';
import { runCampaignTick } from '../src/campaigns/scheduler.js';
import { getJson, postJson, type TestEnv } from './helpers/app.js';
import { assertInert, chromiumSkip, launchBrowser, openPage, screenshot, signIn, XSS, type BrowserHandle } from './helpers/browser.js';
import { addContacts, createCampaign } from './helpers/campaigns.js';
import { buildWithDispatcher } from './helpers/dispatch.js';
import { createOrgFixture, definition, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { WEBHOOK_TEST_ENV } from './helpers/webhooks.js';
import { after, before, describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

/** Short calls: a campaign of a few contacts ends within seconds. */
const QUICK_CALLS = { SIMULATOR_RING_MS: '100', SIMULATOR_TALK_MS: '200', RING_TIMEOUT_MS: '10000', MAX_CALL_DURATION_MS: '10000', STREAM_POLL_INTERVAL_MS: '50', ...WEBHOOK_TEST_ENV };
let chrome: BrowserHandle | undefined;

async function serve(t: TestContext, options: { dispatch?: boolean; definition?: unknown } = {}): Promise<{ env: TestEnv; url: string; f: OrgFixture }> {
  const env = await buildWithDispatcher(t, 'sqlite', { env: QUICK_CALLS, start: options.dispatch !== false });
  const url = await env.app.listen({ host: '127.0.0.1', port: 0 });
  return { env, url, f: await createOrgFixture(env.deps, 'Acme', ...(options.definition === undefined ? [] : [options.definition])) };
}

const navLabels = (page: Page) => page.$$eval('nav a', (links) => links.map((a) => a.textContent));

function tempDir(t: TestContext, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe('The console acting in a browser', { skip: chromiumSkip() }, () => {
  before(async () => {
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
  });

  it('creates an API key holding the ticked scopes, shows its secret once with a copy button and a warning, lists it, and revokes it after a confirmation', async (t) => {
    const { env, url, f } = await serve(t, { dispatch: false });
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="API keys"][role="link"])').click();
    await page.locator('::-p-aria([name="API keys"][role="heading"])').wait();
    await page.waitForSelector('tr[data-testid="key-row"]');
    assert.deepEqual(await page.$$eval('[data-testid="key-name-cell"]', (els) => els.map((el) => el.textContent)), ['test key']);

    await page.locator('::-p-aria(Name)').fill('crm');
    // `calls` is ticked at first; the CRM gets campaigns too.
    await page.click('input[name="scopes"][value="campaigns"]');
    await page.locator('::-p-aria([name="Create key"][role="button"])').click();
    const secret = await page.locator('[data-testid="created-key-secret"]').map((el) => el.textContent ?? '').wait();
    assert.match(secret, /^dt_live_/);
    assert.match(await page.$eval('[data-testid="created-key"]', (el) => el.textContent ?? ''), /you will not see it again/);
    assert.ok(await page.$('::-p-aria([name="Copy key"][role="button"])'), 'a copy button');
    const current = (await getJson(env.app, '/api/v1/public/api-keys/current', secret)).json() as { name: string; scopes: string[] };
    assert.deepEqual([current.name, current.scopes], ['crm', ['calls', 'campaigns']], 'the key works, with the ticked scopes');
    await page.waitForFunction(`document.querySelectorAll('tr[data-testid="key-row"]').length === 2`);
    const row = await page.$$eval('tr[data-testid="key-row"]', (rows) => rows.map((r) => r.textContent ?? ''));
    assert.ok(!row.join('').includes(secret.slice(20)), 'the list never shows the secret');
    // The picture in docs/ shows no secret, even a test database's (like the README's `dt_live_Xy12…`).
    await page.$eval('[data-testid="created-key-secret"]', (el) => void (el.textContent = 'dt_live_Xy12Ab34Cd_…'));
    await screenshot(page, 'api-keys');
    await page.$eval('[data-testid="created-key-secret"]', (el, text) => void (el.textContent = text), secret);
    await page.locator('::-p-aria([name="I have stored it"][role="button"])').click();
    assert.equal(await page.$('[data-testid="created-key"]'), null, 'gone once stored');
    assert.ok(!(await page.content()).includes(secret), 'and nowhere in the page');

    await page.locator('::-p-aria([name="Revoke crm"][role="button"])').click();
    await page.waitForSelector('button[aria-label="Confirm: revoke crm"]');
    assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Confirm revoke', 'the confirmation has the focus');
    assert.equal((await getJson(env.app, '/api/v1/public/api-keys/current', secret)).statusCode, 200, 'not revoked before the confirmation');
    await page.click('button[aria-label="Confirm: revoke crm"]');
    await page.waitForFunction(`[...document.querySelectorAll('tr[data-testid="key-row"]')].some((r) => r.textContent.includes('crm') && r.querySelector('[data-testid="key-revoked"]').textContent !== '—')`);
    assert.equal(await page.$('button[aria-label="Revoke crm"]'), null, 'no Revoke on a revoked key');
    // Refused once revoked (other nodes' caches aside: LOOKUP_CACHE_TTL_MS).
    for (const deadline = Date.now() + scaledTimeout(5_000); (await getJson(env.app, '/api/v1/public/api-keys/current', secret)).statusCode !== 401; ) {
      assert.ok(Date.now() < deadline, 'the revoked key is refused');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.deepEqual(problems, []);
  });

  it('shows a key only the pages its scopes allow: a campaigns key lands on Campaigns and sees no calls, webhooks or keys, and a page typed in names the scope it lacks', async (t) => {
    const { env, url, f } = await serve(t, { dispatch: false });
    const campaignsKey = (await createApiKey(env.deps.store, f.orgId, 'campaigns only', Date.now(), { scopes: ['campaigns'] })).key;
    const callsKey = (await createApiKey(env.deps.store, f.orgId, 'calls only', Date.now(), { scopes: ['calls'] })).key;
    {
      const { page, problems } = await openPage(t, chrome);
      await signIn(page, url, campaignsKey);
      assert.deepEqual(await navLabels(page), ['Campaigns', 'Suppressions']);
      await page.locator('::-p-aria([name="Campaigns"][role="heading"])').wait();
      assert.equal(new URL(page.url()).pathname, '/console/campaigns', 'taken to the first page it may see');
      assert.equal(await page.$eval('[data-testid="stream-status"]', (el) => el.textContent), 'No live updates');
      await page.goto(`${url}/console/api-keys`);
      assert.match(await page.locator('[data-testid="missing-scope"]').map((el) => el.textContent ?? '').wait(), /lacks the admin scope/);
      await page.goto(`${url}/console/runs/1`);
      assert.match(await page.locator('[data-testid="missing-scope"]').map((el) => el.textContent ?? '').wait(), /lacks the calls scope/);
      // Nothing was refused: the console asked only what the key may read.
      assert.deepEqual(problems, []);
    }
    {
      const { page, problems } = await openPage(t, chrome);
      await signIn(page, url, callsKey);
      assert.deepEqual(await navLabels(page), ['Calls', 'Test call', 'Overview']);
      await page.locator('::-p-text(Live)').wait();
      assert.deepEqual(problems, []);
    }
    const { page } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    assert.deepEqual(await navLabels(page), ['Calls', 'Test call', 'Overview', 'Webhooks', 'Campaigns', 'Suppressions', 'Agents', 'Routes', 'API keys', 'Organization', 'Audit log']);
  });

  it('fits every link of a full-scope key\'s navigation on one line at 1280 px, and narrower wraps it with no link cut off or overlapping another or the rest of the header', async (t) => {
    const { url, f } = await serve(t, { dispatch: false });
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-text(Live)').wait();
    // Each link's box, and the header's other parts (brand, key name and stream status, Sign out).
    interface Box {
      name: string;
      top: number;
      bottom: number;
      left: number;
      right: number;
    }
    const boxes = (selector: string): Promise<Box[]> =>
      page.$$eval(selector, (els) =>
        els.map((el) => {
          const r = el.getBoundingClientRect();
          return { name: el.textContent ?? '', top: r.top, bottom: r.bottom, left: r.left, right: r.right };
        }),
      );
    const layout = async () => ({ links: await boxes('nav a'), others: await boxes('header > :not(nav)'), width: (await page.evaluate('document.documentElement.clientWidth')) as number });
    const overlap = (a: Box, b: Box) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;

    const wide = await layout();
    assert.equal(wide.links.length, 11, 'every page the key may see has its link');
    const tops = new Set(wide.links.map((l) => Math.round(l.top)));
    assert.equal(tops.size, 1, `one line at 1280 px: ${wide.links.map((l) => `${l.name} at ${l.top}`).join(', ')}`);

    for (const width of [800, 390]) {
      await page.setViewport({ width, height: 800 });
      const narrow = await layout();
      assert.equal(narrow.links.length, 11, `${width} px: no link hidden`);
      for (const [i, a] of narrow.links.entries()) {
        assert.ok(a.left >= 0 && a.right <= narrow.width && a.right - a.left > 0, `${width} px: ${a.name} is whole in the viewport (${a.left} to ${a.right})`);
        for (const b of narrow.links.slice(i + 1)) assert.ok(!overlap(a, b), `${width} px: ${a.name} and ${b.name} do not overlap`);
        for (const b of narrow.others) assert.ok(!overlap(a, b), `${width} px: ${a.name} does not overlap ${b.name}`);
      }
    }
    assert.deepEqual(problems, []);
  });

  it('creates a campaign from a CSV upload with its columns mapped, retries and pacing, shows the import on its page, and is watched to its end with its contacts and a breakdown that adds up at every read', async (t) => {
    const { env, url, f } = await serve(t, { definition: definition({ variables: { first_name: { required: true } } }) });
    const dir = tempDir(t, 'dialtone-campaign-csv-');
    const file = join(dir, 'spring.csv');
    // The phone number is not the first column; `notes` is ignored; one line is invalid.
    writeFileSync(file, 'first_name,Mobile,notes\nAda,+12025550130,vip\n"Grace, Jr.",+12025550131,\nAlan,not-a-number,x\nEdsger,+12025550132,\n');
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Campaigns"][role="link"])').click();
    await page.locator('::-p-aria([name="New campaign from a CSV"][role="link"])').click();
    await page.locator('::-p-aria([name="New campaign"][role="heading"])').wait();
    const input = await page.waitForSelector('#contacts-csv');
    await input?.uploadFile(file);
    await page.waitForSelector('[data-testid="column-mapping"]');
    assert.deepEqual(await page.$$eval('[data-testid="column-name"]', (els) => els.map((el) => el.textContent)), ['first_name', 'Mobile', 'notes']);
    const roles = () => page.$$eval('[data-testid="column-mapping"] select', (els) => els.map((el) => (el as unknown as { value: string }).value));
    assert.deepEqual(await roles(), ['variable', 'phone', 'variable'], 'the phone column found by its name');
    await page.select('select[aria-label="Use column notes as"]', 'ignore');
    // Two phone columns is a mistake the page names before anything is sent.
    await page.select('select[aria-label="Use column first_name as"]', 'phone');
    await page.locator('[data-testid="mapping-problem"]').wait();
    assert.equal(await page.$eval('button[type="submit"]', (el) => el.hasAttribute('disabled')), true);
    await page.select('select[aria-label="Use column first_name as"]', 'variable');
    await page.waitForFunction(`document.querySelector('[data-testid="mapping-problem"]') === null`);
    await page.locator('#campaign-name').fill('Spring renewals');
    await page.locator('#campaign-concurrency').fill('2');
    await page.locator('#campaign-cps').fill('5');
    await page.locator('#campaign-attempts').fill('2');
    await page.locator('#campaign-delay').fill('30');
    await page.locator('#campaign-min-calls').fill('5');
    await page.evaluate('window.scrollTo(0, 0)');
    await screenshot(page, 'campaign-new');
    await page.locator('::-p-aria([name="Create campaign"][role="button"])').click();

    await page.locator('[data-testid="creation-import"]').wait();
    const id = Number(new URL(page.url()).pathname.split('/').pop());
    const report = await page.$eval('[data-testid="creation-import"]', (el) => ({ text: el.querySelector('p')?.textContent, lines: [...el.querySelectorAll('li')].map((li) => li.textContent) }));
    assert.equal(report.text, 'Created with 4 contacts from the file: added 3, duplicates 0, invalid 1. Start it when ready.');
    assert.equal(report.lines.length, 1);
    assert.match(report.lines[0] ?? '', /^Line 4: /, 'the invalid line numbered as in the file');
    const stored = (await getJson(env.app, `/api/v1/public/campaigns/${id}`, f.apiKey)).json() as { name: string; state: string; max_concurrent_calls: number; calls_per_second: number; retry: unknown; circuit_breaker: unknown };
    assert.deepEqual(
      { name: stored.name, state: stored.state, max: stored.max_concurrent_calls, cps: stored.calls_per_second, retry: stored.retry, breaker: stored.circuit_breaker },
      { name: 'Spring renewals', state: 'draft', max: 2, cps: 5, retry: { max_attempts: 2, delay_seconds: 30, on: ['busy', 'no_answer', 'failed'] }, breaker: { failure_ratio: 0.5, window_seconds: 120, min_calls: 5 } },
    );
    // The mapped variables, and only those, are each contact's initial_context.
    const contacts = (await getJson(env.app, `/api/v1/public/campaigns/${id}/contacts`, f.apiKey)).json() as { data: { phone_number: string }[] };
    assert.deepEqual(contacts.data.map((c) => c.phone_number).sort(), ['+12025550130', '+12025550131', '+12025550132']);

    /** The breakdown as shown: contacts by status summing to the total, attempts by outcome to the attempts. */
    const checkBreakdown = async () => {
      const b = (await page.evaluate(`(() => {
        const cells = (selector) => [...document.querySelectorAll(selector)].map((el) => Number(el.textContent));
        return {
          statuses: cells('[data-testid="contacts-breakdown"] td[data-status]'),
          total: Number(document.querySelector('[data-testid="contacts-total"]')?.textContent),
          outcomes: cells('[data-testid="attempts-breakdown"] td[data-outcome]'),
          attempts: Number(document.querySelector('[data-testid="attempts-total"]')?.textContent),
        };
      })()`)) as { statuses: number[]; total: number; outcomes: number[]; attempts: number };
      assert.equal(b.statuses.reduce((a, n) => a + n, 0), b.total, `contacts add up: ${JSON.stringify(b)}`);
      assert.equal(b.outcomes.reduce((a, n) => a + n, 0), b.attempts, `attempts add up: ${JSON.stringify(b)}`);
      return b;
    };
    assert.deepEqual(await checkBreakdown(), { statuses: [0, 0, 0, 0, 0, 0, 3], total: 3, outcomes: [0], attempts: 0 });
    await page.locator(`::-p-aria([name="Start Spring renewals"][role="button"])`).click();
    await page.waitForFunction(`document.querySelector('[data-testid="campaign-state"]')?.textContent === 'running'`);
    // The scheduler is ticked by hand; the dispatcher dials; the page follows the stream.
    const deadline = Date.now() + scaledTimeout(30_000);
    for (;;) {
      await runCampaignTick(env.deps);
      await checkBreakdown();
      const state = await page.$eval('[data-testid="campaign-state"]', (el) => el.textContent);
      if (state === 'completed') break;
      assert.ok(Date.now() < deadline, `the campaign completes (it is ${state})`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await page.waitForFunction(`[...document.querySelectorAll('[data-testid="contact-status"]')].map((el) => el.textContent).join() === 'reached,reached,reached'`);
    const final = await checkBreakdown();
    assert.deepEqual(final, { statuses: [3, 0, 0, 0, 0, 0, 0], total: 3, outcomes: [3, 0], attempts: 3 });
    // Each contact's attempt links to its call.
    assert.equal(await page.$$eval('[data-testid="contact-row"] a[href^="/console/runs/"]', (links) => links.length), 3);
    await screenshot(page, 'campaign');
    // Filtered by status: none pending.
    await page.select('main select', 'pending');
    await page.locator('::-p-text(No contacts with this status.)').wait();
    assert.deepEqual(problems, []);
  });

  it('keeps a campaign\'s breakdown adding up on its page while it is paused with attempts given back and canceled with attempts queued', async (t) => {
    // No dispatcher: attempts stay queued until the pause or the cancel ends them.
    const { env, url, f } = await serve(t, { dispatch: false });
    const campaign = await createCampaign(env.app, f, { name: 'Paused then canceled' });
    await addContacts(env.app, f, campaign.id, ['+12025550130', '+12025550131', '+12025550132', '+12025550133'].map((phone_number) => ({ phone_number })));
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.goto(`${url}/console/campaigns/${campaign.id}`);
    const shown = async (state: string) => {
      await page.waitForFunction(`document.querySelector('[data-testid="campaign-state"]')?.textContent === ${JSON.stringify(state)}`);
      const read = (await page.evaluate(`(() => {
        const cells = (selector) => [...document.querySelectorAll(selector)].map((el) => Number(el.textContent));
        return {
          statuses: cells('[data-testid="contacts-breakdown"] td[data-status]'),
          total: Number(document.querySelector('[data-testid="contacts-total"]')?.textContent),
          outcomes: cells('[data-testid="attempts-breakdown"] td[data-outcome]'),
          attempts: Number(document.querySelector('[data-testid="attempts-total"]')?.textContent),
        };
      })()`)) as { statuses: number[]; total: number; outcomes: number[]; attempts: number };
      assert.equal(read.statuses.reduce((a, n) => a + n, 0), read.total, `${state}: contacts add up: ${JSON.stringify(read)}`);
      assert.equal(read.outcomes.reduce((a, n) => a + n, 0), read.attempts, `${state}: attempts add up: ${JSON.stringify(read)}`);
      return read;
    };
    assert.equal((await shown('draft')).total, 4);
    await page.locator('::-p-aria([name="Start Paused then canceled"][role="button"])').click();
    await shown('running');
    assert.equal((await runCampaignTick(env.deps)).created, 4);
    // Every contact in progress, every attempt not ended yet.
    await page.waitForFunction(`document.querySelector('[data-testid="contacts-breakdown"] td[data-status="in_progress"]')?.textContent === '4'`);
    assert.deepEqual((await shown('running')).outcomes, [4]);
    await page.locator('::-p-aria([name="Pause Paused then canceled"][role="button"])').click();
    // The pause ended the queued attempts canceled; the next pass gives the contacts their attempt back.
    await shown('paused');
    await runCampaignTick(env.deps);
    await page.waitForFunction(`document.querySelector('[data-testid="contacts-breakdown"] td[data-status="pending"]')?.textContent === '4'`, { timeout: scaledTimeout(15_000) });
    const paused = await shown('paused');
    assert.equal(paused.attempts, 4);
    await page.locator('::-p-aria([name="Resume Paused then canceled"][role="button"])').click();
    await shown('running');
    assert.equal((await runCampaignTick(env.deps)).created, 4);
    await page.locator('::-p-aria([name="Cancel Paused then canceled"][role="button"])').click();
    await page.locator('::-p-aria([name="Confirm: cancel Paused then canceled"][role="button"])').click();
    const canceled = await shown('canceled');
    assert.equal(canceled.attempts, 8);
    assert.equal(canceled.total, 4);
    assert.deepEqual(problems, []);
  });

  it('exports the filtered calls as CSV, every cell a spreadsheet would take for a formula made text, and shows a call\'s duration, outcome and who answered on its page', async (t) => {
    const { env, url, f } = await serve(t);
    const downloads = tempDir(t, 'dialtone-downloads-');
    const ids: number[] = [];
    // Numbers the simulator answers, then hangs up (docs/simulator.md).
    for (const phone of ['+12025550130', '+12025550131', '+12025550132']) {
      const started = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: phone }, { key: f.apiKey });
      assert.equal(started.statusCode, 200, started.body);
      ids.push((started.json() as { workflow_run_id: number }).workflow_run_id);
    }
    const ended = async () => ((await getJson(env.app, '/api/v1/public/workflow-runs?state=completed', f.apiKey)).json() as { data: unknown[] }).data.length === 3;
    for (const deadline = Date.now() + scaledTimeout(20_000); !(await ended()); ) {
      assert.ok(Date.now() < deadline, `the calls complete: ${(await getJson(env.app, '/api/v1/public/workflow-runs', f.apiKey)).body}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const { page, problems } = await openPage(t, chrome, { downloads });
    await signIn(page, url, f.apiKey);
    await page.waitForSelector(`tr[data-run-id="${ids[2]}"]`);
    // Filtered by number: one call.
    await page.locator('::-p-aria(Phone number)').fill('+12025550131');
    await page.locator('::-p-aria([name="Filter"][role="button"])').click();
    await page.waitForFunction(`document.querySelectorAll('tr[data-run-id]').length === 1`);
    await page.locator('::-p-aria([name="Export CSV"][role="button"])').click();
    await page.waitForFunction(`document.querySelector('[data-testid="export-status"]')?.textContent === 'Exported 1 call.'`);
    const deadline = Date.now() + scaledTimeout(10_000);
    let files: string[] = [];
    while ((files = readdirSync(downloads).filter((name) => name.endsWith('.csv'))).length === 0) {
      assert.ok(Date.now() < deadline, 'the file is downloaded');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const lines = readFileSync(join(downloads, files[0] as string), 'utf8').trimEnd().split('\r\n');
    assert.equal(lines.length, 2, lines.join('\n'));
    assert.equal(lines[0], 'id,name,state,outcome_reason,answered_by,duration_seconds,phone_number,caller_id,agent,workflow_uuid,campaign_id,created_at,answered_at,ended_at');
    const cells = (lines[1] as string).split(',');
    assert.equal(cells[0], String(ids[1]));
    assert.equal(cells[2], 'completed');
    assert.equal(cells[6], "'+12025550131", 'a number starting with + is text, not a formula');
    // The escaping itself, on every character that starts a formula, and CSV quoting after it.
    const escaped = await page.evaluate(`import('/console/assets/csv.js').then(({ csvLine }) =>
      csvLine(['=1+2', '+1', '-1', '@SUM(A1)', '\\tx', 'plain', 'a,"b"', '=HYPERLINK("http://x","y")'], { spreadsheet: true }))`);
    assert.equal(escaped, `'=1+2,'+1,'-1,'@SUM(A1),'\tx,plain,"a,""b""","'=HYPERLINK(""http://x"",""y"")"\r\n`);

    await page.click(`tr[data-run-id="${ids[1]}"] a`);
    await page.waitForSelector('[data-testid="run-duration"]');
    const facts = (await page.evaluate(`Object.fromEntries(['run-duration', 'run-outcome', 'run-answered-by'].map((id) => [id, document.querySelector('[data-testid="' + id + '"]')?.textContent]))`)) as Record<string, string | undefined>;
    assert.match(facts['run-duration'] ?? '', /^\d+\.\d s$/);
    assert.equal(facts['run-outcome'], 'hangup');
    assert.ok(facts['run-answered-by'], 'who answered, or — until known');
    assert.deepEqual(problems, []);
  });

  it('shows a script or HTML payload as text in every field an operator sets: key name, campaign name, CSV cells, contact variables, initial_context, webhook URL and description, suppression reason, agent name and definition', async (t) => {
    const { env, url, f } = await serve(t, { dispatch: false });
    await createApiKey(env.deps.store, f.orgId, `key ${XSS}`, Date.now(), { scopes: ['calls'] });
    const campaign = await createCampaign(env.app, f, { name: `campaign ${XSS}` });
    await addContacts(env.app, f, campaign.id, [{ phone_number: '+12025550100', initial_context: { note: `contact ${XSS}` } }]);
    const run = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550101', initial_context: { customer_name: `context ${XSS}` } }, { key: f.apiKey });
    assert.equal(run.statusCode, 200, run.body);
    const runId = (run.json() as { workflow_run_id: number }).workflow_run_id;
    const hook = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: `http://127.0.0.1:9/hook?q=${encodeURIComponent(XSS)}`, description: `hook ${XSS}` }, { key: f.apiKey });
    assert.equal(hook.statusCode, 201, hook.body);
    const suppressed = await env.app.inject({ method: 'PUT', url: `/api/v1/public/suppressions/${encodeURIComponent('+12025550199')}`, headers: { 'x-api-key': f.apiKey, 'content-type': 'application/json' }, payload: { reason: `reason ${XSS}` } });
    assert.ok([200, 201].includes(suppressed.statusCode), suppressed.body);
    const agent = await postJson(env.app, '/api/v1/public/workflows', { name: `agent ${XSS}`, definition: definition({ greeting: `Hello ${XSS}` }) }, { key: f.apiKey });
    assert.equal(agent.statusCode, 201, agent.body);
    const dir = tempDir(t, 'dialtone-xss-csv-');
    const file = join(dir, `cells.csv`);
    writeFileSync(file, `phone_number,"${XSS.replaceAll('"', '""')}"\n+12025550102,"cell ${XSS.replaceAll('"', '""')}"\n`);

    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    const textOf = (selector: string) => page.$eval(selector, (el) => el.textContent ?? '');
    const shows = async (path: string, selector: string, expected: string) => {
      await page.goto(`${url}${path}`);
      await page.waitForFunction(`(document.querySelector(${JSON.stringify(selector)})?.textContent ?? '').includes(${JSON.stringify(expected)})`);
      await assertInert(page);
    };
    await shows('/console/api-keys', 'main table', `key ${XSS}`);
    await shows('/console/campaigns', 'main table', `campaign ${XSS}`);
    await shows(`/console/campaigns/${campaign.id}`, 'h1', `campaign ${XSS}`);
    // The attempt's context holds the contact's variables: started by a scheduler pass.
    await postJson(env.app, `/api/v1/public/campaigns/${campaign.id}/start`, undefined, { key: f.apiKey, raw: '' });
    assert.equal((await runCampaignTick(env.deps)).created, 1);
    const attempt = ((await getJson(env.app, `/api/v1/public/campaigns/${campaign.id}/runs`, f.apiKey)).json() as { data: { id: number }[] }).data[0]?.id;
    await shows(`/console/runs/${attempt}`, '[data-testid="initial-context"]', `contact ${XSS.replaceAll('"', '\\"')}`);
    await shows(`/console/runs/${runId}`, '[data-testid="initial-context"]', `context ${XSS.replaceAll('"', '\\"')}`);
    await shows('/console/webhooks', 'main .endpoints', `hook ${XSS}`);
    assert.ok((await textOf('main .endpoints .url')).includes('/hook?q='), 'the URL as text');
    await shows('/console/suppressions', 'main table', `reason ${XSS}`);
    await shows('/console/agents', 'main table', `agent ${XSS}`);
    await shows(`/console/agents/${(agent.json() as { workflow_uuid: string }).workflow_uuid}`, '[data-testid="published-definition"]', JSON.stringify(`Hello ${XSS}`));
    // CSV cells, a header among them, in the new campaign's column mapping.
    await page.goto(`${url}/console/campaigns/new`);
    const input = await page.waitForSelector('#contacts-csv');
    await input?.uploadFile(file);
    await page.waitForSelector('[data-testid="column-mapping"]');
    const mapping = await textOf('[data-testid="column-mapping"]');
    assert.ok(mapping.includes(XSS) && mapping.includes(`cell ${XSS}`), mapping);
    await assertInert(page);
    assert.deepEqual(problems, []);
  });
});
