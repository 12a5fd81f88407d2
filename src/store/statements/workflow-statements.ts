// Statements on workflows, their definitions (versions) and the registry of their trigger UUIDs
// (agent UUIDs). workflows/workflows.ts decides what a save, a publish or an archive writes, inside
// one transaction; admission/target.ts reads which definition a call runs. Definition graphs
// are stored as JSON and come back decoded.
import type { DefinitionGraph } from '../../workflows/definition.js';
import type { DefinitionRow, DefinitionStatus, RunMode, WorkflowRow } from '../schema/schema.js';
import { decodeJson, queryable, type Connection } from '../engine/store.js';

/** A definition row (or some of its columns) with its graph decoded. */
export type Decoded<R extends { graph: unknown }> = Omit<R, 'graph'> & { graph: DefinitionGraph };

function decodeDefinition<R extends { graph: unknown }>(row: R): Decoded<R> {
  return { ...row, graph: decodeJson<DefinitionGraph>(row.graph) };
}

// Workflows.

export function insertWorkflow(
  on: Connection,
  workflow: { workflow_uuid: string; org_id: number; name: string },
  now: number,
): Promise<Pick<WorkflowRow, 'id' | 'org_id' | 'workflow_uuid'>> {
  const trx = queryable(on);
  return trx
    .insertInto('workflows')
    .values({ ...workflow, status: 'active', created_at: now, updated_at: now })
    .returning(['id', 'org_id', 'workflow_uuid'])
    .executeTakeFirstOrThrow();
}

/** The workflow with this UUID (lower case), whatever its organization and status. */
export function selectWorkflowByUuid(on: Connection, workflowUuid: string): Promise<WorkflowRow | undefined> {
  return queryable(on).selectFrom('workflows').selectAll().where('workflow_uuid', '=', workflowUuid).executeTakeFirst();
}

/**
 * The workflow with this UUID (lower case), locked until the transaction ends (PostgreSQL: FOR
 * UPDATE; SQLite's one writer already runs the transaction alone): every change of a workflow
 * reads it this way first, so two changes of one workflow (two publishes, a draft saved during a
 * publish) run one after the other and the second sees what the first wrote, never a version
 * number or a draft the first has just replaced.
 */
export function selectWorkflowForChange(on: Connection, workflowUuid: string): Promise<WorkflowRow | undefined> {
  const query = queryable(on).selectFrom('workflows').selectAll().where('workflow_uuid', '=', workflowUuid);
  return (on.dialect === 'postgres' ? query.forUpdate() : query).executeTakeFirst();
}

export async function setWorkflowUpdatedAt(on: Connection, workflowId: number, now: number): Promise<void> {
  const trx = queryable(on);
  await trx.updateTable('workflows').set({ updated_at: now }).where('id', '=', workflowId).execute();
}

export async function setWorkflowArchived(on: Connection, workflowId: number, now: number): Promise<void> {
  await queryable(on).updateTable('workflows').set({ status: 'archived', updated_at: now }).where('id', '=', workflowId).execute();
}

/** An organization's workflows, oldest first. */
export function selectWorkflowsOfOrganization(on: Connection, orgId: number): Promise<WorkflowRow[]> {
  return queryable(on).selectFrom('workflows').selectAll().where('org_id', '=', orgId).orderBy('id').execute();
}

/** The organization's active workflow that owns this trigger UUID (lower case). */
export function selectActiveWorkflowByTrigger(on: Connection, orgId: number, triggerUuid: string): Promise<Pick<WorkflowRow, 'id' | 'workflow_uuid'> | undefined> {
  return queryable(on)
    .selectFrom('api_triggers')
    .innerJoin('workflows', 'workflows.id', 'api_triggers.workflow_id')
    .select(['workflows.id', 'workflows.workflow_uuid'])
    .where('api_triggers.trigger_uuid', '=', triggerUuid)
    .where('workflows.org_id', '=', orgId)
    .where('workflows.status', '=', 'active')
    .executeTakeFirst();
}

/** The organization's active workflow with this UUID (lower case). */
export function selectActiveWorkflow(on: Connection, orgId: number, workflowUuid: string): Promise<Pick<WorkflowRow, 'id' | 'workflow_uuid'> | undefined> {
  return queryable(on)
    .selectFrom('workflows')
    .select(['id', 'workflow_uuid'])
    .where('workflow_uuid', '=', workflowUuid)
    .where('org_id', '=', orgId)
    .where('status', '=', 'active')
    .executeTakeFirst();
}

// Definitions. A workflow has at most one draft and one published definition at any instant; the
// others are archived.

export async function insertDefinition(
  on: Connection,
  definition: { workflow_id: number; version: number; status: DefinitionStatus; graph: DefinitionGraph; created_at: number; published_at: number | null },
): Promise<void> {
  const trx = queryable(on);
  await trx
    .insertInto('workflow_definitions')
    .values({ ...definition, graph: JSON.stringify(definition.graph) })
    .execute();
}

/** The graph of the workflow's latest current version (its draft, else its published one). */
export async function selectLatestCurrentGraph(on: Connection, workflowId: number): Promise<DefinitionGraph | undefined> {
  const trx = queryable(on);
  const latest = await trx
    .selectFrom('workflow_definitions')
    .select('graph')
    .where('workflow_id', '=', workflowId)
    .where('status', 'in', ['draft', 'published'])
    .orderBy('version', 'desc')
    .executeTakeFirst();
  return latest ? decodeJson<DefinitionGraph>(latest.graph) : undefined;
}

