// What a run runs: its pinned definition, its template context and its telephony configuration,
// for the provider callbacks (Twilio's answer TwiML) and the agent runtime API.
import type { Store } from '../store/store.js';
import { decodeJson } from '../store/store.js';
import type { TelephonyConfigurationRow, WorkflowRunRow } from '../store/schema.js';
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
  const row = await store.db
    .selectFrom('workflow_runs as r')
    .innerJoin('workflow_definitions as d', 'd.id', 'r.definition_id')
    .innerJoin('workflows as w', 'w.id', 'r.workflow_id')
    .select(['r.id', 'r.name', 'r.org_id', 'r.state', 'r.mode', 'r.provider_call_id', 'r.created_at', 'r.initial_context', 'r.telephony_configuration_id', 'd.version', 'd.graph', 'w.workflow_uuid'])
    .where('r.id', '=', runId)
    .executeTakeFirst();
  if (!row) return undefined;
  const configuration = await store.db.selectFrom('telephony_configurations').selectAll().where('id', '=', row.telephony_configuration_id).executeTakeFirstOrThrow();
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
