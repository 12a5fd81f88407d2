// The console in a real browser (Debian's chromium, headless): signing in, following calls live,
// a call's page (with the agent runtime's result and events), cancelling, text that looks like HTML, a wrong key, two widths, suppressions (add,
// refuse, remove, import), campaigns (start, pause, contacts import, cancel; followed live from the
// stream), the stream resuming across a node restart, and the page rebuilt after a reset.
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { sql } from 'kysely';
import pino from 'pino';
import type { Page } from 'puppeteer-core';
import { buildApp } from '../src/app.js';
import { isTerminal, LIVE_STATES, RUN_STATES } from '../src/runs/states.js';
import { runCampaignTick } from '../src/campaigns/scheduler.js';
import { buildDeps } from '../src/deps.js';
import { DEMO_DEFINITION } from '../src/first-run.js';
import { postJson, testConfig, type TestEnv } from './helpers/app.js';
import { ARTIFACTS, chromiumSkip, launchBrowser, openPage, type BrowserHandle } from './helpers/browser.js';
import { act, addContacts, createCampaign } from './helpers/campaigns.js';
import { buildWithDispatcher } from './helpers/dispatch.js';
import { startReceiver, WEBHOOK_TEST_ENV } from './helpers/webhooks.js';
import { createOrgFixture, definition, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { createTestDatabase, openTestStore } from './helpers/stores.js';
import { after, before, describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

/** Calls long enough that a row is seen live before it ends. */
const VISIBLE_CALLS = { SIMULATOR_RING_MS: '800', SIMULATOR_TALK_MS: '800', MAX_CALL_DURATION_MS: '20000', RING_TIMEOUT_MS: '20000', STREAM_POLL_INTERVAL_MS: '50' };

let chrome: BrowserHandle | undefined;

async function serve(t: TestContext, options: { dispatch?: boolean; env?: Record<string, string>; definition?: unknown } = {}): Promise<{ env: TestEnv; url: string; f: OrgFixture }> {
  const env = await buildWithDispatcher(t, 'sqlite', { env: { ...VISIBLE_CALLS, ...options.env }, start: options.dispatch !== false });
  const url = await env.app.listen({ host: '127.0.0.1', port: 0 });
  return { env, url, f: await createOrgFixture(env.deps, 'Acme', ...(options.definition === undefined ? [] : [options.definition])) };
}

async function signIn(page: Page, url: string, key: string): Promise<void> {
  await page.goto(`${url}/console`);
  await page.locator('::-p-aria(API key)').fill(key);
  await page.locator('::-p-aria([name="Sign in"][role="button"])').click();
}

async function call(env: TestEnv, f: OrgFixture, phone: string, context?: Record<string, unknown>): Promise<{ id: number; name: string }> {
  const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: phone, ...(context ? { initial_context: context } : {}) }, { key: f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  const body = response.json() as { workflow_run_id: number; workflow_run_name: string };
  return { id: body.workflow_run_id, name: body.workflow_run_name };
}

const rowState = (page: Page, id: number) => page.$eval(`tr[data-run-id="${id}"] .state`, (el) => el.textContent).catch(() => null);

async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  for (const [width, height] of [[1280, 800], [390, 844]] as const) {
    await page.setViewport({ width, height });
    await page.screenshot({ path: new URL(`console-${name}-${width}.png`, ARTIFACTS).pathname as `${string}.png`, fullPage: true });
  }
  await page.setViewport({ width: 1280, height: 800 });
}

describe('The console in a browser', { skip: chromiumSkip() }, () => {
  before(async () => {
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
  });

  it('signs in with an API key kept in session storage only: never in the URL, a cookie or the page', async (t) => {
    const { url, f } = await serve(t);
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Console"][role="navigation"])').wait();
    assert.equal(await page.evaluate("sessionStorage.getItem('dialtone.apiKey')"), f.apiKey);
    assert.equal(await page.evaluate('document.cookie'), '');
    assert.ok(!page.url().includes(f.apiKey));
    assert.ok(!(await page.content()).includes(f.apiKey), 'the key is not shown');
    await page.locator('::-p-text(Live)').wait();
    assert.deepEqual(problems, []);
  });

  it('shows an error and nothing else for a wrong key', async (t) => {
    const { url } = await serve(t);
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, 'dt_live_wrong');
    const alert = await page.locator('[role="alert"]').waitHandle();
    assert.match((await alert.evaluate((el) => el.textContent)) ?? '', /not accepted/);
    assert.equal(await page.$('nav'), null, 'no navigation');
    assert.equal(await page.$('table'), null, 'no data');
    assert.equal(await page.evaluate("sessionStorage.getItem('dialtone.apiKey')"), null, 'nothing kept');
    // The 401 the browser logs for the refused key is the only console message.
    assert.ok(problems.every((p) => p.includes('401')), problems.join('\n'));
  });

  it('follows a call started elsewhere in the Calls table, its row going to completed without a reload', async (t) => {
    const { env, url, f } = await serve(t);
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Calls"][role="heading"])').wait();
    await page.locator('::-p-text(Live)').wait();
    await page.evaluate('window.notReloaded = true');
    const run = await call(env, f, '+12025550100');
    await page.waitForSelector(`tr[data-run-id="${run.id}"]`);
    assert.equal(await page.$eval(`tr[data-run-id="${run.id}"] a`, (el) => el.textContent), run.name);
    const seen = new Set<string>();
    const deadline = Date.now() + scaledTimeout(15_000);
    for (let state = await rowState(page, run.id); state !== 'completed'; state = await rowState(page, run.id)) {
      if (state) seen.add(state);
      assert.ok(Date.now() < deadline, `the row reaches completed (seen: ${[...seen].join(', ')})`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    assert.ok([...seen].some((s) => s !== 'completed'), `the row was seen before it ended (${[...seen].join(', ')})`);
    assert.equal(await page.$eval(`tr[data-run-id="${run.id}"] .state`, (el) => el.className), 'state state-completed', 'state as colour too');
    assert.equal(await page.evaluate('window.notReloaded'), true, 'no reload');
    // A few more outcomes for the screenshot.
    const others = [await call(env, f, '+12025550101'), await call(env, f, '+12025550103'), await call(env, f, '+12025550104')];
    await page.waitForFunction(`${JSON.stringify(others.map((o) => o.id))}.every((id) => ['busy', 'rejected', 'failed'].includes(document.querySelector('tr[data-run-id="' + id + '"] .state')?.textContent))`, { timeout: scaledTimeout(15_000) });
    await screenshot(page, 'calls');
    assert.deepEqual(problems, []);
  });

  it('learns the run states from the API, once: a state the service serves shows in the Calls filter and in the Overview\'s chart', async (t) => {
    const { env, url, f } = await serve(t, { dispatch: false });
    const { page, problems } = await openPage(t, chrome);
    // The service answers with one more state than runs/states.ts has today, as it would after a
    // release that adds one: the console shows it without knowing it beforehand.
    const served = { data: [...RUN_STATES.map((state) => ({ state, terminal: isTerminal(state), live: (LIVE_STATES as readonly string[]).includes(state) })), { state: 'machine_answered', terminal: true, live: false }] };
    await page.setRequestInterception(true);
    let reads = 0;
    page.on('request', (request) => {
      if (new URL(request.url()).pathname !== '/api/v1/public/run-states') return void request.continue();
      reads++;
      void request.respond({ status: 200, contentType: 'application/json', body: JSON.stringify(served) });
    });
    const run = await call(env, f, '+12025550100');
    await signIn(page, url, f.apiKey);
    await page.waitForSelector(`tr[data-run-id="${run.id}"]`);
    const options = await page.$$eval('select[name="state"] option', (els) => els.map((el) => el.getAttribute('value')));
    assert.deepEqual(options, ['', ...served.data.map((s) => s.state)], 'every served state, in the served order');

    await page.locator('::-p-aria([name="Overview"][role="link"])').click();
    await page.waitForFunction(`[...document.querySelectorAll('.chart li')].some((li) => li.textContent.includes('machine answered'))`, { timeout: scaledTimeout(10_000) });
    assert.equal(reads, 1, 'read once, not once per page');
    assert.deepEqual(problems, []);
  });

  it('says so when the run states cannot be read, and reads them again with Try again', async (t) => {
    const { url, f } = await serve(t, { dispatch: false });
    const { page, problems } = await openPage(t, chrome);
    await page.setRequestInterception(true);
    let refuse = true;
    page.on('request', (request) => {
      if (!refuse || new URL(request.url()).pathname !== '/api/v1/public/run-states') return void request.continue();
      refuse = false;
      void request.respond({ status: 503, contentType: 'application/problem+json', body: JSON.stringify({ code: 'service_unavailable', detail: 'The store is not answering.' }) });
    });
    await signIn(page, url, f.apiKey);
    const alert = await page.locator('[role="alert"]').waitHandle();
    assert.match((await alert.evaluate((el) => el.textContent)) ?? '', /The store is not answering/);
    assert.equal(await page.$('h1'), null, 'no page without the states');
    await page.locator('::-p-aria([name="Try again"][role="button"])').click();
    await page.locator('::-p-aria([name="Calls"][role="heading"])').wait();
    assert.equal(await page.$('[role="alert"]'), null);
    // The 503 the browser logs for the refused read is the only console message.
    assert.ok(problems.every((p) => p.includes('503')), problems.join('\n'));
  });

  it('starts a test call from the Test call page, lands on its page and sees its timeline reach completed', async (t) => {
    const { url, f } = await serve(t);
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Test call"][role="link"])').click();
    await page.locator('::-p-aria(Agent)').wait();
    await page.waitForFunction("document.querySelector('#agent')?.value !== ''");
    await page.locator('::-p-aria(Phone number)').fill('+12025550100');
    await page.locator('::-p-aria(Initial context (JSON object, optional))').fill('{"name": "Ada"}');
    await page.locator('::-p-aria([name="Start test call"][role="button"])').click();
    await page.waitForFunction(String.raw`/^\/console\/runs\/\d+$/.test(location.pathname)`);
    await page.waitForFunction(`document.querySelector('[data-testid="run-state"]')?.textContent === 'completed'`, { timeout: scaledTimeout(15_000) });
    const timeline = await page.$$eval('[data-testid="timeline"] li .state', (els) => els.map((el) => el.textContent));
    assert.deepEqual(timeline, ['queued', 'dialing', 'ringing', 'in progress', 'completed']);
    assert.match((await page.$eval('h1', (el) => el.textContent)) ?? '', /^WR-TEST-\d+$/);
    assert.equal(await page.$eval('[data-testid="run-outcome"]', (el) => el.textContent), 'hangup');
    assert.equal(await page.$eval('[data-testid="definition-version"]', (el) => el.textContent), '1');
    assert.match((await page.$eval('[data-testid="initial-context"]', (el) => el.textContent)) ?? '', /"name": "Ada"/);
    assert.equal(await page.$('::-p-aria([name="Cancel call"][role="button"])'), null, 'no Cancel once it ended');
    await screenshot(page, 'call');
    assert.deepEqual(problems, []);
  });

  it('suggests an initial context made of the selected agent\'s own variables on the Test call page, and says a refusal once', async (t) => {
    const { url, f } = await serve(t, { definition: DEMO_DEFINITION });
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Test call"][role="link"])').click();
    await page.waitForFunction(`document.querySelector('#agent')?.value === ${JSON.stringify(f.agentUuid)}`);
    const context = await page.waitForSelector('::-p-aria(Initial context (JSON object, optional))');
    assert.ok(context);
    assert.equal(await context.evaluate((el) => el.getAttribute('placeholder')), '{"customer_name":"…","topic":"…"}');
    assert.equal(await page.$eval('[data-testid="agent-variables"]', (el) => el.textContent), "This agent's variables: customer_name, topic.");

    // A number the service refuses: its one sentence, once (the problem repeats it as the field's error).
    await page.locator('::-p-aria(Phone number)').fill('123');
    await page.locator('::-p-aria([name="Start test call"][role="button"])').click();
    const alert = await page.locator('[role="alert"]').waitHandle();
    const text = (await alert.evaluate((el) => el.textContent)) ?? '';
    assert.match(text, /is not in international format/);
    assert.equal(text.split('is not in international format').length - 1, 1, `said once: ${text}`);
    // The browser logs the refused request's 422; nothing else went wrong.
    assert.ok(problems.every((p) => p.includes('422')), problems.join('\n'));
  });

  it('shows each call\'s outcome reason and duration in the Calls list, kept live: a completed call its reason and its time on the call, a canceled one its reason', async (t) => {
    const { env, url, f } = await serve(t);
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-text(Live)').wait();
    await page.evaluate('window.notReloaded = true');
    const completed = await call(env, f, '+12025550100');
    const canceled = await call(env, f, '+12025550100');
    const cancel = await postJson(env.app, `/api/v1/public/workflow-runs/${canceled.id}/cancel`, undefined, { key: f.apiKey });
    assert.equal(cancel.statusCode, 200, cancel.body);
    for (const [run, state] of [[completed, 'completed'], [canceled, 'canceled']] as const) {
      await page.waitForFunction(`document.querySelector('tr[data-run-id="${run.id}"] .state')?.textContent === '${state}'`, { timeout: scaledTimeout(15_000) });
      const stored = (await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${run.id}`, headers: { 'x-api-key': f.apiKey } })).json() as { outcome_reason: string; answered_at: string | null; ended_at: string };
      const seconds = stored.answered_at === null ? null : (Date.parse(stored.ended_at) - Date.parse(stored.answered_at)) / 1000;
      // The row's cells, as the stream left them (no reload), say what the API says.
      await page.waitForFunction(
        `document.querySelector('tr[data-run-id="${run.id}"] [data-testid="run-row-outcome"]')?.textContent === ${JSON.stringify(stored.outcome_reason)}`,
        { timeout: scaledTimeout(5_000) },
      );
      const duration = await page.$eval(`tr[data-run-id="${run.id}"] [data-testid="run-row-duration"]`, (el) => el.textContent);
      assert.equal(duration, seconds === null ? '—' : `${seconds.toFixed(1)} s`, `${state} call's duration`);
    }
    const outcomes = await page.$$eval('thead th', (els) => els.map((el) => el.textContent));
    assert.deepEqual(outcomes.slice(0, 4), ['Call', 'State', 'Outcome', 'Duration']);
    assert.equal(await page.$eval(`tr[data-run-id="${completed.id}"] [data-testid="run-row-outcome"]`, (el) => el.textContent), 'hangup');
    assert.match((await page.$eval(`tr[data-run-id="${completed.id}"] [data-testid="run-row-duration"]`, (el) => el.textContent)) ?? '', /^\d+\.\d s$/);
    assert.equal(await page.$eval(`tr[data-run-id="${canceled.id}"] [data-testid="run-row-outcome"]`, (el) => el.textContent), 'canceled_by_request');
    assert.equal(await page.evaluate('window.notReloaded'), true, 'no reload');
    assert.deepEqual(problems, []);
  });

  it('shows who answered in the Calls list, kept live from the stream, filters the list by it, and shows it with the provider\'s verdict on the call\'s page', async (t) => {
    const { env, url, f } = await serve(t, { definition: { ...definition(), answering_machine: { detect: 'on', on_machine: 'connect_agent' } } });
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-text(Live)').wait();
    await page.evaluate('window.notReloaded = true');
    const machine = await call(env, f, '+12025550120'); // the simulator's voicemail box
    const person = await call(env, f, '+12025550122'); // a person who answers after a short silence
    for (const [run, verdict] of [[machine, 'machine'], [person, 'human']] as const) {
      await page.waitForFunction(`document.querySelector('tr[data-run-id="${run.id}"] [data-testid="run-row-answered-by"]')?.textContent === '${verdict}'`, { timeout: scaledTimeout(15_000) });
    }
    assert.equal(await page.evaluate('window.notReloaded'), true, 'kept live, no reload');
    assert.ok((await page.$$eval('thead th', (els) => els.map((el) => el.textContent))).includes('Answered by'));

    await page.select('select[name="answered_by"]', 'machine');
    await page.locator('::-p-aria([name="Filter"][role="button"])').click();
    await page.waitForFunction(`!document.querySelector('tr[data-run-id="${person.id}"]') && !!document.querySelector('tr[data-run-id="${machine.id}"]')`, { timeout: scaledTimeout(10_000) });

    const stored = (await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${machine.id}`, headers: { 'x-api-key': f.apiKey } })).json() as { raw_answered_by: string };
    await page.goto(`${url}/console/runs/${machine.id}`);
    await page.waitForFunction(`document.querySelector('[data-testid="run-answered-by"]')?.textContent === ${JSON.stringify(`machine (${stored.raw_answered_by})`)}`, { timeout: scaledTimeout(10_000) });
    assert.deepEqual(problems, []);
  });

  it('cancels a queued call with its Cancel call button', async (t) => {
    const { env, url, f } = await serve(t, { dispatch: false });
    const run = await call(env, f, '+12025550100');
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator(`::-p-aria([name="${run.name}"][role="link"])`).click();
    await page.waitForFunction(`document.querySelector('[data-testid="run-state"]')?.textContent === 'queued'`);
    await page.locator('::-p-aria([name="Cancel call"][role="button"])').click();
    await page.waitForFunction(`document.querySelector('[data-testid="run-state"]')?.textContent === 'canceled'`);
    await page.waitForFunction(`!document.querySelector('button.danger')`);
    const stored = await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${run.id}`, headers: { 'x-api-key': f.apiKey } });
    assert.equal((stored.json() as { state: string }).state, 'canceled');
    assert.deepEqual(problems, []);
  });

  it('shows an initial_context holding HTML as text: no element is made of it and no handler runs', async (t) => {
    const { env, url, f } = await serve(t, { dispatch: false });
    const payload = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>';
    const run = await call(env, f, '+12025550100', { name: payload });
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Console"][role="navigation"])').wait();
    await page.goto(`${url}/console/runs/${run.id}`);
    await page.waitForSelector('[data-testid="initial-context"]');
    assert.ok(((await page.$eval('[data-testid="initial-context"]', (el) => el.textContent)) ?? '').includes(JSON.stringify(payload).slice(1, -1)));
    assert.equal(await page.$$eval('img, main script', (els) => els.length), 0, 'no img or script element');
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(await page.evaluate('window.pwned'), undefined, 'no handler ran');
    assert.deepEqual(problems, []);
  });

  it('shows on a call\'s page the result and the agent events the runtime reports, live, the result\'s text never made into elements', async (t) => {
    const { env, url, f } = await serve(t);
    const run = await call(env, f, '+12025550107');
    const deadline = Date.now() + scaledTimeout(15_000);
    let token: string | undefined;
    while (!token && Date.now() < deadline) {
      const events = (await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${run.id}/events`, headers: { 'x-api-key': f.apiKey } })).json() as { data: { type: string; data: { runtime_token?: string } }[] };
      token = events.data.find((e) => e.type === 'in_progress')?.data.runtime_token;
      if (!token) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.ok(token, 'the answered call\'s token');
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Console"][role="navigation"])').wait();
    await page.goto(`${url}/console/runs/${run.id}`);
    await page.waitForSelector('[data-testid="run-result"]');
    assert.equal(await page.$eval('[data-testid="run-result"]', (el) => el.textContent), 'None reported by the agent runtime.');
    await page.evaluate('window.notReloaded = true');
    const runtime = (action: string, body: unknown) =>
      env.app.inject({ method: 'POST', url: `/api/v1/runtime/runs/${run.id}/${action}`, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, payload: JSON.stringify(body) });
    const result = { outcome: 'booked', note: '<b onmouseover="window.pwned=1">bold</b>' };
    assert.equal((await runtime('result', { data: result })).statusCode, 200);
    assert.equal((await runtime('events', { type: 'agent.transcript_ready', data: { url: 'https://runtime.example/t/1' } })).statusCode, 200);
    await page.waitForFunction(`document.querySelector('[data-testid="run-result"]')?.textContent === ${JSON.stringify(JSON.stringify(result, null, 2))}`, { timeout: scaledTimeout(10_000) });
    await page.waitForFunction(`document.querySelector('[data-testid="agent-events"]')?.textContent.includes('agent.transcript_ready')`, { timeout: scaledTimeout(10_000) });
    assert.match((await page.$eval('[data-testid="agent-events"]', (el) => el.textContent)) ?? '', /runtime\.example\/t\/1/);
    assert.equal(await page.$$eval('main b', (els) => els.length), 0, 'the result is shown as text');
    assert.equal((await runtime('hangup', {})).statusCode, 200);
    await page.waitForFunction(`document.querySelector('[data-testid="run-outcome"]')?.textContent === 'agent_hangup'`, { timeout: scaledTimeout(10_000) });
    await screenshot(page, 'call-result');
    assert.equal(await page.evaluate('window.notReloaded'), true, 'no reload');
    assert.deepEqual(problems, []);
  });

  it('is usable with the keyboard alone: sign in, move between pages, open a call', async (t) => {
    const { env, url, f } = await serve(t, { dispatch: false });
    const run = await call(env, f, '+12025550100');
    const { page, problems } = await openPage(t, chrome);
    await page.goto(`${url}/console`);
    const focused = () => page.evaluate('document.activeElement?.id || document.activeElement?.textContent');
    for (let i = 0; i < 5 && (await focused()) !== 'api-key'; i++) await page.keyboard.press('Tab');
    assert.equal(await focused(), 'api-key', 'Tab reaches the key field');
    await page.keyboard.type(f.apiKey);
    await page.keyboard.press('Enter');
    await page.waitForSelector(`tr[data-run-id="${run.id}"]`);
    for (let i = 0; i < 40 && (await focused()) !== run.name; i++) await page.keyboard.press('Tab');
    assert.equal(await focused(), run.name, 'Tab reaches the run\'s link');
    await page.keyboard.press('Enter');
    await page.waitForFunction(`document.querySelector('[data-testid="run-state"]')?.textContent === 'queued'`);
    for (let i = 0; i < 40 && (await focused()) !== 'Cancel call'; i++) await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.waitForFunction(`document.querySelector('[data-testid="run-state"]')?.textContent === 'canceled'`);
    assert.deepEqual(problems, []);
  });

  it('shows the overview (calls by state, queue and live calls per route) and manages webhook endpoints: create with the secret shown once, rotate, retry a call\'s delivery and see the retry succeed live', async (t) => {
    const receiver = await startReceiver(t);
    const { env, url, f } = await serve(t, { env: { ...WEBHOOK_TEST_ENV, SIMULATOR_RING_MS: '20', SIMULATOR_TALK_MS: '20' } });
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Webhooks"][role="link"])').click();
    await page.locator('::-p-aria(Endpoint URL)').fill(receiver.url);
    await page.locator('::-p-aria([name="Create endpoint"][role="button"])').click();
    const secret = await page.locator('[data-testid="webhook-secret"]').map((el) => el.textContent).wait();
    assert.match(secret ?? '', /^whsec_/);
    await page.locator('::-p-aria([name="I have stored it"][role="button"])').click();
    await page.locator('::-p-aria([name="Rotate secret"][role="button"])').click();
    await page.waitForFunction(`(document.querySelector('[data-testid="webhook-secret"]')?.textContent ?? '').startsWith('whsec_')`);
    assert.notEqual(await page.$eval('[data-testid="webhook-secret"]', (el) => el.textContent), secret, 'a new secret');

    const run = await call(env, f, '+12025550100');
    await receiver.waitFor((r) => r.some((m) => m.json.type === 'run.ended'));
    await page.locator('::-p-aria([name="Overview"][role="link"])').click();
    await page.waitForFunction(`[...document.querySelectorAll('.chart li')].some((li) => li.textContent.includes('completed') && li.textContent.trim().endsWith('1'))`, { timeout: scaledTimeout(10_000) });
    assert.equal(await page.$eval('[data-testid="route-queued"]', (el) => el.textContent), '0');
    assert.equal(await page.$eval('[data-testid="route-live"]', (el) => el.textContent), '0');
    await screenshot(page, 'overview');

    await page.goto(`${url}/console/runs/${run.id}`);
    await page.waitForSelector('button[aria-label^="Retry delivery"]');
    const before = receiver.received.length;
    // The retry is answered slowly: the page lists the delivery pending again, and only the
    // stream's webhook.delivery event can tell it of the success (the page is not reloaded).
    receiver.answer = () => new Promise((resolve) => setTimeout(() => resolve({ status: 204 }), 1_000));
    const label = await page.$eval('button[aria-label^="Retry delivery"]', (el) => el.getAttribute('aria-label'));
    const deliveryId = Number(/\d+$/.exec(label ?? '')?.[0]);
    const cell = (name: string) => `(document.querySelector('tr[data-delivery-id="${deliveryId}"] [data-testid="${name}"]')?.textContent ?? '')`;
    await page.locator('button[aria-label^="Retry delivery"]').click();
    await page.waitForFunction(`${cell('delivery-status')} === 'pending'`);
    await receiver.waitFor((r) => r.length > before);
    await page.waitForFunction(`${cell('delivery-status')} === 'succeeded' && ${cell('delivery-attempts')}.startsWith('2 ')`, { timeout: scaledTimeout(10_000) });
    assert.deepEqual(problems, []);
  });

  it('suppresses a number from the Suppressions page (an invalid one is refused with the API\'s words), lists its HTML-looking reason as text, refuses a test call to it with number_suppressed, and removes it with the keyboard after a confirmation', async (t) => {
    const { env, url, f } = await serve(t, { dispatch: false });
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Suppressions"][role="link"])').click();
    await page.locator('::-p-text(No suppressed numbers yet.)').wait();

    await page.locator('::-p-aria(Phone number)').fill('12345');
    await page.locator('::-p-aria([name="Suppress number"][role="button"])').click();
    const refusal = await page.locator('form[aria-label="Suppress a number"] [role="alert"]').waitHandle();
    assert.equal(await refusal.evaluate((el) => el.getAttribute('data-code')), 'invalid_phone_number');
    assert.ok(((await refusal.evaluate((el) => el.textContent)) ?? '').length > 20, 'the API\'s detail is shown');
    assert.equal((await env.app.inject({ method: 'GET', url: '/api/v1/public/suppressions', headers: { 'x-api-key': f.apiKey } })).json().data.length, 0, 'nothing was suppressed');

    const payload = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>';
    const until = `${new Date().getUTCFullYear() + 1}-06-30T12:00`;
    await page.locator('::-p-aria(Phone number)').fill('+12025550100');
    await page.locator('::-p-aria(Reason (optional))').fill(payload);
    // A datetime-local field's typing order depends on the locale: set its value as a picker would.
    await page.evaluate(`(() => {
      const input = document.querySelector('#suppression-expires');
      input.value = ${JSON.stringify(until)};
      input.dispatchEvent(new Event('input', { bubbles: true }));
    })()`);
    await page.focus('#suppression-phone');
    await page.keyboard.press('Enter');
    await page.waitForSelector('tr[data-number="+12025550100"]');
    assert.equal(await page.$('form[aria-label="Suppress a number"] [role="alert"]'), null, 'the earlier error is gone');
    assert.equal(await page.$eval('tr[data-number="+12025550100"] [data-testid="suppression-reason"]', (el) => el.textContent), payload, 'the reason as text');
    assert.equal(await page.$$eval('img, main script', (els) => els.length), 0, 'no img or script element');
    const stored = (await env.app.inject({ method: 'GET', url: '/api/v1/public/suppressions/%2B12025550100', headers: { 'x-api-key': f.apiKey } })).json() as { reason: string; expires_at: string; active: boolean };
    assert.equal(stored.reason, payload);
    assert.equal(stored.expires_at, await page.evaluate((value) => new Date(value).toISOString(), until), 'the local time entered, as RFC 3339');
    assert.equal(stored.active, true);
    await screenshot(page, 'suppressions');
    for (const width of [1280, 390]) {
      await page.setViewport({ width, height: 844 });
      const right = await page.$eval('button[aria-label="Remove +12025550100"]', (el) => el.getBoundingClientRect().right);
      assert.ok(right <= width, `Remove is on screen at ${width} px (right edge ${right})`);
      assert.ok(Number(await page.evaluate('document.documentElement.scrollWidth')) <= width, `the page does not scroll sideways at ${width} px`);
    }
    await page.setViewport({ width: 1280, height: 800 });

    await page.locator('::-p-aria([name="Test call"][role="link"])').click();
    await page.waitForFunction("document.querySelector('#agent')?.value !== ''");
    await page.locator('::-p-aria(Phone number)').fill('+12025550100');
    await page.locator('::-p-aria([name="Start test call"][role="button"])').click();
    const refused = await page.locator('[role="alert"]').waitHandle();
    assert.equal(await refused.evaluate((el) => el.getAttribute('data-code')), 'number_suppressed');
    assert.match((await refused.evaluate((el) => el.textContent)) ?? '', /suppression \(do-not-call\) list/);
    assert.equal(new URL(page.url()).pathname, '/console/test-call', 'no call page: no run');
    const runs = (await env.app.inject({ method: 'GET', url: '/api/v1/public/workflow-runs', headers: { 'x-api-key': f.apiKey } })).json() as { data: unknown[] };
    assert.equal(runs.data.length, 0, 'no run was created');

    await page.locator('::-p-aria([name="Suppressions"][role="link"])').click();
    await page.waitForSelector('button[aria-label="Remove +12025550100"]');
    const focused = () => page.evaluate('document.activeElement?.getAttribute("aria-label")');
    // Remove asks once more, with the focus on its confirmation; Keep leaves the number listed.
    await page.focus('button[aria-label="Remove +12025550100"]');
    await page.keyboard.press('Enter');
    await page.waitForSelector('button[aria-label="Confirm: remove +12025550100"]');
    assert.equal(await focused(), 'Confirm: remove +12025550100');
    await page.keyboard.press('Tab');
    assert.equal(await focused(), 'Keep +12025550100');
    await page.keyboard.press('Enter');
    await page.waitForSelector('button[aria-label="Remove +12025550100"]');
    assert.equal((await env.app.inject({ method: 'GET', url: '/api/v1/public/suppressions/%2B12025550100', headers: { 'x-api-key': f.apiKey } })).statusCode, 200, 'kept');
    await page.focus('button[aria-label="Remove +12025550100"]');
    await page.keyboard.press('Enter');
    await page.waitForSelector('button[aria-label="Confirm: remove +12025550100"]');
    await page.keyboard.press('Enter');
    await page.locator('::-p-text(+12025550100 was removed)').wait();
    await page.locator('::-p-text(No suppressed numbers yet.)').wait();
    const gone = await env.app.inject({ method: 'GET', url: '/api/v1/public/suppressions/%2B12025550100', headers: { 'x-api-key': f.apiKey } });
    assert.equal(gone.statusCode, 404);
    await call(env, f, '+12025550100');
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(await page.evaluate('window.pwned'), undefined, 'no handler ran');
    // The browser logs the two refusals (the invalid number, the suppressed call): nothing else.
    assert.equal(problems.length, 2, problems.join('\n'));
    assert.ok(problems.every((p) => p.includes('422')), problems.join('\n'));
  });

  it('imports a CSV file chosen in its file input, reports the count and the invalid line by number, and pages the list with Next and Previous', async (t) => {
    const { env, url, f } = await serve(t, { dispatch: false });
    const numbers = Array.from({ length: 55 }, (_, i) => `+1202555${String(1000 + i)}`);
    const lines = ['phone_number,reason', ...numbers.slice(0, 2).map((n) => `${n},imported`), 'not-a-number,bad line', ...numbers.slice(2).map((n) => `${n},imported`)];
    const dir = mkdtempSync(join(tmpdir(), 'dialtone-import-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'numbers.csv');
    writeFileSync(file, `${lines.join('\n')}\n`);
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Suppressions"][role="link"])').click();
    const input = await page.waitForSelector('input#suppression-file');
    assert.ok(input);
    assert.equal(await input.evaluate((el) => el.labels?.[0]?.textContent), 'CSV file', 'the file input is labelled');
    await input.uploadFile(file);
    await page.locator('::-p-aria([name="Import"][role="button"])').click();
    await page.locator('::-p-text(Imported 55 numbers.)').wait();
    const report = await page.$eval('[data-testid="import-report"]', (el) => ({ text: el.querySelector('p')?.textContent, lines: [...el.querySelectorAll('li')].map((li) => li.textContent) }));
    assert.equal(report.text, 'Imported 55 numbers. Skipped 1 line:');
    assert.equal(report.lines.length, 1);
    assert.match(report.lines[0] ?? '', /^Line 4: not-a-number — ./);
    await screenshot(page, 'suppressions-import');
    const listed = (await env.app.inject({ method: 'GET', url: '/api/v1/public/suppressions?limit=1000', headers: { 'x-api-key': f.apiKey } })).json() as { data: { phone_number: string }[] };
    assert.deepEqual(listed.data.map((s) => s.phone_number), numbers);

    const shown = () => page.$$eval('tr[data-testid="suppression-row"]', (rows) => rows.map((r) => r.getAttribute('data-number')));
    await page.waitForFunction(`document.querySelectorAll('tr[data-testid="suppression-row"]').length === 50`);
    assert.deepEqual(await shown(), numbers.slice(0, 50));
    await page.locator('::-p-aria([name="Next"][role="button"])').click();
    await page.waitForFunction(`document.querySelectorAll('tr[data-testid="suppression-row"]').length === 5`);
    assert.deepEqual(await shown(), numbers.slice(50));
    assert.equal(await page.$eval('::-p-aria([name="Next"][role="button"])', (el) => el.hasAttribute('disabled')), true, 'the last page');
    await page.locator('::-p-aria([name="Previous"][role="button"])').click();
    await page.waitForFunction(`document.querySelectorAll('tr[data-testid="suppression-row"]').length === 50`);
    assert.deepEqual(await shown(), numbers.slice(0, 50));
    assert.deepEqual(problems, []);
  });

  it('lists a campaign on the Campaigns page as draft with its progress, starts, pauses and cancels it with the buttons its state allows, imports a contacts CSV reporting its invalid line, and shows an HTML-looking name as text', async (t) => {
    // No dispatcher and no scheduler: the campaign stays where the buttons put it.
    const { env, url, f } = await serve(t, { dispatch: false });
    const payload = 'Spring <img src=x onerror="window.pwned=1">';
    const campaign = await createCampaign(env.app, f, { name: payload });
    await addContacts(env.app, f, campaign.id, ['+12025550100', '+12025550101', '+12025550102'].map((phone_number) => ({ phone_number })));
    const dir = mkdtempSync(join(tmpdir(), 'dialtone-contacts-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'contacts.csv');
    writeFileSync(file, 'phone_number\n+12025550103\nnot-a-number\n+12025550100\n');

    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Campaigns"][role="link"])').click();
    await page.locator('::-p-aria([name="Campaigns"][role="heading"])').wait();
    const row = `tr[data-testid="campaign-row"][data-id="${campaign.id}"]`;
    await page.waitForSelector(row);
    const stateIs = (state: string) => page.waitForFunction(`document.querySelector(${JSON.stringify(`${row} [data-testid="campaign-state"]`)})?.textContent === ${JSON.stringify(state)}`);
    const buttons = () => page.$$eval(`${row} td .actions button`, (els) => els.map((el) => el.textContent));

    assert.equal(await page.$eval(`${row} [data-testid="campaign-name"]`, (el) => el.textContent), payload, 'the name as text');
    assert.equal(await page.$$eval('main img, main script', (els) => els.length), 0, 'no img or script element');
    await stateIs('draft');
    assert.deepEqual(await buttons(), ['Start', 'Cancel']);
    const bar = await page.$eval(`${row} [role="progressbar"]`, (el) => ({ max: el.getAttribute('aria-valuemax'), now: el.getAttribute('aria-valuenow'), label: el.getAttribute('aria-label') }));
    assert.deepEqual(bar, { max: '3', now: '0', label: `Progress of ${payload}` });
    assert.equal(await page.$eval(`${row} [data-testid="campaign-progress"]`, (el) => el.textContent), '0 reached · 0 exhausted · 0 suppressed · 0 invalid · 0 canceled · 0 in progress · 3 pending · 3 total');

    await page.click(`${row} button[aria-label="Start ${payload.replace(/"/g, '\\"')}"]`);
    await stateIs('running');
    assert.deepEqual(await buttons(), ['Pause', 'Cancel']);
    // One scheduler pass by hand (no dispatcher runs here): an attempt per contact, queued.
    await runCampaignTick(env.deps);
    const direct = await call(env, f, '+12025550199');
    await page.click(`${row} button[aria-label^="Pause "]`);
    await stateIs('paused');
    assert.equal(await page.$eval(`${row} [data-testid="campaign-paused-reason"]`, (el) => el.textContent), ' (request)');
    assert.deepEqual(await buttons(), ['Resume', 'Cancel']);
    const stored = (await env.app.inject({ method: 'GET', url: `/api/v1/public/campaigns/${campaign.id}`, headers: { 'x-api-key': f.apiKey } })).json() as { state: string; paused_reason: string };
    assert.deepEqual([stored.state, stored.paused_reason], ['paused', 'request']);

    const input = await page.waitForSelector(`${row} input[type="file"]`);
    assert.ok(input);
    assert.equal(await input.evaluate((el) => el.labels?.[0]?.textContent), 'Contacts CSV', 'the file input is labelled');
    await input.uploadFile(file);
    await page.click(`${row} button[type="submit"]`);
    await page.waitForFunction(`document.querySelector(${JSON.stringify(`${row} [data-testid="contacts-report"] p`)}) !== null`);
    const report = await page.$eval(`${row} [data-testid="contacts-report"]`, (el) => ({ text: el.querySelector('p')?.textContent, lines: [...el.querySelectorAll('li')].map((li) => li.textContent) }));
    assert.equal(report.text, 'Added 1, duplicates 1, invalid 1.');
    assert.equal(report.lines.length, 1);
    assert.match(report.lines[0] ?? '', /^Line 3: ./);
    // Refreshed after the import: the new contact is counted.
    await page.waitForFunction(`document.querySelector(${JSON.stringify(`${row} [data-testid="campaign-progress"]`)})?.textContent?.endsWith('4 total')`);
    await screenshot(page, 'campaigns');

    await page.click(`${row} button[aria-label^="Cancel "]`);
    const confirm = await page.waitForSelector(`${row} button[aria-label^="Confirm: cancel "]`);
    assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Confirm cancel', 'the confirmation has the focus');
    assert.equal((await env.app.inject({ method: 'GET', url: `/api/v1/public/campaigns/${campaign.id}`, headers: { 'x-api-key': f.apiKey } })).json().state, 'paused', 'not canceled before the confirmation');
    await confirm?.click();
    await stateIs('canceled');
    assert.deepEqual(await buttons(), []);
    assert.equal(await page.evaluate('window.pwned'), undefined, 'no handler ran');

    // Its calls: the Calls page filtered by campaign_id, the three attempts and not the direct call.
    await page.click(`${row} a[href="/console?campaign_id=${campaign.id}"]`);
    await page.locator('[data-testid="campaign-filter"]').wait();
    await page.waitForFunction(`document.querySelectorAll('tr[data-run-id]').length === 3`);
    const attempts = (await env.app.inject({ method: 'GET', url: `/api/v1/public/campaigns/${campaign.id}/runs`, headers: { 'x-api-key': f.apiKey } })).json() as { data: { id: number }[] };
    const shown = await page.$$eval('tr[data-run-id]', (rows) => rows.map((r) => Number(r.getAttribute('data-run-id'))));
    assert.deepEqual([...shown].sort(), attempts.data.map((r) => r.id).sort());
    assert.ok(!shown.includes(direct.id), 'the direct call is not listed');
    assert.deepEqual(problems, []);
  });

  it('follows campaigns started, paused and created through the API on the open Campaigns page without a reload: state, paused reason and progress', async (t) => {
    // No dispatcher: attempts stay queued, so progress moves only with the scheduler passes the test makes.
    const { env, url, f } = await serve(t, { dispatch: false });
    const campaign = await createCampaign(env.app, f, { name: 'Spring renewals' });
    await addContacts(env.app, f, campaign.id, ['+12025550100', '+12025550101', '+12025550102'].map((phone_number) => ({ phone_number })));
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Campaigns"][role="link"])').click();
    await page.locator('::-p-aria([name="Campaigns"][role="heading"])').wait();
    await page.locator('::-p-text(Live)').wait();
    const row = (id: number) => `tr[data-testid="campaign-row"][data-id="${id}"]`;
    const textIs = (selector: string, text: string, timeout = 5_000) => page.waitForFunction(`document.querySelector(${JSON.stringify(selector)})?.textContent === ${JSON.stringify(text)}`, { timeout: scaledTimeout(timeout) });
    const state = (id: number) => `${row(id)} [data-testid="campaign-state"]`;
    const progress = (id: number) => `${row(id)} [data-testid="campaign-progress"]`;
    await textIs(state(campaign.id), 'draft');
    await page.evaluate('window.notReloaded = true');
    // Every read of the list from here on comes from the stream (nothing is clicked): at most one a
    // second. Timed in the page, when the app calls fetch: the browser's request events reach this
    // process late and unevenly on a loaded machine, which made even one-second gaps look shorter.
    await page.evaluate(`{
      window.campaignListReads = [];
      const fetchBefore = window.fetch;
      window.fetch = (input, init) => {
        // The client (openapi-fetch) hands fetch a Request; the stream's reader a URL and options.
        const url = new URL(input instanceof Request ? input.url : String(input), location.href);
        const method = input instanceof Request ? input.method : (init?.method ?? 'GET');
        if (method === 'GET' && url.pathname === '/api/v1/public/campaigns') window.campaignListReads.push(performance.now());
        return fetchBefore(input, init);
      };
    }`);
    const api = async (id: number, action: string) => assert.equal((await act(env.app, f, id, action)).statusCode, 200);

    await api(campaign.id, 'start');
    await textIs(state(campaign.id), 'running');
    assert.deepEqual(await page.$$eval(`${row(campaign.id)} td .actions button`, (els) => els.map((el) => el.textContent)), ['Pause', 'Cancel'], 'the buttons follow the state');
    // A scheduler pass queues an attempt per contact: their run events bring the progress.
    assert.equal((await runCampaignTick(env.deps)).created, 3);
    await textIs(progress(campaign.id), '0 reached · 0 exhausted · 0 suppressed · 0 invalid · 0 canceled · 3 in progress · 0 pending · 3 total');
    await api(campaign.id, 'pause');
    await textIs(state(campaign.id), 'paused');
    await textIs(`${row(campaign.id)} [data-testid="campaign-paused-reason"]`, ' (request)');
    // The pause canceled the queued attempts; the next pass gives them back to their contacts, which
    // no event reports: the page reads it while contacts are being called (every 5 s).
    await runCampaignTick(env.deps);
    await textIs(progress(campaign.id), '0 reached · 0 exhausted · 0 suppressed · 0 invalid · 0 canceled · 0 in progress · 3 pending · 3 total', 10_000);

    // A campaign created through the API appears on the first page; one that runs out of contacts completes.
    const empty = await createCampaign(env.app, f, { name: 'Follow-ups' });
    await page.waitForSelector(row(empty.id), { timeout: scaledTimeout(5_000) });
    await api(empty.id, 'start');
    await runCampaignTick(env.deps);
    await textIs(state(empty.id), 'completed');
    const draft = await createCampaign(env.app, f, { name: 'Autumn survey' });
    await addContacts(env.app, f, draft.id, ['+12025550103', '+12025550104'].map((phone_number) => ({ phone_number })));
    await api(campaign.id, 'resume');
    await textIs(state(campaign.id), 'running');
    await runCampaignTick(env.deps);
    await textIs(progress(campaign.id), '0 reached · 0 exhausted · 0 suppressed · 0 invalid · 0 canceled · 3 in progress · 0 pending · 3 total');
    // The draft's contacts were added without an event: the refresh after the resume counted them.
    await textIs(progress(draft.id), '0 reached · 0 exhausted · 0 suppressed · 0 invalid · 0 canceled · 0 in progress · 2 pending · 2 total');
    const winter = await createCampaign(env.app, f, { name: 'Winter check-ins' });
    await addContacts(env.app, f, winter.id, ['+12025550105', '+12025550106', '+12025550107', '+12025550108'].map((phone_number) => ({ phone_number })));
    await api(winter.id, 'start');
    await api(winter.id, 'pause');
    await textIs(state(winter.id), 'paused');
    await textIs(progress(winter.id), '0 reached · 0 exhausted · 0 suppressed · 0 invalid · 0 canceled · 0 in progress · 4 pending · 4 total');
    assert.equal(await page.evaluate('window.notReloaded'), true, 'no reload');
    const reads = (await page.evaluate('window.campaignListReads')) as number[];
    const gaps = reads.slice(1).map((at, i) => at - (reads[i] as number));
    assert.ok(reads.length >= 3 && gaps.every((gap) => gap >= 900), `the list was read at most once a second (${reads.length} reads, gaps ${gaps.join(', ')} ms)`);
    await screenshot(page, 'campaigns-live');
    assert.deepEqual(problems, []);
  });

  it('reconnects its stream when the node restarts and resumes from the last event id: a change made while the node was down reaches the page', async (t) => {
    const database = await createTestDatabase('sqlite');
    const node = async () => {
      const store = openTestStore(database);
      const deps = buildDeps(testConfig(database.url, { STREAM_POLL_INTERVAL_MS: '50' }), { store, logger: pino({ level: 'silent' }) });
      const app = await buildApp(deps);
      return { app, deps, close: async () => { await app.close(); await deps.rateLimits.close(); await store.close(); } };
    };
    const first = await node();
    t.after(() => database.drop());
    const { migrateToLatest } = await import('../src/store/schema/migrate.js');
    await migrateToLatest(first.deps.store);
    const f = await createOrgFixture(first.deps);
    const url = await first.app.listen({ host: '127.0.0.1', port: 0 });
    const port = Number(new URL(url).port);
    const run = await call(first, f, '+12025550100');
    const { page } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.waitForSelector(`tr[data-run-id="${run.id}"]`);
    await page.locator('::-p-text(Live)').wait();
    assert.equal(await rowState(page, run.id), 'queued');

    await first.close();
    await page.locator('::-p-text(Reconnecting…)').wait();
    // While no node serves the page, the run is canceled through another node's API.
    const second = await node();
    t.after(() => second.close());
    assert.equal((await second.app.inject({ method: 'POST', url: `/api/v1/public/workflow-runs/${run.id}/cancel`, headers: { 'x-api-key': f.apiKey } })).statusCode, 200);
    await second.app.listen({ host: '127.0.0.1', port });
    // The row is one the page already shows: it changes only through the resent event.
    await page.waitForFunction(`document.querySelector('tr[data-run-id="${run.id}"] .state')?.textContent === 'canceled'`, { timeout: scaledTimeout(15_000) });
    await page.locator('::-p-text(Live)').wait();
  });

  it('rebuilds its page when the stream says it was reset: after the node comes back on a database restored from a backup taken before two calls, the Calls table drops them without a reload', async (t) => {
    const database = await createTestDatabase('sqlite');
    t.after(() => database.drop());
    const path = database.url.slice('sqlite:'.length);
    const node = async () => {
      const store = openTestStore(database);
      const deps = buildDeps(testConfig(database.url, { STREAM_POLL_INTERVAL_MS: '50' }), { store, logger: pino({ level: 'silent' }) });
      const app = await buildApp(deps);
      return { app, deps, close: async () => { await app.close(); await deps.rateLimits.close(); await store.close(); } };
    };
    const first = await node();
    const { migrateToLatest } = await import('../src/store/schema/migrate.js');
    await migrateToLatest(first.deps.store);
    const f = await createOrgFixture(first.deps);
    const kept = await call(first, f, '+12025550100');
    const backupDir = mkdtempSync(join(tmpdir(), 'dialtone-backup-'));
    t.after(() => rmSync(backupDir, { recursive: true, force: true }));
    const backup = join(backupDir, 'backup.db');
    await sql`vacuum into ${backup}`.execute(first.deps.store.db);
    const url = await first.app.listen({ host: '127.0.0.1', port: 0 });
    const port = Number(new URL(url).port);
    const { page } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-text(Live)').wait();
    const lost = [await call(first, f, '+12025550101'), await call(first, f, '+12025550102')];
    for (const run of [kept, ...lost]) await page.waitForSelector(`tr[data-run-id="${run.id}"]`);

    await first.close();
    await page.locator('::-p-text(Reconnecting…)').wait();
    // The restore: the database as it was before the two calls (their runs and events are gone, and
    // the ids the page last got are above any the database holds).
    for (const suffix of ['-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
    copyFileSync(backup, path);
    const second = await node();
    t.after(() => second.close());
    await second.app.listen({ host: '127.0.0.1', port });
    await page.locator('::-p-text(Live)').wait();
    await page.waitForFunction(`document.querySelectorAll('tr[data-run-id]').length === 1 && document.querySelector('tr[data-run-id="${kept.id}"]') !== null`, { timeout: scaledTimeout(15_000) });
    // And it follows what happens next.
    const next = await call(second, f, '+12025550103');
    await page.waitForFunction(`document.querySelectorAll('tr[data-run-id]').length === 2 && document.querySelector('tr[data-run-id="${next.id}"]') !== null`, { timeout: scaledTimeout(15_000) });
  });
});