/** The workflow's highest version number, archived ones included; 0 when it has none. */
export async function selectHighestVersion(on: Connection, workflowId: number): Promise<number> {
  const trx = queryable(on);
  const latest = await trx
    .selectFrom('workflow_definitions')
    .select((eb) => eb.fn.max('version').as('version'))
    .where('workflow_id', '=', workflowId)
    .executeTakeFirst();
  return Number(latest?.version ?? 0);
}

/** Archives the workflow's definitions in this status (its draft, or its published one). */
export async function setDefinitionsArchived(on: Connection, workflowId: number, status: 'draft' | 'published'): Promise<void> {
  const trx = queryable(on);
  await trx.updateTable('workflow_definitions').set({ status: 'archived' }).where('workflow_id', '=', workflowId).where('status', '=', status).execute();
}

export async function selectDraft(on: Connection, workflowId: number): Promise<Decoded<DefinitionRow> | undefined> {
  const trx = queryable(on);
  const row = await trx
    .selectFrom('workflow_definitions')
    .selectAll()
    .where('workflow_id', '=', workflowId)
    .where('status', '=', 'draft')
    .executeTakeFirst();
  return row && decodeDefinition(row);
}

export async function setDefinitionPublished(on: Connection, definitionId: number, now: number): Promise<void> {
  const trx = queryable(on);
  await trx.updateTable('workflow_definitions').set({ status: 'published', published_at: now }).where('id', '=', definitionId).execute();
}

/** Every version of a workflow, newest first. */
export async function selectDefinitionsOfWorkflow(on: Connection, workflowId: number): Promise<Decoded<DefinitionRow>[]> {
  const rows = await queryable(on)
    .selectFrom('workflow_definitions')
    .selectAll()
    .where('workflow_id', '=', workflowId)
    .orderBy('version', 'desc')
    .execute();
  return rows.map(decodeDefinition);
}

/** A page of a workflow's versions, newest first: those below `beforeVersion` when given; `limit` at most. */
export async function selectDefinitionPage(on: Connection, workflowId: number, page: { beforeVersion?: number; limit: number }): Promise<Decoded<DefinitionRow>[]> {
  let query = queryable(on).selectFrom('workflow_definitions').selectAll().where('workflow_id', '=', workflowId);
  if (page.beforeVersion !== undefined) query = query.where('version', '<', page.beforeVersion);
  const rows = await query.orderBy('version', 'desc').limit(page.limit).execute();
  return rows.map(decodeDefinition);
}

/** One version of a workflow; without a version, its latest current one (its draft, else its published one). */
export async function selectDefinitionVersion(on: Connection, workflowId: number, version: number | undefined): Promise<Decoded<DefinitionRow> | undefined> {
  let query = queryable(on).selectFrom('workflow_definitions').selectAll().where('workflow_id', '=', workflowId);
  query = version === undefined ? query.where('status', 'in', ['draft', 'published']).orderBy('version', 'desc') : query.where('version', '=', version);
  const row = await query.executeTakeFirst();
  return row && decodeDefinition(row);
}

/** The current (draft and published) definitions of these workflows. */
export async function selectCurrentDefinitions(
  on: Connection,
  workflowIds: readonly number[],
): Promise<Decoded<Pick<DefinitionRow, 'workflow_id' | 'version' | 'status' | 'graph' | 'created_at' | 'published_at'>>[]> {
  const rows = await queryable(on)
    .selectFrom('workflow_definitions')
    .select(['workflow_id', 'version', 'status', 'graph', 'created_at', 'published_at'])
    .where('workflow_id', 'in', workflowIds)
    .where('status', 'in', ['draft', 'published'])
    .execute();
  return rows.map(decodeDefinition);
}

/**
 * The definition a run of this mode uses: the published one, or for a test run the draft if there
 * is one, else the published one. Undefined when there is none to run.
 */
export async function selectRunnableDefinition(
  on: Connection,
  workflowId: number,
  mode: RunMode,
): Promise<Decoded<Pick<DefinitionRow, 'id' | 'version' | 'status' | 'graph'>> | undefined> {
  const candidates = await queryable(on)
    .selectFrom('workflow_definitions')
    .select(['id', 'version', 'status', 'graph'])
    .where('workflow_id', '=', workflowId)
    .where('status', 'in', mode === 'test' ? ['draft', 'published'] : ['published'])
    .execute();
  const definition = candidates.find((d) => d.status === 'draft') ?? candidates.find((d) => d.status === 'published');
  return definition && decodeDefinition(definition);
}

// Trigger UUIDs: each belongs to one workflow forever.

/** Which workflow owns each of these trigger UUIDs (those not registered are absent). */
export function selectTriggerOwners(on: Connection, triggerUuids: readonly string[]): Promise<{ trigger_uuid: string; workflow_id: number }[]> {
  const trx = queryable(on);
  return trx.selectFrom('api_triggers').select(['trigger_uuid', 'workflow_id']).where('trigger_uuid', 'in', triggerUuids).execute();
}

export async function insertTriggers(
  on: Connection,
  workflow: Pick<WorkflowRow, 'id' | 'org_id'>,
  triggerUuids: readonly string[],
  now: number,
): Promise<void> {
  const trx = queryable(on);
  await trx
    .insertInto('api_triggers')
    .values(triggerUuids.map((trigger_uuid) => ({ trigger_uuid, workflow_id: workflow.id, org_id: workflow.org_id, created_at: now })))
    .execute();
}

/** A workflow's UUID by its id, whatever its status (a campaign names its workflow by id). */
export async function selectWorkflowUuid(on: Connection, workflowId: number): Promise<string | undefined> {
  const row = await queryable(on).selectFrom('workflows').select('workflow_uuid').where('id', '=', workflowId).executeTakeFirst();
  return row?.workflow_uuid;
}
