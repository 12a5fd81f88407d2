// Audit log (scope `admin`): the organization's changes, newest first (GET /audit-events), filtered
// by action, target, actor and time, paged by cursor. Each entry says who (the kind of actor and
// the key's name when it acted), what (action and target), when, and what changed: the members
// that differ between before and after, each with its two values, and the two documents side by
// side on demand. Everything is rendered as text: names and values are whatever operators typed.
import { html, useState } from './vendor-htm-preact.js';
import { Pager, useCursorPages } from './paging.js';
import { ErrorBox, formatTime, valueOf } from './ui.js';
/** @import { CursorPages } from './paging.js' */
/** @import { PageProps } from './pages.js' */
/** @import { AuditEvent } from './types.js' */

const PAGE_SIZE = 20;

/** @typedef {{ action: string, target_type: string, target_id: string, actor: string, since: string, until: string }} Filters */
/** @type {Filters} */
const NO_FILTERS = { action: '', target_type: '', target_id: '', actor: '', since: '', until: '' };

/**
 * The list's path for the filters: times typed in local time (datetime-local) sent as RFC 3339.
 * @param {Filters} filters
 */
export function auditPath(filters) {
  const params = new URLSearchParams();
  for (const name of /** @type {(keyof Filters)[]} */ (['action', 'target_type', 'target_id', 'actor'])) {
    const value = filters[name].trim();
    if (value) params.set(name, value);
  }
  for (const name of /** @type {('since' | 'until')[]} */ (['since', 'until'])) {
    const time = filters[name] ? new Date(filters[name]) : null;
    if (time && !Number.isNaN(time.getTime())) params.set(name, time.toISOString());
  }
  const query = params.toString();
  return query ? `/audit-events?${query}` : '/audit-events';
}

/**
 * Every member of a document by its JSON Pointer; arrays are one value (a day's windows, a key's
 * scopes read better whole than element by element).
 * @param {unknown} value
 * @param {string} pointer
 * @param {Map<string, string>} into
 */
function flatten(value, pointer, into) {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const entries = Object.entries(value);
    if (entries.length === 0) into.set(pointer, '{}');
    for (const [name, member] of entries) flatten(member, `${pointer}/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`, into);
  } else {
    into.set(pointer, JSON.stringify(value));
  }
}

/**
 * The members that differ between before and after, in the order they first appear. A creation
 * (before null) or deletion (after null) is one line for the whole document.
 * @param {unknown} before
 * @param {unknown} after
 * @returns {{ pointer: string, before: string | undefined, after: string | undefined }[]}
 */
export function auditDiff(before, after) {
  const a = new Map();
  const b = new Map();
  if (before !== null && before !== undefined) flatten(before, '', a);
  if (after !== null && after !== undefined) flatten(after, '', b);
  const pointers = [...new Set([...a.keys(), ...b.keys()])];
  return pointers.filter((p) => a.get(p) !== b.get(p)).map((pointer) => ({ pointer, before: a.get(pointer), after: b.get(pointer) }));
}

/** @param {{ event: AuditEvent }} props */
function Actor({ event }) {
  if (event.actor !== 'api_key') return html`<span data-testid="audit-actor">${event.actor === 'cli' ? 'CLI (on the database)' : 'the service'}</span>`;
  return html`<span data-testid="audit-actor">key <strong>${event.actor_key_name ?? '(unnamed)'}</strong> <span class="hint">#${event.actor_key_id}</span></span>`;
}

/** @param {{ event: AuditEvent }} props */
function Entry({ event }) {
  const diff = auditDiff(event.before, event.after);
  return html`<li data-testid="audit-entry" data-action=${event.action}>
    <p><code data-testid="audit-action">${event.action}</code> of <span data-testid="audit-target">${event.target_type}${event.target_id === null ? '' : ` ${event.target_id}`}</span>${' by '}<${Actor} event=${event} />, <time datetime=${event.created_at}>${formatTime(event.created_at)}</time></p>
    ${diff.length === 0
      ? html`<p class="hint">No member differs.</p>`
      : html`<table class="diff" data-testid="audit-diff">
          <thead><tr><th scope="col">Member</th><th scope="col">Before</th><th scope="col">After</th></tr></thead>
          <tbody>${diff.map(
            (d) => html`<tr key=${d.pointer} data-pointer=${d.pointer}>
              <td><code>${d.pointer || '(whole)'}</code></td>
              <td class="before"><code>${d.before ?? '—'}</code></td>
              <td class="after"><code>${d.after ?? '—'}</code></td>
            </tr>`,
          )}</tbody>
        </table>`}
    <details>
      <summary>Before and after in full</summary>
      <div class="side-by-side">
        <div><h3>Before</h3><pre class="context" data-testid="audit-before">${JSON.stringify(event.before, null, 2)}</pre></div>
        <div><h3>After</h3><pre class="context" data-testid="audit-after">${JSON.stringify(event.after, null, 2)}</pre></div>
      </div>
    </details>
  </li>`;
}

/** @param {PageProps} _props */
export function AuditLogPage(_props) {
  const [form, setForm] = useState(NO_FILTERS);
  const [applied, setApplied] = useState(NO_FILTERS);
  /** @type {CursorPages<AuditEvent>} */
  const pages = useCursorPages(auditPath(applied), PAGE_SIZE);
  const { page, error } = pages;
  /** @param {keyof Filters} name */
  const field = (name) => (/** @type {Event} */ e) => setForm({ ...form, [name]: valueOf(e) });
  /** @param {SubmitEvent} event */
  const submit = (event) => {
    event.preventDefault();
    setApplied(form);
  };
  return html`<section>
    <h1>Audit log</h1>
    <p>Every change of how the organization is set up, newest first: who made it, what it changed, and the target before and after (secrets redacted by the service).</p>
    <form class="filters" onSubmit=${submit} aria-label="Filter the audit log">
      <label>Action<input name="action" placeholder="organization.settings_updated" value=${form.action} onInput=${field('action')} /></label>
      <label>Target type<input name="target_type" placeholder="workflow" value=${form.target_type} onInput=${field('target_type')} /></label>
      <label>Target id<input name="target_id" value=${form.target_id} onInput=${field('target_id')} /></label>
      <label>Actor<select name="actor" value=${form.actor} onChange=${field('actor')}>
        <option value="">any</option><option value="api_key">an API key</option><option value="cli">the CLI</option><option value="system">the service</option>
      </select></label>
      <label>Since<input type="datetime-local" name="since" value=${form.since} onInput=${field('since')} /></label>
      <label>Until<input type="datetime-local" name="until" value=${form.until} onInput=${field('until')} /></label>
      <div class="actions"><button type="submit">Filter</button></div>
    </form>
    <${ErrorBox} error=${error} />
    ${page === null
      ? html`<p>Loading…</p>`
      : page.data.length === 0
        ? html`<p class="empty">No changes recorded${auditPath(applied).includes('?') ? ' that match' : ''}.</p>`
        : html`<ol class="audit" data-testid="audit-entries">${page.data.map((e) => html`<${Entry} key=${e.id} event=${e} />`)}</ol>`}
    <${Pager} pages=${pages} />
  </section>`;
}
