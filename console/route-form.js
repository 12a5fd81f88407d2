// A telephony route's fields, shared by the New route page and a route's page: its name, caller
// IDs and pacing, then the settings and credentials its provider takes, generated from the
// provider's definition (GET /telephony-providers lists each member with its type and whether it
// is required), so a provider added to the service needs no change here. Every value is sent as
// typed (an integer's as a number when it is one), and the service checks it against the
// provider's own schema: a 422's problems come back with JSON Pointers (`/settings/port`), shown
// beside their fields. Credentials are write-only: their inputs start empty, are never filled
// from the service (which never sends them), and are emptied once sent; a route's page says only
// whether each is set.
import { html } from './vendor-htm-preact.js';
import { FieldProblems } from './field-problems.js';
import { valueOf } from './ui.js';
/** @import { RouteField, TelephonyConfigurationDetails, TelephonyProvider } from './types.js' */

/**
 * The form: every value a string as typed.
 * @typedef {object} RouteForm
 * @property {string} name
 * @property {string} caller_ids E.164 numbers, comma-separated or one a line
 * @property {string} calls_per_second
 * @property {string} max_concurrent_calls
 * @property {Record<string, string>} settings
 * @property {Record<string, string>} credentials typed here, never read from the service
 * @property {Record<string, boolean>} remove stored credentials to remove
 */

/** @returns {RouteForm} */
export function emptyRouteForm() {
  return { name: '', caller_ids: '', calls_per_second: '', max_concurrent_calls: '', settings: {}, credentials: {}, remove: {} };
}

/**
 * A stored setting as text: strings as they are, numbers and booleans written out.
 * @param {unknown} value
 */
function settingText(value) {
  if (value === null || value === undefined) return '';
  return typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value);
}

/**
 * The route as the form shows it; its credentials are not (and cannot be) among it.
 * @param {TelephonyConfigurationDetails} route
 * @returns {RouteForm}
 */
export function routeFormOf(route) {
  return {
    name: route.name,
    caller_ids: route.caller_ids.join(', '),
    calls_per_second: String(route.calls_per_second),
    max_concurrent_calls: String(route.max_concurrent_calls),
    settings: Object.fromEntries(Object.entries(route.settings).map(([name, value]) => [name, settingText(value)])),
    credentials: {},
    remove: {},
  };
}

/**
 * The settings the form shows: the provider's, then any stored that it does not list (so they can
 * be seen and removed).
 * @param {TelephonyProvider} provider
 * @param {TelephonyConfigurationDetails} [route]
 * @returns {RouteField[]}
 */
function settingFields(provider, route) {
  const listed = new Set(provider.settings.map((f) => f.name));
  const others = Object.keys(route?.settings ?? {}).filter((name) => !listed.has(name));
  return [...provider.settings, ...others.map((name) => ({ name, description: `Not one of ${provider.name}'s settings: the service will say what is wrong with it. Empty it to remove it.`, type: /** @type {const} */ ('string'), required: false }))];
}

/**
 * The credentials the form shows: the provider's, then any stored that it does not list.
 * @param {TelephonyProvider} provider
 * @param {TelephonyConfigurationDetails} [route]
 * @returns {RouteField[]}
 */
function credentialFields(provider, route) {
  const listed = new Set(provider.credentials.map((f) => f.name));
  const others = Object.keys(route?.credentials_set ?? {}).filter((name) => !listed.has(name));
  return [...provider.credentials, ...others.map((name) => ({ name, description: `Not one of ${provider.name}'s credentials.`, type: /** @type {const} */ ('string'), required: false }))];
}

/**
 * A number as typed, or the text itself when it is not one (the service names the problem).
 * @param {string} text
 * @param {boolean} integer
 */
function numberOf(text, integer) {
  const v = text.trim();
  return (integer ? /^-?\d+$/ : /^-?\d+(\.\d+)?$/).test(v) ? Number(v) : v;
}

/**
 * A setting's value as the API takes it.
 * @param {RouteField} field
 * @param {string} text
 */
function settingValue(field, text) {
  return field.type === 'integer' ? numberOf(text, true) : text.trim();
}

/** @param {string} text */
function callerIdsOf(text) {
  return text.split(/[\s,]+/).filter(Boolean);
}

/**
 * The fields problems are shown beside, most specific first (problemsByField).
 * @param {TelephonyProvider | undefined} provider
 * @param {TelephonyConfigurationDetails} [route]
 */
export function routeFieldPointers(provider, route) {
  const settings = provider ? settingFields(provider, route).map((f) => `/settings/${f.name}`) : [];
  const credentials = provider ? credentialFields(provider, route).map((f) => `/credentials/${f.name}`) : [];
  return ['/name', '/provider', '/caller_ids', '/calls_per_second', '/max_concurrent_calls', '/is_default', ...settings, '/settings', ...credentials, '/credentials'];
}

