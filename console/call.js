// Call: one run, its facts, outcome, the agent runtime's result and agent.* events, initial context, its timeline, Cancel while it is not over,
// and its webhook deliveries with Retry; kept live from the stream's run events and its
// webhook.delivery events.
import { html, useCallback, useEffect, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
import { useRunStates } from './run-states.js';
import { useDebounced } from './timing.js';
import { callDuration, ErrorBox, formatTime, Link, StateBadge } from './ui.js';
/** @import { PageProps } from './pages.js' */
/** @import { Delivery, Page, Run, RunEvent, WebhookEndpoint } from './types.js' */

/** A delivery with the endpoint it goes to. @typedef {Delivery & { endpoint: { id: number, url: string } }} RunDelivery */

/**
 * Every event of the run, page by page.
 * @param {number} id
 */
async function allEvents(id) {
  /** @type {RunEvent[]} */
  const events = [];
  for (let after = 0; ; ) {
    /** @type {Page<RunEvent>} */
    const page = await api(`/workflow-runs/${id}/events?after=${after}&limit=1000`);
    events.push(...page.data);
    if (page.next_after === null || page.data.length === 0) return events;
    after = page.next_after;
  }
}

/**
 * Every delivery of the run, to every endpoint of the organization (read by run, page by page).
 * @param {number} id
 * @returns {Promise<RunDelivery[]>}
 */
async function runDeliveries(id) {
  /** @type {Page<WebhookEndpoint>} */
  const endpoints = await api('/webhook-endpoints');
  /** @type {Delivery[]} */
  const deliveries = [];
  for (let after = ''; ; ) {
    /** @type {Page<Delivery>} */
    const page = await api(`/webhook-deliveries?run_id=${id}&limit=100${after}`);
    deliveries.push(...page.data);
    if (page.next_after === null || page.data.length === 0) break;
    after = `&after=${page.next_after}`;
  }
  const byId = new Map(endpoints.data.map((endpoint) => [endpoint.id, endpoint]));
  return deliveries.map((d) => ({ ...d, endpoint: byId.get(d.endpoint_id) ?? { id: d.endpoint_id, url: `endpoint ${d.endpoint_id}` } }));
}

/** @param {PageProps} props */
export function CallPage({ params, stream, scopes }) {
  // The deliveries are read with `webhooks`: a key without it is told so instead of shown none.
  const webhooks = scopes.includes('webhooks');
  const states = useRunStates();
  const id = Number(params[0]);
  const [run, setRun] = useState(/** @type {Run | null} */ (null));
  const [events, setEvents] = useState(/** @type {RunEvent[]} */ ([]));
  const [deliveries, setDeliveries] = useState(/** @type {RunDelivery[]} */ ([]));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [actionError, setActionError] = useState(/** @type {unknown} */ (null));
  const [canceling, setCanceling] = useState(false);

  const load = useCallback(async () => {
    try {
      /** @type {Promise<Run>} */
      const reading = api(`/workflow-runs/${id}`);
      const [r, e] = await Promise.all([reading, allEvents(id)]);
      setRun(r);
      setEvents(e);
      setError(null);
      if (webhooks) runDeliveries(id).then(setDeliveries, () => undefined);
    } catch (e) {
      setError(e);
    }
  }, [id, webhooks]);
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
      /** @type {Run} */
      const canceled = await api(`/workflow-runs/${id}/cancel`, { method: 'POST' });
      setRun(canceled);
      reload();
    } catch (e) {
      setActionError(e);
    } finally {
      setCanceling(false);
    }
  };
  /** @param {RunDelivery} delivery */
  const retry = async (delivery) => {
    setActionError(null);
    try {
      await api(`/webhook-endpoints/${delivery.endpoint.id}/deliveries/${delivery.id}/retry`, { method: 'POST' });
      setDeliveries(await runDeliveries(id));
    } catch (e) {
      setActionError(e);
    }
  };

  // What the agent runtime appended (agent.*), apart from the state changes (they are in the timeline too).
  const agentEvents = events.filter((event) => event.type.startsWith('agent.'));
  if (error) return html`<section><h1>Call</h1><${ErrorBox} error=${error} /><p><${Link} href="/console">Back to calls</${Link}></p></section>`;
  if (!run) return html`<section><h1>Call</h1><p>Loading…</p></section>`;
  return html`<section class="call">
    <p><${Link} href="/console">← Calls</${Link}></p>
    <h1>${run.name}</h1>
    <p class="run-state">State: <${StateBadge} state=${run.state} testid="run-state" /></p>
    ${!states.isTerminal(run.state)
      ? html`<p><button type="button" class="danger" onClick=${cancel} disabled=${canceling}>Cancel call</button>
          ${run.cancel_requested_at ? html` <span>Cancel requested ${formatTime(run.cancel_requested_at)}</span>` : null}</p>`
      : null}
    <${ErrorBox} error=${actionError} />
    <dl class="facts">
      <dt>Number</dt><dd>${run.phone_number}</dd>
      <dt>Caller ID</dt><dd>${run.caller_id ?? '—'}</dd>
      <dt>Outcome</dt><dd data-testid="run-outcome">${run.outcome_reason ?? '—'}</dd>
      <dt>Provider's reason</dt><dd data-testid="run-provider-status">${run.raw_provider_status ?? '—'}</dd>
      <dt>Duration</dt><dd data-testid="run-duration">${callDuration(run)}</dd>
      <dt>Answered by</dt><dd data-testid="run-answered-by">${run.answered_by ? `${run.answered_by}${run.raw_answered_by ? ` (${run.raw_answered_by})` : ''}` : '—'}</dd>
      <dt>Provider call id</dt><dd>${run.provider_call_id ?? '—'}</dd>
      <dt>Mode</dt><dd>${run.mode}</dd>
      <dt>Agent</dt><dd>${run.agent_uuid ?? run.workflow_uuid}</dd>
      <dt>Definition version</dt><dd data-testid="definition-version">${run.definition_version}</dd>
      <dt>Route</dt><dd>${run.telephony_configuration_id}</dd>
      <dt>Created</dt><dd>${formatTime(run.created_at)}</dd>
      <dt>Ended</dt><dd>${formatTime(run.ended_at)}</dd>
    </dl>
    <h2>Result</h2>
    ${run.result === null || run.result === undefined
      ? html`<p class="empty" data-testid="run-result">None reported by the agent runtime.</p>`
      : html`<pre class="context" data-testid="run-result">${JSON.stringify(run.result, null, 2)}</pre>`}
    <h2>Agent events</h2>
    ${agentEvents.length === 0
      ? html`<p class="empty">None appended by the agent runtime.</p>`
      : html`<ol class="timeline" data-testid="agent-events">
          ${agentEvents.map(
            (event) => html`<li key=${event.seq}>
              <strong>${event.type}</strong> <time datetime=${event.at}>${formatTime(event.at)}</time>
              ${Object.keys(event.data).length ? html`<code>${JSON.stringify(event.data)}</code>` : null}
            </li>`,
          )}
        </ol>`}
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
    ${!webhooks
      ? html`<p class="empty">This key lacks the <code>webhooks</code> scope: the deliveries are not shown.</p>`
      : deliveries.length === 0
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
