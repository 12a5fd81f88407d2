// Test call: start a call through the test operation (an agent, a number, a route and an initial
// context, with the agent's variables named) and land on its page.
import { html, useEffect, useState } from './vendor-htm-preact.js';
import { api, ApiError } from './api.js';
import { ErrorBox, fieldSetter, navigate } from './ui.js';
/** @import { Page, TelephonyConfiguration, Workflow } from './types.js' */

/**
 * The variable names of the version a test call through `agent` runs: the draft's when the agent
 * is in the draft (the test operation prefers it), else the published version's.
 * @param {Workflow[]} workflows
 * @param {string} agent
 * @returns {string[]}
 */
function agentVariables(workflows, agent) {
  const workflow = workflows.find((w) => w.draft_agent_uuids.includes(agent)) ?? workflows.find((w) => w.agent_uuids.includes(agent));
  if (!workflow) return [];
  return workflow.draft_agent_uuids.includes(agent) ? workflow.draft_variables : workflow.variables;
}

/**
 * An initial context naming each variable, as the textarea's placeholder and the parse error's example.
 * @param {string[]} names
 */
const contextExample = (names) => JSON.stringify(Object.fromEntries(names.map((name) => [name, '…'])));

export function TestCallPage() {
  const [workflows, setWorkflows] = useState(/** @type {Workflow[]} */ ([]));
  const [routes, setRoutes] = useState(/** @type {TelephonyConfiguration[]} */ ([]));
  const [form, setForm] = useState({ agent: '', phone: '', context: '', route: '' });
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    /** @type {Promise<Page<Workflow>>} */
    const readWorkflows = api('/workflows');
    readWorkflows.then(
      (r) => {
        // An archived workflow cannot be called.
        const active = r.data.filter((w) => w.status === 'active');
        setWorkflows(active);
        const first = active.flatMap((w) => [...w.draft_agent_uuids, ...w.agent_uuids])[0];
        if (first) setForm((f) => ({ ...f, agent: f.agent || first }));
      },
      setError,
    );
    /** @type {Promise<Page<TelephonyConfiguration>>} */
    const readRoutes = api('/telephony-configurations');
    readRoutes.then((r) => setRoutes(r.data), setError);
  }, []);
  const set = fieldSetter(form, setForm);
  const variables = agentVariables(workflows, form.agent);
  const example = contextExample(variables);
  /** @param {SubmitEvent} event */
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    /** @type {unknown} */
    let context = null;
    if (form.context.trim()) {
      try {
        context = JSON.parse(form.context);
      } catch {
        setError(new ApiError(0, { detail: `The initial context must be a JSON object, for example ${example}.` }));
        return;
      }
    }
    setBusy(true);
    try {
      /** @type {{ phone_number: string, initial_context: unknown, telephony_configuration_id?: number }} */
      const body = { phone_number: form.phone.trim(), initial_context: context };
      if (form.route) body.telephony_configuration_id = Number(form.route);
      /** @type {{ workflow_run_id: number }} */
      const created = await api(`/agent/test/${encodeURIComponent(form.agent)}`, { method: 'POST', body });
      navigate(`/console/runs/${created.workflow_run_id}`);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<section>
    <h1>Test call</h1>
    <p>Starts a call through the test operation: the agent's draft if it has one, else its published version.</p>
    <form class="stacked" onSubmit=${submit}>
      <label for="agent">Agent</label>
      <select id="agent" required value=${form.agent} onChange=${set('agent')}>
        ${workflows.flatMap((w) => [
          ...w.draft_agent_uuids.map((uuid) => html`<option value=${uuid}>${w.name} (draft v${w.draft_version}) ${uuid}</option>`),
          ...w.agent_uuids.map((uuid) => html`<option value=${uuid}>${w.name} (published v${w.published_version}) ${uuid}</option>`),
        ])}
      </select>
      <label for="phone">Phone number</label>
      <input id="phone" type="tel" required placeholder="+12025550123" value=${form.phone} onInput=${set('phone')} />
      <label for="route">Route</label>
      <select id="route" value=${form.route} onChange=${set('route')}>
        <option value="">The organization's default</option>
        ${routes.map((r) => html`<option value=${String(r.id)}>${r.name} (${r.provider}${r.status === 'active' ? '' : `, ${r.status}`})</option>`)}
      </select>
      <label for="context">Initial context (JSON object, optional)</label>
      <p class="hint" id="context-variables" data-testid="agent-variables">${variables.length ? `This agent's variables: ${variables.join(', ')}.` : 'This agent has no variables.'}</p>
      <textarea id="context" rows="5" spellcheck="false" aria-describedby="context-variables" placeholder=${example} value=${form.context} onInput=${set('context')}></textarea>
      <div class="actions"><button type="submit" disabled=${busy || !form.agent}>Start test call</button></div>
    </form>
    <${ErrorBox} error=${error} />
  </section>`;
}

