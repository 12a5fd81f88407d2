// A route's page (scope `admin`, and `calls` to read its provider's fields): the telephony
// configuration (GET /telephony-configurations/{id}), its readiness with every problem and its
// JSON Pointer (GET …/readiness, read again after every change), Enable / Disable and Make
// default, and its fields as a form (route-form.js) saved with PATCH: only what changed is sent,
// a 422's problems are shown beside their fields and nothing changes. Credentials are never shown:
// the service sends only whether each is set, and what is typed to replace one is emptied once sent.
import { html, useCallback, useEffect, useState } from './vendor-htm-preact.js';
import { api, ApiError } from './api.js';
import { problemsByField, topError } from './field-problems.js';
import { routeFieldPointers, RouteFields, routeFormOf, updateRouteBody } from './route-form.js';
import { ErrorBox, formatTime, Link } from './ui.js';
/** @import { PageProps } from './pages.js' */
/** @import { RouteForm } from './route-form.js' */
/** @import { TelephonyConfigurationDetails, TelephonyConfigurationReadiness, TelephonyProvider } from './types.js' */

/** @param {PageProps} props */
export function RoutePage({ params }) {
  return html`<${RouteDetails} id=${params[0] ?? ''} />`;
}

/**
 * Every reason the route cannot place calls now, each with the member it is about.
 * @param {{ readiness: TelephonyConfigurationReadiness | null }} props
 */
function ReadinessPanel({ readiness }) {
  return html`<section class="readiness" aria-labelledby="readiness-heading" data-testid="readiness" data-ready=${readiness ? String(readiness.ready) : undefined}>
    <h2 id="readiness-heading">Readiness</h2>
    ${!readiness
      ? html`<p>Loading…</p>`
      : readiness.ready
        ? html`<p><span class="state route-ready">ready</span> A call can be placed through it now.</p>`
        : html`<p><span class="state route-not-ready">not ready</span> Calls through it are refused until each of these is put right:</p>
            <ul class="readiness-problems">${readiness.problems.map(
              (p, i) => html`<li key=${i} data-testid="readiness-problem" data-pointer=${p.pointer}><code>${p.pointer || 'the route'}</code> ${p.detail}</li>`,
            )}</ul>`}
  </section>`;
}

