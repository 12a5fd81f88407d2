// The overview's figures over time: an organization's runs created in a window, per hour or per
// day, by state, with the answer rate and the time to answer (p50, p95). The window is bounded
// (STATS_SERIES_MAX_WINDOW_DAYS, STATS_SERIES_MAX_BUCKETS): a series is read whole on each request.
import { validationFailed } from '../errors.js';
import type { Store } from '../store/engine/store.js';
import { runSeries } from '../store/statements/run-series-statements.js';
import { iso } from './read-run.js';
import { RUN_STATES, TERMINAL_STATES, type RunState } from './states.js';

export const SERIES_BUCKETS = { hour: 3_600_000, day: 86_400_000 } as const;
export type SeriesBucket = keyof typeof SERIES_BUCKETS;

/** The window asked for when `since` is not given: the day before `until`. */
export const DEFAULT_SERIES_WINDOW_MS = 86_400_000;
const DAY_MS = 86_400_000;

export interface SeriesLimits {
  maxWindowDays: number;
  maxBuckets: number;
}

export interface SeriesRequest {
  since?: number;
  until?: number;
  bucket: SeriesBucket;
}

export interface SeriesBucketView {
  start: string;
  end: string;
  total: number;
  by_state: Record<RunState, number>;
  answered: number;
  /** answered ÷ runs whose answer is settled (dialed, and answered or ended); null when none is. */
  answer_rate: number | null;
  time_to_answer_ms: { p50: number | null; p95: number | null };
}

export interface SeriesView {
  since: string;
  until: string;
  bucket: SeriesBucket;
  bucket_seconds: number;
  buckets: SeriesBucketView[];
}

/**
 * The window read: `since` moved back to the start of its bucket (UTC hours and days, so every
 * bucket is a whole hour or day on the clock) up to `until`, refused when empty or over the limits.
 * Each refusal names the query parameter to change.
 */
export function seriesWindow(request: SeriesRequest, now: number, limits: SeriesLimits): { start: number; until: number; bucketMs: number } {
  const bucketMs = SERIES_BUCKETS[request.bucket];
  const until = request.until ?? now;
  const since = request.since ?? until - DEFAULT_SERIES_WINDOW_MS;
  if (since >= until) throw validationFailed([{ pointer: '/until', detail: 'Must be later than since.' }], 'The window is empty.');
  const start = Math.floor(since / bucketMs) * bucketMs;
  if (until - start > limits.maxWindowDays * DAY_MS) {
    throw validationFailed(
      [{ pointer: '/since', detail: `The window from since to until is longer than ${limits.maxWindowDays} days (STATS_SERIES_MAX_WINDOW_DAYS); ask for a later since or an earlier until.` }],
      'The window is too long.',
    );
  }
  const count = Math.ceil((until - start) / bucketMs);
  if (count > limits.maxBuckets) {
    throw validationFailed(
      [{ pointer: '/bucket', detail: `The window holds ${count} buckets of a ${request.bucket}, more than ${limits.maxBuckets} (STATS_SERIES_MAX_BUCKETS); ask for a larger bucket or a shorter window.` }],
      'Too many buckets.',
    );
  }
  return { start, until, bucketMs };
}

export async function statsSeries(store: Store, orgId: number, request: SeriesRequest, now: number, limits: SeriesLimits): Promise<SeriesView> {
  const window = seriesWindow(request, now, limits);
  const rows = await runSeries(store, orgId, window, { terminalStates: TERMINAL_STATES, percentiles: [0.5, 0.95] });
  return {
    since: iso(window.start),
    until: iso(window.until),
    bucket: request.bucket,
    bucket_seconds: window.bucketMs / 1000,
    buckets: rows.map((row, i) => {
      const start = window.start + i * window.bucketMs;
      const byState = Object.fromEntries(RUN_STATES.map((s) => [s, row.byState[s] ?? 0])) as Record<RunState, number>;
      return {
        start: iso(start),
        end: iso(Math.min(start + window.bucketMs, window.until)),
        total: RUN_STATES.reduce((sum, s) => sum + byState[s], 0),
        by_state: byState,
        answered: row.answered,
        answer_rate: row.settled === 0 ? null : row.answered / row.settled,
        time_to_answer_ms: { p50: row.timeToAnswerMs[0], p95: row.timeToAnswerMs[1] },
      };
    }),
  };
}
