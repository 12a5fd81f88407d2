// New campaign (/console/campaigns/new): a campaign from a CSV file. The file is read in the
// browser; the operator says which column is the phone number, which become contact variables
// (the agent's initial_context) and which is a contact's time zone, and sets the agent, the route,
// the schedule, the retries, the pacing and the circuit breaker (what POST /campaigns takes:
// docs/campaigns.md; a campaign's own answering-machine settings are left to the API). Create
// makes the campaign (a draft), then adds the contacts as a CSV rebuilt from the mapping (a header
// the API reads: phone_number, the variables, timezone), in parts of at most CONTACTS_PER_REQUEST
// rows, and opens the campaign's page with the import's report. Nothing is started by itself.
import { html, useEffect, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
import { rememberImport } from './campaign.js';
import { csvLine, parseCsv } from './csv.js';
import { ErrorBox, fieldSetter, fileOf, Link, navigate, valueOf } from './ui.js';
/** @import { PageProps } from './pages.js' */
/** @import { Campaign, ContactsReport, Page, TelephonyConfiguration, Workflow } from './types.js' */

/**
 * Rows sent per request, well under the service's default CAMPAIGN_CONTACTS_MAX_PER_REQUEST
 * (10 000), so a large file goes in several requests each far from the limits.
 */
const CONTACTS_PER_REQUEST = 5_000;
/** Rows of the file shown as a preview under the mapping. */
const PREVIEW_ROWS = 3;
const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
/** The run states (and `machine`) a retry may be earned by: RETRY_CONDITIONS in docs/campaigns.md. */
const RETRY_ON = ['busy', 'no_answer', 'failed', 'rejected', 'expired', 'machine'];
const DEFAULT_RETRY_ON = ['busy', 'no_answer', 'failed'];

/** @typedef {'phone' | 'variable' | 'timezone' | 'ignore'} Role */

/**
 * What a column is used as at first, from its header: the phone number and the time zone by their
 * usual names, every other column a variable named after its header.
 * @param {string[]} header
 * @returns {Role[]}
 */
function guessRoles(header) {
  const names = header.map((h) => h.trim().toLowerCase());
  let phone = names.findIndex((n) => ['phone_number', 'phone', 'number', 'mobile', 'telephone'].includes(n));
  if (phone < 0) phone = 0;
  return names.map((n, i) => (i === phone ? 'phone' : n === 'timezone' || n === 'time_zone' ? 'timezone' : n === '' ? 'ignore' : 'variable'));
}

/**
 * What is wrong with a mapping, or null.
 * @param {string[]} header
 * @param {Role[]} roles
 */
function mappingProblem(header, roles) {
  if (roles.filter((r) => r === 'phone').length !== 1) return 'Choose exactly one column as the phone number.';
  if (roles.filter((r) => r === 'timezone').length > 1) return 'Choose at most one column as the time zone.';
  const variables = header.filter((_, i) => roles[i] === 'variable').map((h) => h.trim());
  if (variables.some((v) => v === '')) return 'A column used as a variable needs a header (its name).';
  if (variables.some((v) => v === 'phone_number' || v === 'timezone')) return 'A variable cannot be named phone_number or timezone.';
  if (new Set(variables).size !== variables.length) return 'Two variable columns have the same header.';
  return null;
}

/**
 * The contacts as CSV for the API, in parts: each part's header and its rows.
 * @param {string[]} header
 * @param {string[][]} rows
 * @param {Role[]} roles
 */
function contactParts(header, rows, roles) {
  const phone = roles.indexOf('phone');
  const timezone = roles.indexOf('timezone');
  const variables = roles.flatMap((r, i) => (r === 'variable' ? [i] : []));
  const head = csvLine(['phone_number', ...variables.map((i) => header[i]?.trim()), ...(timezone >= 0 ? ['timezone'] : [])]);
  /** @type {string[]} */
  const parts = [];
  for (let start = 0; start < rows.length; start += CONTACTS_PER_REQUEST) {
    let text = head;
    for (const row of rows.slice(start, start + CONTACTS_PER_REQUEST)) {
      text += csvLine([row[phone], ...variables.map((i) => row[i]), ...(timezone >= 0 ? [row[timezone]] : [])]);
    }
    parts.push(text);
  }
  return parts;
}

/**
 * The reports of the parts as one, each invalid line numbered as in the whole file.
 * @param {ContactsReport[]} reports
 * @returns {ContactsReport}
 */
function mergeReports(reports) {
  return {
    added: reports.reduce((n, r) => n + r.added, 0),
    duplicates: reports.reduce((n, r) => n + r.duplicates, 0),
    invalid_count: reports.reduce((n, r) => n + (r.invalid_count ?? r.invalid.length), 0),
    invalid: reports.flatMap((r, part) => r.invalid.map((i) => (i.line !== undefined ? { ...i, line: i.line + part * CONTACTS_PER_REQUEST } : i))),
  };
}

const EMPTY = {
  name: '',
  agent: '',
  mode: 'published',
  route: '',
  max_concurrent_calls: '',
  calls_per_second: '',
  starts_at: '',
  ends_at: '',
  timezone: '',
  windows: '',
  max_attempts: '1',
  delay_seconds: '600',
  failure_ratio: '',
  window_seconds: '',
  min_calls: '',
};

/**
 * The request body from the form, leaving out what the operator left empty (the API's defaults apply).
 * @param {typeof EMPTY} form
 * @param {string[]} retryOn
 * @param {string[]} days
 */
function campaignBody(form, retryOn, days) {
  /** @type {Record<string, unknown>} */
  const body = { name: form.name.trim(), agent_uuid: form.agent.trim(), mode: form.mode };
  if (form.route) body.telephony_configuration_id = Number(form.route);
  if (form.max_concurrent_calls) body.max_concurrent_calls = Number(form.max_concurrent_calls);
  if (form.calls_per_second) body.calls_per_second = Number(form.calls_per_second);
  // datetime-local inputs give local time without a zone; the API takes RFC 3339.
  if (form.starts_at) body.starts_at = new Date(form.starts_at).toISOString();
  if (form.ends_at) body.ends_at = new Date(form.ends_at).toISOString();
  if (form.timezone.trim()) {
    const spans = form.windows.split(',').map((w) => w.trim()).filter(Boolean);
    body.schedule = { timezone: form.timezone.trim(), windows: Object.fromEntries(days.map((d) => [d, spans])) };
  }
  body.retry = { max_attempts: Number(form.max_attempts), delay_seconds: Number(form.delay_seconds), on: RETRY_ON.filter((r) => retryOn.includes(r)) };
  /** @type {Record<string, number>} */
  const breaker = {};
  for (const name of /** @type {const} */ (['failure_ratio', 'window_seconds', 'min_calls'])) if (form[name]) breaker[name] = Number(form[name]);
  if (Object.keys(breaker).length) body.circuit_breaker = breaker;
  return body;
}

/** @param {PageProps} props */
export function NewCampaignPage({ scopes }) {
  const calls = scopes.includes('calls');
  const [form, setForm] = useState(EMPTY);
  const [retryOn, setRetryOn] = useState(DEFAULT_RETRY_ON);
  const [days, setDays] = useState(['mon', 'tue', 'wed', 'thu', 'fri']);
  const [file, setFile] = useState(/** @type {{ name: string, header: string[], rows: string[][] } | null} */ (null));
  const [roles, setRoles] = useState(/** @type {Role[]} */ ([]));
  const [workflows, setWorkflows] = useState(/** @type {Workflow[]} */ ([]));
  const [routes, setRoutes] = useState(/** @type {TelephonyConfiguration[]} */ ([]));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [created, setCreated] = useState(/** @type {Campaign | null} */ (null)); // made, its contacts not all added
  const [busy, setBusy] = useState('');
  useEffect(() => {
    // The agents and routes are listed with `calls`; without it the agent's UUID is typed in and the default route applies.
    if (!calls) return;
    /** @type {Promise<Page<Workflow>>} */
    const readWorkflows = api('/workflows');
    readWorkflows.then((r) => {
      const active = r.data.filter((w) => w.status === 'active');
      setWorkflows(active);
      const first = active.flatMap((w) => w.agent_uuids)[0];
      if (first) setForm((f) => ({ ...f, agent: f.agent || first }));
    }, setError);
    /** @type {Promise<Page<TelephonyConfiguration>>} */
    const readRoutes = api('/telephony-configurations');
    readRoutes.then((r) => setRoutes(r.data.filter((route) => route.status === 'active')), setError);
  }, [calls]);
  const set = fieldSetter(form, setForm);

  /** @param {Event} event */
  const choose = async (event) => {
    setError(null);
    const chosen = fileOf(event);
    if (!chosen) return setFile(null);
    const [header = [], ...rows] = parseCsv(await chosen.text());
    setFile({ name: chosen.name, header, rows });
    setRoles(guessRoles(header));
    if (!form.name) setForm((f) => ({ ...f, name: f.name || chosen.name.replace(/\.csv$/i, '') }));
  };
  const problem = file ? (file.rows.length === 0 ? 'The file has a header and no contact.' : mappingProblem(file.header, roles)) : null;

  /** @param {Campaign} campaign */
  const addContacts = async (campaign) => {
    if (!file) return;
    /** @type {ContactsReport[]} */
    const reports = [];
    const parts = contactParts(file.header, file.rows, roles);
    for (const [n, part] of parts.entries()) {
      setBusy(`Adding contacts (part ${n + 1} of ${parts.length})…`);
      reports.push(await api(`/campaigns/${campaign.id}/contacts`, { method: 'POST', csv: part }));
    }
    rememberImport(campaign.id, mergeReports(reports), file.rows.length);
    navigate(`/console/campaigns/${campaign.id}`);
  };

  /** @param {SubmitEvent} event */
  const submit = async (event) => {
    event.preventDefault();
    if (!file || problem) return;
    setError(null);
    try {
      let campaign = created;
      if (!campaign) {
        setBusy('Creating the campaign…');
        campaign = /** @type {Campaign} */ (await api('/campaigns', { method: 'POST', body: campaignBody(form, retryOn, days) }));
        setCreated(campaign);
      }
      await addContacts(campaign);
    } catch (e) {
      setError(e);
    } finally {
      setBusy('');
    }
  };

  /**
   * @param {string[]} list
   * @param {(next: string[]) => void} setList
   * @param {string} value
   */
  const toggle = (list, setList, value) => setList(list.includes(value) ? list.filter((v) => v !== value) : [...list, value]);

  return html`<section>
    <p><${Link} href="/console/campaigns">← Campaigns</${Link}></p>
    <h1>New campaign</h1>
    <p>From a CSV file with a header line: choose the phone number's column and which columns become the contact's variables. The campaign is created as a draft; start it from its page.</p>
    <form class="stacked wide-form" onSubmit=${submit} aria-label="New campaign">
      <label for="contacts-csv">Contacts CSV</label>
      <input id="contacts-csv" type="file" accept=".csv,text/csv" required onChange=${choose} />
      ${file
        ? html`<fieldset class="mapping" data-testid="column-mapping">
            <legend>Columns of ${file.name} (${file.rows.length} ${file.rows.length === 1 ? 'contact' : 'contacts'})</legend>
            <div class="table-wrap"><table>
              <thead><tr><th scope="col">Column</th><th scope="col">Use as</th><th scope="col">First values</th></tr></thead>
              <tbody>${file.header.map(
                (h, i) => html`<tr key=${i}>
                  <th scope="row" data-testid="column-name">${h || `(column ${i + 1})`}</th>
                  <td><select aria-label=${`Use column ${h || i + 1} as`} value=${roles[i]} onChange=${(/** @type {Event} */ e) => setRoles(roles.map((r, j) => (j === i ? /** @type {Role} */ (valueOf(e)) : r)))}>
                    <option value="phone">Phone number</option>
                    <option value="variable">Contact variable "${h.trim()}"</option>
                    <option value="timezone">Time zone</option>
                    <option value="ignore">Ignore</option>
                  </select></td>
                  <td class="reason">${file.rows.slice(0, PREVIEW_ROWS).map((r) => r[i] ?? '').join(' · ')}</td>
                </tr>`,
              )}</tbody>
            </table></div>
            ${problem ? html`<p class="error" role="alert" data-testid="mapping-problem">${problem}</p>` : null}
          </fieldset>`
        : null}

      <label for="campaign-name">Name</label>
      <input id="campaign-name" required maxlength="200" value=${form.name} onInput=${set('name')} />
      <label for="campaign-agent">Agent</label>
      ${calls
        ? html`<select id="campaign-agent" required value=${form.agent} onChange=${set('agent')}>
            ${workflows.flatMap((w) => [...new Set([...w.agent_uuids, ...w.draft_agent_uuids])].map((a) => html`<option key=${a} value=${a}>${w.name} (${a.slice(0, 8)}…)${w.agent_uuids.includes(a) ? '' : ' draft only'}</option>`))}
          </select>`
        : html`<input id="campaign-agent" required placeholder="the agent's UUID" value=${form.agent} onInput=${set('agent')} />`}
      <label for="campaign-mode">Version</label>
      <select id="campaign-mode" value=${form.mode} onChange=${set('mode')}>
        <option value="published">published</option>
        <option value="test">test (the draft, else the published one)</option>
      </select>
      <label for="campaign-route">Route</label>
      <select id="campaign-route" value=${form.route} onChange=${set('route')}>
        <option value="">The organization's default</option>
        ${routes.map((r) => html`<option key=${r.id} value=${r.id}>${r.name} (${r.provider})</option>`)}
      </select>

      <fieldset>
        <legend>Pacing</legend>
        <label for="campaign-concurrency">Calls at once (empty: the route's)</label>
        <input id="campaign-concurrency" type="number" min="1" value=${form.max_concurrent_calls} onInput=${set('max_concurrent_calls')} />
        <label for="campaign-cps">Calls per second (empty: only the route's pacing)</label>
        <input id="campaign-cps" type="number" min="0.01" step="0.01" value=${form.calls_per_second} onInput=${set('calls_per_second')} />
      </fieldset>

      <fieldset>
        <legend>Schedule</legend>
        <label for="campaign-starts">Starts at (optional)</label>
        <input id="campaign-starts" type="datetime-local" value=${form.starts_at} onInput=${set('starts_at')} />
        <label for="campaign-ends">Ends at (optional)</label>
        <input id="campaign-ends" type="datetime-local" value=${form.ends_at} onInput=${set('ends_at')} />
        <label for="campaign-timezone">Calling windows' time zone (empty: any time of day)</label>
        <input id="campaign-timezone" placeholder="America/New_York" value=${form.timezone} onInput=${set('timezone')} />
        ${form.timezone.trim()
          ? html`<label for="campaign-windows">Windows, local time</label>
              <input id="campaign-windows" required placeholder="09:00-12:00, 13:00-17:00" value=${form.windows} onInput=${set('windows')} />
              <div class="actions" role="group" aria-label="Days">${WEEKDAYS.map(
                (d) => html`<label key=${d} class="check"><input type="checkbox" checked=${days.includes(d)} onChange=${() => toggle(days, setDays, d)} /> ${d}</label>`,
              )}</div>`
          : null}
      </fieldset>

      <fieldset>
        <legend>Retries</legend>
        <label for="campaign-attempts">Attempts per contact, the first included</label>
        <input id="campaign-attempts" type="number" min="1" max="10" required value=${form.max_attempts} onInput=${set('max_attempts')} />
        <label for="campaign-delay">Seconds between attempts</label>
        <input id="campaign-delay" type="number" min="30" required value=${form.delay_seconds} onInput=${set('delay_seconds')} />
        <div class="actions" role="group" aria-label="Retry when an attempt ends">${RETRY_ON.map(
          (r) => html`<label key=${r} class="check"><input type="checkbox" checked=${retryOn.includes(r)} onChange=${() => toggle(retryOn, setRetryOn, r)} /> ${r.replace('_', ' ')}</label>`,
        )}</div>
      </fieldset>

      <fieldset>
        <legend>Circuit breaker (empty: the defaults)</legend>
        <p class="hint">The campaign pauses itself when, over a window, enough attempts ended and this share of them failed.</p>
        <label for="campaign-failure-ratio">Failed share that pauses it (default 0.5)</label>
        <input id="campaign-failure-ratio" type="number" min="0.01" max="1" step="0.01" value=${form.failure_ratio} onInput=${set('failure_ratio')} />
        <label for="campaign-window">Window, seconds (default 120)</label>
        <input id="campaign-window" type="number" min="1" value=${form.window_seconds} onInput=${set('window_seconds')} />
        <label for="campaign-min-calls">Ended attempts before it can pause (default 10)</label>
        <input id="campaign-min-calls" type="number" min="1" value=${form.min_calls} onInput=${set('min_calls')} />
      </fieldset>

      <div class="actions">
        <button type="submit" disabled=${Boolean(busy) || !file || Boolean(problem)}>${created ? 'Add the contacts again' : 'Create campaign'}</button>
      </div>
      <p role="status" class="hint">${busy}</p>
      <${ErrorBox} error=${error} />
      ${created
        ? html`<p class="hint" data-testid="created-without-contacts">The campaign <${Link} href=${`/console/campaigns/${created.id}`}>${created.name}</${Link}> was created, as a draft; its contacts were not all added. Contacts already added count as duplicates if sent again.</p>`
        : null}
    </form>
  </section>`;
}
