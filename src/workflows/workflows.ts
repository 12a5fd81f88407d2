// Workflows and their versions. Definitions are immutable once saved: saving a draft always adds a
// version (archiving the previous draft), so a run that pinned a definition keeps exactly what it
// started with. Publishing promotes the draft and archives the previous published version.
import { randomUUID } from 'node:crypto';
import type { Transaction } from 'kysely';
import { DialtoneError, validationFailed } from '../errors.js';
import type { Database, DefinitionRow, WorkflowRow } from '../store/schema.js';
import { decodeJson, type Store } from '../store/store.js';
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
 * the README's example is, keeps its agent UUIDs from version to version.
 */
async function inheritTriggerUuids(trx: Transaction<Database>, workflowId: number, graph: DefinitionGraph): Promise<DefinitionGraph> {
  const latest = await trx
    .selectFrom('workflow_definitions')
    .select('graph')
    .where('workflow_id', '=', workflowId)
    .where('status', 'in', ['draft', 'published'])
    .orderBy('version', 'desc')
    .executeTakeFirst();
  const inherited = new Map(latest ? triggersOf(decodeJson<DefinitionGraph>(latest.graph)).map((t) => [t.nodeId, t.triggerUuid] as const) : []);
  return mintTriggerUuids(graph, inherited);
}

/**
 * Registers the definition's trigger UUIDs for this workflow. A trigger UUID belongs to one
 * workflow forever (agent UUIDs are globally unique): one owned by another workflow is refused.
 */
async function claimTriggers(
  trx: Transaction<Database>,
  workflow: Pick<WorkflowRow, 'id' | 'org_id'>,
  graph: DefinitionGraph,
  now: number,
): Promise<void> {
  const uuids = triggersOf(graph).map((t) => t.triggerUuid);
  if (uuids.length === 0) return;
  const owned = await trx
    .selectFrom('api_triggers')
    .select(['trigger_uuid', 'workflow_id'])
    .where('trigger_uuid', 'in', uuids)
    .execute();
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
  if (fresh.length > 0) {
    await trx
      .insertInto('api_triggers')
      .values(fresh.map((trigger_uuid) => ({ trigger_uuid, workflow_id: workflow.id, org_id: workflow.org_id, created_at: now })))
      .execute();
  }
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
  return store.db.transaction().execute(async (trx) => {
    const workflow = await trx
      .insertInto('workflows')
      .values({ workflow_uuid: randomUUID(), org_id: input.orgId, name: input.name, status: 'active', created_at: now, updated_at: now })
      .returning(['id', 'org_id', 'workflow_uuid'])
      .executeTakeFirstOrThrow();
    await claimTriggers(trx, workflow, graph, now);
    await trx
      .insertInto('workflow_definitions')
      .values({ workflow_id: workflow.id, version: 1, status: 'published', graph: JSON.stringify(graph), created_at: now, published_at: now })
      .execute();
    return { workflow_uuid: workflow.workflow_uuid, version: 1, status: 'published', agent_uuids: triggersOf(graph).map((t) => t.triggerUuid) };
  });
}

async function findWorkflow(trx: Transaction<Database> | Store['db'], workflowUuid: string): Promise<WorkflowRow> {
  const workflow = isUuid(workflowUuid)
    ? await trx.selectFrom('workflows').selectAll().where('workflow_uuid', '=', workflowUuid.toLowerCase()).executeTakeFirst()
    : undefined;
  if (!workflow) throw new DialtoneError('workflow_not_found', `No workflow ${workflowUuid}.`);
  return workflow;
}

export async function saveDraft(store: Store, workflowUuid: string, definition: unknown, now: number): Promise<DefinitionSummary> {
  const submitted = validateGraph(definition);
  return store.db.transaction().execute(async (trx) => {
    const workflow = await findWorkflow(trx, workflowUuid);
    if (workflow.status === 'archived') throw new DialtoneError('workflow_not_found', `Workflow ${workflowUuid} is archived.`);
    const graph = await inheritTriggerUuids(trx, workflow.id, submitted);
    await claimTriggers(trx, workflow, graph, now);
    const latest = await trx
      .selectFrom('workflow_definitions')
      .select((eb) => eb.fn.max('version').as('version'))
      .where('workflow_id', '=', workflow.id)
      .executeTakeFirst();
    const version = Number(latest?.version ?? 0) + 1;
    await trx.updateTable('workflow_definitions').set({ status: 'archived' }).where('workflow_id', '=', workflow.id).where('status', '=', 'draft').execute();
    await trx
      .insertInto('workflow_definitions')
      .values({ workflow_id: workflow.id, version, status: 'draft', graph: JSON.stringify(graph), created_at: now, published_at: null })
      .execute();
    await trx.updateTable('workflows').set({ updated_at: now }).where('id', '=', workflow.id).execute();
    return { workflow_uuid: workflow.workflow_uuid, version, status: 'draft', agent_uuids: triggersOf(graph).map((t) => t.triggerUuid) };
  });
}

