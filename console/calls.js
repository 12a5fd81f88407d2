// Calls (the run list, filtered, paged, kept live from the event stream) and Call (one run: its
// timeline, outcome, context, cancel, and its webhook deliveries, kept live from the stream's
// webhook.delivery events).
import { html, useCallback, useEffect, useRef, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
import { ErrorBox, formatTime, isTerminal, Link, RUN_STATES, StateBadge } from './ui.js';

const PAGE_SIZE = 25;
const EMPTY_FILTERS = { state: '', workflow_uuid: '', phone_number: '', created_after: '', created_before: '' };

/** Runs `work` once after `ms` of quiet, however often it is asked (bursts of events → one read). */
function useDebounced(work, ms) {
  const timer = useRef();
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    clearTimeout(timer.current);
    timer.current = setTimeout(() => work(), ms);
  }, [work, ms]);
}

function query(filters, after) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(filters)) {
    if (!value) continue;
    // datetime-local inputs give local time without a zone; the API takes RFC 3339.
    params.set(name, name.startsWith('created_') ? new Date(value).toISOString() : value);
  }
  if (after) params.set('after', String(after));
  params.set('limit', String(PAGE_SIZE));
  return `?${params}`;
}

/** The filters a link may carry: the Campaigns page links to a campaign's calls as ?campaign_id=N. */
function filtersFromUrl() {
  const campaignId = new URLSearchParams(location.search).get('campaign_id');
  return campaignId && /^[1-9][0-9]{0,14}$/.test(campaignId) ? { ...EMPTY_FILTERS, campaign_id: campaignId } : EMPTY_FILTERS;
}

/** A listed run after one of its events: the columns the service sets on that transition too. */
function withEvent(run, event) {
  const next = { ...run, state: event.type, updated_at: event.at };
  if (event.type === 'in_progress') next.answered_at = event.at;
  if (isTerminal(event.type)) {
    next.ended_at = event.at;
    if (typeof event.data?.reason === 'string') next.outcome_reason = event.data.reason;
  }
  return next;
}

