// Organization settings (scope `admin`): GET /organization shown as a form, PATCH /organization
// with what was changed only (so two admins editing different settings do not undo each other).
// An empty limit follows the service's default, shown beside it. Calling hours are edited as a
// time zone, what happens outside, and per weekday its windows (`09:00-12:00, 13:00-20:00`), not
// as JSON. A 422's problems are shown next to the field their JSON Pointer names; a problem no
// field owns is shown at the top.
import { html, useEffect, useState } from './vendor-htm-preact.js';
import { api, ApiError } from './api.js';
import { FieldProblems, problemsByField, topError } from './field-problems.js';
import { ErrorBox, valueOf } from './ui.js';
/** @import { PageProps } from './pages.js' */
/** @import { CallingHours, OrganizationSettings } from './types.js' */

const DAYS = /** @type {const} */ (['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun']);
const DAY_NAMES = { mon: 'Monday', tue: 'Tuesday', wed: 'Wednesday', thu: 'Thursday', fri: 'Friday', sat: 'Saturday', sun: 'Sunday' };
const LIMITS = /** @type {const} */ ([
  ['rate_limit_per_second', 'Requests per second, all keys together', '0: no limit'],
  ['key_rate_limit_per_second', 'Requests per second, per key', '0: no limit'],
  ['max_queued_runs', 'Most runs queued at once', ''],
  ['retention_days', 'Days ended runs are kept', '0: kept forever'],
]);

/**
 * The form: every field a string as typed.
 * @typedef {object} Form
 * @property {string} rate_limit_per_second
 * @property {string} key_rate_limit_per_second
 * @property {string} max_queued_runs
 * @property {string} retention_days
 * @property {boolean} cap_on
 * @property {string} max_calls
 * @property {string} window_seconds
 * @property {boolean} hours_on
 * @property {string} timezone
 * @property {'defer' | 'refuse'} outside
 * @property {Record<string, string>} windows per day, comma-separated
 */

/** @param {OrganizationSettings} s @returns {Form} */
function formOf(s) {
  const text = (/** @type {number | null} */ n) => (n === null ? '' : String(n));
  return {
    rate_limit_per_second: text(s.rate_limit_per_second),
    key_rate_limit_per_second: text(s.key_rate_limit_per_second),
    max_queued_runs: text(s.max_queued_runs),
    retention_days: text(s.retention_days),
    cap_on: s.number_cap !== null,
    max_calls: text(s.number_cap?.max_calls ?? null),
    window_seconds: text(s.number_cap?.window_seconds ?? null),
    hours_on: s.calling_hours !== null,
    timezone: s.calling_hours?.timezone ?? Intl.DateTimeFormat().resolvedOptions().timeZone,
    outside: s.calling_hours?.outside ?? 'refuse',
    windows: Object.fromEntries(DAYS.map((d) => [d, (s.calling_hours?.windows[d] ?? []).join(', ')])),
  };
}

/**
 * A number as typed: empty is null (the default, or off); anything else not an integer is sent as
 * typed, so the service names the problem at its pointer.
 * @param {string} value
 */
function numberOf(value) {
  const v = value.trim();
  if (v === '') return null;
  return /^-?\d+$/.test(v) ? Number(v) : v;
}

/**
 * The settings the form describes, in the API's shape.
 * @param {Form} f
 */
function settingsOf(f) {
  /** @type {CallingHours['windows']} */
  const windows = {};
  for (const d of DAYS) {
    const list = (f.windows[d] ?? '').split(',').map((w) => w.trim()).filter(Boolean);
    if (list.length) windows[d] = list;
  }
  return {
    rate_limit_per_second: numberOf(f.rate_limit_per_second),
    key_rate_limit_per_second: numberOf(f.key_rate_limit_per_second),
    max_queued_runs: numberOf(f.max_queued_runs),
    retention_days: numberOf(f.retention_days),
    number_cap: f.cap_on ? { max_calls: numberOf(f.max_calls), window_seconds: numberOf(f.window_seconds) } : null,
    calling_hours: f.hours_on ? { timezone: f.timezone.trim(), outside: f.outside, windows } : null,
  };
}

/**
 * The members of `next` that differ from `current`: the PATCH body.
 * @param {Record<string, unknown>} current
 * @param {Record<string, unknown>} next
 */
function changes(current, next) {
  return Object.fromEntries(Object.entries(next).filter(([name, value]) => JSON.stringify(value) !== JSON.stringify(current[name] ?? null)));
}

/** The fields problems are shown beside, most specific first (a pointer goes to the first that starts it). */
const FIELDS = [
  ...DAYS.map((d) => `/calling_hours/windows/${d}`),
  '/calling_hours/timezone',
  '/calling_hours/outside',
  '/calling_hours',
  '/number_cap/max_calls',
  '/number_cap/window_seconds',
  '/number_cap',
  ...LIMITS.map(([name]) => `/${name}`),
];