export async function publishDraft(store: Store, workflowUuid: string, now: number): Promise<DefinitionSummary> {
  return store.db.transaction().execute(async (trx) => {
    const workflow = await findWorkflow(trx, workflowUuid);
    if (workflow.status === 'archived') throw new DialtoneError('workflow_not_found', `Workflow ${workflowUuid} is archived.`);
    const draft = await trx
      .selectFrom('workflow_definitions')
      .selectAll()
      .where('workflow_id', '=', workflow.id)
      .where('status', '=', 'draft')
      .executeTakeFirst();
    if (!draft) throw new DialtoneError('not_found', `Workflow ${workflowUuid} has no draft to publish.`);
    // Archive first: the store allows one published definition per workflow at any instant.
    await trx.updateTable('workflow_definitions').set({ status: 'archived' }).where('workflow_id', '=', workflow.id).where('status', '=', 'published').execute();
    await trx.updateTable('workflow_definitions').set({ status: 'published', published_at: now }).where('id', '=', draft.id).execute();
    await trx.updateTable('workflows').set({ updated_at: now }).where('id', '=', workflow.id).execute();
    const graph = decodeJson<DefinitionGraph>(draft.graph);
    return { workflow_uuid: workflow.workflow_uuid, version: draft.version, status: 'published', agent_uuids: triggersOf(graph).map((t) => t.triggerUuid) };
  });
}

export async function archiveWorkflow(store: Store, workflowUuid: string, now: number): Promise<void> {
  const workflow = await findWorkflow(store.db, workflowUuid);
  await store.db.updateTable('workflows').set({ status: 'archived', updated_at: now }).where('id', '=', workflow.id).execute();
}

export interface WorkflowDetails {
  workflow_uuid: string;
  org_id: number;
  name: string;
  status: WorkflowRow['status'];
  definitions: { id: number; version: number; status: DefinitionRow['status']; created_at: number; published_at: number | null; agent_uuids: string[] }[];
}

export async function showWorkflow(store: Store, workflowUuid: string): Promise<WorkflowDetails> {
  const workflow = await findWorkflow(store.db, workflowUuid);
  const definitions = await store.db
    .selectFrom('workflow_definitions')
    .selectAll()
    .where('workflow_id', '=', workflow.id)
    .orderBy('version', 'desc')
    .execute();
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
      agent_uuids: triggersOf(decodeJson<DefinitionGraph>(d.graph)).map((t) => t.triggerUuid),
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
  const workflow = await findWorkflow(store.db, workflowUuid);
  let query = store.db.selectFrom('workflow_definitions').selectAll().where('workflow_id', '=', workflow.id);
  query = version === undefined ? query.where('status', 'in', ['draft', 'published']).orderBy('version', 'desc') : query.where('version', '=', version);
  const row = await query.executeTakeFirst();
  if (!row) throw new DialtoneError('not_found', version === undefined ? `Workflow ${workflowUuid} has no current definition.` : `Workflow ${workflowUuid} has no version ${version}.`);
  return { workflow_uuid: workflow.workflow_uuid, version: row.version, status: row.status, definition: decodeJson<DefinitionGraph>(row.graph) };
}

export interface WorkflowListItem {
  workflow_uuid: string;
  name: string;
  status: WorkflowRow['status'];
  published_version: number | null;
  draft_version: number | null;
  /** The published version's agent UUIDs: what the non-test operations answer to. */
  agent_uuids: string[];
  created_at: number;
  updated_at: number;
}

/** An organization's workflows, oldest first, with their published and draft versions. */
export async function listWorkflows(store: Store, orgId: number): Promise<WorkflowListItem[]> {
  const workflows = await store.db.selectFrom('workflows').selectAll().where('org_id', '=', orgId).orderBy('id').execute();
  if (workflows.length === 0) return [];
  const current = await store.db
    .selectFrom('workflow_definitions')
    .select(['workflow_id', 'version', 'status', 'graph'])
    .where('workflow_id', 'in', workflows.map((w) => w.id))
    .where('status', 'in', ['draft', 'published'])
    .execute();
  return workflows.map((w) => {
    const published = current.find((d) => d.workflow_id === w.id && d.status === 'published');
    const draft = current.find((d) => d.workflow_id === w.id && d.status === 'draft');
    return {
      workflow_uuid: w.workflow_uuid,
      name: w.name,
      status: w.status,
      published_version: published?.version ?? null,
      draft_version: draft?.version ?? null,
      agent_uuids: published ? triggersOf(decodeJson<DefinitionGraph>(published.graph)).map((t) => t.triggerUuid) : [],
      created_at: w.created_at,
      updated_at: w.updated_at,
    };
  });
}