/** Time on the call (answered to ended); a call that was never answered has none. */
export function callDuration(run) {
  if (!run.answered_at || !run.ended_at) return '—';
  const seconds = Math.max(0, (Date.parse(run.ended_at) - Date.parse(run.answered_at)) / 1000);
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, '0')}`;
}

export function CallsPage({ stream }) {
  const [draft, setDraft] = useState(filtersFromUrl);
  const [filters, setFilters] = useState(filtersFromUrl);
  const [cursors, setCursors] = useState([]); // the `after` of each page before this one
  const [page, setPage] = useState({ data: [], next_after: null });
  const [workflows, setWorkflows] = useState([]);
  const [error, setError] = useState(null);
  const [loading, setLoading] = useState(true);
  const after = cursors[cursors.length - 1];
  const shown = useRef(page);
  shown.current = page;

  const load = useCallback(async () => {
    try {
      setPage(await api(`/workflow-runs${query(filters, after)}`));
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
    api('/workflows').then((r) => setWorkflows(r.data), () => undefined);
  }, []);
  useEffect(
    () =>
      stream.subscribe((event) => {
        const known = shown.current.data.some((run) => run.id === event.run_id);
        if (known && RUN_STATES.includes(event.type)) {
          setPage((current) => ({
            ...current,
            data: current.data.map((run) => (run.id === event.run_id ? withEvent(run, event) : run)),
          }));
        }
        // A run this page does not show yet (a new one, or one that now matches the filter): read
        // the first page again. Older pages stay as they are while someone reads them.
        if (!known && cursors.length === 0) reload();
        else if (filters.state) reload();
      }),
    [stream, reload, cursors.length, filters.state],
  );

  const names = Object.fromEntries(workflows.map((w) => [w.workflow_uuid, w.name]));
  const set = (name) => (e) => setDraft({ ...draft, [name]: e.currentTarget.value });
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

  return html`<section>
    <h1>Calls</h1>
    ${filters.campaign_id ? html`<p class="hint" data-testid="campaign-filter">Only the calls of campaign ${filters.campaign_id} (Clear shows every call).</p>` : null}
    <form class="filters" onSubmit=${apply} aria-label="Filter calls">
      <label>State <select name="state" value=${draft.state} onChange=${set('state')}>
        <option value="">Any</option>
        ${RUN_STATES.map((s) => html`<option value=${s}>${s.replace('_', ' ')}</option>`)}
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
    <${ErrorBox} error=${error} />
    <div class="table-wrap">
      <table>
        <caption class="visually-hidden">Calls, newest first</caption>
        <thead><tr><th scope="col">Call</th><th scope="col">State</th><th scope="col">Outcome</th><th scope="col">Duration</th><th scope="col">Number</th><th scope="col" class="wide">Agent</th><th scope="col" class="wide">Created</th></tr></thead>
        <tbody>
          ${page.data.map(
            (run) => html`<tr key=${run.id} data-testid="run-row" data-run-id=${run.id}>
              <td><${Link} href=${`/console/runs/${run.id}`}>${run.name}</${Link}></td>
              <td><${StateBadge} state=${run.state} /></td>
              <td data-testid="run-row-outcome">${run.outcome_reason ?? '—'}</td>
              <td data-testid="run-row-duration">${callDuration(run)}</td>
              <td>${run.phone_number}</td>
              <td class="wide">${names[run.workflow_uuid] ?? run.workflow_uuid}</td>
              <td class="wide">${formatTime(run.created_at)}</td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>
    ${!loading && page.data.length === 0 ? html`<p class="empty">No calls${filters === EMPTY_FILTERS ? ' yet' : ' match these filters'}.</p>` : null}
    <div class="pager">
      <button type="button" class="secondary" disabled=${cursors.length === 0} onClick=${() => setCursors(cursors.slice(0, -1))}>Newer</button>
      <button type="button" class="secondary" disabled=${page.next_after === null} onClick=${() => setCursors([...cursors, page.next_after])}>Older</button>
    </div>
  </section>`;
}

async function allEvents(id) {
  const events = [];
  for (let after = 0; ; ) {
    const page = await api(`/workflow-runs/${id}/events?after=${after}&limit=1000`);
    events.push(...page.data);
    if (page.next_after === null || page.data.length === 0) return events;
    after = page.next_after;
  }
}

/** Every delivery of the run, to every endpoint of the organization (read by run, page by page). */
async function runDeliveries(id) {
  const [endpoints, deliveries] = [(await api('/webhook-endpoints')).data, []];
  for (let after = ''; ; ) {
    const page = await api(`/webhook-deliveries?run_id=${id}&limit=100${after}`);
    deliveries.push(...page.data);
    if (page.next_after === null || page.data.length === 0) break;
    after = `&after=${page.next_after}`;
  }
  const byId = new Map(endpoints.map((endpoint) => [endpoint.id, endpoint]));
  return deliveries.map((d) => ({ ...d, endpoint: byId.get(d.endpoint_id) ?? { id: d.endpoint_id, url: `endpoint ${d.endpoint_id}` } }));
}

export function CallPage({ params, stream }) {
  const id = Number(params[0]);
  const [run, setRun] = useState(null);
  const [events, setEvents] = useState([]);
  const [deliveries, setDeliveries] = useState([]);
  const [error, setError] = useState(null);
  const [actionError, setActionError] = useState(null);
  const [canceling, setCanceling] = useState(false);

  const load = useCallback(async () => {
    try {
      const [r, e] = await Promise.all([api(`/workflow-runs/${id}`), allEvents(id)]);
      setRun(r);
      setEvents(e);
      setError(null);
      runDeliveries(id).then(setDeliveries, () => undefined);
    } catch (e) {
      setError(e);
    }
  }, [id]);
  const reload = useDebounced(load, 150);
  const readDeliveries = useCallback(() => runDeliveries(id).then(setDeliveries, () => undefined), [id]);
  const reloadDeliveries = useDebounced(readDeliveries, 150);
  useEffect(() => void load(), [load]);
  useEffect(() => stream.subscribe((event) => event.run_id === id && reload()), [stream, id, reload]);
  useEffect(
    () =>
      stream.subscribeDeliveries((event) => {
        if (event.run_id !== id) return;
        // The delivery's status at once from the event; its attempts (and a delivery this page has
        // not listed yet) as the API lists them, read right after.
        setDeliveries((current) => current.map((d) => (d.id === event.delivery_id ? { ...d, status: event.status, next_attempt_at: event.next_attempt_at } : d)));
        reloadDeliveries();
      }),
    [stream, id, reloadDeliveries],
  );

  const cancel = async () => {
    setCanceling(true);
    setActionError(null);
    try {
      setRun(await api(`/workflow-runs/${id}/cancel`, { method: 'POST' }));
      reload();
    } catch (e) {
      setActionError(e);
    } finally {
      setCanceling(false);
    }
  };
  const retry = async (delivery) => {
    setActionError(null);
    try {
      await api(`/webhook-endpoints/${delivery.endpoint.id}/deliveries/${delivery.id}/retry`, { method: 'POST' });
      setDeliveries(await runDeliveries(id));
    } catch (e) {
      setActionError(e);
    }
  };

  if (error) return html`<section><h1>Call</h1><${ErrorBox} error=${error} /><p><${Link} href="/console">Back to calls</${Link}></p></section>`;
  if (!run) return html`<section><h1>Call</h1><p>Loading…</p></section>`;
  return html`<section class="call">
    <p><${Link} href="/console">← Calls</${Link}></p>
    <h1>${run.name}</h1>
    <p class="run-state">State: <${StateBadge} state=${run.state} testid="run-state" /></p>
    ${!isTerminal(run.state)
      ? html`<p><button type="button" class="danger" onClick=${cancel} disabled=${canceling}>Cancel call</button>
          ${run.cancel_requested_at ? html` <span>Cancel requested ${formatTime(run.cancel_requested_at)}</span>` : null}</p>`
      : null}
    <${ErrorBox} error=${actionError} />
    <dl class="facts">
      <dt>Number</dt><dd>${run.phone_number}</dd>
      <dt>Caller ID</dt><dd>${run.caller_id ?? '—'}</dd>
      <dt>Outcome</dt><dd data-testid="run-outcome">${run.outcome_reason ?? '—'}</dd>
      <dt>Provider's reason</dt><dd data-testid="run-provider-status">${run.raw_provider_status ?? '—'}</dd>
      <dt>Provider call id</dt><dd>${run.provider_call_id ?? '—'}</dd>
      <dt>Mode</dt><dd>${run.mode}</dd>
      <dt>Agent</dt><dd>${run.agent_uuid ?? run.workflow_uuid}</dd>
      <dt>Definition version</dt><dd data-testid="definition-version">${run.definition_version}</dd>
      <dt>Route</dt><dd>${run.telephony_configuration_id}</dd>
      <dt>Created</dt><dd>${formatTime(run.created_at)}</dd>
      <dt>Ended</dt><dd>${formatTime(run.ended_at)}</dd>
    </dl>
    <h2>Initial context</h2>
    <pre class="context" data-testid="initial-context">${run.initial_context === null ? 'none' : JSON.stringify(run.initial_context, null, 2)}</pre>
    <h2>Timeline</h2>
    <ol class="timeline" data-testid="timeline">
      ${events.map(
        (event) => html`<li key=${event.seq}>
          <${StateBadge} state=${event.type} /> <time datetime=${event.at}>${formatTime(event.at)}</time>
          ${Object.keys(event.data).length ? html`<code>${JSON.stringify(event.data)}</code>` : null}
        </li>`,
      )}
    </ol>
    <h2>Webhook deliveries</h2>
    ${deliveries.length === 0
      ? html`<p class="empty">No webhook deliveries for this call.</p>`
      : html`<div class="table-wrap"><table>
          <thead><tr><th scope="col">Type</th><th scope="col">Endpoint</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
          <tbody>${deliveries.map(
            (d) => html`<tr key=${d.id} data-testid="delivery-row" data-delivery-id=${d.id}>
              <td>${d.event_type}</td><td class="url">${d.endpoint.url}</td><td data-testid="delivery-status">${d.status}</td>
              <td data-testid="delivery-attempts">${d.attempts.length}${d.attempts.length ? ` (last: ${d.attempts[d.attempts.length - 1].http_status ?? d.attempts[d.attempts.length - 1].error})` : ''}</td>
              <td>${d.status !== 'pending' ? html`<button type="button" class="secondary" onClick=${() => retry(d)} aria-label=${`Retry delivery ${d.id}`}>Retry</button>` : null}</td>
            </tr>`,
          )}</tbody>
        </table></div>`}
  </section>`;
}
