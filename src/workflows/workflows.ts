// Workflows and their versions. Definitions are immutable once saved: saving a draft always adds a
// version (archiving the previous draft), so a run that pinned a definition keeps exactly what it
// started with. Publishing promotes the draft and archives the previous published version.
import { randomUUID } from 'node:crypto';
import { DialtoneError, validationFailed } from '../errors.js';
import type { DefinitionRow, WorkflowRow } from '../store/schema/schema.js';
import { plainTransaction, type Connection, type Store, type StoreTransaction } from '../store/engine/store.js';
import {
  insertDefinition,
  insertTriggers,
  insertWorkflow,
  selectCurrentDefinitions,
  selectDefinitionsOfWorkflow,
  selectDefinitionVersion,
  selectDraft,
  selectHighestVersion,
  selectLatestCurrentGraph,
  selectTriggerOwners,
  selectWorkflowByUuid,
  selectWorkflowsOfOrganization,
  setDefinitionPublished,
  setDefinitionsArchived,
  setWorkflowArchived,
  setWorkflowUpdatedAt,
} from '../store/statements/workflow-statements.js';
import { isUuid, mintTriggerUuids, triggersOf, validateDefinition, type DefinitionGraph } from './definition.js';

export interface DefinitionSummary {
  workflow_uuid: string;
  version: number;
  status: DefinitionRow['status'];
  agent_uuids: string[];
}

/** Validates a definition; trigger UUIDs it omits are filled in later (see inheritTriggerUuids). */
function validateGraph(input: unknown): DefinitionGraph {
  const result = validateDefinition(input, { allowMissingTriggerUuids: true });
  if (!result.ok) throw validationFailed(result.errors, 'The definition is not valid.');
  return result.graph;
}

/**
 * Fills in the trigger UUIDs a new version omits from the workflow's latest version (its draft, else
 * its published one), matching trigger nodes by id: a definition saved without `trigger_uuid`, as
 * the example in docs/cli.md, "Agent definitions" is, keeps its agent UUIDs from version to version.
 */
async function inheritTriggerUuids(trx: StoreTransaction, workflowId: number, graph: DefinitionGraph): Promise<DefinitionGraph> {
  const latest = await selectLatestCurrentGraph(trx, workflowId);
  const inherited = new Map(latest ? triggersOf(latest).map((t) => [t.nodeId, t.triggerUuid] as const) : []);
  return mintTriggerUuids(graph, inherited);
}

/**
 * Registers the definition's trigger UUIDs for this workflow. A trigger UUID belongs to one
 * workflow forever (agent UUIDs are globally unique): one owned by another workflow is refused.
 */
async function claimTriggers(
  trx: StoreTransaction,
  workflow: Pick<WorkflowRow, 'id' | 'org_id'>,
  graph: DefinitionGraph,
  now: number,
): Promise<void> {
  const uuids = triggersOf(graph).map((t) => t.triggerUuid);
  if (uuids.length === 0) return;
  const owned = await selectTriggerOwners(trx, uuids);
  const foreign = owned.filter((row) => row.workflow_id !== workflow.id);
  if (foreign.length > 0) {
    throw validationFailed(
      foreign.map((row) => ({
        pointer: pointerOfTrigger(graph, row.trigger_uuid),
        detail: `Trigger UUID ${row.trigger_uuid} already belongs to another workflow.`,
      })),
      'The definition is not valid.',
    );
  }
  const known = new Set(owned.map((row) => row.trigger_uuid));
  const fresh = uuids.filter((uuid) => !known.has(uuid));
  if (fresh.length > 0) await insertTriggers(trx, workflow, fresh, now);
}

function pointerOfTrigger(graph: DefinitionGraph, uuid: string): string {
  const index = graph.nodes.findIndex((n) => String(n.data.trigger_uuid).toLowerCase() === uuid);
  return `/nodes/${index}/data/trigger_uuid`;
}

export async function createWorkflow(
  store: Store,
  input: { orgId: number; name: string; definition: unknown },
  now: number,
): Promise<DefinitionSummary> {
  const graph = mintTriggerUuids(validateGraph(input.definition));
  return plainTransaction(store, async (trx) => {
    const workflow = await insertWorkflow(trx, { workflow_uuid: randomUUID(), org_id: input.orgId, name: input.name }, now);
    await claimTriggers(trx, workflow, graph, now);
    await insertDefinition(trx, { workflow_id: workflow.id, version: 1, status: 'published', graph, created_at: now, published_at: now });
    return { workflow_uuid: workflow.workflow_uuid, version: 1, status: 'published', agent_uuids: triggersOf(graph).map((t) => t.triggerUuid) };
  });
}

async function findWorkflow(on: Connection, workflowUuid: string): Promise<WorkflowRow> {
  const workflow = isUuid(workflowUuid) ? await selectWorkflowByUuid(on, workflowUuid.toLowerCase()) : undefined;
  if (!workflow) throw new DialtoneError('workflow_not_found', `No workflow ${workflowUuid}.`);
  return workflow;
}

