// CSV export of the Calls list as filtered: built in the browser from the list API's pages
// (GET /workflow-runs with the same filters, 100 runs a read, newest first) rather than by a
// server route. Why: the list API already pages by a stable cursor, applies the same filters and
// the key's scope, and is rate-limited per key; an export route would be a second way to read runs
// to secure, document and bound. The cost is one read per 100 runs, so an export holds at most
// EXPORT_MAX_ROWS runs (the file says when it stopped there); a larger one is for the API itself.
// Every cell a spreadsheet would take for a formula is made text (csv.js, spreadsheetSafe).
import { html, useState } from './vendor-htm-preact.js';
import { api, ApiError } from './api.js';
import { csvLine } from './csv.js';
import { callSeconds, ErrorBox } from './ui.js';
/** @import { Page, Run } from './types.js' */

/** The most runs one export reads (100 reads of the list API). */
export const EXPORT_MAX_ROWS = 10_000;
const READ_SIZE = 100;
/** A refused read (429, rate limited) is tried again after this long, at most READ_RETRIES times. */
const RETRY_MS = 1_000;
const READ_RETRIES = 10;

/**
 * The file's columns: its header and each run's cell.
 * @type {{ header: string, cell: (run: Run, names: Record<string, string>) => string | number | null }[]}
 */
const COLUMNS = [
  { header: 'id', cell: (r) => r.id },
  { header: 'name', cell: (r) => r.name },
  { header: 'state', cell: (r) => r.state },
  { header: 'outcome_reason', cell: (r) => r.outcome_reason },
  { header: 'answered_by', cell: (r) => r.answered_by },
  { header: 'duration_seconds', cell: (r) => callSeconds(r)?.toFixed(1) ?? null },
  { header: 'phone_number', cell: (r) => r.phone_number },
  { header: 'caller_id', cell: (r) => r.caller_id },
  { header: 'agent', cell: (r, names) => names[r.workflow_uuid] ?? null },
  { header: 'workflow_uuid', cell: (r) => r.workflow_uuid },
  { header: 'campaign_id', cell: (r) => r.campaign_id },
  { header: 'created_at', cell: (r) => r.created_at },
  { header: 'answered_at', cell: (r) => r.answered_at },
  { header: 'ended_at', cell: (r) => r.ended_at },
];

/**
 * One page of the list, tried again while the service says to slow down.
 * @param {string} path
 * @returns {Promise<Page<Run>>}
 */
async function readPage(path) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await api(path);
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 429 || attempt >= READ_RETRIES) throw e;
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }
}

/**
 * The filtered list as CSV text (spreadsheet-safe), and how many runs it holds.
 * @param {(after: number | undefined, limit: number) => string} queryOf the list's query for a page
 * @param {Record<string, string>} names agent names by workflow UUID
 * @param {(read: number) => void} onProgress
 */
export async function callsCsv(queryOf, names, onProgress) {
  let text = csvLine(COLUMNS.map((c) => c.header));
  let count = 0;
  let truncated = false;
  for (let after = /** @type {number | undefined} */ (undefined); ; ) {
    const page = await readPage(`/workflow-runs${queryOf(after, READ_SIZE)}`);
    for (const run of page.data) {
      if (count === EXPORT_MAX_ROWS) {
        truncated = true;
        break;
      }
      text += csvLine(COLUMNS.map((c) => c.cell(run, names)), { spreadsheet: true });
      count++;
    }
    onProgress(count);
    if (truncated || page.next_after === null || page.data.length === 0) break;
    if (count === EXPORT_MAX_ROWS) {
      truncated = true;
      break;
    }
    after = page.next_after;
  }
  return { text, count, truncated };
}

/**
 * `Export CSV`: the list as filtered, downloaded as a file.
 * @param {{ queryOf: (after: number | undefined, limit: number) => string, names: Record<string, string> }} props
 */
export function ExportCalls({ queryOf, names }) {
  const [status, setStatus] = useState('');
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [busy, setBusy] = useState(false);
  const run = async () => {
    setBusy(true);
    setError(null);
    setStatus('Reading calls…');
    try {
      const { text, count, truncated } = await callsCsv(queryOf, names, (read) => setStatus(`Reading calls… ${read}`));
      const url = URL.createObjectURL(new Blob([text], { type: 'text/csv;charset=utf-8' }));
      const link = document.createElement('a');
      link.href = url;
      link.download = `dialtone-calls-${new Date().toISOString().slice(0, 19).replaceAll(':', '-')}.csv`;
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      setStatus(truncated ? `Exported the newest ${count} calls: an export stops at ${EXPORT_MAX_ROWS}. Narrow the filters for the rest.` : `Exported ${count} ${count === 1 ? 'call' : 'calls'}.`);
    } catch (e) {
      setStatus('');
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<div class="export">
    <button type="button" class="secondary" onClick=${run} disabled=${busy}>Export CSV</button>
    <span class="hint" role="status" data-testid="export-status">${status}</span>
    <${ErrorBox} error=${error} />
  </div>`;
}