/**
 * POST /telephony-configurations's body: what was filled in (empty pacing takes the API's defaults).
 * @param {TelephonyProvider} provider
 * @param {RouteForm} form
 * @param {boolean} isDefault
 */
export function createRouteBody(provider, form, isDefault) {
  /** @type {Record<string, unknown>} */
  const settings = {};
  for (const field of provider.settings) {
    const text = form.settings[field.name] ?? '';
    if (text.trim() !== '') settings[field.name] = settingValue(field, text);
  }
  /** @type {Record<string, unknown>} */
  const credentials = {};
  // Sent exactly as typed: a secret's spaces may be its own.
  for (const field of provider.credentials) if (form.credentials[field.name]) credentials[field.name] = form.credentials[field.name];
  const callerIds = callerIdsOf(form.caller_ids);
  return {
    name: form.name.trim(),
    provider: provider.name,
    ...(callerIds.length ? { caller_ids: callerIds } : {}),
    ...(isDefault ? { is_default: true } : {}),
    ...(form.calls_per_second.trim() ? { calls_per_second: numberOf(form.calls_per_second, false) } : {}),
    ...(form.max_concurrent_calls.trim() ? { max_concurrent_calls: numberOf(form.max_concurrent_calls, true) } : {}),
    ...(Object.keys(settings).length ? { settings } : {}),
    ...(Object.keys(credentials).length ? { credentials } : {}),
  };
}

/**
 * PATCH /telephony-configurations/{id}'s body: only what differs from the route as read, so two
 * admins changing different members do not undo each other. A setting emptied is removed (null);
 * a credential is sent only when one was typed (replacing it) or ticked for removal (null).
 * @param {TelephonyProvider} provider
 * @param {TelephonyConfigurationDetails} route
 * @param {RouteForm} form
 */
export function updateRouteBody(provider, route, form) {
  const read = routeFormOf(route);
  /** @type {Record<string, unknown>} */
  const body = {};
  if (form.name.trim() !== read.name) body.name = form.name.trim();
  const callerIds = callerIdsOf(form.caller_ids);
  if (JSON.stringify(callerIds) !== JSON.stringify(route.caller_ids)) body.caller_ids = callerIds;
  if (form.calls_per_second.trim() !== read.calls_per_second) body.calls_per_second = numberOf(form.calls_per_second, false);
  if (form.max_concurrent_calls.trim() !== read.max_concurrent_calls) body.max_concurrent_calls = numberOf(form.max_concurrent_calls, true);
  /** @type {Record<string, unknown>} */
  const settings = {};
  for (const field of settingFields(provider, route)) {
    const text = form.settings[field.name] ?? '';
    if (text === (read.settings[field.name] ?? '')) continue;
    settings[field.name] = text.trim() === '' ? null : settingValue(field, text);
  }
  if (Object.keys(settings).length) body.settings = settings;
  /** @type {Record<string, unknown>} */
  const credentials = {};
  for (const field of credentialFields(provider, route)) {
    if (form.remove[field.name]) credentials[field.name] = null;
    else if (form.credentials[field.name]) credentials[field.name] = form.credentials[field.name];
  }
  if (Object.keys(credentials).length) body.credentials = credentials;
  return body;
}

/**
 * One setting's input: a text area for a PEM, else one line.
 * @param {{ field: RouteField, form: RouteForm, setForm: (form: RouteForm) => void, problems: Record<string, string[]> }} props
 */
function SettingField({ field, form, setForm, problems }) {
  const id = `route-setting-${field.name}`;
  const onInput = (/** @type {Event} */ e) => setForm({ ...form, settings: { ...form.settings, [field.name]: valueOf(e) } });
  const value = form.settings[field.name] ?? '';
  return html`<div class="field">
    <label for=${id}>${field.name}${field.required ? ' (required)' : ''}</label>
    ${field.name.endsWith('_pem')
      ? html`<textarea id=${id} name=${`setting-${field.name}`} rows="4" spellcheck="false" value=${value} onInput=${onInput}></textarea>`
      : html`<input id=${id} name=${`setting-${field.name}`} inputmode=${field.type === 'integer' ? 'numeric' : undefined} spellcheck="false" value=${value} onInput=${onInput} />`}
    <p class="hint">${field.description}</p>
    <${FieldProblems} problems=${problems} field=${`/settings/${field.name}`} />
  </div>`;
}

/**
 * One credential's input: a password field that starts empty whatever is stored; on a route's page
 * it says whether the credential is set, and a set one can be removed.
 * @param {{ field: RouteField, form: RouteForm, setForm: (form: RouteForm) => void, problems: Record<string, string[]>, stored: boolean | undefined }} props
 */