/** @param {PageProps} _props */
export function OrganizationPage(_props) {
  const [settings, setSettings] = useState(/** @type {OrganizationSettings | null} */ (null));
  const [form, setForm] = useState(/** @type {Form | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [problems, setProblems] = useState(/** @type {Record<string, string[]>} */ ({}));
  const [status, setStatus] = useState('');
  const [busy, setBusy] = useState(false);
  /** @param {OrganizationSettings} read */
  const show = (read) => {
    setSettings(read);
    setForm(formOf(read));
  };
  useEffect(() => {
    api('/organization').then((read) => show(/** @type {OrganizationSettings} */ (read)), setError);
  }, []);
  if (!settings || !form) return html`<section><h1>Organization settings</h1>${error ? html`<${ErrorBox} error=${error} />` : html`<p>Loading…</p>`}</section>`;

  /** @param {Partial<Form>} change */
  const set = (change) => setForm({ ...form, ...change });
  /** @param {keyof Form} name */
  const text = (name) => (/** @type {Event} */ e) => set({ [name]: valueOf(e) });
  /** @param {SubmitEvent} event */
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    setProblems({});
    setStatus('');
    const body = changes(/** @type {Record<string, unknown>} */ (/** @type {unknown} */ (settings)), settingsOf(form));
    if (Object.keys(body).length === 0) {
      setStatus('Nothing changed.');
      return;
    }
    setBusy(true);
    try {
      show(await api('/organization', { method: 'PATCH', body }));
      setStatus('Saved.');
    } catch (e) {
      const found = e instanceof ApiError ? problemsByField(e.errors, FIELDS) : {};
      setProblems(found);
      setError(topError(e, found));
    } finally {
      setBusy(false);
    }
  };
  const defaults = /** @type {Record<string, number>} */ (settings.defaults);
  return html`<section>
    <h1>Organization settings</h1>
    <p>${settings.name}: its own limits, the per-number cap, calling hours and retention. An empty limit follows the service's default. Changes reach every node within a second or so (LOOKUP_CACHE_TTL_MS) and are recorded in the audit log.</p>
    <form class="stacked settings" onSubmit=${submit} aria-label="Organization settings" novalidate>
      <${ErrorBox} error=${error} />
      <h2>Limits</h2>
      ${LIMITS.map(
        ([name, label, hint]) => html`<div key=${name} class="field">
          <label for=${`org-${name}`}>${label}</label>
          <input id=${`org-${name}`} name=${name} inputmode="numeric" placeholder=${`default: ${defaults[name]}`} value=${form[name]} onInput=${text(name)} />
          <p class="hint">Empty: the service's default (${defaults[name]})${hint ? `; ${hint}` : ''}.</p>
          <${FieldProblems} problems=${problems} field=${`/${name}`} />
        </div>`,
      )}
      <h2>Per-number cap</h2>
      <label class="check"><input type="checkbox" name="cap_on" checked=${form.cap_on} onChange=${() => set({ cap_on: !form.cap_on })} /> Limit the calls to one number</label>
      <${FieldProblems} problems=${problems} field="/number_cap" />
      ${form.cap_on
        ? html`<div class="inline-fields">
            <label for="org-max-calls">Max calls</label><input id="org-max-calls" name="max_calls" inputmode="numeric" value=${form.max_calls} onInput=${text('max_calls')} />
            <label for="org-window">per window of (seconds)</label><input id="org-window" name="window_seconds" inputmode="numeric" value=${form.window_seconds} onInput=${text('window_seconds')} />
          </div>
          <${FieldProblems} problems=${problems} field="/number_cap/max_calls" />
          <${FieldProblems} problems=${problems} field="/number_cap/window_seconds" />`
        : null}
      <h2>Calling hours</h2>
      <label class="check"><input type="checkbox" name="hours_on" checked=${form.hours_on} onChange=${() => set({ hours_on: !form.hours_on })} /> Hold calls to hours of the callee's local time</label>
      <${FieldProblems} problems=${problems} field="/calling_hours" />
      ${form.hours_on
        ? html`<div class="field">
              <label for="org-timezone">Time zone where the callee's is unknown</label>
              <input id="org-timezone" name="timezone" placeholder="America/New_York" value=${form.timezone} onInput=${text('timezone')} />
              <${FieldProblems} problems=${problems} field="/calling_hours/timezone" />
            </div>
            <div class="field">
              <label for="org-outside">Outside the hours</label>
              <select id="org-outside" name="outside" value=${form.outside} onChange=${text('outside')}>
                <option value="refuse">refuse the call (422 outside_calling_hours)</option>
                <option value="defer">defer it to the next window</option>
              </select>
              <${FieldProblems} problems=${problems} field="/calling_hours/outside" />
            </div>
            <fieldset class="windows">
              <legend>Windows (HH:MM-HH:MM, comma-separated; an empty day has no calls)</legend>
              ${DAYS.map(
                (d) => html`<div key=${d} class="day">
                  <label for=${`org-day-${d}`}>${DAY_NAMES[d]}</label>
                  <input id=${`org-day-${d}`} name=${`windows-${d}`} placeholder="09:00-17:00" value=${form.windows[d]} onInput=${(/** @type {Event} */ e) => set({ windows: { ...form.windows, [d]: valueOf(e) } })} />
                  <${FieldProblems} problems=${problems} field=${`/calling_hours/windows/${d}`} />
                </div>`,
              )}
            </fieldset>`
        : null}
      <div class="actions">
        <button type="submit" disabled=${busy}>Save settings</button>
        <button type="button" class="secondary" disabled=${busy} onClick=${() => { setForm(formOf(settings)); setProblems({}); setError(null); setStatus(''); }}>Undo changes</button>
      </div>
      <p class="hint" role="status" data-testid="settings-status">${status}</p>
    </form>
  </section>`;
}
