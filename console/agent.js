// An agent (`/console/agents/{workflow_uuid}`, scopes `calls` and `admin`): its facts, its draft
// in an editor beside its published definition, and its versions. `Save draft` sends the text as
// PUT …/draft (a new version each time; a refusal's problems are shown at their place in the
// text), `Publish` publishes the draft the page shows, naming its version so a draft saved
// elsewhere meanwhile is never published unseen (409), and `Archive` asks once more, since an
// archived agent answers no call and is changed no more. An older version can be opened in the
// editor and saved as the new draft.
import { html, useCallback, useEffect, useState } from './vendor-htm-preact.js';
import { api, ApiError } from './api.js';
import { DefinitionEditor, definitionText, parseDefinition } from './definition-editor.js';
import { Pager, useCursorPages } from './paging.js';
import { ErrorBox, formatTime, Link } from './ui.js';
/** @import { DefinitionProblem } from './definition-editor.js' */
/** @import { CursorPages } from './paging.js' */
/** @import { PageProps } from './pages.js' */
/** @import { WorkflowDefinitionVersion, WorkflowVersion, WorkflowWithVersions } from './types.js' */

const VERSIONS_PAGE_SIZE = 10;

/**
 * A version's definition, or null when there is no such version.
 * @param {string} uuid
 * @param {number | null} version
 * @returns {Promise<WorkflowDefinitionVersion | null>}
 */
function readVersion(uuid, version) {
  return version === null ? Promise.resolve(null) : api(`/workflows/${uuid}/versions/${version}`);
}

/**
 * @typedef {object} Loaded
 * @property {WorkflowWithVersions} workflow
 * @property {WorkflowDefinitionVersion | null} published
 * @property {WorkflowDefinitionVersion | null} draft
 */