export async function saveDraft(store: Store, workflowUuid: string, definition: unknown, now: number): Promise<DefinitionSummary> {
  const submitted = validateGraph(definition);
  return plainTransaction(store, async (trx) => {
    const workflow = await findWorkflow(trx, workflowUuid);
    if (workflow.status === 'archived') throw new DialtoneError('workflow_not_found', `Workflow ${workflowUuid} is archived.`);
    const graph = await inheritTriggerUuids(trx, workflow.id, submitted);
    await claimTriggers(trx, workflow, graph, now);
    const version = (await selectHighestVersion(trx, workflow.id)) + 1;
    await setDefinitionsArchived(trx, workflow.id, 'draft');
    await insertDefinition(trx, { workflow_id: workflow.id, version, status: 'draft', graph, created_at: now, published_at: null });
    await setWorkflowUpdatedAt(trx, workflow.id, now);
    return { workflow_uuid: workflow.workflow_uuid, version, status: 'draft', agent_uuids: triggersOf(graph).map((t) => t.triggerUuid) };
  });
}

export async function publishDraft(store: Store, workflowUuid: string, now: number): Promise<DefinitionSummary> {
  return plainTransaction(store, async (trx) => {
    const workflow = await findWorkflow(trx, workflowUuid);
    if (workflow.status === 'archived') throw new DialtoneError('workflow_not_found', `Workflow ${workflowUuid} is archived.`);
    const draft = await selectDraft(trx, workflow.id);
    if (!draft) throw new DialtoneError('not_found', `Workflow ${workflowUuid} has no draft to publish.`);
    // Archive first: the store allows one published definition per workflow at any instant.
    await setDefinitionsArchived(trx, workflow.id, 'published');
    await setDefinitionPublished(trx, draft.id, now);
    await setWorkflowUpdatedAt(trx, workflow.id, now);
    return { workflow_uuid: workflow.workflow_uuid, version: draft.version, status: 'published', agent_uuids: triggersOf(draft.graph).map((t) => t.triggerUuid) };
  });
}

export async function archiveWorkflow(store: Store, workflowUuid: string, now: number): Promise<void> {
  const workflow = await findWorkflow(store, workflowUuid);
  await setWorkflowArchived(store, workflow.id, now);
}

export interface WorkflowDetails {
  workflow_uuid: string;
  org_id: number;
  name: string;
  status: WorkflowRow['status'];
  definitions: { id: number; version: number; status: DefinitionRow['status']; created_at: number; published_at: number | null; agent_uuids: string[] }[];
}

export async function showWorkflow(store: Store, workflowUuid: string): Promise<WorkflowDetails> {
  const workflow = await findWorkflow(store, workflowUuid);
  const definitions = await selectDefinitionsOfWorkflow(store, workflow.id);
  return {
    workflow_uuid: workflow.workflow_uuid,
    org_id: workflow.org_id,
    name: workflow.name,
    status: workflow.status,
    definitions: definitions.map((d) => ({
      id: d.id,
      version: d.version,
      status: d.status,
      created_at: d.created_at,
      published_at: d.published_at,
      agent_uuids: triggersOf(d.graph).map((t) => t.triggerUuid),
    })),
  };
}

export interface DefinitionVersion {
  workflow_uuid: string;
  version: number;
  status: DefinitionRow['status'];
  definition: DefinitionGraph;
}

/**
 * One version's definition graph, as saved (with its trigger UUIDs): the given version, or by
 * default the one an edit starts from, the draft if there is one, else the published version.
 */
export async function getDefinition(store: Store, workflowUuid: string, version?: number): Promise<DefinitionVersion> {
  const workflow = await findWorkflow(store, workflowUuid);
  const row = await selectDefinitionVersion(store, workflow.id, version);
  if (!row) throw new DialtoneError('not_found', version === undefined ? `Workflow ${workflowUuid} has no current definition.` : `Workflow ${workflowUuid} has no version ${version}.`);
  return { workflow_uuid: workflow.workflow_uuid, version: row.version, status: row.status, definition: row.graph };
}

export interface WorkflowListItem {
  workflow_uuid: string;
  name: string;
  status: WorkflowRow['status'];
  published_version: number | null;
  draft_version: number | null;
  /** The published version's agent UUIDs: what the non-test operations answer to. */
  agent_uuids: string[];
  /** The draft's agent UUIDs: what the test operations run the draft through. */
  draft_agent_uuids: string[];
  /** The published version's variable names, sorted (the initial_context keys it reads). */
  variables: string[];
  /** The draft's variable names. */
  draft_variables: string[];
  created_at: number;
  updated_at: number;
}

/** Sorted: PostgreSQL's jsonb does not keep a definition's key order, so it is not the same on both stores. */
function variableNames(graph: DefinitionGraph | undefined): string[] {
  return Object.keys(graph?.variables ?? {}).sort();
}

/** An organization's workflows, oldest first, with their published and draft versions. */
export async function listWorkflows(store: Store, orgId: number): Promise<WorkflowListItem[]> {
  const workflows = await selectWorkflowsOfOrganization(store, orgId);
  if (workflows.length === 0) return [];
  const current = await selectCurrentDefinitions(store, workflows.map((w) => w.id));
  return workflows.map((w) => {
    const published = current.find((d) => d.workflow_id === w.id && d.status === 'published');
    const draft = current.find((d) => d.workflow_id === w.id && d.status === 'draft');
    return {
      workflow_uuid: w.workflow_uuid,
      name: w.name,
      status: w.status,
      published_version: published?.version ?? null,
      draft_version: draft?.version ?? null,
      agent_uuids: published ? triggersOf(published.graph).map((t) => t.triggerUuid) : [],
      draft_agent_uuids: draft ? triggersOf(draft.graph).map((t) => t.triggerUuid) : [],
      variables: variableNames(published?.graph),
      draft_variables: variableNames(draft?.graph),
      created_at: w.created_at,
      updated_at: w.updated_at,
    };
  });
}
