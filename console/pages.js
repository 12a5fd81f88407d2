// Test call (start a call through the test operation and land on its page), Overview (the last
// hour by outcome, queue depth and live calls per route), Webhook endpoints (list, create, rotate,
// deliveries with Retry).
import { html, useCallback, useEffect, useState } from './vendor-htm-preact.js';
import { api, ApiError } from './api.js';
import { ErrorBox, formatTime, navigate, RUN_STATES, StateBadge } from './ui.js';

/**
 * The variable names of the version a test call through `agent` runs: the draft's when the agent
 * is in the draft (the test operation prefers it), else the published version's.
 */
function agentVariables(workflows, agent) {
  const workflow = workflows.find((w) => w.draft_agent_uuids.includes(agent)) ?? workflows.find((w) => w.agent_uuids.includes(agent));
  if (!workflow) return [];
  return workflow.draft_agent_uuids.includes(agent) ? workflow.draft_variables : workflow.variables;
}

/** An initial context naming each variable, as the textarea's placeholder and the parse error's example. */
const contextExample = (names) => JSON.stringify(Object.fromEntries(names.map((name) => [name, '…'])));

export function TestCallPage() {
  const [workflows, setWorkflows] = useState([]);
  const [routes, setRoutes] = useState([]);
  const [form, setForm] = useState({ agent: '', phone: '', context: '', route: '' });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    api('/workflows').then(
      (r) => {
        // An archived workflow cannot be called.
        const active = r.data.filter((w) => w.status === 'active');
        setWorkflows(active);
        const first = active.flatMap((w) => [...w.draft_agent_uuids, ...w.agent_uuids])[0];
        if (first) setForm((f) => ({ ...f, agent: f.agent || first }));
      },
      setError,
    );
    api('/telephony-configurations').then((r) => setRoutes(r.data), setError);
  }, []);
  const set = (name) => (e) => setForm({ ...form, [name]: e.currentTarget.value });
  const variables = agentVariables(workflows, form.agent);
  const example = contextExample(variables);
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    let context = null;
    if (form.context.trim()) {
      try {
        context = JSON.parse(form.context);
      } catch {
        setError(new ApiError(0, { detail: `The initial context must be a JSON object, for example ${example}.` }));
        return;
      }
    }
    setBusy(true);
    try {
      const body = { phone_number: form.phone.trim(), initial_context: context };
      if (form.route) body.telephony_configuration_id = Number(form.route);
      const created = await api(`/agent/test/${encodeURIComponent(form.agent)}`, { method: 'POST', body });
      navigate(`/console/runs/${created.workflow_run_id}`);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<section>
    <h1>Test call</h1>
    <p>Starts a call through the test operation: the agent's draft if it has one, else its published version.</p>
    <form class="stacked" onSubmit=${submit}>
      <label for="agent">Agent</label>
      <select id="agent" required value=${form.agent} onChange=${set('agent')}>
        ${workflows.flatMap((w) => [
          ...w.draft_agent_uuids.map((uuid) => html`<option value=${uuid}>${w.name} (draft v${w.draft_version}) ${uuid}</option>`),
          ...w.agent_uuids.map((uuid) => html`<option value=${uuid}>${w.name} (published v${w.published_version}) ${uuid}</option>`),
        ])}
      </select>
      <label for="phone">Phone number</label>
      <input id="phone" type="tel" required placeholder="+12025550123" value=${form.phone} onInput=${set('phone')} />
      <label for="route">Route</label>
      <select id="route" value=${form.route} onChange=${set('route')}>
        <option value="">The organization's default</option>
        ${routes.map((r) => html`<option value=${String(r.id)}>${r.name} (${r.provider}${r.status === 'active' ? '' : `, ${r.status}`})</option>`)}
      </select>
      <label for="context">Initial context (JSON object, optional)</label>
      <p class="hint" id="context-variables" data-testid="agent-variables">${variables.length ? `This agent's variables: ${variables.join(', ')}.` : 'This agent has no variables.'}</p>
      <textarea id="context" rows="5" spellcheck="false" aria-describedby="context-variables" placeholder=${example} value=${form.context} onInput=${set('context')}></textarea>
      <div class="actions"><button type="submit" disabled=${busy || !form.agent}>Start test call</button></div>
    </form>
    <${ErrorBox} error=${error} />
  </section>`;
}

/** A horizontal bar chart of counts, each bar labelled with its name and number (text, not only colour). */
function BarChart({ label, rows }) {
  const max = Math.max(1, ...rows.map((r) => r.count));
  return html`<figure class="chart">
    <figcaption>${label}</figcaption>
    <ul>
      ${rows.map(
        (r) => html`<li>
          <span class="bar-label"><${StateBadge} state=${r.state} /></span>
          <span class="bar-track"><span class=${`bar state-${r.state}`} style=${{ width: `${(100 * r.count) / max}%` }}></span></span>
          <span class="bar-count">${r.count}</span>
        </li>`,
      )}
    </ul>
  </figure>`;
}

export function OverviewPage({ stream }) {
  const [stats, setStats] = useState(null);
  const [error, setError] = useState(null);
  const load = useCallback(() => api('/stats').then((s) => (setStats(s), setError(null)), setError), []);
  useEffect(() => {
    void load();
    // Queue depth and live calls change without events of this organization's own (other
    // organizations share no route, but a poll keeps the numbers honest); events refresh sooner.
    const timer = setInterval(load, 5_000);
    let pending;
    const stop = stream.subscribe(() => {
      clearTimeout(pending);
      pending = setTimeout(load, 300);
    });
    return () => {
      clearInterval(timer);
      clearTimeout(pending);
      stop();
    };
  }, [load, stream]);
  return html`<section>
    <h1>Overview</h1>
    <${ErrorBox} error=${error} />
    ${stats
      ? html`<p>${stats.total} ${stats.total === 1 ? 'call' : 'calls'} since ${formatTime(stats.since)}.</p>
        <${BarChart} label="Calls in the last hour by state" rows=${RUN_STATES.map((state) => ({ state, count: stats.by_state[state] ?? 0 }))} />
        <h2>Routes</h2>
        <div class="table-wrap"><table>
          <thead><tr><th scope="col">Route</th><th scope="col">Provider</th><th scope="col">Queued</th><th scope="col">Live</th></tr></thead>
          <tbody>${stats.routes.map((r) => html`<tr key=${r.telephony_configuration_id}><td>${r.name}</td><td>${r.provider}</td><td data-testid="route-queued">${r.queued}</td><td data-testid="route-live">${r.live}</td></tr>`)}</tbody>
        </table></div>
        <h2>Outcomes</h2>
        <ul class="outcomes">${stats.by_outcome.map((o) => html`<li><${StateBadge} state=${o.state} /> ${o.outcome_reason ?? '—'}: ${o.count}</li>`)}</ul>`
      : html`<p>Loading…</p>`}
  </section>`;
}

function Deliveries({ endpoint }) {
  const [list, setList] = useState(null);
  const [error, setError] = useState(null);
  const load = useCallback(() => api(`/webhook-endpoints/${endpoint.id}/deliveries?limit=20`).then((r) => setList(r.data), setError), [endpoint.id]);
  useEffect(() => void load(), [load]);
  const retry = async (delivery) => {
    try {
      await api(`/webhook-endpoints/${endpoint.id}/deliveries/${delivery.id}/retry`, { method: 'POST' });
      await load();
    } catch (e) {
      setError(e);
    }
  };
  return html`<div>
    <${ErrorBox} error=${error} />
    ${list === null ? html`<p>Loading…</p>` : list.length === 0 ? html`<p class="empty">No deliveries yet.</p>` : html`<div class="table-wrap"><table>
      <thead><tr><th scope="col">Type</th><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Created</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
      <tbody>${list.map((d) => html`<tr key=${d.id}>
        <td>${d.event_type}</td><td>${d.run_id ?? '—'}</td><td>${d.status}</td><td>${d.attempts.length}</td><td>${formatTime(d.created_at)}</td>
        <td>${d.status !== 'pending' ? html`<button type="button" class="secondary" onClick=${() => retry(d)} aria-label=${`Retry delivery ${d.id}`}>Retry</button>` : null}</td>
      </tr>`)}</tbody>
    </table></div>`}
  </div>`;
}

export function WebhooksPage() {
  const [endpoints, setEndpoints] = useState([]);
  const [form, setForm] = useState({ url: '', description: '' });
  const [secret, setSecret] = useState(null);
  const [open, setOpen] = useState(null);
  const [error, setError] = useState(null);
  const load = useCallback(() => api('/webhook-endpoints').then((r) => setEndpoints(r.data), setError), []);
  useEffect(() => void load(), [load]);
  const create = async (event) => {
    event.preventDefault();
    setError(null);
    try {
      const created = await api('/webhook-endpoints', { method: 'POST', body: { url: form.url.trim(), ...(form.description ? { description: form.description } : {}) } });
      setSecret({ id: created.id, url: created.url, secret: created.secret });
      setForm({ url: '', description: '' });
      await load();
    } catch (e) {
      setError(e);
    }
  };
  const rotate = async (endpoint) => {
    setError(null);
    try {
      const rotated = await api(`/webhook-endpoints/${endpoint.id}/rotate-secret`, { method: 'POST' });
      setSecret({ id: endpoint.id, url: endpoint.url, secret: rotated.secret });
    } catch (e) {
      setError(e);
    }
  };
  return html`<section>
    <h1>Webhook endpoints</h1>
    <form class="stacked" onSubmit=${create} aria-label="New webhook endpoint">
      <label for="webhook-url">Endpoint URL</label>
      <input id="webhook-url" type="url" required placeholder="https://api.example.org/hooks/dialtone" value=${form.url} onInput=${(e) => setForm({ ...form, url: e.currentTarget.value })} />
      <label for="webhook-description">Description (optional)</label>
      <input id="webhook-description" maxlength="500" value=${form.description} onInput=${(e) => setForm({ ...form, description: e.currentTarget.value })} />
      <div class="actions"><button type="submit">Create endpoint</button></div>
    </form>
    <${ErrorBox} error=${error} />
    ${secret
      ? html`<div class="secret" role="status"><p>Signing secret of ${secret.url}, shown only now:</p><code data-testid="webhook-secret">${secret.secret}</code>
          <p><button type="button" class="secondary" onClick=${() => setSecret(null)}>I have stored it</button></p></div>`
      : null}
    ${endpoints.length === 0 ? html`<p class="empty">No webhook endpoints yet.</p>` : null}
    <ul class="endpoints">
      ${endpoints.map(
        (endpoint) => html`<li key=${endpoint.id}>
          <p class="url">${endpoint.url}</p>
          <p>${endpoint.enabled ? 'Enabled' : `Disabled (${endpoint.disabled_reason})`}${endpoint.description ? ` · ${endpoint.description}` : ''} · ${endpoint.events.length ? endpoint.events.join(', ') : 'every event'}</p>
          <div class="actions">
            <button type="button" class="secondary" onClick=${() => rotate(endpoint)}>Rotate secret</button>
            <button type="button" class="secondary" aria-expanded=${open === endpoint.id} onClick=${() => setOpen(open === endpoint.id ? null : endpoint.id)}>${open === endpoint.id ? 'Hide deliveries' : 'Show deliveries'}</button>
          </div>
          ${open === endpoint.id ? html`<${Deliveries} endpoint=${endpoint} />` : null}
        </li>`,
      )}
    </ul>
  </section>`;
}