/** @param {PageProps} props */
export function AgentPage({ params }) {
  const uuid = params[0] ?? '';
  const [loaded, setLoaded] = useState(/** @type {Loaded | null} */ (null));
  // The text in the editor, what it was loaded as (to know it changed), and what was last sent.
  const [text, setText] = useState('');
  const [base, setBase] = useState('');
  const [sent, setSent] = useState('');
  const [problems, setProblems] = useState(/** @type {DefinitionProblem[]} */ ([]));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [status, setStatus] = useState('');
  const [busy, setBusy] = useState(false);
  const [confirming, setConfirming] = useState(false);
  /** @type {CursorPages<WorkflowVersion>} */
  const versions = useCursorPages(`/workflows/${uuid}/versions`, VERSIONS_PAGE_SIZE);
  const focusOnMount = useCallback((/** @type {HTMLElement | null} */ el) => el?.focus(), []);

  const load = useCallback(async () => {
    /** @type {WorkflowWithVersions} */
    const workflow = await api(`/workflows/${uuid}`);
    const [published, draft] = await Promise.all([readVersion(uuid, workflow.published_version), readVersion(uuid, workflow.draft_version)]);
    setLoaded({ workflow, published, draft });
    // The editor holds the draft, or the published definition to start one from.
    const start = definitionText((draft ?? published)?.definition ?? {});
    setText(start);
    setBase(start);
    setProblems([]);
  }, [uuid]);
  useEffect(() => {
    load().catch(setError);
  }, [load]);

  if (!loaded) return html`<section><h1>Agent</h1>${error ? html`<${ErrorBox} error=${error} />` : html`<p>Loading…</p>`}<p><${Link} href="/console/agents">Back to the agents</${Link}></p></section>`;
  const { workflow, published, draft } = loaded;
  const archived = workflow.status === 'archived';
  const edited = text !== base;

  /**
   * Runs one change, then reads the agent again.
   * @param {() => Promise<string>} change answers what to say once done
   */
  const act = async (change) => {
    setError(null);
    setStatus('');
    setBusy(true);
    try {
      const said = await change();
      await Promise.all([load(), versions.load()]);
      setStatus(said);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const saveDraft = async () => {
    setSent(text);
    const parsed = parseDefinition(text);
    if (!parsed.ok) {
      setError(null);
      setStatus('');
      setProblems([parsed.problem]);
      return;
    }
    setProblems([]);
    setError(null);
    setStatus('');
    setBusy(true);
    try {
      /** @type {WorkflowDefinitionVersion} */
      const saved = await api(`/workflows/${uuid}/draft`, { method: 'PUT', body: parsed.value });
      await Promise.all([load(), versions.load()]);
      setStatus(`Saved as draft v${saved.version}.`);
    } catch (e) {
      // The draft's body is the definition: the API's pointers are into the text as sent.
      // Those with a place are shown in the editor, the rest (and the problem's own words) above it.
      const placed = e instanceof ApiError ? e.errors.filter((p) => p.pointer !== undefined) : [];
      setProblems(placed);
      setError(e instanceof ApiError ? new ApiError(e.status, { code: e.code, detail: e.message, errors: e.errors.filter((p) => !placed.includes(p)) }) : e);
    } finally {
      setBusy(false);
    }
  };
  const publish = () =>
    act(async () => {
      /** @type {WorkflowWithVersions} */
      const done = await api(`/workflows/${uuid}/publish`, { method: 'POST', body: { version: workflow.draft_version } });
      return `Published v${done.published_version}.`;
    });
  const archive = () => {
    setConfirming(false);
    return act(async () => {
      await api(`/workflows/${uuid}/archive`, { method: 'POST' });
      return 'Archived.';
    });
  };
  /** @param {number} version */
  const openVersion = async (version) => {
    setError(null);
    try {
      const read = await readVersion(uuid, version);
      if (read) setText(definitionText(read.definition));
      setProblems([]);
      setStatus(`Version ${version} is in the editor: Save draft makes it the new draft.`);
    } catch (e) {
      setError(e);
    }
  };

  return html`<section>
    <p><${Link} href="/console/agents">Back to the agents</${Link}></p>
    <h1 data-testid="agent-title">${workflow.name}</h1>
    <dl class="facts two-up">
      <dt>Workflow UUID</dt><dd><code>${workflow.workflow_uuid}</code></dd>
      <dt>State</dt><dd data-testid="agent-status">${workflow.status}</dd>
      <dt>Published</dt><dd data-testid="agent-published">${workflow.published_version === null ? 'nothing' : `v${workflow.published_version}`}</dd>
      <dt>Draft</dt><dd data-testid="agent-draft">${workflow.draft_version === null ? 'none' : `v${workflow.draft_version}`}</dd>
      <dt>Agent UUIDs</dt><dd data-testid="agent-uuids">${workflow.agent_uuids.length ? workflow.agent_uuids.map((a, i) => html`${i ? ', ' : ''}<code>${a}</code>`) : '—'}</dd>
      <dt>Variables</dt><dd>${workflow.variables.length ? workflow.variables.join(', ') : '—'}</dd>
      <dt>Updated</dt><dd>${formatTime(workflow.updated_at)}</dd>
    </dl>
    ${archived ? html`<p class="hint" data-testid="agent-archived">Archived: its agent UUIDs answer no call and it is changed no more.</p>` : null}
    <${ErrorBox} error=${error} />
    <div class="side-by-side definitions">
      <div>
        <h2>${draft ? `Draft v${draft.version}` : 'Draft'}</h2>
        ${archived ? null : html`<p class="hint">${draft ? 'The test operations run it; Publish makes calls run it.' : 'No draft: this is the published definition, to start one from.'}</p>`}
        <${DefinitionEditor} id="draft-definition" label="Draft definition (JSON)" text=${text} onText=${setText} problems=${problems} problemsText=${sent} readOnly=${archived} />
      </div>
      <div>
        <h2>${published ? `Published v${published.version}` : 'Published'}</h2>
        ${published
          ? html`<pre class="definition" data-testid="published-definition" tabindex="0" aria-label="Published definition">${definitionText(published.definition)}</pre>`
          : html`<p class="empty">Nothing published.</p>`}
      </div>
    </div>
    ${archived
      ? null
      : html`<div class="actions">
          <button type="button" disabled=${busy} onClick=${saveDraft}>Save draft</button>
          <button type="button" disabled=${busy || !draft || edited} onClick=${publish}>${draft ? `Publish v${draft.version}` : 'Publish'}</button>
          ${confirming
            ? html`<button type="button" class="danger" ref=${focusOnMount} disabled=${busy} onClick=${archive}>Confirm archive</button>
                <button type="button" class="secondary" onClick=${() => setConfirming(false)}>Keep it</button>`
            : html`<button type="button" class="secondary" disabled=${busy} onClick=${() => setConfirming(true)}>Archive</button>`}
        </div>
        <p class="hint">${!draft ? 'Save a draft to publish it.' : edited ? 'The editor holds unsaved changes: save them as a draft before publishing.' : ''}</p>`}
    ${confirming ? html`<p class="hint" role="status">An archived agent answers no call (its agent UUIDs stop answering) and cannot be changed again; runs already queued keep their definition.</p>` : null}
    <p class="hint" role="status" data-testid="agent-status-line">${status}</p>
    <h2>Versions</h2>
    <${ErrorBox} error=${versions.error} />
    ${versions.page === null
      ? html`<p>Loading…</p>`
      : html`<div class="table-wrap"><table class="cards">
          <caption class="visually-hidden">Versions, newest first</caption>
          <thead><tr><th scope="col">Version</th><th scope="col">State</th><th scope="col">Saved</th><th scope="col">Published</th><th scope="col">Agent UUIDs</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
          <tbody>${versions.page.data.map(
            (v) => html`<tr key=${v.version} data-testid="version-row" data-version=${v.version} data-status=${v.status}>
              <td data-label="Version">v${v.version}</td>
              <td data-label="State">${v.status}</td>
              <td data-label="Saved">${formatTime(v.created_at)}</td>
              <td data-label="Published">${formatTime(v.published_at)}</td>
              <td data-label="Agent UUIDs" class="wide">${v.agent_uuids.map((a, i) => html`${i ? ', ' : ''}<code>${a}</code>`)}</td>
              <td>${archived ? null : html`<button type="button" class="secondary" aria-label=${`Open v${v.version} in the editor`} onClick=${() => openVersion(v.version)}>Open in the editor</button>`}</td>
            </tr>`,
          )}</tbody>
        </table></div>`}
    <${Pager} pages=${versions} />
  </section>`;
}
