// Campaigns: the organization's campaigns (newest first, paged) with their state, why a paused one
// is paused and their progress; Start / Pause / Resume / Cancel where the state allows it (Cancel
// asks once more: it cannot be undone), and a CSV contacts import per campaign with its report.
// Kept live from the event stream: a campaign.<change> of a campaign shown sets its state at once,
// and that change or a run event of one of its attempts reads the page again (at most once a
// second), for its progress; a new campaign appears on the first page the same way. While contacts
// are being called the page is also read every few seconds (SETTLING_POLL_MS).
import { html, useCallback, useEffect, useRef, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
import { Pager, useCursorPages } from './paging.js';
import { useThrottled } from './timing.js';
import { ErrorBox, fileOf, Link } from './ui.js';
/** @import { CursorPages } from './paging.js' */
/** @import { PageProps } from './pages.js' */
/** @import { Campaign, CampaignState, ContactsReport, ContactStatus } from './types.js' */

const PAGE_SIZE = 20;
/** The page is read again at most this often while events come. */
const REFRESH_MS = 1_000;
/**
 * How often the page is read while a campaign shown has contacts being called: an attempt's end
 * settles its contact on the scheduler's next pass (reached, exhausted, pending again), which no
 * event reports; the run's end that came before it was read too early to show it.
 */
const SETTLING_POLL_MS = 5_000;

/**
 * The states each action moves a campaign from (the API's own rule; it refuses others with 409).
 * @type {{ action: 'start' | 'pause' | 'resume' | 'cancel', label: string, from: CampaignState[] }[]}
 */
const ACTIONS = [
  { action: 'start', label: 'Start', from: ['draft'] },
  { action: 'pause', label: 'Pause', from: ['running'] },
  { action: 'resume', label: 'Resume', from: ['paused'] },
  { action: 'cancel', label: 'Cancel', from: ['draft', 'running', 'paused'] },
];

/**
 * The parts of the progress bar: contacts settled one way or the other, those being called, and
 * those still waiting. Every status a contact can be in is a part, so the figures add up to the
 * total in every state of the campaign (a canceled one's canceled contacts included).
 * @type {{ key: ContactStatus, label: string }[]}
 */
export const PARTS = [
  { key: 'reached', label: 'reached' },
  { key: 'exhausted', label: 'exhausted' },
  { key: 'suppressed', label: 'suppressed' },
  { key: 'invalid', label: 'invalid' },
  { key: 'canceled', label: 'canceled' },
  { key: 'in_progress', label: 'in progress' },
  { key: 'pending', label: 'pending' },
];
/** @type {ContactStatus[]} */
const SETTLED = ['reached', 'exhausted', 'suppressed', 'invalid', 'canceled'];

/** @param {{ campaign: Campaign }} props */
export function Progress({ campaign }) {
  const p = campaign.progress;
  const done = SETTLED.reduce((sum, key) => sum + p[key], 0);
  // The figures beside the bar carry the meaning; the colours only repeat them.
  return html`<div class="campaign-progress">
    <div class="bar-track stacked-bar" role="progressbar" aria-label=${`Progress of ${campaign.name}`} aria-valuemin="0" aria-valuemax=${p.total} aria-valuenow=${done}
      aria-valuetext=${`${done} of ${p.total} contacts settled`}>
      ${PARTS.map(({ key }) => (p.total && p[key] ? html`<span key=${key} class=${`bar part-${key}`} style=${{ width: `${(100 * p[key]) / p.total}%` }}></span>` : null))}
    </div>
    <p class="progress-figures" data-testid="campaign-progress">${PARTS.map(({ key, label }) => `${p[key]} ${label}`).join(' · ')} · ${p.total} total</p>
  </div>`;
}

/** @param {{ campaign: Campaign, onChanged: () => void }} props */
export function ImportContacts({ campaign, onChanged }) {
  const [file, setFile] = useState(/** @type {File | null} */ (null));
  const [report, setReport] = useState(/** @type {ContactsReport | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [busy, setBusy] = useState(false);
  const id = `contacts-file-${campaign.id}`;
  /** @param {SubmitEvent} event */
  const submit = async (event) => {
    event.preventDefault();
    if (!file) return;
    setError(null);
    setReport(null);
    setBusy(true);
    try {
      /** @type {ContactsReport} */
      const imported = await api(`/campaigns/${campaign.id}/contacts`, { method: 'POST', csv: await file.text() });
      setReport(imported);
      onChanged();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="import-contacts" onSubmit=${submit} aria-label=${`Import contacts into ${campaign.name}`}>
    <label for=${id}>Contacts CSV</label>
    <input id=${id} type="file" accept=".csv,text/csv" required onChange=${(/** @type {Event} */ e) => setFile(fileOf(e))} />
    <button type="submit" class="secondary" disabled=${busy || !file}>Import contacts</button>
    <${ErrorBox} error=${error} />
    <div role="status" data-testid="contacts-report">
      ${report
        ? html`<p>Added ${report.added}, duplicates ${report.duplicates}, invalid ${report.invalid_count ?? report.invalid.length}.</p>
          ${report.invalid.length ? html`<ul class="invalid-lines">${report.invalid.map((i, n) => html`<li key=${n}>${i.line !== undefined ? `Line ${i.line}` : `Item ${i.index}`}: ${i.detail}</li>`)}</ul>` : null}`
        : null}
    </div>
  </form>`;
}

/**
 * The buttons a campaign's state allows; Cancel asks once more (it ends the campaign for good).
 * Whatever happens, `onDone` reads the campaign again: a refusal (409) usually means its state moved.
 * @param {{ campaign: Campaign, onDone: () => unknown, onError: (error: unknown) => void }} props
 */
export function CampaignActions({ campaign: c, onDone, onError }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  // A stable ref, so focus moves to the confirm button once, when it appears.
  const focusOnMount = useCallback((/** @type {HTMLElement | null} */ el) => el?.focus(), []);
  /** @param {(typeof ACTIONS)[number]['action']} action */
  const act = async (action) => {
    setConfirming(false);
    onError(null);
    setBusy(true);
    try {
      await api(`/campaigns/${c.id}/${action}`, { method: 'POST' });
    } catch (e) {
      onError(e);
    } finally {
      setBusy(false);
      await onDone();
    }
  };
  return html`<div class="actions">${ACTIONS.filter((a) => a.from.includes(c.state)).map((a) =>
    a.action === 'cancel' && confirming
      ? html`<button key="confirm" type="button" class="danger" ref=${focusOnMount} disabled=${busy} aria-label=${`Confirm: cancel ${c.name}`} onClick=${() => act('cancel')}>Confirm cancel</button>
          <button key="keep" type="button" class="secondary" aria-label=${`Keep ${c.name}`} onClick=${() => setConfirming(false)}>Keep</button>`
      : html`<button key=${a.action} type="button" class=${a.action === 'cancel' ? 'secondary' : ''} disabled=${busy} aria-label=${`${a.label} ${c.name}`}
          onClick=${() => (a.action === 'cancel' ? setConfirming(true) : act(a.action))}>${a.label}</button>`,
  )}</div>`;
}

/** @param {PageProps} props */
export function CampaignsPage({ stream, scopes }) {
  /** @type {CursorPages<Campaign>} */
  const pages = useCursorPages('/campaigns', PAGE_SIZE);
  const { page, error, setError, load, firstPage } = pages;
  const shown = useRef(page);
  shown.current = page;
  const refresh = useThrottled(load, REFRESH_MS);
  useEffect(() => {
    /** @param {number} id */
    const showing = (id) => Boolean(shown.current?.data.some((c) => c.id === id));
    const stopCampaigns = stream.subscribeCampaigns((event) => {
      // Read again rather than set the new state on the row shown: its progress was counted
      // before the change, and a state beside another moment's progress misleads (a campaign
      // completed with contacts still in progress). The API answers both from one read.
      if (showing(event.campaign.id) || (event.type === 'campaign.created' && firstPage)) refresh();
    });
    // An attempt moved: the campaign's progress did too.
    const stopRuns = stream.subscribe((event) => {
      if (event.campaign_id != null && showing(event.campaign_id)) refresh();
    });
    return () => {
      stopCampaigns();
      stopRuns();
    };
  }, [stream, refresh, firstPage]);
  const settling = Boolean(page?.data.some((c) => c.progress.in_progress > 0));
  useEffect(() => {
    if (!settling) return undefined;
    const timer = setInterval(refresh, SETTLING_POLL_MS);
    return () => clearInterval(timer);
  }, [settling, refresh]);
  return html`<section>
    <h1>Campaigns</h1>
    <p>Lists of contacts called with retries, within the campaign's schedule. <${Link} href="/console/campaigns/new" class="button">New campaign from a CSV</${Link}></p>
    <${ErrorBox} error=${error} />
    ${page === null
      ? html`<p>Loading…</p>`
      : page.data.length === 0
        ? html`<p class="empty">${!firstPage ? 'No more campaigns.' : 'No campaigns yet.'}</p>`
        : html`<div class="table-wrap"><table class="cards">
            <caption class="visually-hidden">Campaigns, newest first</caption>
            <thead><tr><th scope="col">Name</th><th scope="col">State</th><th scope="col">Progress</th><th scope="col"><span class="visually-hidden">Actions</span></th><th scope="col">Contacts</th></tr></thead>
            <tbody>${page.data.map(
              (c) => html`<tr key=${c.id} data-testid="campaign-row" data-id=${c.id}>
                <td data-label="Name" class="reason"><${Link} href=${`/console/campaigns/${c.id}`} data-testid="campaign-name">${c.name}</${Link}>${scopes.includes('calls') ? html`<br /><${Link} href=${`/console?campaign_id=${c.id}`}>Its calls</${Link}>` : null}</td>
                <td data-label="State"><span class=${`state campaign-${c.state}`} data-testid="campaign-state">${c.state}</span>${c.paused_reason ? html`<span class="hint" data-testid="campaign-paused-reason"> (${c.paused_reason.replace('_', ' ')})</span>` : null}</td>
                <td data-label="Progress"><${Progress} campaign=${c} /></td>
                <td><${CampaignActions} campaign=${c} onDone=${load} onError=${setError} /></td>
                <td data-label="Contacts">${['draft', 'running', 'paused'].includes(c.state) ? html`<${ImportContacts} campaign=${c} onChanged=${load} />` : html`<span class="hint">Ended</span>`}</td>
              </tr>`,
            )}</tbody>
          </table></div>`}
    <${Pager} pages=${pages} />
  </section>`;
}
