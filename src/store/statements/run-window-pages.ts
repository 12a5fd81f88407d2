// An organization's runs created in a time window, read a page at a time in (created_at, id) order:
// how SQLite counts a window (the statistics, the overview's series) with bounded memory.
import { explainQuery } from '../engine/query-plans.js';
import { queryable, type Connection } from '../engine/store.js';

/**
 * Rows read per statement when SQLite counts a window page by page. SQLite has no hash aggregate:
 * a GROUP BY over the window sorts every row of it first, in memory (`temp_store = MEMORY`), 54 MB
 * per million runs (docs/benchmarks.md). Counted a page at a time the memory is a page's, whatever
 * the window; the time stays linear in the window's runs, read through the (org_id, created_at)
 * index in its order.
 */
export const COUNT_PAGE_ROWS = 5_000;

/** Runs created at or after `start` and, when `until` is given, before it (epoch ms). */
export interface RunWindow {
  start: number;
  until?: number;
}

type PageKey = { createdAt: number; id: number };

/** One page of the window's runs after `after`: the columns every paged count reads. */
function windowPageQuery(on: Connection, orgId: number, window: RunWindow, after: PageKey | undefined, pageRows: number) {
  return queryable(on)
    .selectFrom('workflow_runs')
    .select(['id', 'created_at', 'state', 'outcome_reason', 'answered_by', 'dial_sent_at', 'answered_at'])
    .where('org_id', '=', orgId)
    // The range starts at the last page's end, not at the window's: each page is read from the
    // index where the last one stopped, not by walking past every row counted before it.
    .where('created_at', '>=', after ? Math.max(window.start, after.createdAt) : window.start)
    .$if(window.until !== undefined, (q) => q.where('created_at', '<', window.until as number))
    .$if(after !== undefined, (q) => q.where((eb) => eb.or([eb('created_at', '>', (after as PageKey).createdAt), eb('id', '>', (after as PageKey).id)])))
    .orderBy('created_at')
    .orderBy('id')
    .limit(pageRows);
}

export type WindowRunRow = Awaited<ReturnType<ReturnType<typeof windowPageQuery>['execute']>>[number];

/** The window's runs, page after page, in creation order (ties by id). */
export async function* windowRunPages(on: Connection, orgId: number, window: RunWindow, pageRows = COUNT_PAGE_ROWS): AsyncGenerator<WindowRunRow[]> {
  let after: PageKey | undefined;
  for (;;) {
    const rows = await windowPageQuery(on, orgId, window, after, pageRows).execute();
    if (rows.length > 0) yield rows;
    const last = rows.at(-1);
    if (!last || rows.length < pageRows) return;
    after = { createdAt: last.created_at, id: last.id };
  }
}

/** The plan of a page after the first, as text (tests check the index serves it in order, with no sort). */
export function explainWindowPage(on: Connection, orgId: number, window: RunWindow): Promise<string> {
  return explainQuery(on, windowPageQuery(on, orgId, window, { createdAt: window.start, id: 0 }, COUNT_PAGE_ROWS));
}
