// Which definition a call runs. An agent UUID (trigger) resolves to its workflow; then the
// definition is chosen by mode (published, or for tests the draft, else the published one); and
// for agent UUIDs, the chosen definition must itself contain that trigger, enabled.
import { DialtoneError } from '../errors.js';
import { NO_CACHE, type LookupCache } from '../shared/lookup-cache.js';
import type { DefinitionRow, RunMode, WorkflowRow } from '../store/schema/schema.js';
import type { Store } from '../store/engine/store.js';
import { selectActiveWorkflow, selectActiveWorkflowByTrigger, selectRunnableDefinition } from '../store/statements/workflow-statements.js';
import { isUuid, triggersOf, type DefinitionGraph } from '../workflows/definition.js';

export type Target = { kind: 'agent'; uuid: string } | { kind: 'workflow'; uuid: string };

export interface ResolvedTarget {
  workflow: Pick<WorkflowRow, 'id' | 'workflow_uuid'>;
  definition: Pick<DefinitionRow, 'id' | 'version' | 'status'>;
  graph: DefinitionGraph;
  triggerUuid: string | null;
}

/** What the store says about a target: found, or why not (errors are built only when raised). */
type TargetLookup =
  | { found: true; resolved: ResolvedTarget }
  | { found: false; code: 'agent_not_found' | 'workflow_not_found' | 'workflow_not_published'; detail: string };

export async function resolveTarget(store: Store, orgId: number, target: Target, mode: RunMode, cache: LookupCache = NO_CACHE): Promise<ResolvedTarget> {
  if (!isUuid(target.uuid)) throw notFound(target);
  const uuid = target.uuid.toLowerCase();
  const lookup = await cache.get(`target:${orgId}:${target.kind}:${uuid}:${mode}`, () => lookUpTarget(store, orgId, target.kind, uuid, mode));
  if (lookup.found) return lookup.resolved;
  if (lookup.code === 'workflow_not_published') throw new DialtoneError(lookup.code, lookup.detail);
  throw lookup.detail === '' ? notFound(target) : new DialtoneError(lookup.code, lookup.detail);
}

function notFound(target: Target): DialtoneError {
  return target.kind === 'agent'
    ? new DialtoneError('agent_not_found', `No agent ${target.uuid}.`)
    : new DialtoneError('workflow_not_found', `No workflow ${target.uuid}.`);
}

async function lookUpTarget(store: Store, orgId: number, kind: Target['kind'], uuid: string, mode: RunMode): Promise<TargetLookup> {
  const missing = { found: false, code: kind === 'agent' ? 'agent_not_found' : 'workflow_not_found', detail: '' } as const;
  const workflow = kind === 'agent' ? await selectActiveWorkflowByTrigger(store, orgId, uuid) : await selectActiveWorkflow(store, orgId, uuid);
  if (!workflow) return missing;

  const definition = await selectRunnableDefinition(store, workflow.id, mode);
  if (!definition) {
    return { found: false, code: 'workflow_not_published', detail: `Workflow ${workflow.workflow_uuid} has no published definition to run.` };
  }
  const { graph } = definition;

  if (kind === 'agent') {
    const trigger = triggersOf(graph).find((t) => t.triggerUuid === uuid);
    if (!trigger || !trigger.enabled) {
      return { found: false, code: 'agent_not_found', detail: `No enabled agent ${uuid} in the ${definition.status} definition.` };
    }
  }
  return {
    found: true,
    resolved: {
      workflow,
      definition: { id: definition.id, version: definition.version, status: definition.status },
      graph,
      triggerUuid: kind === 'agent' ? uuid : null,
    },
  };
}