/** @param {{ id: string }} props */
function RouteDetails({ id }) {
  const base = `/telephony-configurations/${id}`;
  const [route, setRoute] = useState(/** @type {TelephonyConfigurationDetails | null} */ (null));
  const [provider, setProvider] = useState(/** @type {TelephonyProvider | null} */ (null));
  const [readiness, setReadiness] = useState(/** @type {TelephonyConfigurationReadiness | null} */ (null));
  const [form, setForm] = useState(/** @type {RouteForm | null} */ (null));
  const [problems, setProblems] = useState(/** @type {Record<string, string[]>} */ ({}));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [actionError, setActionError] = useState(/** @type {unknown} */ (null));
  const [status, setStatus] = useState('');
  const [saveStatus, setSaveStatus] = useState('');
  const [busy, setBusy] = useState(false);
  const readReadiness = useCallback(async () => {
    try {
      setReadiness(await api(`${base}/readiness`));
    } catch (e) {
      setActionError(e);
    }
  }, [base]);
  useEffect(() => {
    (async () => {
      const [read, providers] = await Promise.all([
        /** @type {Promise<TelephonyConfigurationDetails>} */ (api(base)),
        /** @type {Promise<{ data: TelephonyProvider[] }>} */ (api('/telephony-providers')),
      ]);
      const found = providers.data.find((p) => p.name === read.provider);
      if (!found) throw new Error(`The service does not list the provider ${read.provider}.`);
      setRoute(read);
      setForm(routeFormOf(read));
      setProvider(found);
    })().catch(setError);
    void readReadiness();
  }, [base, readReadiness]);
  if (!route || !form || !provider) return html`<section><p><${Link} href="/console/routes">← Routes</${Link}></p><h1>Route</h1>${error ? html`<${ErrorBox} error=${error} />` : html`<p>Loading…</p>`}</section>`;

  /**
   * Enable, Disable or Make default: the route as it now is, and its readiness read again. The form
   * keeps what is being typed in it.
   * @param {'enable' | 'disable' | 'set-default'} verb
   * @param {string} done
   */
  const act = async (verb, done) => {
    setActionError(null);
    setStatus('');
    setSaveStatus('');
    setBusy(true);
    try {
      setRoute(await api(`${base}/${verb}`, { method: 'POST' }));
      setStatus(done);
    } catch (e) {
      setActionError(e);
    } finally {
      setBusy(false);
      await readReadiness();
    }
  };
  /** @param {SubmitEvent} event */
  const save = async (event) => {
    event.preventDefault();
    setError(null);
    setProblems({});
    setSaveStatus('');
    const body = updateRouteBody(provider, route, form);
    if (Object.keys(body).length === 0) {
      setSaveStatus('Nothing changed.');
      return;
    }
    setBusy(true);
    try {
      /** @type {TelephonyConfigurationDetails} */
      const saved = await api(base, { method: 'PATCH', body });
      setRoute(saved);
      // The credentials typed are sent: their inputs are emptied, and only "set" is shown.
      setForm(routeFormOf(saved));
      setSaveStatus('Saved.');
      await readReadiness();
    } catch (e) {
      const found = e instanceof ApiError ? problemsByField(e.errors, routeFieldPointers(provider, route)) : {};
      setProblems(found);
      setError(topError(e, found));
    } finally {
      setBusy(false);
    }
  };
  const active = route.status === 'active';
  return html`<section>
    <p><${Link} href="/console/routes">← Routes</${Link}></p>
    <h1 data-testid="route-name">${route.name}</h1>
    <dl class="facts">
      <dt>Provider</dt><dd>${route.provider}</dd>
      <dt>Status</dt><dd data-testid="route-status"><span class=${`state route-${route.status}`}>${active ? 'enabled' : 'disabled'}</span></dd>
      <dt>Default</dt><dd data-testid="route-default">${route.is_default ? 'yes: calls that name no route go through it' : 'no'}</dd>
      <dt>Credentials</dt><dd>${Object.keys(route.credentials_set).length === 0 ? 'none' : Object.entries(route.credentials_set).map(([name, set]) => `${name}: ${set ? 'set' : 'not set'}`).join(', ')}</dd>
      <dt>Created</dt><dd>${formatTime(route.created_at)}</dd>
      <dt>Updated</dt><dd>${formatTime(route.updated_at)}</dd>
    </dl>
    <div class="actions route-actions">
      ${active
        ? html`<button type="button" class="secondary" disabled=${busy} onClick=${() => act('disable', 'Disabled: new calls cannot use it.')}>Disable</button>`
        : html`<button type="button" class="secondary" disabled=${busy} onClick=${() => act('enable', 'Enabled.')}>Enable</button>`}
      <button type="button" class="secondary" disabled=${busy || route.is_default || !active} onClick=${() => act('set-default', 'It is now the default route.')}>Make default</button>
    </div>
    ${active ? (route.is_default ? html`<p class="hint">Disabling the default route leaves calls that name no route without one until another is made the default.</p>` : null) : html`<p class="hint">A disabled route cannot be the default: enable it first.</p>`}
    <p class="hint" role="status" data-testid="route-action-status">${status}</p>
    <${ErrorBox} error=${actionError} />
    <${ReadinessPanel} readiness=${readiness} />
    <h2>Settings</h2>
    <form class="stacked settings" onSubmit=${save} aria-label="Route settings" novalidate>
      <${ErrorBox} error=${error} />
      <${RouteFields} provider=${provider} form=${form} setForm=${setForm} problems=${problems} route=${route} />
      <div class="actions">
        <button type="submit" disabled=${busy}>Save route</button>
        <button type="button" class="secondary" disabled=${busy} onClick=${() => { setForm(routeFormOf(route)); setProblems({}); setError(null); setSaveStatus(''); }}>Undo changes</button>
      </div>
      <p class="hint" role="status" data-testid="route-save-status">${saveStatus}</p>
    </form>
  </section>`;
}
