// Campaign (/console/campaigns/{id}): one campaign's settings, the buttons its state allows, its
// progress, a breakdown that adds up in every state (its contacts by status sum to its total; its
// attempts by outcome, with those not ended yet, sum to its attempts), the report of the contacts
// upload that created it, more contacts from a CSV while it is open, and its contacts with their attempts,
// filtered by status and paged. Kept live like the Campaigns page: its campaign.<change> and its
// attempts' run events read it again (at most once a second), and so does a poll while contacts
// are being called (an attempt's end settles its contact without an event).
import { html, useCallback, useEffect, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
import { CampaignActions, ImportContacts, PARTS, Progress } from './campaigns.js';
import { Pager, useCursorPages } from './paging.js';
import { useThrottled } from './timing.js';
import { ErrorBox, formatTime, Link, StateBadge, valueOf } from './ui.js';
/** @import { CursorPages } from './paging.js' */
/** @import { PageProps } from './pages.js' */
/** @import { Campaign, Contact, ContactsReport } from './types.js' */

const CONTACTS_PAGE_SIZE = 25;
const REFRESH_MS = 1_000;
const SETTLING_POLL_MS = 5_000;

/**
 * The upload that created a campaign, handed from the New campaign page to this one (kept in
 * memory: a reload shows the campaign without it).
 * @type {Map<number, { report: ContactsReport, rows: number }>}
 */
const importsShown = new Map();

/**
 * @param {number} campaignId
 * @param {ContactsReport} report
 * @param {number} rows the file's contact rows
 */
export function rememberImport(campaignId, report, rows) {
  importsShown.set(campaignId, { report, rows });
}

/**
 * The contacts by status and the attempts by outcome, each summing to its total, with the sum
 * shown so that a reader can check it.
 * @param {{ campaign: Campaign }} props
 */
function Breakdown({ campaign }) {
  const p = campaign.progress;
  const contactsSum = PARTS.reduce((sum, { key }) => sum + p[key], 0);
  const outcomes = Object.entries(p.outcomes).filter(([, n]) => n > 0);
  const ended = outcomes.reduce((sum, [, n]) => sum + n, 0);
  // Attempts created and not ended: queued, dialing, ringing or in progress.
  const open = p.attempts - ended;
  return html`<div class="forms">
    <div>
      <h2>Contacts by status</h2>
      <table class="breakdown" data-testid="contacts-breakdown">
        <tbody>${PARTS.map(({ key, label }) => html`<tr key=${key}><th scope="row">${label}</th><td data-status=${key}>${p[key]}</td></tr>`)}</tbody>
        <tfoot><tr><th scope="row">total</th><td data-testid="contacts-total">${p.total}${contactsSum === p.total ? '' : ` (the statuses sum to ${contactsSum})`}</td></tr></tfoot>
      </table>
    </div>
    <div>
      <h2>Attempts by outcome</h2>
      <table class="breakdown" data-testid="attempts-breakdown">
        <tbody>
          ${outcomes.map(([state, n]) => html`<tr key=${state}><th scope="row"><${StateBadge} state=${state} /></th><td data-outcome=${state}>${n}</td></tr>`)}
          <tr><th scope="row">not ended yet</th><td data-outcome="open">${open}</td></tr>
        </tbody>
        <tfoot><tr><th scope="row">attempts</th><td data-testid="attempts-total">${p.attempts}</td></tr></tfoot>
      </table>
      ${Object.values(p.answered_by).some((n) => n > 0)
        ? html`<p class="hint">Answered by: ${Object.entries(p.answered_by).map(([who, n]) => `${who} ${n}`).join(' · ')}</p>`
        : null}
    </div>
  </div>`;
}

/** @param {{ campaign: Campaign }} props */
function Settings({ campaign: c }) {
  const windows = c.schedule ? Object.entries(c.schedule.windows).map(([day, spans]) => `${day} ${spans.join(', ')}`).join('; ') : null;
  return html`<dl class="facts">
    <dt>Agent</dt><dd>${c.agent_uuid ?? c.workflow_uuid} (${c.mode})</dd>
    <dt>Route</dt><dd>${c.telephony_configuration_id}</dd>
    <dt>Pacing</dt><dd>${c.max_concurrent_calls} at once${c.calls_per_second !== null ? `, ${c.calls_per_second} per second` : ''}</dd>
    <dt>Schedule</dt><dd>${c.schedule ? `${c.schedule.timezone}: ${windows || 'no window'}` : 'any time'}${c.starts_at ? `, from ${formatTime(c.starts_at)}` : ''}${c.ends_at ? `, until ${formatTime(c.ends_at)}` : ''}</dd>
    <dt>Retries</dt><dd>${c.retry.max_attempts} ${c.retry.max_attempts === 1 ? 'attempt' : 'attempts'}, ${c.retry.delay_seconds} s apart, on ${c.retry.on.join(', ')}</dd>
    <dt>Created</dt><dd>${formatTime(c.created_at)}</dd>
    <dt>Started</dt><dd>${formatTime(c.started_at)}</dd>
  </dl>`;
}

/** @param {{ contact: Contact, calls: boolean }} props */
function Attempts({ contact, calls }) {
  if (contact.attempts.length === 0) return html`<span class="hint">none yet</span>`;
  return html`<ol class="attempts">${contact.attempts.map(
    (a) => html`<li key=${a.attempt}>${calls ? html`<${Link} href=${`/console/runs/${a.run_id}`}>#${a.attempt}</${Link}>` : `#${a.attempt}`} <${StateBadge} state=${a.state} /></li>`,
  )}</ol>`;
}

/** @param {PageProps} props */
export function CampaignPage({ params, stream, scopes }) {
  const id = Number(params[0]);
  const calls = scopes.includes('calls');
  const [campaign, setCampaign] = useState(/** @type {Campaign | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [actionError, setActionError] = useState(/** @type {unknown} */ (null));
  const [status, setStatus] = useState('');
  /** @type {CursorPages<Contact>} */
  const contacts = useCursorPages(`/campaigns/${id}/contacts${status ? `?status=${status}` : ''}`, CONTACTS_PAGE_SIZE);
  const loadContacts = contacts.load;
  const load = useCallback(async () => {
    try {
      /** @type {Campaign} */
      const read = await api(`/campaigns/${id}`);
      setCampaign(read);
      setError(null);
    } catch (e) {
      setError(e);
    }
  }, [id]);
  const loadBoth = useCallback(async () => {
    await Promise.all([load(), loadContacts()]);
  }, [load, loadContacts]);
  const refresh = useThrottled(loadBoth, REFRESH_MS);
  useEffect(() => void load(), [load]);
  useEffect(() => {
    const stops = [stream.subscribeCampaigns((event) => event.campaign.id === id && refresh()), stream.subscribe((event) => event.campaign_id === id && refresh())];
    return () => {
      for (const stop of stops) stop();
    };
  }, [stream, id, refresh]);
  const settling = Boolean(campaign && campaign.progress.in_progress > 0);
  useEffect(() => {
    if (!settling) return undefined;
    const timer = setInterval(refresh, SETTLING_POLL_MS);
    return () => clearInterval(timer);
  }, [settling, refresh]);

  if (error && !campaign) return html`<section><h1>Campaign</h1><${ErrorBox} error=${error} /><p><${Link} href="/console/campaigns">Back to campaigns</${Link}></p></section>`;
  if (!campaign) return html`<section><h1>Campaign</h1><p>Loading…</p></section>`;
  const imported = importsShown.get(id);
  const open = ['draft', 'running', 'paused'].includes(campaign.state);
  return html`<section class="campaign">
    <p><${Link} href="/console/campaigns">← Campaigns</${Link}></p>
    <h1 data-testid="campaign-title">${campaign.name}</h1>
    <p>State: <span class=${`state campaign-${campaign.state}`} data-testid="campaign-state">${campaign.state}</span>${campaign.paused_reason ? html`<span class="hint"> (${campaign.paused_reason.replace('_', ' ')})</span>` : null}
      ${calls ? html` · <${Link} href=${`/console?campaign_id=${campaign.id}`}>Its calls</${Link}>` : null}</p>
    <${CampaignActions} campaign=${campaign} onDone=${loadBoth} onError=${setActionError} />
    <${ErrorBox} error=${actionError} />
    ${imported
      ? html`<div class="secret" role="status" data-testid="creation-import">
          <p>Created with ${imported.rows} ${imported.rows === 1 ? 'contact' : 'contacts'} from the file: added ${imported.report.added}, duplicates ${imported.report.duplicates}, invalid ${imported.report.invalid_count}.${campaign.state === 'draft' ? ' Start it when ready.' : ''}</p>
          ${imported.report.invalid.length ? html`<ul class="invalid-lines">${imported.report.invalid.map((i, n) => html`<li key=${n}>${i.line !== undefined ? `Line ${i.line}` : `Item ${i.index}`}: ${i.detail}</li>`)}</ul>` : null}
        </div>`
      : null}
    <h2>Progress</h2>
    <${Progress} campaign=${campaign} />
    <${Breakdown} campaign=${campaign} />
    <h2>Settings</h2>
    <${Settings} campaign=${campaign} />
    ${open ? html`<h2>Add contacts</h2><${ImportContacts} campaign=${campaign} onChanged=${loadBoth} />` : null}
    <h2>Contacts</h2>
    <label class="inline">Status <select value=${status} onChange=${(/** @type {Event} */ e) => setStatus(valueOf(e))}>
      <option value="">Any</option>
      ${PARTS.map(({ key, label }) => html`<option key=${key} value=${key}>${label}</option>`)}
    </select></label>
    <${ErrorBox} error=${contacts.error} />
    ${contacts.page === null
      ? html`<p>Loading…</p>`
      : contacts.page.data.length === 0
        ? html`<p class="empty">${status ? 'No contacts with this status.' : 'No contacts yet.'}</p>`
        : html`<div class="table-wrap"><table class="cards">
            <caption class="visually-hidden">Contacts with their attempts</caption>
            <thead><tr><th scope="col">Number</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Next attempt</th><th scope="col">Time zone</th></tr></thead>
            <tbody>${contacts.page.data.map(
              (c) => html`<tr key=${c.id} data-testid="contact-row">
                <td data-label="Number">${c.phone_number}</td>
                <td data-label="Status" data-testid="contact-status">${c.status.replace('_', ' ')}</td>
                <td data-label="Attempts"><${Attempts} contact=${c} calls=${calls} /></td>
                <td data-label="Next attempt">${formatTime(c.next_attempt_at)}</td>
                <td data-label="Time zone">${c.timezone ?? '—'}</td>
              </tr>`,
            )}</tbody>
          </table></div>`}
    <${Pager} pages=${contacts} />
  </section>`;
}
