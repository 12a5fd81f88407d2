// The statements behind the overview's charts (GET /stats/series): an organization's runs created
// in a window, per time bucket, counted by state, with how many were answered and how long the
// answered ones took to be (the 50th and 95th percentiles).
import { sql } from '../engine/kysely.js';
import { queryable, type Connection } from '../engine/store.js';
import type { RunState } from '../schema/schema.js';
import { COUNT_PAGE_ROWS, windowRunPages } from './run-window-pages.js';

/** The window read: runs created in [start, until), cut into buckets of bucketMs from start. */
export interface SeriesWindow {
  start: number;
  until: number;
  bucketMs: number;
}

/**
 * What settles a run's answer and which percentiles to take: the lifecycle's and the caller's, handed
 * in because the store imports nothing but types from the rest of src/ (store/README.md).
 */
export interface SeriesQuestion {
  terminalStates: readonly RunState[];
  /** Two percentiles, as fractions (0.5, 0.95). */
  percentiles: readonly [number, number];
}

/** One bucket's figures. Time to answer: answered_at − dial_sent_at, in milliseconds. */
export interface SeriesBucketRow {
  /** Runs by their state now; a state with none is absent. */
  byState: Partial<Record<RunState, number>>;
  /** Runs answered (answered_at set: a person or a machine picked up). */
  answered: number;
  /** Runs whose answer is settled: dialed, and either answered or ended. The answer rate's denominator. */
  settled: number;
  /** The question's two nearest-rank percentiles of the answered runs' times to answer; null when none was answered. */
  timeToAnswerMs: [number | null, number | null];
}

function emptyBucket(): SeriesBucketRow {
  return { byState: {}, answered: 0, settled: 0, timeToAnswerMs: [null, null] };
}

function bucketCount(window: SeriesWindow): number {
  return Math.max(0, Math.ceil((window.until - window.start) / window.bucketMs));
}

/**
 * The nearest-rank percentile of sorted values (the smallest value with at least p of them at or
 * below it): what PostgreSQL's percentile_disc answers, so both stores give the same figure.
 */
export function nearestRank(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil(p * sorted.length))) - 1] ?? null;
}

/** Every bucket of the window in order, empty ones included. */
export async function runSeries(on: Connection, orgId: number, window: SeriesWindow, question: SeriesQuestion, pageRows = COUNT_PAGE_ROWS): Promise<SeriesBucketRow[]> {
  const buckets = Array.from({ length: bucketCount(window) }, emptyBucket);
  if (buckets.length === 0) return buckets;
  if (on.dialect === 'sqlite') await fillPaged(on, orgId, window, question, buckets, pageRows);
  else await fillAggregated(on, orgId, window, question, buckets);
  return buckets;
}

/**
 * PostgreSQL groups and sorts per bucket itself (hash aggregate for the counts; percentile_disc
 * sorts each bucket's answer times, spilling past work_mem): two statements, whatever the window.
 */
async function fillAggregated(on: Connection, orgId: number, window: SeriesWindow, question: SeriesQuestion, buckets: SeriesBucketRow[]): Promise<void> {
  const db = queryable(on);
  const bucketOf = sql<number>`(created_at - ${window.start}::bigint) / ${window.bucketMs}::bigint`;
  const inWindow = sql`org_id = ${orgId} and created_at >= ${window.start}::bigint and created_at < ${window.until}::bigint`;
  const terminal = sql.join(question.terminalStates.map((s) => sql`${s}`));
  const [counts, answers] = await Promise.all([
    sql<{ bucket: string | number; state: RunState; count: string | number }>`
      select ${bucketOf} as bucket, state, count(*) as count from workflow_runs where ${inWindow} group by 1, 2`.execute(db),
    sql<{ bucket: string | number; answered: string | number; settled: string | number; p50: string | number | null; p95: string | number | null }>`
      select ${bucketOf} as bucket,
        count(answered_at) as answered,
        count(*) filter (where dial_sent_at is not null and (answered_at is not null or state in (${terminal}))) as settled,
        percentile_disc(${question.percentiles[0]}::float8) within group (order by answered_at - dial_sent_at) as p50,
        percentile_disc(${question.percentiles[1]}::float8) within group (order by answered_at - dial_sent_at) as p95
      from workflow_runs where ${inWindow} group by 1`.execute(db),
  ]);
  for (const row of counts.rows) {
    const bucket = buckets[Number(row.bucket)];
    if (bucket) bucket.byState[row.state] = Number(row.count);
  }
  for (const row of answers.rows) {
    const bucket = buckets[Number(row.bucket)];
    if (!bucket) continue;
    bucket.answered = Number(row.answered);
    bucket.settled = Number(row.settled);
    bucket.timeToAnswerMs = [row.p50 === null ? null : Number(row.p50), row.p95 === null ? null : Number(row.p95)];
  }
}

/**
 * SQLite has no percentile function and no hash aggregate (a GROUP BY sorts the whole window in
 * memory: run-window-pages.ts, COUNT_PAGE_ROWS). So the window is read a page at a time in
 * creation order, and since that order is the buckets' order, only the bucket being read keeps its
 * answer times (8 bytes per answered run) until it is complete and its percentiles are taken. Memory:
 * one page and one bucket's answer times, whatever the window.
 */
async function fillPaged(on: Connection, orgId: number, window: SeriesWindow, question: SeriesQuestion, buckets: SeriesBucketRow[], pageRows: number): Promise<void> {
  const terminal = new Set(question.terminalStates);
  let current = -1;
  let times: number[] = [];
  const close = () => {
    const bucket = buckets[current];
    if (!bucket) return;
    times.sort((a, b) => a - b);
    bucket.timeToAnswerMs = [nearestRank(times, question.percentiles[0]), nearestRank(times, question.percentiles[1])];
    times = [];
  };
  for await (const rows of windowRunPages(on, orgId, window, pageRows)) {
    for (const r of rows) {
      const index = Math.floor((r.created_at - window.start) / window.bucketMs);
      if (index !== current) {
        close();
        current = index;
      }
      const bucket = buckets[index];
      if (!bucket) continue;
      bucket.byState[r.state] = (bucket.byState[r.state] ?? 0) + 1;
      if (r.answered_at !== null) bucket.answered += 1;
      if (r.dial_sent_at !== null && (r.answered_at !== null || terminal.has(r.state))) bucket.settled += 1;
      if (r.answered_at !== null && r.dial_sent_at !== null) times.push(r.answered_at - r.dial_sent_at);
    }
  }
  close();
}
