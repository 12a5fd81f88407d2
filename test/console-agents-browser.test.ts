// The console's agent pages in a real browser (Debian's chromium, headless): an agent created from
// the New agent form, a refused definition's problems shown at their line in the text, a draft
// saved beside the published definition and published, the published version then answering a
// call through the API, and the agent archived; no agent page for a key lacking `admin` or `calls`;
// an HTML/script payload in an agent's name, its definition and a problem's words shown as text.
// The pages read the store through the API only, so these run on SQLite (the API's own tests,
// workflows-api among them, cover both stores).
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type { Page } from 'puppeteer-core';
import { createApiKey } from '../src/auth/api-keys.js';
import { build, getJson, postJson, type TestEnv } from './helpers/app.js';
import { assertInert, chromiumSkip, launchBrowser, openPage, screenshot, signIn, XSS, type BrowserHandle } from './helpers/browser.js';
import { createOrgFixture, definition, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { after, before, describe, it } from './helpers/suite.js';

let chrome: BrowserHandle | undefined;

async function serve(t: TestContext): Promise<{ env: TestEnv; url: string; f: OrgFixture }> {
  const env = await build(t, 'sqlite');
  const url = await env.app.listen({ host: '127.0.0.1', port: 0 });
  return { env, url, f: await createOrgFixture(env.deps, 'Acme') };
}

/** The definition as the editor shows it: 2-space JSON. */
const text = (value: unknown) => JSON.stringify(value, null, 2);

/** The 1-based line of the first occurrence of `needle` in `haystack`. */
function lineOf(haystack: string, needle: string): number {
  const at = haystack.indexOf(needle);
  assert.ok(at >= 0, `${needle} is in the text`);
  return haystack.slice(0, at).split('\n').length;
}

/** A problem listed under the editor: its line, its words, the gutter's marked lines and the text selected in the editor. */
async function problemAt(page: Page, editor: string, pointer: string) {
  const item = await page.waitForSelector(`[data-testid="definition-problem"][data-pointer="${pointer}"]`);
  assert.ok(item);
  return {
    line: Number(await item.evaluate((el) => el.getAttribute('data-line'))),
    text: await item.evaluate((el) => el.textContent ?? ''),
    marked: await page.$$eval('[data-testid="problem-line"]', (els) => els.map((el) => Number(el.textContent))),
    selected: await page.$eval(editor, (el) => {
      const area = el as unknown as { value: string; selectionStart: number; selectionEnd: number };
      return area.value.slice(area.selectionStart, area.selectionEnd);
    }),
  };
}

async function statusLine(page: Page, expected: string): Promise<void> {
  await page.waitForFunction(`document.querySelector('[data-testid="agent-status-line"]')?.textContent === ${JSON.stringify(expected)}`);
}

interface Workflow {
  workflow_uuid: string;
  name: string;
  status: string;
  published_version: number | null;
  draft_version: number | null;
  agent_uuids: string[];
}

describe('The console\'s agent pages in a browser', { skip: chromiumSkip() }, () => {
  before(async () => {
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
  });

  it('creates an agent, shows a refused definition\'s problems at their line, saves a draft beside the published definition, publishes it so a call through the API runs it, and archives the agent', async (t) => {
    const { env, url, f } = await serve(t);
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.locator('::-p-aria([name="Agents"][role="link"])').click();
    await page.locator('::-p-aria([name="Agents"][role="heading"])').wait();
    await page.waitForSelector(`tr[data-testid="agent-row"][data-uuid="${f.workflowUuid}"]`);

    // New agent: a definition whose edge names no node is refused, the problem at its line.
    await page.locator('::-p-aria([name="New agent"][role="link"])').click();
    await page.locator('::-p-aria([name="New agent"][role="heading"])').wait();
    await page.locator('#agent-name').fill('Reminder');
    const bad = definition();
    bad.edges[1] = { source: 'start', target: 'nowhere' };
    await page.locator('#agent-definition').fill(text(bad));
    await page.locator('::-p-aria([name="Create agent"][role="button"])').click();
    const created = await problemAt(page, '#agent-definition', '/edges/1/target');
    assert.equal(created.line, lineOf(text(bad), '"target": "nowhere"'), 'the line of the edge\'s target');
    assert.match(created.text, /^Line \d+ \/edges\/1\/target: No node has id "nowhere"/);
    assert.deepEqual(created.marked, [created.line], 'its line marked in the gutter');
    assert.equal(created.selected, '"target": "nowhere"', 'and selected in the editor');
    assert.equal(((await getJson(env.app, '/api/v1/public/workflows', f.apiKey)).json() as { data: unknown[] }).data.length, 1, 'nothing created');
    await page.$eval('[data-testid="definition-problem"]', (el) => el.scrollIntoView({ block: 'end' }));
    await screenshot(page, 'agent-new');

    await page.locator('#agent-definition').fill(text(definition({ greeting: 'Hello {{name | there}}' })));
    await page.locator('::-p-aria([name="Create agent"][role="button"])').click();
    await page.waitForFunction(`/^\\/console\\/agents\\/[0-9a-f-]{36}$/.test(location.pathname)`);
    const uuid = new URL(page.url()).pathname.split('/').pop() ?? '';
    await page.waitForFunction(`document.querySelector('[data-testid="agent-title"]')?.textContent === 'Reminder'`);
    assert.equal(await page.$eval('[data-testid="agent-published"]', (el) => el.textContent), 'v1', 'created as published version 1');
    assert.equal(await page.$eval('[data-testid="agent-draft"]', (el) => el.textContent), 'none');
    const v1 = await page.$eval('#draft-definition', (el) => (el as unknown as { value: string }).value);
    assert.match(v1, /"trigger_uuid": "[0-9a-f-]{36}"/, 'the editor starts from the published definition, its minted trigger UUID filled in');

    // A draft with no start node: its problems at their place, and no draft saved.
    const noStart = v1.replace('"type": "start"', '"type": "begin"');
    await page.locator('#draft-definition').fill(noStart);
    await page.locator('::-p-aria([name="Save draft"][role="button"])').click();
    const refused = await problemAt(page, '#draft-definition', '/nodes/1/type');
    assert.equal(refused.line, lineOf(noStart, '"type": "begin"'));
    assert.equal(refused.selected, '"type": "begin"');
    const nodes = await problemAt(page, '#draft-definition', '/nodes');
    assert.equal(nodes.line, lineOf(noStart, '"nodes"'), 'a problem of the whole list at the list');
    assert.deepEqual(refused.marked.sort((a, b) => a - b), [nodes.line, refused.line].sort((a, b) => a - b));
    assert.equal(((await getJson(env.app, `/api/v1/public/workflows/${uuid}`, f.apiKey)).json() as Workflow).draft_version, null, 'no draft saved');

    // Text that is not JSON: said at once, at its line, nothing sent.
    await page.locator('#draft-definition').fill(v1.replace('"nodes"', 'nodes'));
    await page.locator('::-p-aria([name="Save draft"][role="button"])').click();
    await page.waitForFunction(`[...document.querySelectorAll('[data-testid="definition-problem"]')].some((el) => el.textContent.includes('Not JSON') && el.getAttribute('data-line') === '2')`);

    // The draft saved: shown beside the published version, which is unchanged.
    await page.locator('#draft-definition').fill(v1.replace('Hello {{name | there}}', 'Hi again {{name | there}}'));
    await page.locator('::-p-aria([name="Save draft"][role="button"])').click();
    await statusLine(page, 'Saved as draft v2.');
    assert.equal(await page.$('[data-testid="definition-problem"]'), null, 'the problems are gone');
    assert.equal(await page.$eval('[data-testid="agent-draft"]', (el) => el.textContent), 'v2');
    assert.match(await page.$eval('[data-testid="published-definition"]', (el) => el.textContent ?? ''), /"greeting": "Hello \{\{name \| there\}\}"/, 'published: v1 still');
    assert.match(await page.$eval('#draft-definition', (el) => (el as unknown as { value: string }).value), /"greeting": "Hi again/);
    await page.waitForFunction(`document.querySelectorAll('tr[data-testid="version-row"]').length === 2`);
    await page.evaluate('window.scrollTo(0, 0)');
    await screenshot(page, 'agent');

    // An older version opened in the editor: unsaved, so the draft cannot be published meanwhile.
    const v2 = await page.$eval('#draft-definition', (el) => (el as unknown as { value: string }).value);
    const publishDisabled = (disabled: boolean) => page.waitForFunction(`[...document.querySelectorAll('button')].find((b) => b.textContent === 'Publish v2')?.disabled === ${disabled}`);
    await publishDisabled(false);
    await page.locator('::-p-aria([name="Open v1 in the editor"][role="button"])').click();
    await page.waitForFunction(`document.querySelector('#draft-definition').value.includes('"greeting": "Hello {{name | there}}"')`);
    await publishDisabled(true); // Publish waits for the changes to be saved
    await page.locator('#draft-definition').fill(v2);
    await publishDisabled(false); // the draft shown again: it may be published

    // A draft saved elsewhere since the page read it: Publish v2 is refused, nothing published unseen.
    const elsewhere = await env.app.inject({ method: 'PUT', url: `/api/v1/public/workflows/${uuid}/draft`, headers: { 'x-api-key': f.apiKey, 'content-type': 'application/json' }, payload: JSON.parse(v2) });
    assert.equal(elsewhere.statusCode, 200, elsewhere.body);
    await page.locator('::-p-aria([name="Publish v2"][role="button"])').click();
    await page.waitForSelector('.error[data-code="workflow_state_conflict"]');
    assert.equal(((await getJson(env.app, `/api/v1/public/workflows/${uuid}`, f.apiKey)).json() as Workflow).published_version, 1, 'nothing published');
    await page.reload();
    await page.locator('::-p-aria([name="Publish v3"][role="button"])').click();
    await statusLine(page, 'Published v3.');
    assert.equal(await page.$eval('[data-testid="agent-published"]', (el) => el.textContent), 'v3');
    assert.equal(await page.$eval('[data-testid="agent-draft"]', (el) => el.textContent), 'none');
    assert.match(await page.$eval('[data-testid="published-definition"]', (el) => el.textContent ?? ''), /"greeting": "Hi again/);
    await page.waitForFunction(`[...document.querySelectorAll('tr[data-testid="version-row"]')].map((r) => r.dataset.version + ':' + r.dataset.status).join() === '3:published,2:archived,1:archived'`);

    // The published version answers a call placed through the API.
    const call = await postJson(env.app, PATHS.initiateCallByWorkflowUuid(uuid), { phone_number: '+12025550123' }, { key: f.apiKey });
    assert.equal(call.statusCode, 200, call.body);
    const runId = (call.json() as { workflow_run_id: number }).workflow_run_id;
    assert.equal(((await getJson(env.app, `/api/v1/public/workflow-runs/${runId}`, f.apiKey)).json() as { definition_version: number }).definition_version, 3);

    await page.locator('::-p-aria([name="Back to the agents"][role="link"])').click();
    const row = await page.waitForSelector(`tr[data-testid="agent-row"][data-uuid="${uuid}"]`);
    assert.deepEqual(await row?.$$eval('[data-testid="agent-name"], [data-testid="agent-published"], [data-testid="agent-draft"], [data-testid="agent-status"]', (els) => els.map((el) => el.textContent)), ['Reminder', 'v3', 'none', 'active']);
    await screenshot(page, 'agents');

    // Archive asks once more; then the agent answers no call.
    await page.click(`tr[data-uuid="${uuid}"] a`);
    await page.locator('::-p-aria([name="Archive"][role="button"])').click();
    await page.locator('::-p-aria([name="Confirm archive"][role="button"])').wait();
    assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Confirm archive', 'the confirmation has the focus');
    assert.equal(((await getJson(env.app, `/api/v1/public/workflows/${uuid}`, f.apiKey)).json() as Workflow).status, 'active', 'not archived before the confirmation');
    await page.locator('::-p-aria([name="Confirm archive"][role="button"])').click();
    await statusLine(page, 'Archived.');
    assert.equal(await page.$eval('[data-testid="agent-status"]', (el) => el.textContent), 'archived');
    assert.equal(await page.$('::-p-aria([name="Save draft"][role="button"])'), null, 'an archived agent is changed no more');
    assert.equal(await page.$eval('#draft-definition', (el) => (el as unknown as { readOnly: boolean }).readOnly), true);
    const refusedCall = await postJson(env.app, PATHS.initiateCallByWorkflowUuid(uuid), { phone_number: '+12025550123' }, { key: f.apiKey });
    assert.equal(refusedCall.statusCode, 404, refusedCall.body);
    assert.deepEqual(problems.filter((p) => !/422|409/.test(p)), [], 'only the refused saves and publish');
  });

  it('shows no agent page to a key lacking admin or calls: no link, and a page typed in names the scope it lacks', async (t) => {
    const { env, url, f } = await serve(t);
    const keys = {
      calls: (await createApiKey(env.deps.store, f.orgId, 'no admin', Date.now(), { scopes: ['calls', 'campaigns', 'webhooks'] })).key,
      admin: (await createApiKey(env.deps.store, f.orgId, 'admin only', Date.now(), { scopes: ['admin'] })).key,
    };
    for (const [held, key] of Object.entries(keys)) {
      const lacking = held === 'calls' ? 'admin' : 'calls';
      const { page, problems } = await openPage(t, chrome);
      await signIn(page, url, key);
      const links = await page.$$eval('nav a', (els) => els.map((a) => a.textContent));
      assert.ok(!links.includes('Agents'), `no Agents link for the ${held} key: ${links.join(', ')}`);
      for (const path of ['/console/agents', '/console/agents/new', `/console/agents/${f.workflowUuid}`]) {
        await page.goto(`${url}${path}`);
        assert.match(await page.locator('[data-testid="missing-scope"]').map((el) => el.textContent ?? '').wait(), new RegExp(`lacks the ${lacking} scope this page needs`), path);
      }
      assert.deepEqual(problems, [], 'nothing was asked that the key may not read');
    }
  });

  it('shows a script or HTML payload as text in an agent\'s name, its definition\'s strings and a problem\'s words, on the list, the agent\'s page and the New agent form', async (t) => {
    const { env, url, f } = await serve(t);
    const made = await postJson(env.app, '/api/v1/public/workflows', { name: `agent ${XSS}`, definition: definition({ greeting: `Hello ${XSS}`, variables: { name: { description: `who ${XSS}` } } }) }, { key: f.apiKey });
    assert.equal(made.statusCode, 201, made.body);
    const uuid = (made.json() as Workflow).workflow_uuid;
    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    const shows = async (selector: string, expected: string) => {
      await page.waitForFunction(`(document.querySelector(${JSON.stringify(selector)})?.textContent ?? '').includes(${JSON.stringify(expected)})`);
      await assertInert(page);
    };
    await page.goto(`${url}/console/agents`);
    await shows('main table', `agent ${XSS}`);
    await page.goto(`${url}/console/agents/${uuid}`);
    await shows('[data-testid="agent-title"]', `agent ${XSS}`);
    await shows('[data-testid="published-definition"]', JSON.stringify(`Hello ${XSS}`));
    await shows('[data-testid="published-definition"]', JSON.stringify(`who ${XSS}`));
    assert.ok((await page.$eval('#draft-definition', (el) => (el as unknown as { value: string }).value)).includes(JSON.stringify(`Hello ${XSS}`)), 'in the editor as text');
    // A problem repeats what was typed: an edge to a node named by the payload.
    const bad = definition();
    bad.edges[1] = { source: 'start', target: XSS };
    await page.locator('#draft-definition').fill(text(bad));
    await page.locator('::-p-aria([name="Save draft"][role="button"])').click();
    await shows('[data-testid="definition-problem"][data-pointer="/edges/1/target"]', `No node has id "${XSS}"`);
    await page.goto(`${url}/console/agents/new`);
    await page.locator('#agent-name').fill(XSS);
    await page.locator('#agent-definition').fill(text(bad));
    await page.locator('::-p-aria([name="Create agent"][role="button"])').click();
    await shows('[data-testid="definition-problem"][data-pointer="/edges/1/target"]', `No node has id "${XSS}"`);
    assert.deepEqual(problems.filter((p) => !/422/.test(p)), [], 'only the refused saves');
  });

  it('places a JSON Pointer in the text it points into: escaped names, array elements, an absent member at the object that lacks it, none in text that is not JSON', async (t) => {
    const { url } = await serve(t);
    const { page, problems } = await openPage(t, chrome);
    await page.goto(`${url}/console`);
    // A string holding an escaped quote and a brace, names needing ~0 and ~1 in a pointer.
    const json = '{\n  "a/b": { "m~n": [10, {"x": null}] },\n  "s": "q\\"}"\n}';
    assert.deepEqual(JSON.parse(json), { 'a/b': { 'm~n': [10, { x: null }] }, s: 'q"}' }, 'the text is JSON');
    const placed = (await page.evaluate(`import('/console/assets/json-positions.js').then(({ locatePointer }) => {
      const text = ${JSON.stringify(json)};
      const at = (pointer) => { const r = locatePointer(text, pointer); return r && [text.slice(r.start, r.end), r.line, r.exact]; };
      return { escaped: at('/a~1b/m~0n/1/x'), element: at('/a~1b/m~0n/0'), string: at('/s'), absent: at('/a~1b/m~0n/1/y'), root: at(''), broken: locatePointer('{"a": ', '/a') };
    })`)) as Record<string, unknown>;
    assert.deepEqual(placed, {
      escaped: ['"x": null', 2, true],
      element: ['10', 2, true],
      string: ['"s": "q\\"}"', 3, true],
      absent: ['{"x": null}', 2, false],
      root: [json, 1, true],
      broken: null,
    });
    assert.deepEqual(problems, []);
  });
});