function CredentialField({ field, form, setForm, problems, stored }) {
  const id = `route-credential-${field.name}`;
  const removing = form.remove[field.name] === true;
  return html`<div class="field">
    <label for=${id}>${field.name}${field.required ? ' (required)' : ''}</label>
    ${stored === undefined
      ? null
      : html`<p class="hint" data-testid="credential-status" data-credential=${field.name}>${stored ? 'Set: type a new value to replace it, or leave empty to keep it.' : 'Not set.'}</p>`}
    <input
      id=${id}
      name=${`credential-${field.name}`}
      type="password"
      autocomplete="new-password"
      spellcheck="false"
      disabled=${removing}
      placeholder=${stored ? '(set: hidden)' : ''}
      value=${form.credentials[field.name] ?? ''}
      onInput=${(/** @type {Event} */ e) => setForm({ ...form, credentials: { ...form.credentials, [field.name]: valueOf(e) } })}
    />
    ${stored
      ? html`<label class="check"><input type="checkbox" name=${`remove-${field.name}`} checked=${removing} onChange=${() => setForm({ ...form, remove: { ...form.remove, [field.name]: !removing }, credentials: { ...form.credentials, [field.name]: '' } })} /> Remove ${field.name}</label>`
      : null}
    <p class="hint">${field.description}</p>
    <${FieldProblems} problems=${problems} field=${`/credentials/${field.name}`} />
  </div>`;
}

/**
 * The route's fields. `route` is given on a route's page (its stored settings and which credentials
 * are set), not on the New route page.
 * @param {{ provider: TelephonyProvider, form: RouteForm, setForm: (form: RouteForm) => void, problems: Record<string, string[]>, route?: TelephonyConfigurationDetails }} props
 */
export function RouteFields({ provider, form, setForm, problems, route }) {
  /** @param {'name' | 'caller_ids' | 'calls_per_second' | 'max_concurrent_calls'} name */
  const text = (name) => (/** @type {Event} */ e) => setForm({ ...form, [name]: valueOf(e) });
  const settings = settingFields(provider, route);
  const credentials = credentialFields(provider, route);
  return html`
    <div class="field">
      <label for="route-name">Name</label>
      <input id="route-name" name="name" maxlength="100" value=${form.name} onInput=${text('name')} />
      <${FieldProblems} problems=${problems} field="/name" />
    </div>
    <div class="field">
      <label for="route-caller-ids">Caller IDs</label>
      <input id="route-caller-ids" name="caller_ids" placeholder="+12025550100" value=${form.caller_ids} onInput=${text('caller_ids')} />
      <p class="hint">E.164 numbers, comma-separated; the first is the caller ID of calls through this route.</p>
      <${FieldProblems} problems=${problems} field="/caller_ids" />
    </div>
    <div class="inline-fields">
      <label for="route-cps">Calls per second</label>
      <input id="route-cps" name="calls_per_second" inputmode="decimal" placeholder=${route ? '' : 'default'} value=${form.calls_per_second} onInput=${text('calls_per_second')} />
      <label for="route-max-concurrent">Calls at once</label>
      <input id="route-max-concurrent" name="max_concurrent_calls" inputmode="numeric" placeholder=${route ? '' : 'default'} value=${form.max_concurrent_calls} onInput=${text('max_concurrent_calls')} />
    </div>
    <p class="hint">Across every node.${route ? '' : ' Empty: the service\'s defaults.'}</p>
    <${FieldProblems} problems=${problems} field="/calls_per_second" />
    <${FieldProblems} problems=${problems} field="/max_concurrent_calls" />
    <fieldset data-testid="route-settings">
      <legend>${provider.name} settings</legend>
      ${settings.length === 0 ? html`<p class="hint">${provider.name} takes no settings.</p>` : settings.map((field) => html`<${SettingField} key=${field.name} field=${field} form=${form} setForm=${setForm} problems=${problems} />`)}
      <${FieldProblems} problems=${problems} field="/settings" />
    </fieldset>
    <fieldset data-testid="route-credentials">
      <legend>${provider.name} credentials</legend>
      ${credentials.length === 0
        ? html`<p class="hint">${provider.name} takes no credentials.</p>`
        : html`<p class="hint">Write-only: stored encrypted and never shown again, here or anywhere else.</p>
            ${credentials.map((field) => html`<${CredentialField} key=${field.name} field=${field} form=${form} setForm=${setForm} problems=${problems} stored=${route ? route.credentials_set[field.name] === true : undefined} />`)}`}
      <${FieldProblems} problems=${problems} field="/credentials" />
    </fieldset>`;
}
