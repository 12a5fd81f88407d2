// The console's route pages in a real browser (Debian's chromium, headless): the Routes list with
// each route's readiness at a glance, New route for the simulator, SIP and Twilio providers (a
// 422's problems beside the field their pointer names), a route's page (Make default, Disable and
// Enable, its readiness with every problem, its settings saved), credentials that are never shown
// back (not in an input, nor anywhere in the page's HTML, after saving or a reload), none of it for
// a key without `admin`, and an HTML/script payload in a route's name and settings shown as text.
// The pages read and change the store through the API only, so these run on SQLite (the API's own
// tests, telephony-configurations-api, cover both stores).
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type { Page } from 'puppeteer-core';
import { createApiKey } from '../src/auth/api-keys.js';
import { build, getJson, postJson, type TestEnv } from './helpers/app.js';
import { assertInert, chromiumSkip, launchBrowser, openPage, screenshot, signIn, XSS, type BrowserHandle } from './helpers/browser.js';
import { createOrgFixture, type OrgFixture } from './helpers/fixtures.js';
import { after, before, describe, it } from './helpers/suite.js';

let chrome: BrowserHandle | undefined;

const BASE = '/api/v1/public/telephony-configurations';

async function serve(t: TestContext): Promise<{ env: TestEnv; url: string; f: OrgFixture }> {
  const env = await build(t, 'sqlite');
  const url = await env.app.listen({ host: '127.0.0.1', port: 0 });
  return { env, url, f: await createOrgFixture(env.deps) };
}

interface Details {
  id: number;
  name: string;
  provider: string;
  caller_ids: string[];
  is_default: boolean;
  status: string;
  settings: Record<string, unknown>;
  credentials_set: Record<string, boolean>;
}

async function routes(env: TestEnv, f: OrgFixture): Promise<{ id: number; name: string; is_default: boolean; status: string }[]> {
  return ((await getJson(env.app, BASE, f.apiKey)).json() as { data: { id: number; name: string; is_default: boolean; status: string }[] }).data;
}

async function details(env: TestEnv, f: OrgFixture, id: number): Promise<Details> {
  return (await getJson(env.app, `${BASE}/${id}`, f.apiKey)).json() as Details;
}

const click = (page: Page, name: string) => page.locator(`::-p-aria([name="${name}"][role="button"])`).click();
/** Empties an input as a person does (puppeteer's fill('') sends no input event). */
async function clear(page: Page, selector: string): Promise<void> {
  await page.click(selector, { count: 3 });
  await page.keyboard.press('Backspace');
}
/** The page scrolled back to its top, nothing focused: for a screenshot of what a page opens with. */
async function fromTop(page: Page): Promise<void> {
  await page.evaluate('document.activeElement?.blur(); scrollTo(0, 0)');
}
const text = (page: Page, selector: string) => page.$eval(selector, (el) => el.textContent ?? '');

/** The route page's id, once the browser is on it. */
async function routePageId(page: Page): Promise<number> {
  await page.waitForFunction(`/^\\/console\\/routes\\/\\d+$/.test(location.pathname) && document.querySelector('[data-testid="readiness"][data-ready]')`);
  return Number(new URL(page.url()).pathname.split('/').pop());
}

/** Fails unless `secret` is nowhere in the page: not in its HTML, nor in any input's value. */
async function assertNotShown(page: Page, secret: string): Promise<void> {
  assert.ok(!(await page.content()).includes(secret), 'the secret is not in the page\'s HTML');
  const values = await page.$$eval('input, textarea', (els) => els.map((el) => (el as unknown as { value: string }).value));
  assert.ok(!values.some((v) => v.includes(secret)), 'nor in any field');
}

