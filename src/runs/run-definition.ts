// What a run runs: its pinned definition, its template context and its telephony configuration,
// for the provider callbacks (Twilio's answer TwiML) and the agent runtime API.
import { selectRunConfiguration, selectRunWithDefinition } from '../store/statements/run-reads.js';
import type { Store } from '../store/engine/store.js';
import { decodeJson } from '../store/engine/store.js';
import type { TelephonyConfigurationRow, WorkflowRunRow } from '../store/schema/schema.js';
import { templateContext, type DefinitionGraph } from '../workflows/definition.js';
import type { TemplateContext } from '../workflows/templates.js';

export interface RunDefinition {
  run: Pick<WorkflowRunRow, 'id' | 'name' | 'org_id' | 'state' | 'mode' | 'provider_call_id' | 'created_at'>;
  workflowUuid: string;
  version: number;
  graph: DefinitionGraph;
  context: TemplateContext;
  configuration: TelephonyConfigurationRow;
}

export async function loadRunDefinition(store: Store, runId: number): Promise<RunDefinition | undefined> {
  const row = await selectRunWithDefinition(store, runId);
  if (!row) return undefined;
  const configuration = await selectRunConfiguration(store, row.telephony_configuration_id);
  const graph = decodeJson<DefinitionGraph>(row.graph);
  const initialContext = row.initial_context === null ? null : (JSON.parse(row.initial_context) as TemplateContext);
  return {
    run: { id: row.id, name: row.name, org_id: row.org_id, state: row.state, mode: row.mode, provider_call_id: row.provider_call_id, created_at: row.created_at },
    workflowUuid: row.workflow_uuid,
    version: row.version,
    graph,
    context: templateContext(graph, initialContext),
    configuration,
  };
}
