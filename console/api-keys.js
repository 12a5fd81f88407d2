// API keys (scope `admin`): the organization's keys, oldest first, paged, with their scopes and
// when each was created, last used and revoked; a form to create one with the scopes ticked (its
// secret shown once, with a copy button: the service stores only its hash), and Revoke, which asks
// once more since a revoked key cannot be used again.
import { html, useCallback, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
import { Pager, useCursorPages } from './paging.js';
import { ErrorBox, formatTime, valueOf } from './ui.js';
/** @import { CursorPages } from './paging.js' */
/** @import { PageProps } from './pages.js' */
/** @import { ApiKey, Scope } from './types.js' */

const PAGE_SIZE = 20;

/**
 * The scopes a key can hold, with what each allows (docs/api.md, "Scopes").
 * @type {{ scope: Scope, label: string }[]}
 */
const SCOPES = [
  { scope: 'calls', label: 'place calls; read runs, stats and the event stream' },
  { scope: 'campaigns', label: 'campaigns, their contacts and the suppression list' },
  { scope: 'webhooks', label: 'webhook endpoints and their deliveries' },
  { scope: 'admin', label: 'administer the organization: keys, agents, routes, settings, audit log; erasure' },
];

/**
 * The secret of the key just created, shown once with a copy button.
 * @param {{ created: ApiKey & { key: string }, onDone: () => void }} props
 */
function CreatedKey({ created, onDone }) {
  const [copied, setCopied] = useState(/** @type {boolean | null} */ (null));
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(created.key);
      setCopied(true);
    } catch {
      // No clipboard (not a secure context, or refused): the text can still be selected.
      setCopied(false);
    }
  };
  return html`<div class="secret" role="status" data-testid="created-key">
    <p>The key <strong>${created.name}</strong> was created. Copy its secret now: <strong>you will not see it again</strong> (the service keeps only its hash).</p>
    <code data-testid="created-key-secret">${created.key}</code>
    <div class="actions">
      <button type="button" onClick=${copy}>Copy key</button>
      <button type="button" class="secondary" onClick=${onDone}>I have stored it</button>
    </div>
    <p class="hint" aria-live="polite">${copied === true ? 'Copied to the clipboard.' : copied === false ? 'The browser refused the clipboard: select the key and copy it.' : ''}</p>
  </div>`;
}

/** @param {{ onCreated: (key: ApiKey & { key: string }) => void }} props */
function CreateKey({ onCreated }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState(/** @type {Scope[]} */ (['calls']));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [busy, setBusy] = useState(false);
  /** @param {Scope} scope */
  const toggle = (scope) => setScopes(scopes.includes(scope) ? scopes.filter((s) => s !== scope) : [...scopes, scope]);
  /** @param {SubmitEvent} event */
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    setBusy(true);
    try {
      /** @type {ApiKey & { key: string }} */
      const created = await api('/api-keys', { method: 'POST', body: { name: name.trim(), scopes: SCOPES.map((s) => s.scope).filter((s) => scopes.includes(s)) } });
      setName('');
      onCreated(created);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="stacked" onSubmit=${submit} aria-label="New API key">
    <label for="key-name">Name</label>
    <input id="key-name" required maxlength="100" placeholder="crm" value=${name} onInput=${(/** @type {Event} */ e) => setName(valueOf(e))} />
    <fieldset class="scopes">
      <legend>Scopes</legend>
      ${SCOPES.map(
        ({ scope, label }) => html`<label key=${scope} class="check"><input type="checkbox" name="scopes" value=${scope} checked=${scopes.includes(scope)} onChange=${() => toggle(scope)} />
          <code>${scope}</code> <span class="hint">${label}</span></label>`,
      )}
    </fieldset>
    ${scopes.length === 0 ? html`<p class="hint">Tick at least one scope: a key that can do nothing is refused.</p>` : null}
    <div class="actions"><button type="submit" disabled=${busy || scopes.length === 0}>Create key</button></div>
    <${ErrorBox} error=${error} />
  </form>`;
}

/** @param {PageProps} _props */
export function ApiKeysPage(_props) {
  /** @type {CursorPages<ApiKey>} */
  const pages = useCursorPages('/api-keys', PAGE_SIZE);
  const { page, error, setError, load } = pages;
  const [created, setCreated] = useState(/** @type {(ApiKey & { key: string }) | null} */ (null));
  const [confirming, setConfirming] = useState(/** @type {number | null} */ (null));
  const [busy, setBusy] = useState(false);
  const focusOnMount = useCallback((/** @type {HTMLElement | null} */ el) => el?.focus(), []);
  /** @param {ApiKey & { key: string }} key */
  const onCreated = (key) => {
    setCreated(key);
    void load();
  };
  /** @param {ApiKey} key */
  const revoke = async (key) => {
    setConfirming(null);
    setError(null);
    setBusy(true);
    try {
      await api(`/api-keys/${key.id}/revoke`, { method: 'POST' });
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
      await load();
    }
  };
  return html`<section>
    <h1>API keys</h1>
    <p>Each key holds the scopes it was given: a CRM's key can place calls and nothing else. The secret is shown once, when the key is created.</p>
    <div class="forms">
      <div><h2>New key</h2><${CreateKey} onCreated=${onCreated} /></div>
      <div>${created ? html`<${CreatedKey} created=${created} onDone=${() => setCreated(null)} />` : null}</div>
    </div>
    <h2>Keys</h2>
    <${ErrorBox} error=${error} />
    ${page === null
      ? html`<p>Loading…</p>`
      : html`<div class="table-wrap"><table class="cards">
          <caption class="visually-hidden">API keys, oldest first</caption>
          <thead><tr><th scope="col">Name</th><th scope="col">Prefix</th><th scope="col">Scopes</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Revoked</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
          <tbody>${page.data.map(
            (k) => html`<tr key=${k.id} data-testid="key-row" data-id=${k.id}>
              <td data-label="Name" class="reason" data-testid="key-name-cell">${k.name}</td>
              <td data-label="Prefix"><code>${k.prefix}</code></td>
              <td data-label="Scopes" data-testid="key-scopes">${k.scopes.join(', ')}</td>
              <td data-label="Created">${formatTime(k.created_at)}</td>
              <td data-label="Last used">${k.last_used_at ? formatTime(k.last_used_at) : 'never'}</td>
              <td data-label="Revoked" data-testid="key-revoked">${k.revoked_at ? formatTime(k.revoked_at) : '—'}</td>
              <td><div class="actions">${k.revoked_at
                ? null
                : confirming === k.id
                  ? html`<button type="button" class="danger" ref=${focusOnMount} disabled=${busy} aria-label=${`Confirm: revoke ${k.name}`} onClick=${() => revoke(k)}>Confirm revoke</button>
                      <button type="button" class="secondary" aria-label=${`Keep ${k.name}`} onClick=${() => setConfirming(null)}>Keep</button>`
                  : html`<button type="button" class="secondary" disabled=${busy} aria-label=${`Revoke ${k.name}`} onClick=${() => setConfirming(k.id)}>Revoke</button>`}</div></td>
            </tr>`,
          )}</tbody>
        </table></div>`}
    ${confirming !== null ? html`<p class="hint" role="status">A revoked key is refused from then on (by every node once LOOKUP_CACHE_TTL_MS, 1 s by default, has passed); it cannot be used again. A key may revoke itself: this console then signs out.</p>` : null}
    <${Pager} pages=${pages} />
  </section>`;
}
