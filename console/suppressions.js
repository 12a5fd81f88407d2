// Suppressions: the organization's do-not-call list (paged in number order), adding a number with
// an optional reason and expiry, removing one, and importing a CSV file (its report: how many
// numbers were imported and which lines were skipped and why).
import { html, useCallback, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
import { Pager, useCursorPages } from './paging.js';
import { ErrorBox, fieldSetter, fileOf, formatTime } from './ui.js';
/** @import { CursorPages } from './paging.js' */
/** @import { Suppression, SuppressionReport } from './types.js' */

const PAGE_SIZE = 50;
const EMPTY_FORM = { phone: '', reason: '', expires: '' };

/**
 * A number in a path: E.164's + must be URL-encoded (%2B).
 * @param {string} phone
 */
const numberPath = (phone) => `/suppressions/${encodeURIComponent(phone)}`;

/** @param {{ onChanged: () => void }} props */
function AddForm({ onChanged }) {
  const [form, setForm] = useState(EMPTY_FORM);
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [done, setDone] = useState(/** @type {string | null} */ (null));
  const [busy, setBusy] = useState(false);
  const set = fieldSetter(form, setForm);
  /** @param {SubmitEvent} event */
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    setDone(null);
    setBusy(true);
    try {
      /** @type {{ reason?: string, expires_at?: string }} */
      const body = {};
      if (form.reason.trim()) body.reason = form.reason.trim();
      // datetime-local gives local time without a zone; the API takes RFC 3339.
      if (form.expires) body.expires_at = new Date(form.expires).toISOString();
      /** @type {Suppression} */
      const saved = await api(numberPath(form.phone.trim()), { method: 'PUT', body });
      setDone(saved.phone_number);
      setForm(EMPTY_FORM);
      onChanged();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="stacked" onSubmit=${submit} aria-label="Suppress a number">
    <h2>Suppress a number</h2>
    <label for="suppression-phone">Phone number</label>
    <input id="suppression-phone" type="tel" required autocomplete="off" placeholder="+12025550123" value=${form.phone} onInput=${set('phone')} />
    <label for="suppression-reason">Reason (optional)</label>
    <input id="suppression-reason" maxlength="500" value=${form.reason} onInput=${set('reason')} />
    <label for="suppression-expires">Suppressed until (optional; empty: never expires)</label>
    <input id="suppression-expires" type="datetime-local" value=${form.expires} onInput=${set('expires')} />
    <div class="actions"><button type="submit" disabled=${busy}>Suppress number</button></div>
    <${ErrorBox} error=${error} />
    <p role="status" class="hint">${done ? `${done} is suppressed.` : ''}</p>
  </form>`;
}

/** @param {{ onChanged: () => void }} props */
function ImportForm({ onChanged }) {
  const [file, setFile] = useState(/** @type {File | null} */ (null));
  const [report, setReport] = useState(/** @type {SuppressionReport | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [busy, setBusy] = useState(false);
  /** @param {SubmitEvent} event */
  const submit = async (event) => {
    event.preventDefault();
    if (!file) return;
    setError(null);
    setReport(null);
    setBusy(true);
    try {
      /** @type {SuppressionReport} */
      const imported = await api('/suppressions/import', { method: 'POST', csv: await file.text() });
      setReport(imported);
      onChanged();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="stacked" onSubmit=${submit} aria-label="Import suppressions">
    <h2>Import a CSV file</h2>
    <p class="hint">The first line names the columns: <code>phone_number</code>, and optionally <code>reason</code> and <code>expires_at</code> (RFC 3339). Numbers already on the list get the file's reason and expiry.</p>
    <label for="suppression-file">CSV file</label>
    <input id="suppression-file" type="file" accept=".csv,text/csv" required onChange=${(/** @type {Event} */ e) => setFile(fileOf(e))} />
    <div class="actions"><button type="submit" disabled=${busy || !file}>Import</button></div>
    <${ErrorBox} error=${error} />
    <div role="status" data-testid="import-report">
      ${report
        ? html`<p>Imported ${report.imported} ${report.imported === 1 ? 'number' : 'numbers'}.${report.invalid_count ? ` Skipped ${report.invalid_count} ${report.invalid_count === 1 ? 'line' : 'lines'}${report.invalid_count > report.invalid.length ? ` (the first ${report.invalid.length} listed)` : ''}:` : ''}</p>
          ${report.invalid.length ? html`<ul class="invalid-lines">${report.invalid.map((i) => html`<li key=${i.line}>Line ${i.line}: <code>${i.value}</code> — ${i.detail}</li>`)}</ul>` : null}`
        : null}
    </div>
  </form>`;
}

export function SuppressionsPage() {
  /** @type {CursorPages<Suppression>} */
  const pages = useCursorPages('/suppressions', PAGE_SIZE);
  const { page, error, setError, load, firstPage } = pages;
  const [removed, setRemoved] = useState(/** @type {string | null} */ (null));
  const [confirming, setConfirming] = useState(/** @type {string | null} */ (null)); // the number whose Remove asks "are you sure?"
  // A stable ref, so focus moves to the confirm button once, when it appears.
  const focusOnMount = useCallback((/** @type {HTMLElement | null} */ el) => el?.focus(), []);
  /** @param {Suppression} suppression */
  const remove = async (suppression) => {
    setConfirming(null);
    setError(null);
    setRemoved(null);
    try {
      await api(numberPath(suppression.phone_number), { method: 'DELETE' });
      setRemoved(suppression.phone_number);
      await load();
    } catch (e) {
      setError(e);
    }
  };
  const changed = () => {
    setRemoved(null);
    void load();
  };
  return html`<section>
    <h1>Suppressions</h1>
    <p>Numbers this organization does not call: starting a call to one is refused (<code>number_suppressed</code>), and a call still queued for one ends without a dial.</p>
    <div class="forms">
      <${AddForm} onChanged=${changed} />
      <${ImportForm} onChanged=${changed} />
    </div>
    <h2>Suppressed numbers</h2>
    <${ErrorBox} error=${error} />
    <p role="status" class="hint">${removed ? `${removed} was removed: it may be called again.` : ''}</p>
    ${page === null
      ? html`<p>Loading…</p>`
      : page.data.length === 0
        ? html`<p class="empty">${!firstPage ? 'No more suppressed numbers.' : 'No suppressed numbers yet.'}</p>`
        : html`<div class="table-wrap"><table class="cards">
            <caption class="visually-hidden">Suppressed numbers, in number order</caption>
            <thead><tr><th scope="col">Number</th><th scope="col">Reason</th><th scope="col">Until</th><th scope="col" class="wide">Added</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
            <tbody>${page.data.map(
              (s) => html`<tr key=${s.phone_number} data-testid="suppression-row" data-number=${s.phone_number}>
                <td class="nowrap" data-label="Number">${s.phone_number}</td>
                <td class="reason" data-label="Reason" data-testid="suppression-reason">${s.reason ?? '—'}</td>
                <td data-label="Until">${s.expires_at ? `${formatTime(s.expires_at)}${s.active ? '' : ' (expired)'}` : 'Never expires'}</td>
                <td class="wide">${formatTime(s.created_at)}</td>
                <td class="nowrap">${confirming === s.phone_number
                  ? // Removing a number lets it be called again: one more press, focused, to be sure.
                    html`<button type="button" class="danger" ref=${focusOnMount} aria-label=${`Confirm: remove ${s.phone_number}`} onClick=${() => remove(s)}>Confirm remove</button>
                      <button type="button" class="secondary" aria-label=${`Keep ${s.phone_number}`} onClick=${() => setConfirming(null)}>Keep</button>`
                  : html`<button type="button" class="secondary" aria-label=${`Remove ${s.phone_number}`} onClick=${() => setConfirming(s.phone_number)}>Remove</button>`}</td>
              </tr>`,
            )}</tbody>
          </table></div>`}
    <${Pager} pages=${pages} />
  </section>`;
}
