// GET /api/v1/public/stats/series, the overview's charts: runs per hour or day by state, the answer
// rate and the time to answer's percentiles, on a known set of runs placed at chosen times (a clock
// the test moves by hand), on both stores; the window's limits; the SQLite read page by page.
import assert from 'node:assert/strict';
import { nearestRank, runSeries } from '../src/store/statements/run-series-statements.js';
import { explainWindowPage } from '../src/store/statements/run-window-pages.js';
import { TERMINAL_STATES } from '../src/runs/states.js';
import { build, getJson, postJson, type TestEnv } from './helpers/app.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const SERIES = '/api/v1/public/stats/series';
const HOUR = 3_600_000;
const T0 = Date.parse('2026-03-01T10:00:00Z');

interface Bucket {
  start: string;
  end: string;
  total: number;
  by_state: Record<string, number>;
  answered: number;
  answer_rate: number | null;
  time_to_answer_ms: { p50: number | null; p95: number | null };
}
interface Series {
  since: string;
  until: string;
  bucket: string;
  bucket_seconds: number;
  buckets: Bucket[];
}

function manualClock(start: number) {
  const clock = { at: start, now: () => clock.at };
  return clock;
}

let numbers = 0;
/** A run created now (the clock's time), then set as a provider would have left it. */
async function runAt(env: TestEnv, f: OrgFixture, set: { state: 'queued' | 'in_progress' | 'completed' | 'busy' | 'no_answer' | 'failed'; dialed?: boolean; answerAfterMs?: number }): Promise<number> {
  numbers += 1;
  const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: `+1202555${String(numbers).padStart(4, '0')}` }, { key: f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  const id = (response.json() as { workflow_run_id: number }).workflow_run_id;
  const now = env.deps.clock.now();
  const dialedAt = set.dialed === false ? null : now + 50;
  await env.deps.store.db
    .updateTable('workflow_runs')
    .set({
      state: set.state,
      dial_sent_at: set.state === 'queued' ? null : dialedAt,
      answered_at: set.answerAfterMs === undefined || dialedAt === null ? null : dialedAt + set.answerAfterMs,
      ended_at: ['queued', 'in_progress'].includes(set.state) ? null : now + 60_000,
    })
    .where('id', '=', id)
    .execute();
  return id;
}

async function series(env: TestEnv, key: string, query: string): Promise<Series> {
  const response = await getJson(env.app, `${SERIES}${query}`, key);
  assert.equal(response.statusCode, 200, response.body);
  return response.json() as Series;
}

/**
 * The known set: in 10:00–11:00, twenty answered calls taking 100, 200, … 2000 ms to answer (in a
 * shuffled order), three busy, one no answer, one failed before dialing (settled: dialed? no), one
 * still queued; nothing in 11:00–12:00; in 12:00–13:00 one call answered and still talking, one
 * busy. Another organization's runs in the same hours.
 */
async function knownSet(env: TestEnv, clock: { at: number }, f: OrgFixture, other: OrgFixture): Promise<void> {
  const order = [7, 19, 2, 14, 0, 11, 5, 17, 9, 3, 15, 1, 12, 18, 6, 10, 4, 16, 8, 13];
  for (const i of order) {
    clock.at += 1_000;
    await runAt(env, f, { state: 'completed', answerAfterMs: (i + 1) * 100 });
  }
  for (let i = 0; i < 3; i++) {
    clock.at += 1_000;
    await runAt(env, f, { state: 'busy' });
  }
  clock.at += 1_000;
  await runAt(env, f, { state: 'no_answer' });
  clock.at += 1_000;
  await runAt(env, f, { state: 'failed', dialed: false });
  clock.at += 1_000;
  await runAt(env, f, { state: 'queued' });
  clock.at += 1_000;
  await runAt(env, other, { state: 'completed', answerAfterMs: 99_000 });
  clock.at = T0 + 2 * HOUR + 5 * 60_000;
  await runAt(env, f, { state: 'in_progress', answerAfterMs: 4_000 });
  clock.at += 1_000;
  await runAt(env, f, { state: 'busy' });
  clock.at += 1_000;
  await runAt(env, other, { state: 'busy' });
  clock.at = T0 + 2 * HOUR + 30 * 60_000;
}

