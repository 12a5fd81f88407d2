// Webhook endpoints: list and create them (the signing secret shown once), rotate a secret, and
// each endpoint's latest deliveries with Retry.
import { html, useCallback, useEffect, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
import { ErrorBox, fieldSetter, formatTime } from './ui.js';
/** @import { Delivery, Page, WebhookEndpoint } from './types.js' */

/** @param {{ endpoint: WebhookEndpoint }} props */
function Deliveries({ endpoint }) {
  const [list, setList] = useState(/** @type {Delivery[] | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const load = useCallback(async () => {
    try {
      /** @type {Page<Delivery>} */
      const read = await api(`/webhook-endpoints/${endpoint.id}/deliveries?limit=20`);
      setList(read.data);
    } catch (e) {
      setError(e);
    }
  }, [endpoint.id]);
  useEffect(() => void load(), [load]);
  /** @param {Delivery} delivery */
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
  const [endpoints, setEndpoints] = useState(/** @type {WebhookEndpoint[]} */ ([]));
  const [form, setForm] = useState({ url: '', description: '' });
  const [secret, setSecret] = useState(/** @type {{ id: number, url: string, secret: string } | null} */ (null));
  const [open, setOpen] = useState(/** @type {number | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const load = useCallback(async () => {
    try {
      /** @type {Page<WebhookEndpoint>} */
      const read = await api('/webhook-endpoints');
      setEndpoints(read.data);
    } catch (e) {
      setError(e);
    }
  }, []);
  useEffect(() => void load(), [load]);
  const set = fieldSetter(form, setForm);
  /** @param {SubmitEvent} event */
  const create = async (event) => {
    event.preventDefault();
    setError(null);
    try {
      /** @type {WebhookEndpoint & { secret: string }} */
      const created = await api('/webhook-endpoints', { method: 'POST', body: { url: form.url.trim(), ...(form.description ? { description: form.description } : {}) } });
      setSecret({ id: created.id, url: created.url, secret: created.secret });
      setForm({ url: '', description: '' });
      await load();
    } catch (e) {
      setError(e);
    }
  };
  /** @param {WebhookEndpoint} endpoint */
  const rotate = async (endpoint) => {
    setError(null);
    try {
      /** @type {{ secret: string }} */
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
      <input id="webhook-url" type="url" required placeholder="https://api.example.org/hooks/dialtone" value=${form.url} onInput=${set('url')} />
      <label for="webhook-description">Description (optional)</label>
      <input id="webhook-description" maxlength="500" value=${form.description} onInput=${set('description')} />
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
