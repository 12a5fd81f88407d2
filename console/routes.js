// Routes (scope `admin`, and `calls` to list them): the organization's telephony configurations,
// oldest first, paged (GET /telephony-configurations), each with its provider, whether it is
// enabled and the default, and its readiness at a glance (GET …/{id}/readiness for each route
// shown: the list does not carry it, since it depends on the service's configuration too). Each
// name opens the route's page; `New route` opens the form that creates one.
import { html, useEffect, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
import { Pager, useCursorPages } from './paging.js';
import { ErrorBox, Link } from './ui.js';
/** @import { CursorPages } from './paging.js' */
/** @import { TelephonyConfiguration, TelephonyConfigurationReadiness } from './types.js' */

const PAGE_SIZE = 20;

export function RoutesPage() {
  return html`<${RoutesList} />`;
}

/** @param {{ readiness: TelephonyConfigurationReadiness | Error | undefined }} props */
function ReadinessCell({ readiness }) {
  if (readiness === undefined) return html`<span class="hint">…</span>`;
  if (readiness instanceof Error) return html`<span class="hint" title=${readiness.message}>unknown</span>`;
  if (readiness.ready) return html`<span class="state route-ready">ready</span>`;
  return html`<span class="state route-not-ready">not ready</span>
    <ul class="readiness-problems">${readiness.problems.map((p, i) => html`<li key=${i}>${p.detail}</li>`)}</ul>`;
}

function RoutesList() {
  /** @type {CursorPages<TelephonyConfiguration>} */
  const pages = useCursorPages('/telephony-configurations', PAGE_SIZE);
  const { page, error } = pages;
  const [readiness, setReadiness] = useState(/** @type {Record<number, TelephonyConfigurationReadiness | Error>} */ ({}));
  useEffect(() => {
    if (!page) return;
    let current = true;
    for (const route of page.data) {
      /** @type {Promise<TelephonyConfigurationReadiness>} */
      const read = api(`/telephony-configurations/${route.id}/readiness`);
      read.then(
        (r) => current && setReadiness((all) => ({ ...all, [route.id]: r })),
        (e) => current && setReadiness((all) => ({ ...all, [route.id]: e instanceof Error ? e : new Error(String(e)) })),
      );
    }
    return () => {
      current = false;
    };
  }, [page]);
  return html`<section>
    <h1>Routes</h1>
    <p>Routes to the phone network (telephony configurations): each calls through one provider, with its own caller IDs, pacing, settings and write-only credentials. Calls that name no route go through the default one. <${Link} class="button" href="/console/routes/new">New route</${Link}></p>
    <${ErrorBox} error=${error} />
    ${page === null
      ? html`<p>Loading…</p>`
      : page.data.length === 0
        ? html`<p class="empty">No routes yet.</p>`
        : html`<div class="table-wrap"><table class="cards">
            <caption class="visually-hidden">Routes, oldest first</caption>
            <thead><tr><th scope="col">Name</th><th scope="col">Provider</th><th scope="col">Status</th><th scope="col">Default</th><th scope="col">Caller ID</th><th scope="col">Readiness</th></tr></thead>
            <tbody>${page.data.map(
              (r) => html`<tr key=${r.id} data-testid="route-row" data-id=${r.id}>
                <td data-label="Name" class="reason"><${Link} href=${`/console/routes/${r.id}`}>${r.name}</${Link}></td>
                <td data-label="Provider">${r.provider}</td>
                <td data-label="Status" data-testid="route-row-status"><span class=${`state route-${r.status}`}>${r.status === 'active' ? 'enabled' : 'disabled'}</span></td>
                <td data-label="Default" data-testid="route-row-default">${r.is_default ? 'default' : '—'}</td>
                <td data-label="Caller ID">${r.caller_ids[0] ?? '—'}</td>
                <td data-label="Readiness" data-testid="route-row-readiness"><${ReadinessCell} readiness=${readiness[r.id]} /></td>
              </tr>`,
            )}</tbody>
          </table></div>`}
    <${Pager} pages=${pages} />
  </section>`;
}
