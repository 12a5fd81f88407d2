// Calls: the run list, filtered, paged, kept live from the event stream. Its columns are one list
// (COLUMNS): a column is one more entry. `Export CSV` downloads the filtered list (export.js).
import { html, useCallback, useEffect, useRef, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
import { ExportCalls } from './export.js';
import { useRunStates } from './run-states.js';
import { useDebounced } from './timing.js';
import { callDuration, ErrorBox, fieldSetter, formatTime, Link, StateBadge } from './ui.js';
/** @import { PageProps } from './pages.js' */
/** @import { RunStates } from './run-states.js' */
/** @import { Page, Run, RunMessage, Workflow } from './types.js' */

const PAGE_SIZE = 25;
/** Who may have answered: the list API's `answered_by` filter values (the OpenAPI document's enum). */
const ANSWERED_BY = ['human', 'machine', 'fax', 'unknown'];
/** The run event answering-machine detection writes when it decides (its data carries `answered_by`). */
const ANSWERED_BY_EVENT = 'answered_by';
/** @typedef {{ state: string, answered_by: string, workflow_uuid: string, phone_number: string, created_after: string, created_before: string, campaign_id?: string }} Filters */
/** @type {Filters} */
const EMPTY_FILTERS = { state: '', answered_by: '', workflow_uuid: '', phone_number: '', created_after: '', created_before: '' };

/**
 * A listed run after one of its events: the columns the service sets on that transition too.
 * @param {Run} run
 * @param {RunMessage} event
 * @param {RunStates} states
 * @returns {Run}
 */
function withEvent(run, event, states) {
  // Answering-machine detection's verdict: an event of its own, which leaves the state as it is.
  if (event.type === ANSWERED_BY_EVENT) {
    const verdict = event.data.answered_by;
    return ANSWERED_BY.includes(/** @type {string} */ (verdict)) ? { ...run, answered_by: /** @type {Run['answered_by']} */ (verdict), updated_at: event.at } : run;
  }
  const next = { ...run, state: event.type, updated_at: event.at };
  if (event.type === 'in_progress') next.answered_at = event.at;
  if (states.isTerminal(event.type)) {
    next.ended_at = event.at;
    if (typeof event.data.reason === 'string') next.outcome_reason = event.data.reason;
  }
  return next;
}

/**
 * One column of the table: its header and each run's cell.
 * @typedef {object} Column
 * @property {string} header
 * @property {(run: Run, names: Record<string, string>) => unknown} cell
 * @property {string} [testid] the cells' data-testid
 * @property {boolean} [wide] shown on wide screens only
 */

/** @type {Column[]} */
const COLUMNS = [
  { header: 'Call', cell: (run) => html`<${Link} href=${`/console/runs/${run.id}`}>${run.name}</${Link}>` },
  { header: 'State', cell: (run) => html`<${StateBadge} state=${run.state} />` },
  { header: 'Outcome', testid: 'run-row-outcome', cell: (run) => run.outcome_reason ?? '—' },
  { header: 'Duration', testid: 'run-row-duration', cell: (run) => callDuration(run) },
  { header: 'Answered by', testid: 'run-row-answered-by', cell: (run) => run.answered_by ?? '—' },
  { header: 'Number', cell: (run) => run.phone_number },
  { header: 'Agent', wide: true, cell: (run, names) => names[run.workflow_uuid] ?? run.workflow_uuid },
  { header: 'Created', wide: true, cell: (run) => formatTime(run.created_at) },
];

/**
 * @param {Filters} filters
 * @param {number | undefined} after
 * @param {number} [limit]
 */
function query(filters, after, limit = PAGE_SIZE) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(filters)) {
    if (!value) continue;
    // datetime-local inputs give local time without a zone; the API takes RFC 3339.
    params.set(name, name.startsWith('created_') ? new Date(value).toISOString() : value);
  }
  if (after) params.set('after', String(after));
  params.set('limit', String(limit));
  return `?${params}`;
}

/**
 * The filters a link may carry: the Campaigns page links to a campaign's calls as ?campaign_id=N.
 * @returns {Filters}
 */
function filtersFromUrl() {
  const campaignId = new URLSearchParams(location.search).get('campaign_id');
  return campaignId && /^[1-9][0-9]{0,14}$/.test(campaignId) ? { ...EMPTY_FILTERS, campaign_id: campaignId } : EMPTY_FILTERS;
}

