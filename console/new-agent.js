// New agent (`/console/agents/new`, scopes `calls` and `admin`): a name and a definition, sent as
// POST /workflows; the definition becomes the agent's published version 1, callable at once, and
// the page moves to the agent. The text starts as the smallest definition that works (an API
// trigger, a start with a greeting, an end), whose trigger UUID the service mints. A refusal's
// problems are shown at their place: under `/definition` in the editor, `/name` beside the name.
import { html, useState } from './vendor-htm-preact.js';
import { api, ApiError } from './api.js';
import { DefinitionEditor, definitionText, parseDefinition } from './definition-editor.js';
import { ErrorBox, Link, navigate, valueOf } from './ui.js';
/** @import { DefinitionProblem } from './definition-editor.js' */
/** @import { PageProps } from './pages.js' */
/** @import { WorkflowWithVersions } from './types.js' */

const STARTER = definitionText({
  nodes: [
    { id: 'trigger', type: 'api_trigger', data: { enabled: true } },
    { id: 'start', type: 'start', data: { greeting: 'Hello {{name | there}}' } },
    { id: 'end', type: 'end', data: {} },
  ],
  edges: [
    { source: 'trigger', target: 'start' },
    { source: 'start', target: 'end' },
  ],
  variables: { name: { description: 'Who is called' } },
});

/** @param {PageProps} _props */
export function NewAgentPage(_props) {
  const [name, setName] = useState('');
  const [text, setText] = useState(STARTER);
  const [sent, setSent] = useState(STARTER);
  const [problems, setProblems] = useState(/** @type {DefinitionProblem[]} */ ([]));
  const [nameProblems, setNameProblems] = useState(/** @type {string[]} */ ([]));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [busy, setBusy] = useState(false);

  /** @param {SubmitEvent} event */
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    setNameProblems([]);
    setSent(text);
    const parsed = parseDefinition(text);
    if (!parsed.ok) {
      setProblems([parsed.problem]);
      return;
    }
    setProblems([]);
    setBusy(true);
    try {
      /** @type {WorkflowWithVersions} */
      const created = await api('/workflows', { method: 'POST', body: { name: name.trim(), definition: parsed.value } });
      navigate(`/console/agents/${created.workflow_uuid}`);
    } catch (e) {
      if (!(e instanceof ApiError)) {
        setError(e);
        return;
      }
      // Pointers into the body: the definition's are under /definition, shown in the editor.
      const inDefinition = e.errors.filter((p) => p.pointer === '/definition' || p.pointer?.startsWith('/definition/'));
      setProblems(inDefinition.map((p) => ({ detail: p.detail, pointer: (p.pointer ?? '').slice('/definition'.length) })));
      setNameProblems(e.errors.filter((p) => p.pointer === '/name').map((p) => p.detail));
      const rest = e.errors.filter((p) => !inDefinition.includes(p) && p.pointer !== '/name');
      setError(new ApiError(e.status, { code: e.code, detail: e.message, errors: rest }));
    } finally {
      setBusy(false);
    }
  };

  return html`<section>
    <h1>New agent</h1>
    <p>Its definition (nodes and edges: see Create Workflow in <a href="/docs" target="_blank" rel="noopener">the API reference</a>) becomes its published version 1, callable at once through the agent UUID minted for its API trigger. <${Link} href="/console/agents">Back to the agents</${Link}></p>
    <form class="stacked wide-form" onSubmit=${submit} aria-label="New agent" novalidate>
      <${ErrorBox} error=${error} />
      <label for="agent-name">Name</label>
      <input id="agent-name" name="name" required maxlength="200" placeholder="Appointment reminder" value=${name} onInput=${(/** @type {Event} */ e) => setName(valueOf(e))} />
      ${nameProblems.length ? html`<ul class="field-problems" role="alert" data-testid="field-problem" data-pointer="/name">${nameProblems.map((p) => html`<li>${p}</li>`)}</ul>` : null}
      <${DefinitionEditor} id="agent-definition" label="Definition (JSON)" text=${text} onText=${setText} problems=${problems} problemsText=${sent} />
      <div class="actions"><button type="submit" disabled=${busy}>Create agent</button></div>
    </form>
  </section>`;
}
