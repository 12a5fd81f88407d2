// The overview's charts in a real browser (Debian's chromium, headless): calls placed on the
// simulator with varied outcomes (docs/simulator.md's reserved numbers) end, the overview draws its
// three uPlot charts (canvases with the series' colours on them), its figures in text and uPlot's
// legend at the last hour match GET /stats/series, and the window selector reads a week. The
// series' figures are the API's own (stats-series.test.ts covers both stores); this runs on SQLite.
import assert from 'node:assert/strict';
import type { Page } from 'puppeteer-core';
import { getJson, postJson } from './helpers/app.js';
import { chromiumSkip, launchBrowser, openPage, screenshot, signIn, type BrowserHandle } from './helpers/browser.js';
import { buildWithDispatcher, ended, waitForRun } from './helpers/dispatch.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { after, before, describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

let chrome: BrowserHandle | undefined;

/** Reserved numbers of the simulator, each with its outcome: answered (several), busy, no answer, rejected, failed. */
const NUMBERS = ['+12025550100', '+12025550100', '+12025550151', '+12025550152', '+12025550101', '+12025550101', '+12025550102', '+12025550103', '+12025550104'];

interface Bucket {
  start: string;
  total: number;
  by_state: Record<string, number>;
  answered: number;
}

/**
 * How many pixels of a chart's canvas are within `tolerance` of the colour (a series' stroke). The
 * canvas is transparent: a line's antialiased edge keeps its colour with less alpha, so any alpha counts.
 */
function pixelsNear(page: Page, testid: string, [r, g, b]: [number, number, number], tolerance = 40): Promise<number> {
  // A string, evaluated in the page: the tests are type-checked without the DOM's types.
  return page.evaluate(`(() => {
    const c = document.querySelector('[data-testid="${testid}"] canvas');
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < data.length; i += 4) {
      if (data[i + 3] > 0 && Math.abs(data[i] - ${r}) + Math.abs(data[i + 1] - ${g}) + Math.abs(data[i + 2] - ${b}) < ${tolerance}) n++;
    }
    return n;
  })()`) as Promise<number>;
}

const summaryIs = (page: Page, text: string) => page.waitForFunction(`document.querySelector('[data-testid="chart-outcomes-summary"]')?.textContent === ${JSON.stringify(text)}`);

/** uPlot's legend of a chart, label → value, at the data point under the cursor. */
function legend(page: Page, testid: string): Promise<Record<string, string>> {
  return page.$$eval(`[data-testid="${testid}"] .u-legend .u-series`, (rows) =>
    Object.fromEntries(rows.map((row) => [row.querySelector('.u-label')?.textContent ?? '', row.querySelector('.u-value')?.textContent ?? ''])),
  );
}

describe('The overview\'s charts in a browser', { skip: chromiumSkip() }, () => {
  before(async () => {
    chrome = await launchBrowser();
  });
  after(async () => {
    await chrome?.close();
  });

  it('draws calls by outcome, the answer rate and the time to answer from GET /stats/series after calls with varied outcomes, with a window selector', async (t) => {
    const env = await buildWithDispatcher(t, 'sqlite', { env: { SIMULATOR_RING_MS: '300', RING_TIMEOUT_MS: '1500', MAX_CALL_DURATION_MS: '2000' } });
    const url = await env.app.listen({ host: '127.0.0.1', port: 0 });
    const f = await createOrgFixture(env.deps, 'Acme');
    const ids: number[] = [];
    for (const phone_number of NUMBERS) {
      const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number }, { key: f.apiKey });
      assert.equal(response.statusCode, 200, response.body);
      ids.push((response.json() as { workflow_run_id: number }).workflow_run_id);
    }
    for (const id of ids) await waitForRun(env, id, ended, scaledTimeout(15_000));

    const { page, problems } = await openPage(t, chrome);
    await signIn(page, url, f.apiKey);
    await page.goto(`${url}/console/overview`);
    for (const chart of ['chart-outcomes', 'chart-answer-rate', 'chart-time-to-answer']) await page.locator(`[data-testid="${chart}"] canvas`).wait();

    // The figures in text: the window's totals by outcome, as the API counts them.
    const api = (await getJson(env.app, `/api/v1/public/stats/series?since=${encodeURIComponent(new Date(Date.now() - 86_400_000).toISOString())}`, f.apiKey)).json() as { buckets: Bucket[] };
    const sum = (states: string[]) => api.buckets.reduce((n, b) => n + states.reduce((m, s) => m + (b.by_state[s] ?? 0), 0), 0);
    assert.equal(sum(['completed', 'busy', 'no_answer', 'rejected', 'failed']), NUMBERS.length, 'every call ended with an outcome');
    const expected = `${NUMBERS.length} calls: completed ${sum(['completed'])}, busy ${sum(['busy'])}, no answer ${sum(['no_answer'])}, rejected ${sum(['rejected'])}, failed ${sum(['failed'])}, canceled or expired 0, not ended yet 0.`;
    assert.deepEqual(['completed', 'busy', 'no_answer', 'rejected', 'failed'].map((s) => sum([s])), [4, 2, 1, 1, 1], 'the simulator\'s outcomes of these numbers');
    await summaryIs(page, expected);
    const answered = api.buckets.reduce((n, b) => n + b.answered, 0);
    assert.equal(await page.$eval('[data-testid="chart-answer-rate-summary"]', (el) => el.textContent), `${answered} answered.`);

    // Drawn: each chart's canvas holds its series' colour (completed; the answer rate; p50).
    assert.ok((await pixelsNear(page, 'chart-outcomes', [5, 150, 105])) > 20, 'the completed line is drawn');
    assert.ok((await pixelsNear(page, 'chart-answer-rate', [29, 78, 216])) > 5, 'the answer rate is drawn');
    assert.ok((await pixelsNear(page, 'chart-time-to-answer', [15, 118, 110])) > 5, 'the p50 time to answer is drawn');

    // uPlot's legend at the last hour (the cursor on the plot's right edge) says that bucket's counts.
    // The page read its series before this test's read: an hour that began in between leaves the
    // page's last bucket the API's second to last.
    await page.$eval('.overview-charts', (el) => el.scrollIntoView());
    const over = await page.$('[data-testid="chart-outcomes"] .u-over');
    const box = await over?.boundingBox();
    assert.ok(box, 'the plot area is laid out');
    await page.mouse.move(box.x + box.width - 1, box.y + box.height / 2);
    const shown = await legend(page, 'chart-outcomes');
    const asLegend = (b: Bucket | undefined) => ({ completed: String(b?.by_state.completed), busy: String(b?.by_state.busy), failed: String(b?.by_state.failed) });
    const candidates = [asLegend(api.buckets.at(-1)), asLegend(api.buckets.at(-2))].map((c) => JSON.stringify(c));
    assert.ok(candidates.includes(JSON.stringify({ completed: shown.completed, busy: shown.busy, failed: shown.failed })), `legend ${JSON.stringify(shown)} is the last hour's: ${candidates[0]}`);
    await page.mouse.move(0, 0);

    await screenshot(page, 'overview-charts');

    // A week: the same charts over 168 hours or so.
    await page.select('[data-testid="chart-window"]', '7d');
    // The week's read: 168 hours or 169 (from the start of the first one), each an x value of the chart.
    await page.waitForFunction(`document.querySelectorAll('[data-testid="chart-outcomes"] .u-legend .u-series').length > 0 && document.querySelector('[data-testid="chart-outcomes"]').dataset.points >= 168`);
    await summaryIs(page, expected);
    assert.deepEqual(problems, [], 'no error, no CSP violation');
  });
});
