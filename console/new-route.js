// New route (scope `admin`, and `calls` to read the providers): a telephony configuration created
// with POST /telephony-configurations. The provider is chosen first (from GET /telephony-providers),
// and the form is its fields (route-form.js); a 422's problems are shown beside the field their
// JSON Pointer names, and nothing is created. Once created, its page opens: the credentials typed
// here are never shown again.
import { html, useEffect, useState } from './vendor-htm-preact.js';
import { api, ApiError } from './api.js';
import { FieldProblems, problemsByField, topError } from './field-problems.js';
import { createRouteBody, emptyRouteForm, routeFieldPointers, RouteFields } from './route-form.js';
import { ErrorBox, Link, navigate, valueOf } from './ui.js';
/** @import { TelephonyConfigurationDetails, TelephonyProvider } from './types.js' */

export function NewRoutePage() {
  return html`<${NewRouteForm} />`;
}

function NewRouteForm() {
  const [providers, setProviders] = useState(/** @type {TelephonyProvider[] | null} */ (null));
  const [providerName, setProviderName] = useState('');
  const [form, setForm] = useState(emptyRouteForm);
  const [isDefault, setIsDefault] = useState(false);
  const [problems, setProblems] = useState(/** @type {Record<string, string[]>} */ ({}));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    /** @type {Promise<{ data: TelephonyProvider[] }>} */
    const read = api('/telephony-providers');
    read.then((answer) => {
      setProviders(answer.data);
      setProviderName(answer.data[0]?.name ?? '');
    }, setError);
  }, []);
  if (!providers) return html`<section><h1>New route</h1>${error ? html`<${ErrorBox} error=${error} />` : html`<p>Loading…</p>`}</section>`;
  const provider = providers.find((p) => p.name === providerName);

  /** @param {Event} event */
  const chooseProvider = (event) => {
    // Another provider takes other settings and credentials: what was typed for the last one goes.
    setProviderName(valueOf(event));
    setForm({ ...form, settings: {}, credentials: {}, remove: {} });
    setProblems({});
  };
  /** @param {SubmitEvent} event */
  const submit = async (event) => {
    event.preventDefault();
    if (!provider) return;
    setError(null);
    setProblems({});
    setBusy(true);
    try {
      /** @type {TelephonyConfigurationDetails} */
      const created = await api('/telephony-configurations', { method: 'POST', body: createRouteBody(provider, form, isDefault) });
      navigate(`/console/routes/${created.id}`);
    } catch (e) {
      const found = e instanceof ApiError ? problemsByField(e.errors, routeFieldPointers(provider)) : {};
      setProblems(found);
      setError(topError(e, found));
    } finally {
      setBusy(false);
    }
  };
  return html`<section>
    <p><${Link} href="/console/routes">← Routes</${Link}></p>
    <h1>New route</h1>
    <p>A route to the phone network through one of the providers this service knows. Its settings and credentials are checked against the provider's own schema; credentials are stored encrypted and never shown again.</p>
    <form class="stacked settings" onSubmit=${submit} aria-label="New route" novalidate>
      <${ErrorBox} error=${error} />
      <div class="field">
        <label for="route-provider">Provider</label>
        <select id="route-provider" name="provider" value=${providerName} onChange=${chooseProvider}>
          ${providers.map((p) => html`<option key=${p.name} value=${p.name}>${p.name}</option>`)}
        </select>
        ${provider ? html`<p class="hint">${provider.summary}</p>` : null}
        <${FieldProblems} problems=${problems} field="/provider" />
      </div>
      ${provider ? html`<${RouteFields} provider=${provider} form=${form} setForm=${setForm} problems=${problems} />` : null}
      <label class="check"><input type="checkbox" name="is_default" checked=${isDefault} onChange=${() => setIsDefault(!isDefault)} /> Make it the default route (calls that name no route go through it)</label>
      <${FieldProblems} problems=${problems} field="/is_default" />
      <div class="actions"><button type="submit" disabled=${busy || !provider}>Create route</button></div>
    </form>
  </section>`;
}