/** @param {PageProps} props */
export function CallsPage({ stream }) {
  const states = useRunStates();
  const [draft, setDraft] = useState(filtersFromUrl);
  const [filters, setFilters] = useState(filtersFromUrl);
  const [cursors, setCursors] = useState(/** @type {number[]} */ ([])); // the `after` of each page before this one
  const [page, setPage] = useState(/** @type {Page<Run>} */ ({ data: [], next_after: null }));
  const [workflows, setWorkflows] = useState(/** @type {Workflow[]} */ ([]));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [loading, setLoading] = useState(true);
  const after = cursors[cursors.length - 1];
  const shown = useRef(page);
  shown.current = page;

  const load = useCallback(async () => {
    try {
      /** @type {Page<Run>} */
      const read = await api(`/workflow-runs${query(filters, after)}`);
      setPage(read);
      setError(null);
    } catch (e) {
      setError(e);
    } finally {
      setLoading(false);
    }
  }, [filters, after]);
  const reload = useDebounced(load, 200);

  useEffect(() => {
    setLoading(true);
    void load();
  }, [load]);
  useEffect(() => {
    /** @type {Promise<Page<Workflow>>} */
    const read = api('/workflows');
    read.then((r) => setWorkflows(r.data), () => undefined);
  }, []);
  useEffect(
    () =>
      stream.subscribe((event) => {
        const known = shown.current.data.some((run) => run.id === event.run_id);
        if (known && (states.isKnown(event.type) || event.type === ANSWERED_BY_EVENT)) {
          setPage((current) => ({
            ...current,
            data: current.data.map((run) => (run.id === event.run_id ? withEvent(run, event, states) : run)),
          }));
        }
        // A run this page does not show yet (a new one, or one that now matches the filter): read
        // the first page again. Older pages stay as they are while someone reads them.
        if (!known && cursors.length === 0) reload();
        else if (filters.state || filters.answered_by) reload();
      }),
    [stream, reload, cursors.length, filters.state, filters.answered_by, states],
  );

  /** @type {Record<string, string>} */
  const names = Object.fromEntries(workflows.map((w) => [w.workflow_uuid, w.name]));
  const set = fieldSetter(draft, setDraft);
  /** @param {SubmitEvent} e */
  const apply = (e) => {
    e.preventDefault();
    setCursors([]);
    setFilters(draft);
  };
  const clear = () => {
    setDraft(EMPTY_FILTERS);
    setCursors([]);
    setFilters(EMPTY_FILTERS);
  };
  const older = () => {
    if (page.next_after !== null) setCursors([...cursors, page.next_after]);
  };

  return html`<section>
    <h1>Calls</h1>
    ${filters.campaign_id ? html`<p class="hint" data-testid="campaign-filter">Only the calls of campaign ${filters.campaign_id} (Clear shows every call).</p>` : null}
    <form class="filters" onSubmit=${apply} aria-label="Filter calls">
      <label>State <select name="state" value=${draft.state} onChange=${set('state')}>
        <option value="">Any</option>
        ${states.all.map((s) => html`<option value=${s}>${s.replace('_', ' ')}</option>`)}
      </select></label>
      <label>Answered by <select name="answered_by" value=${draft.answered_by} onChange=${set('answered_by')}>
        <option value="">Any</option>
        ${ANSWERED_BY.map((v) => html`<option value=${v}>${v}</option>`)}
      </select></label>
      <label>Agent <select name="workflow_uuid" value=${draft.workflow_uuid} onChange=${set('workflow_uuid')}>
        <option value="">Any</option>
        ${workflows.map((w) => html`<option value=${w.workflow_uuid}>${w.name}</option>`)}
      </select></label>
      <label>Phone number <input name="phone_number" type="tel" value=${draft.phone_number} onInput=${set('phone_number')} /></label>
      <label>Created after <input name="created_after" type="datetime-local" value=${draft.created_after} onInput=${set('created_after')} /></label>
      <label>Created before <input name="created_before" type="datetime-local" value=${draft.created_before} onInput=${set('created_before')} /></label>
      <div class="actions"><button type="submit">Filter</button><button type="button" class="secondary" onClick=${clear}>Clear</button></div>
    </form>
    <${ExportCalls} queryOf=${(/** @type {number | undefined} */ after, /** @type {number} */ limit) => query(filters, after, limit)} names=${names} />
    <${ErrorBox} error=${error} />
    <div class="table-wrap">
      <table>
        <caption class="visually-hidden">Calls, newest first</caption>
        <thead><tr>${COLUMNS.map((c) => html`<th scope="col" class=${c.wide ? 'wide' : undefined}>${c.header}</th>`)}</tr></thead>
        <tbody>
          ${page.data.map(
            (run) => html`<tr key=${run.id} data-testid="run-row" data-run-id=${run.id}>
              ${COLUMNS.map((c) => html`<td class=${c.wide ? 'wide' : undefined} data-testid=${c.testid}>${c.cell(run, names)}</td>`)}
            </tr>`,
          )}
        </tbody>
      </table>
    </div>
    ${!loading && page.data.length === 0 ? html`<p class="empty">No calls${filters === EMPTY_FILTERS ? ' yet' : ' match these filters'}.</p>` : null}
    <div class="pager">
      <button type="button" class="secondary" disabled=${cursors.length === 0} onClick=${() => setCursors(cursors.slice(0, -1))}>Newer</button>
      <button type="button" class="secondary" disabled=${page.next_after === null} onClick=${older}>Older</button>
    </div>
  </section>`;
}