describe('The console\'s route pages in a browser', { skip: chromiumSkip() }, () => {
  before(async () => {
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
  });

  it('creates a SIP route (its 422 problems shown beside their fields first), makes it the default, disables and enables it, saves a new password, and never shows a credential back', async (t) => {
    const { env, url, f } = await serve(t);
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Routes"][role="link"])').click();
    await page.locator('::-p-aria([name="Routes"][role="heading"])').wait();
    await page.waitForSelector(`tr[data-id="${f.telephonyId}"] [data-testid="route-row-readiness"] .route-ready`);
    assert.equal(await text(page, `tr[data-id="${f.telephonyId}"] [data-testid="route-row-default"]`), 'default');

    await page.locator('::-p-aria([name="New route"][role="link"])').click();
    await page.locator('::-p-aria([name="New route"][role="heading"])').wait();
    await page.select('#route-provider', 'sip');
    await page.locator('#route-setting-host').wait();
    await page.locator('#route-name').fill('Trunk A');
    await page.locator('#route-setting-port').fill('99999');
    await page.locator('#route-credential-username').fill('alice');
    await page.locator('#route-credential-password').fill('first-s3cret-pass');
    await click(page, 'Create route');
    // Both problems of the provider's schema, each beside its field.
    assert.match(await page.locator('[data-testid="field-problem"][data-pointer="/settings/host"]').map((el) => el.textContent ?? '').wait(), /Required/);
    assert.match(await text(page, '[data-testid="field-problem"][data-pointer="/settings/port"]'), /port/);
    assert.equal((await routes(env, f)).length, 1, 'nothing was created');
    await fromTop(page);
    await screenshot(page, 'route-new');

    await page.locator('#route-setting-host').fill('sip.example.net');
    await page.locator('#route-setting-port').fill('5061');
    await page.locator('#route-setting-transport').fill('tls');
    await page.locator('#route-caller-ids').fill('+12025550177');
    await click(page, 'Create route');
    const id = await routePageId(page);
    const created = await details(env, f, id);
    assert.deepEqual(
      { name: created.name, provider: created.provider, caller_ids: created.caller_ids, settings: created.settings, credentials_set: created.credentials_set, is_default: created.is_default },
      { name: 'Trunk A', provider: 'sip', caller_ids: ['+12025550177'], settings: { host: 'sip.example.net', port: 5061, transport: 'tls' }, credentials_set: { username: true, password: true }, is_default: false },
      'the port sent as a number',
    );
    assert.equal(await page.$eval('[data-testid="readiness"]', (el) => el.getAttribute('data-ready')), 'true');
    assert.match(await text(page, '[data-testid="credential-status"][data-credential="password"]'), /^Set/);
    await assertNotShown(page, 'first-s3cret-pass');
    await assertNotShown(page, 'alice');

    await click(page, 'Make default');
    await page.waitForFunction(`document.querySelector('[data-testid="route-default"]').textContent.startsWith('yes')`);
    assert.equal((await details(env, f, id)).is_default, true);
    assert.equal((await details(env, f, f.telephonyId)).is_default, false, 'the previous default stays, as an ordinary route');

    await click(page, 'Disable');
    await page.waitForSelector('[data-testid="readiness"][data-ready="false"] [data-testid="readiness-problem"][data-pointer="/status"]');
    assert.equal(await text(page, '[data-testid="route-status"]'), 'disabled');
    assert.equal(await page.$eval('::-p-aria([name="Make default"][role="button"])', (el) => (el as unknown as { disabled: boolean }).disabled), true, 'a disabled route cannot be the default');
    const disabled = await details(env, f, id);
    assert.deepEqual([disabled.status, disabled.is_default], ['inactive', false], 'disabling the default left no default');
    await click(page, 'Enable');
    await page.waitForSelector('[data-testid="readiness"][data-ready="true"]');
    assert.equal(await text(page, '[data-testid="route-status"]'), 'enabled');
    assert.equal((await details(env, f, id)).status, 'active');

    // A problem on saving is shown beside its field, and nothing changes.
    await page.locator('#route-setting-port').fill('port five');
    await page.locator('#route-credential-password').fill('second-s3cret-pass');
    await click(page, 'Save route');
    await page.waitForSelector('[data-testid="field-problem"][data-pointer="/settings/port"]');
    assert.equal((await details(env, f, id)).settings.port, 5061, 'nothing changed');
    await clear(page, '#route-setting-port');
    await click(page, 'Save route');
    await page.waitForFunction(`document.querySelector('[data-testid="route-save-status"]')?.textContent === 'Saved.'`);
    const saved = await details(env, f, id);
    assert.deepEqual(saved.settings, { host: 'sip.example.net', transport: 'tls' }, 'an emptied setting is removed');
    assert.deepEqual(saved.credentials_set, { username: true, password: true });
    // The password replaced: the route's credentials decrypt to the new one (read the way calls read them).
    const row = await env.deps.store.db.selectFrom('telephony_configurations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    assert.ok(row.credentials_encrypted, 'credentials are stored');
    assert.deepEqual(env.deps.cipher.decrypt(row.org_id, row.credentials_encrypted), { username: 'alice', password: 'second-s3cret-pass' });
    assert.equal(await page.$eval('#route-credential-password', (el) => (el as unknown as { value: string }).value), '', 'the typed password is emptied once sent');
    for (const secret of ['first-s3cret-pass', 'second-s3cret-pass', 'alice']) await assertNotShown(page, secret);

    await page.reload();
    await routePageId(page);
    for (const secret of ['first-s3cret-pass', 'second-s3cret-pass', 'alice']) await assertNotShown(page, secret);
    assert.match(await text(page, '[data-testid="credential-status"][data-credential="username"]'), /^Set/);
    assert.deepEqual(problems.filter((p) => !/422/.test(p)), [], 'only the refused creation and save');
  });

  it('creates a simulator route with a setting typed as a number, and a Twilio route whose readiness lists every problem, on its page and in the list', async (t) => {
    const { env, url, f } = await serve(t);
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.goto(`${url}/console/routes/new`);
    await page.locator('#route-provider').wait();
    await page.select('#route-provider', 'simulator');
    await page.locator('#route-name').fill('Slow ringing');
    await page.locator('#route-setting-ring_ms').fill('2500');
    await page.locator('#route-caller-ids').fill('+12025550123');
    await page.locator('#route-cps').fill('0');
    await click(page, 'Create route');
    // A problem of the request's own schema, beside its field too.
    await page.waitForSelector('[data-testid="field-problem"][data-pointer="/calls_per_second"]');
    await page.locator('#route-cps').fill('2.5');
    await page.locator('input[name="is_default"]').click();
    await click(page, 'Create route');
    const simulator = await details(env, f, await routePageId(page));
    assert.deepEqual([simulator.provider, simulator.settings, simulator.is_default, (simulator as unknown as { calls_per_second: number }).calls_per_second], ['simulator', { ring_ms: 2500 }, true, 2.5]);
    assert.equal(await page.$('[data-testid="route-credentials"] input'), null, 'the simulator takes no credentials');

    await page.goto(`${url}/console/routes/new`);
    await page.locator('#route-provider').wait();
    await page.select('#route-provider', 'twilio');
    await page.locator('#route-credential-auth_token').wait();
    await page.locator('#route-name').fill('Twilio main');
    await page.locator('#route-credential-account_sid').fill('AC0123456789abcdef0123456789abcdef');
    await page.locator('#route-credential-auth_token').fill('twilio-t0ken-never-shown');
    await click(page, 'Create route');
    const id = await routePageId(page);
    // No caller ID, and no PUBLIC_BASE_URL in this service: both are listed, each with its pointer.
    const listed = await page.$$eval('[data-testid="readiness-problem"]', (els) => els.map((el) => [el.getAttribute('data-pointer'), el.textContent ?? '']));
    const readiness = (await getJson(env.app, `${BASE}/${id}/readiness`, f.apiKey)).json() as { ready: boolean; problems: { pointer: string; detail: string }[] };
    assert.equal(readiness.ready, false);
    assert.deepEqual(listed.map(([pointer]) => pointer), readiness.problems.map((p) => p.pointer), 'every problem the API lists');
    assert.deepEqual(readiness.problems.map((p) => p.pointer), ['/caller_ids', '']);
    for (const [i, [, shown]] of listed.entries()) assert.ok(shown.endsWith(readiness.problems[i]?.detail ?? '?'), shown);
    assert.deepEqual(await page.$$eval('[data-testid="credential-status"]', (els) => els.map((el) => [el.getAttribute('data-credential'), (el.textContent ?? '').split(':')[0]?.replace('.', '')])), [
      ['account_sid', 'Set'],
      ['auth_token', 'Set'],
      ['api_key_sid', 'Not set'],
      ['api_key_secret', 'Not set'],
    ]);
    await assertNotShown(page, 'twilio-t0ken-never-shown');
    await assertNotShown(page, 'AC0123456789abcdef0123456789abcdef');
    await fromTop(page);
    await screenshot(page, 'route');

    await page.locator('::-p-aria([name="← Routes"][role="link"])').click();
    await page.waitForSelector(`tr[data-id="${id}"] [data-testid="route-row-readiness"] .route-not-ready`);
    assert.match(await text(page, `tr[data-id="${id}"] [data-testid="route-row-readiness"]`), /No caller ID is configured/);
    await page.waitForSelector(`tr[data-id="${simulator.id}"] [data-testid="route-row-readiness"] .route-ready`);
    assert.equal(await text(page, `tr[data-id="${simulator.id}"] [data-testid="route-row-default"]`), 'default');
    assert.equal(await text(page, `tr[data-id="${f.telephonyId}"] [data-testid="route-row-default"]`), '—');
    assert.deepEqual(await page.$$eval('tr[data-testid="route-row"] td[data-label="Provider"]', (els) => els.map((el) => el.textContent)), ['simulator', 'simulator', 'twilio'], 'oldest first');
    await assertNotShown(page, 'twilio-t0ken-never-shown');
    await screenshot(page, 'routes');
    assert.deepEqual(problems.filter((p) => !/422/.test(p)), [], 'only the refused creation');
  });

  it('shows no route page to a key without the admin scope: no link, and a page typed in names the scope it lacks', async (t) => {
    const { env, url, f } = await serve(t);
    const key = (await createApiKey(env.deps.store, f.orgId, 'no admin', Date.now(), { scopes: ['calls', 'campaigns', 'webhooks'] })).key;
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, key);
    assert.ok(!(await page.$$eval('nav a', (links) => links.map((a) => a.textContent))).includes('Routes'));
    for (const path of ['/console/routes', '/console/routes/new', `/console/routes/${f.telephonyId}`]) {
      await page.goto(`${url}${path}`);
      assert.match(await page.locator('[data-testid="missing-scope"]').map((el) => el.textContent ?? '').wait(), /lacks the admin scope/, path);
    }
    assert.deepEqual(problems, [], 'nothing was asked that the key may not read');
  });

  it('tells a key with admin but not calls that the route pages need calls too, shows no Routes link, and asks the API nothing it would refuse', async (t) => {
    const { env, url, f } = await serve(t);
    const key = (await createApiKey(env.deps.store, f.orgId, 'admin only', Date.now(), { scopes: ['admin'] })).key;
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, key);
    for (const path of ['/console/routes', '/console/routes/new', `/console/routes/${f.telephonyId}`]) {
      await page.goto(`${url}${path}`);
      assert.match(await page.locator('[data-testid="missing-scope"]').map((el) => el.textContent ?? '').wait(), /lacks the calls scope/, path);
    }
    assert.equal(await page.$('nav a[href="/console/routes"]'), null, 'no Routes link');
    assert.deepEqual(problems, [], 'no refusal');
  });

  it('shows a script or HTML payload in a route\'s name and settings as text: in the list, on its page, in its fields and in a problem about it', async (t) => {
    const { env, url, f } = await serve(t);
    const created = await postJson(env.app, BASE, { name: `route ${XSS}`, provider: 'sip', settings: { host: 'sip.example.net', media_address: '192.0.2.10' } }, { key: f.apiKey });
    assert.equal(created.statusCode, 201, created.body);
    const id = (created.json() as { id: number }).id;
    // The API refuses markup in a setting; written behind its back, as an older version or a hand edit might have.
    await env.deps.store.db.updateTable('telephony_configurations').set({ settings: JSON.stringify({ host: 'sip.example.net', media_address: XSS }), updated_at: Date.now() + 1 }).where('id', '=', id).execute();
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.goto(`${url}/console/routes`);
    await page.waitForSelector(`tr[data-id="${id}"] [data-testid="route-row-readiness"] .state`);
    assert.equal(await text(page, `tr[data-id="${id}"] td[data-label="Name"]`), `route ${XSS}`);
    await assertInert(page);

    await page.goto(`${url}/console/routes/${id}`);
    await routePageId(page);
    assert.equal(await text(page, '[data-testid="route-name"]'), `route ${XSS}`);
    assert.equal(await page.$eval('#route-setting-media_address', (el) => (el as unknown as { value: string }).value), XSS);
    assert.equal(await page.$eval('#route-name', (el) => (el as unknown as { value: string }).value), `route ${XSS}`);
    // What an operator types comes back in a problem's words too.
    await page.locator('#route-setting-outbound_proxy').fill(XSS);
    await page.locator('#route-setting-host').fill(XSS);
    await click(page, 'Save route');
    await page.waitForSelector('[data-testid="field-problem"][data-pointer="/settings/outbound_proxy"]');
    await assertInert(page);
    assert.deepEqual(problems.filter((p) => !/422/.test(p)), [], 'only the refused save');
  });
});