for (const store of await storeCases()) {
  describe(`GET /api/v1/public/stats/series (${store.kind})`, { skip: store.skip }, () => {
    it('counts each hour\'s runs by state with the answer rate and the nearest-rank p50 and p95 of the time to answer, empty hours listed, another organization\'s runs never counted', async (t) => {
      const clock = manualClock(T0);
      const env = await build(t, store.kind, { clock });
      const f = await createOrgFixture(env.deps, 'Acme');
      const other = await createOrgFixture(env.deps, 'Other');
      await knownSet(env, clock, f, other);

      const s = await series(env, f.apiKey, `?since=${encodeURIComponent('2026-03-01T10:20:00Z')}`);
      assert.equal(s.since, '2026-03-01T10:00:00.000Z', 'since moved back to the start of its hour');
      assert.equal(s.until, '2026-03-01T12:30:00.000Z', 'until defaults to now');
      assert.equal(s.bucket, 'hour');
      assert.equal(s.bucket_seconds, 3600);
      assert.deepEqual(s.buckets.map((b) => [b.start, b.end]), [
        ['2026-03-01T10:00:00.000Z', '2026-03-01T11:00:00.000Z'],
        ['2026-03-01T11:00:00.000Z', '2026-03-01T12:00:00.000Z'],
        ['2026-03-01T12:00:00.000Z', '2026-03-01T12:30:00.000Z'],
      ]);
      const [first, empty, last] = s.buckets as [Bucket, Bucket, Bucket];
      assert.equal(first.total, 26);
      assert.deepEqual(
        Object.entries(first.by_state).filter(([, n]) => n > 0),
        [['queued', 1], ['completed', 20], ['busy', 3], ['no_answer', 1], ['failed', 1]],
      );
      assert.equal(Object.keys(first.by_state).length, 11, 'every state listed');
      assert.equal(first.answered, 20);
      assert.equal(first.answer_rate, 20 / 24, 'answered ÷ dialed and settled: the queued run and the one never dialed are left out');
      assert.deepEqual(first.time_to_answer_ms, { p50: 1_000, p95: 1_900 }, 'the 10th and 19th of the twenty sorted times');
      assert.deepEqual(empty, {
        start: '2026-03-01T11:00:00.000Z',
        end: '2026-03-01T12:00:00.000Z',
        total: 0,
        by_state: Object.fromEntries(Object.keys(first.by_state).map((k) => [k, 0])),
        answered: 0,
        answer_rate: null,
        time_to_answer_ms: { p50: null, p95: null },
      });
      assert.equal(last.total, 2);
      assert.equal(last.by_state.in_progress, 1);
      assert.equal(last.answer_rate, 0.5, 'an answered call still talking is settled');
      assert.deepEqual(last.time_to_answer_ms, { p50: 4_000, p95: 4_000 });

      const theirs = await series(env, other.apiKey, `?since=${encodeURIComponent('2026-03-01T10:00:00Z')}`);
      assert.deepEqual(theirs.buckets.map((b) => b.total), [1, 0, 1]);
      assert.deepEqual(theirs.buckets[0]?.time_to_answer_ms, { p50: 99_000, p95: 99_000 });
    });

    it('counts by day (UTC), defaults to the 24 hours before until, and leaves out runs at or after until', async (t) => {
      const clock = manualClock(T0);
      const env = await build(t, store.kind, { clock });
      const f = await createOrgFixture(env.deps, 'Acme');
      const other = await createOrgFixture(env.deps, 'Other');
      await knownSet(env, clock, f, other);

      const byDay = await series(env, f.apiKey, `?bucket=day&since=${encodeURIComponent('2026-02-28T18:00:00Z')}`);
      assert.equal(byDay.bucket_seconds, 86_400);
      assert.deepEqual(byDay.buckets.map((b) => [b.start, b.total, b.answered]), [['2026-02-28T00:00:00.000Z', 0, 0], ['2026-03-01T00:00:00.000Z', 28, 21]]);
      assert.deepEqual(byDay.buckets[1]?.time_to_answer_ms, { p50: 1_100, p95: 2_000 }, 'the 11th and 20th of the 21 times');

      const byDefault = await series(env, f.apiKey, '');
      assert.equal(byDefault.since, '2026-02-28T12:00:00.000Z', 'a day before now, from the start of its hour');
      assert.equal(byDefault.buckets.length, 25);

      const before = await series(env, f.apiKey, `?since=${encodeURIComponent('2026-03-01T10:00:00Z')}&until=${encodeURIComponent('2026-03-01T12:05:00Z')}`);
      assert.deepEqual(before.buckets.map((b) => b.total), [26, 0, 0], 'the runs created at 12:05 and after are outside [since, until)');
    });

    it('refuses a window longer than STATS_SERIES_MAX_WINDOW_DAYS, with more buckets than STATS_SERIES_MAX_BUCKETS, or empty, with a 422 naming the parameter to change', async (t) => {
      const clock = manualClock(T0);
      const env = await build(t, store.kind, { clock, env: { STATS_SERIES_MAX_WINDOW_DAYS: '7', STATS_SERIES_MAX_BUCKETS: '48' } });
      const f = await createOrgFixture(env.deps, 'Acme');
      const refused = async (query: string, pointer: string, mentions: RegExp) => {
        const response = await getJson(env.app, `${SERIES}${query}`, f.apiKey);
        assert.equal(response.statusCode, 422, response.body);
        assert.match(String(response.headers['content-type']), /^application\/problem\+json/);
        const problem = response.json() as { code: string; errors: { pointer: string; detail: string }[] };
        assert.equal(problem.code, 'validation_failed');
        assert.equal(problem.errors[0]?.pointer, pointer);
        assert.match(problem.errors[0]?.detail ?? '', mentions);
      };
      await refused(`?bucket=day&since=${encodeURIComponent('2026-02-21T00:00:00Z')}`, '/since', /STATS_SERIES_MAX_WINDOW_DAYS/);
      await refused(`?since=${encodeURIComponent('2026-02-27T00:00:00Z')}`, '/bucket', /STATS_SERIES_MAX_BUCKETS/);
      await refused(`?since=${encodeURIComponent('2026-03-01T10:00:00Z')}&until=${encodeURIComponent('2026-03-01T09:00:00Z')}`, '/until', /later than since/);
      const unknown = await getJson(env.app, `${SERIES}?bucket=minute`, f.apiKey);
      assert.equal(unknown.statusCode, 422);
      // At the limits exactly: 48 hourly buckets, and 7 daily ones.
      assert.equal((await series(env, f.apiKey, `?since=${encodeURIComponent('2026-02-27T10:00:00Z')}`)).buckets.length, 48);
      assert.equal((await series(env, f.apiKey, `?bucket=day&since=${encodeURIComponent('2026-02-23T00:00:00Z')}&until=${encodeURIComponent('2026-03-02T00:00:00Z')}`)).buckets.length, 7);
      const none = await env.app.inject({ method: 'GET', url: SERIES });
      assert.equal(none.statusCode, 401);
    });

    it('reads the window page by page to the same figures as in one read, runs sharing a millisecond across page ends included', async (t) => {
      const clock = manualClock(T0);
      const env = await build(t, store.kind, { clock });
      const f = await createOrgFixture(env.deps, 'Acme');
      const other = await createOrgFixture(env.deps, 'Other');
      for (let i = 0; i < 17; i++) {
        // Three runs per millisecond, and a new hour every five runs, so page ends fall inside both.
        if (i % 3 === 0) clock.at += 1;
        if (i % 5 === 4) clock.at += HOUR;
        const states = ['completed', 'busy', 'no_answer', 'queued'] as const;
        const state = states[i % states.length] ?? 'completed';
        await runAt(env, i % 7 === 6 ? other : f, { state, ...(state === 'completed' ? { answerAfterMs: 300 + ((i * 37) % 11) * 100 } : {}) });
      }
      const window = { start: T0, until: clock.at + 1, bucketMs: HOUR };
      const question = { terminalStates: TERMINAL_STATES, percentiles: [0.5, 0.95] as [number, number] };
      const whole = await runSeries(env.deps.store, f.orgId, window, question, 1_000);
      assert.equal(whole.length, 4);
      assert.equal(whole.reduce((sum, b) => sum + Object.values(b.byState).reduce((a, n) => a + (n ?? 0), 0), 0), 17 - 2, 'the other organization\'s two runs left out');
      if (env.deps.store.embedded) {
        for (const pageRows of [1, 2, 3, 4]) assert.deepEqual(await runSeries(env.deps.store, f.orgId, window, question, pageRows), whole, `pages of ${pageRows}`);
        const plan = await explainWindowPage(env.deps.store, f.orgId, window);
        assert.match(plan, /workflow_runs_org_created_idx/, plan);
        assert.doesNotMatch(plan, /TEMP B-TREE/, `a page is read in index order, never sorted: ${plan}`);
      }
    });
  });
}

describe('The nearest-rank percentile', () => {
  it('is the smallest value with at least the fraction of the values at or below it, null for none', () => {
    assert.equal(nearestRank([], 0.5), null);
    assert.equal(nearestRank([7], 0.95), 7);
    assert.equal(nearestRank([1, 2], 0.5), 1);
    assert.equal(nearestRank([1, 2, 3], 0.5), 2);
    const hundred = Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(nearestRank(hundred, 0.95), 95);
    assert.equal(nearestRank(hundred, 0.5), 50);
  });
});
