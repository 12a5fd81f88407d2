// Agents (workflows), scopes `calls` and `admin`: the organization's agents from GET /workflows
// (oldest first, all of them: the API does not page this list), each with its UUID, the version
// published, whether a draft waits, and whether it is archived; each name opens its page, where it
// is edited. `New agent` opens the creation form.
import { html, useEffect, useState } from './vendor-htm-preact.js';
import { api } from './api.js';
import { ErrorBox, formatTime, Link } from './ui.js';
/** @import { PageProps } from './pages.js' */
/** @import { Workflow } from './types.js' */

/** @param {PageProps} _props */
export function AgentsPage(_props) {
  const [agents, setAgents] = useState(/** @type {Workflow[] | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  useEffect(() => {
    api('/workflows').then((read) => setAgents(/** @type {{ data: Workflow[] }} */ (read).data), setError);
  }, []);
  return html`<section>
    <h1>Agents</h1>
    <p>An agent is a workflow: a definition graph with versions. Calls run its published version (the test operations its draft); a draft is saved, reviewed and then published. An archived agent answers no call.</p>
    <p><${Link} href="/console/agents/new" class="button">New agent</${Link}></p>
    <${ErrorBox} error=${error} />
    ${agents === null
      ? error
        ? null
        : html`<p>Loading…</p>`
      : agents.length === 0
        ? html`<p class="empty">No agents yet.</p>`
        : html`<div class="table-wrap"><table class="cards">
            <caption class="visually-hidden">Agents, oldest first</caption>
            <thead><tr><th scope="col">Name</th><th scope="col">Workflow UUID</th><th scope="col">Published</th><th scope="col">Draft</th><th scope="col">State</th><th scope="col">Updated</th></tr></thead>
            <tbody>${agents.map(
              (a) => html`<tr key=${a.workflow_uuid} data-testid="agent-row" data-uuid=${a.workflow_uuid} data-status=${a.status}>
                <td data-label="Name" class="reason" data-testid="agent-name"><${Link} href=${`/console/agents/${a.workflow_uuid}`}>${a.name}</${Link}></td>
                <td data-label="Workflow UUID"><code>${a.workflow_uuid}</code></td>
                <td data-label="Published" data-testid="agent-published">${a.published_version === null ? 'nothing' : `v${a.published_version}`}</td>
                <td data-label="Draft" data-testid="agent-draft">${a.draft_version === null ? 'none' : `v${a.draft_version}`}</td>
                <td data-label="State" data-testid="agent-status">${a.status}</td>
                <td data-label="Updated">${formatTime(a.updated_at)}</td>
              </tr>`,
            )}</tbody>
          </table></div>`}
  </section>`;
}
