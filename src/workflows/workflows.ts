// Workflows and their versions. Definitions are immutable once saved: saving a draft always adds a
// version (archiving the previous draft), so a run that pinned a definition keeps exactly what it
// started with. Publishing promotes the draft and archives the previous published version. Every
// change locks its workflow first and is recorded in the audit log in its own transaction
// (`workflow.created`, `workflow.draft_saved`, `workflow.published`, `workflow.archived`).
import { randomUUID } from 'node:crypto';
import { CLI_ACTOR, recordAuditEvent, type AuditActor } from '../audit/audit-log.js';
import { DialtoneError, validationFailed } from '../errors.js';
import type { DefinitionRow, WorkflowRow } from '../store/schema/schema.js';
import { plainTransaction, type Connection, type Store, type StoreTransaction } from '../store/engine/store.js';
import {
  insertDefinition,
  insertTriggers,
  insertWorkflow,
  selectCurrentDefinitions,
  selectDefinitionPage,
  selectDefinitionsOfWorkflow,
  selectDefinitionVersion,
  selectDraft,
  selectHighestVersion,
  selectLatestCurrentGraph,
  selectTriggerOwners,
  selectWorkflowByUuid,
  selectWorkflowForChange,
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

/** Who changes a workflow and within which organization (the API); the CLI on the database names any workflow. */
export interface WorkflowChangeOptions {
  /** Only a workflow of this organization is found: another organization's answers workflow_not_found, like an absent one. */
  orgId?: number;
  /** Who changes it, for the audit log (the CLI unless told). */
  actor?: AuditActor;
}

/** Runs in the creating transaction, after the workflow and its audit entry (an Idempotency-Key's answer stored with them). */
export type OnCreated<T> = (trx: StoreTransaction, created: T) => Promise<void>;

/** The workflow as the audit log records it before and after a change. */
interface AuditedWorkflow {
  workflow_uuid: string;
  name: string;
  status: WorkflowRow['status'];
  published_version: number | null;
  draft_version: number | null;
  /** The definition the change saved (a creation, a draft), or the draft it replaced. */
  definition?: DefinitionGraph | null;
}

async function auditedState(trx: StoreTransaction, workflow: WorkflowRow): Promise<AuditedWorkflow> {
  const current = await selectCurrentDefinitions(trx, [workflow.id]);
  return {
    workflow_uuid: workflow.workflow_uuid,
    name: workflow.name,
    status: workflow.status,
    published_version: current.find((d) => d.status === 'published')?.version ?? null,
    draft_version: current.find((d) => d.status === 'draft')?.version ?? null,
  };
}

export async function createWorkflow(
  store: Store,
  input: { orgId: number; name: string; definition: unknown },
  now: number,
  options: { actor?: AuditActor; onCreated?: OnCreated<DefinitionSummary> } = {},
): Promise<DefinitionSummary> {
  const graph = mintTriggerUuids(validateGraph(input.definition));
  return plainTransaction(store, async (trx) => {
    const workflow = await insertWorkflow(trx, { workflow_uuid: randomUUID(), org_id: input.orgId, name: input.name }, now);
    await claimTriggers(trx, workflow, graph, now);
    await insertDefinition(trx, { workflow_id: workflow.id, version: 1, status: 'published', graph, created_at: now, published_at: now });
    const after: AuditedWorkflow = { workflow_uuid: workflow.workflow_uuid, name: input.name, status: 'active', published_version: 1, draft_version: null, definition: graph };
    await recordAuditEvent(trx, { orgId: input.orgId, actor: options.actor ?? CLI_ACTOR, action: 'workflow.created', target: { type: 'workflow', id: workflow.workflow_uuid }, after, at: now });
    const created: DefinitionSummary = { workflow_uuid: workflow.workflow_uuid, version: 1, status: 'published', agent_uuids: triggersOf(graph).map((t) => t.triggerUuid) };
    await options.onCreated?.(trx, created);
    return created;
  });
}

function notFound(workflowUuid: string): DialtoneError {
  return new DialtoneError('workflow_not_found', `No workflow ${workflowUuid}.`);
}

async function findWorkflow(on: Connection, workflowUuid: string, orgId?: number): Promise<WorkflowRow> {
  const workflow = isUuid(workflowUuid) ? await selectWorkflowByUuid(on, workflowUuid.toLowerCase()) : undefined;
  if (!workflow || (orgId !== undefined && workflow.org_id !== orgId)) throw notFound(workflowUuid);
  return workflow;
}

/**
 * The workflow, locked for the rest of the transaction (selectWorkflowForChange), so concurrent
 * changes of one workflow apply one after the other.
 */
async function lockedWorkflow(trx: StoreTransaction, workflowUuid: string, orgId: number | undefined): Promise<WorkflowRow> {
  const workflow = isUuid(workflowUuid) ? await selectWorkflowForChange(trx, workflowUuid.toLowerCase()) : undefined;
  if (!workflow || (orgId !== undefined && workflow.org_id !== orgId)) throw notFound(workflowUuid);
  return workflow;
}

/** The workflow to change, locked (lockedWorkflow). An archived workflow is changed no more: 409 workflow_state_conflict. */
async function workflowToChange(trx: StoreTransaction, workflowUuid: string, orgId: number | undefined): Promise<WorkflowRow> {
  const workflow = await lockedWorkflow(trx, workflowUuid, orgId);
  if (workflow.status === 'archived') throw new DialtoneError('workflow_state_conflict', `Workflow ${workflowUuid} is archived: nothing changes it any more.`, { extra: { state: 'archived' } });
  return workflow;
}

export async function saveDraft(
  store: Store,
  workflowUuid: string,
  definition: unknown,
  now: number,
  options: WorkflowChangeOptions & { onCreated?: OnCreated<DefinitionSummary> } = {},
): Promise<DefinitionSummary> {
  const submitted = validateGraph(definition);
  return plainTransaction(store, async (trx) => {
    const workflow = await workflowToChange(trx, workflowUuid, options.orgId);
    const graph = await inheritTriggerUuids(trx, workflow.id, submitted);
    await claimTriggers(trx, workflow, graph, now);
    const before = await auditedState(trx, workflow);
    const previousDraft = await selectDraft(trx, workflow.id);
    const version = (await selectHighestVersion(trx, workflow.id)) + 1;
    await setDefinitionsArchived(trx, workflow.id, 'draft');
    await insertDefinition(trx, { workflow_id: workflow.id, version, status: 'draft', graph, created_at: now, published_at: null });
    await setWorkflowUpdatedAt(trx, workflow.id, now);
    await recordAuditEvent(trx, {
      orgId: workflow.org_id,
      actor: options.actor ?? CLI_ACTOR,
      action: 'workflow.draft_saved',
      target: { type: 'workflow', id: workflow.workflow_uuid },
      before: { ...before, definition: previousDraft?.graph ?? null },
      after: { ...before, draft_version: version, definition: graph },
      at: now,
    });
    const saved: DefinitionSummary = { workflow_uuid: workflow.workflow_uuid, version, status: 'draft', agent_uuids: triggersOf(graph).map((t) => t.triggerUuid) };
    await options.onCreated?.(trx, saved);
    return saved;
  });
}

/**
 * Publishes the draft. With `version`, only if the draft is that version: a publish names what its
 * caller reviewed, and a draft saved since is not published in its place (409).
 */
export async function publishDraft(store: Store, workflowUuid: string, now: number, options: WorkflowChangeOptions & { version?: number } = {}): Promise<DefinitionSummary> {
  return plainTransaction(store, async (trx) => {
    const workflow = await workflowToChange(trx, workflowUuid, options.orgId);
    const draft = await selectDraft(trx, workflow.id);
    if (!draft || (options.version !== undefined && draft.version !== options.version)) {
      const detail = !draft ? `Workflow ${workflowUuid} has no draft to publish.` : `Workflow ${workflowUuid}'s draft is version ${draft.version}, not ${options.version}.`;
      throw new DialtoneError('workflow_state_conflict', detail, { extra: { state: workflow.status, draft_version: draft?.version ?? null } });
    }
    const before = await auditedState(trx, workflow);
    // Archive first: the store allows one published definition per workflow at any instant.
    await setDefinitionsArchived(trx, workflow.id, 'published');
    await setDefinitionPublished(trx, draft.id, now);
    await setWorkflowUpdatedAt(trx, workflow.id, now);
    const after: AuditedWorkflow = { ...before, published_version: draft.version, draft_version: null };
    await recordAuditEvent(trx, { orgId: workflow.org_id, actor: options.actor ?? CLI_ACTOR, action: 'workflow.published', target: { type: 'workflow', id: workflow.workflow_uuid }, before, after, at: now });
    return { workflow_uuid: workflow.workflow_uuid, version: draft.version, status: 'published', agent_uuids: triggersOf(draft.graph).map((t) => t.triggerUuid) };
  });
}

/** Archives a workflow: its agent UUIDs stop answering. Archiving an archived one changes and records nothing. */
export async function archiveWorkflow(store: Store, workflowUuid: string, now: number, options: WorkflowChangeOptions = {}): Promise<void> {
  await plainTransaction(store, async (trx) => {
    const workflow = await lockedWorkflow(trx, workflowUuid, options.orgId);
    if (workflow.status === 'archived') return;
    const before = await auditedState(trx, workflow);
    await setWorkflowArchived(trx, workflow.id, now);
    await recordAuditEvent(trx, { orgId: workflow.org_id, actor: options.actor ?? CLI_ACTOR, action: 'workflow.archived', target: { type: 'workflow', id: workflow.workflow_uuid }, before, after: { ...before, status: 'archived' }, at: now });
  });
}

export interface WorkflowDetails {
  workflow_uuid: string;
  org_id: number;
  name: string;
  status: WorkflowRow['status'];
  definitions: { id: number; version: number; status: DefinitionRow['status']; created_at: number; published_at: number | null; agent_uuids: string[] }[];
}

export async function showWorkflow(store: Store, workflowUuid: string, orgId?: number): Promise<WorkflowDetails> {
  const workflow = await findWorkflow(store, workflowUuid, orgId);
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
export async function getDefinition(store: Store, workflowUuid: string, version?: number, orgId?: number): Promise<DefinitionVersion> {
  const workflow = await findWorkflow(store, workflowUuid, orgId);
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

type CurrentDefinition = Awaited<ReturnType<typeof selectCurrentDefinitions>>[number];

function listItem(w: WorkflowRow, current: readonly CurrentDefinition[]): WorkflowListItem {
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
}

/** An organization's workflows, oldest first, with their published and draft versions. */
export async function listWorkflows(store: Store, orgId: number): Promise<WorkflowListItem[]> {
  const workflows = await selectWorkflowsOfOrganization(store, orgId);
  if (workflows.length === 0) return [];
  const current = await selectCurrentDefinitions(store, workflows.map((w) => w.id));
  return workflows.map((w) => listItem(w, current));
}

/** One version as listed: never its definition (getDefinition reads that). */
export interface VersionSummary {
  version: number;
  status: DefinitionRow['status'];
  created_at: number;
  published_at: number | null;
  agent_uuids: string[];
}

const summaryOf = (d: Pick<DefinitionRow, 'version' | 'status' | 'created_at' | 'published_at'> & { graph: DefinitionGraph }): VersionSummary => ({
  version: d.version,
  status: d.status,
  created_at: d.created_at,
  published_at: d.published_at,
  agent_uuids: triggersOf(d.graph).map((t) => t.triggerUuid),
});

/** One workflow as listed, with its published and draft versions; another organization's is workflow_not_found. */
export async function getWorkflow(on: Connection, workflowUuid: string, orgId: number): Promise<WorkflowListItem & { published: VersionSummary | null; draft: VersionSummary | null }> {
  const workflow = await findWorkflow(on, workflowUuid, orgId);
  const current = await selectCurrentDefinitions(on, [workflow.id]);
  const published = current.find((d) => d.status === 'published') ?? null;
  const draft = current.find((d) => d.status === 'draft') ?? null;
  return { ...listItem(workflow, current), published: published && summaryOf(published), draft: draft && summaryOf(draft) };
}

/** A page of a workflow's versions, newest first (below `beforeVersion` when given). */
export async function listVersions(store: Store, workflowUuid: string, orgId: number, page: { beforeVersion?: number; limit: number }): Promise<VersionSummary[]> {
  const workflow = await findWorkflow(store, workflowUuid, orgId);
  return (await selectDefinitionPage(store, workflow.id, page)).map(summaryOf);
}
