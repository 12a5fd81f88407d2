// Workflows (agents) and their versions over the API (docs/api.md, "Management"). Reading them is
// the `calls` scope's (a CRM's key reads the agents it calls through); changing them is `admin`'s.
// workflows/workflows.ts does the work: every change locks its workflow, so concurrent changes of
// one workflow apply one after the other, and records its audit entry in its own transaction.
// Another organization's workflow answers 404, like an absent one. Validation problems are the
// definition validator's own (workflows/definition.ts), each located by a JSON Pointer into the
// request body: the draft's body is the definition itself, so its pointers are the validator's
// exactly; a creation's definition is under `/definition`.
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { DialtoneError, type ErrorCode } from '../../errors.js';
import { iso } from '../../runs/read-run.js';
import type { Connection } from '../../store/engine/store.js';
import {
  archiveWorkflow,
  createWorkflow,
  getDefinition,
  getWorkflow,
  listVersions,
  listWorkflows,
  publishDraft,
  saveDraft,
  type VersionSummary,
  type WorkflowListItem,
} from '../../workflows/workflows.js';
import { actorOf, authOf } from '../authenticate.js';
import { createOnce } from '../create-once.js';
import { OPTIONAL_BODY } from '../openapi.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { documentedAs, IdempotencyHeaders, StringEnum, replayableResponse, withRateLimitHeaders } from '../schemas.js';
import { PageLimit, pageOf } from '../paging.js';

/** The longest workflow name, in characters. */
export const WORKFLOW_NAME_MAX_LENGTH = 200;
const VERSION_PATTERN = '^[1-9][0-9]{0,8}$';

const Uuid = Type.String({ format: 'uuid' });
const Timestamp = Type.String({ format: 'date-time' });

const workflowProperties = {
  workflow_uuid: Uuid,
  name: Type.String(),
  status: StringEnum(['active', 'archived'] as const, { description: 'An archived workflow answers no call and is changed no more' }),
  published_version: Type.Union([Type.Integer(), Type.Null()], { description: 'The version the non-test operations run; null when nothing is published' }),
  draft_version: Type.Union([Type.Integer(), Type.Null()], { description: 'The version the test operations run when there is one' }),
  agent_uuids: Type.Array(Uuid, { description: 'The published version\'s agent UUIDs (API triggers)' }),
  draft_agent_uuids: Type.Array(Uuid, { description: 'The draft\'s agent UUIDs' }),
  variables: Type.Array(Type.String(), { description: 'The published version\'s variable names (the keys its initial_context may set), sorted' }),
  draft_variables: Type.Array(Type.String(), { description: 'The draft\'s variable names, sorted' }),
  created_at: Timestamp,
  updated_at: Timestamp,
};
const Workflow = Type.Object(workflowProperties, { $id: 'Workflow', title: 'Workflow', description: 'A workflow (agent) with its published and draft versions' });

const WorkflowVersion = Type.Object(
  {
    version: Type.Integer({ minimum: 1 }),
    status: StringEnum(['draft', 'published', 'archived'] as const, { description: 'At most one draft and one published version at a time; the others are archived' }),
    created_at: Timestamp,
    published_at: Type.Union([Timestamp, Type.Null()], { description: 'When it was published; null for a version never published' }),
    agent_uuids: Type.Array(Uuid, { description: 'Its agent UUIDs (API triggers)' }),
  },
  { $id: 'WorkflowVersion', title: 'WorkflowVersion', description: 'One version of a workflow, without its definition (GET …/versions/{version} reads that)' },
);

const WorkflowWithVersions = Type.Object(
  {
    ...workflowProperties,
    published: Type.Union([Type.Ref('WorkflowVersion'), Type.Null()], { description: 'The published version; null when nothing is published' }),
    draft: Type.Union([Type.Ref('WorkflowVersion'), Type.Null()], { description: 'The draft; null when there is none' }),
  },
  { $id: 'WorkflowWithVersions', title: 'WorkflowWithVersions', description: 'A workflow with its published version and its draft' },
);

/** A definition as the validator reads it (docs/cli.md, "Agent definitions"): checked by the handler, every problem listed. */
const Definition = Type.Object(
  {},
  {
    additionalProperties: true,
    description:
      'The definition graph: `nodes`, `edges`, and optionally `variables`, `result_schema` and `answering_machine` (docs/cli.md, "Agent definitions"). Checked whole on save: every problem is listed in a 422 with its JSON Pointer. An `api_trigger` node without `trigger_uuid` gets one minted, or keeps the one its node `id` had in the latest version.',
    examples: [
      {
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
      },
    ],
  },
);

const WorkflowDefinitionVersion = Type.Object(
  {
    workflow_uuid: Uuid,
    version: Type.Integer({ minimum: 1 }),
    status: StringEnum(['draft', 'published', 'archived'] as const),
    definition: Type.Object({}, { additionalProperties: true, description: 'The definition as saved, trigger UUIDs filled in' }),
  },
  { $id: 'WorkflowDefinitionVersion', title: 'WorkflowDefinitionVersion', description: 'One version\'s definition, ready to edit and save as a draft' },
);

const WorkflowParams = Type.Object({ workflow_uuid: Type.String({ description: 'The workflow\'s UUID', examples: ['6f1c7a52-0c1e-4c8e-9f3a-2b7d9c0e4a11'] }) });
const VersionParams = Type.Object({
  workflow_uuid: Type.String({ description: 'The workflow\'s UUID' }),
  // Validated by the handler: a version that is not one answers 404 like an absent one.
  version: documentedAs(Type.String({ description: 'A version number' }), { type: 'integer', minimum: 1, maximum: 999_999_999, description: 'A version number', examples: [3] }),
});

/** What every operation here can refuse with. */
const REFUSALS: ErrorCode[] = ['missing_api_key', 'invalid_api_key', 'rate_limited'];
/** A body that is sent is parsed even where none is read. */
const BODY: ErrorCode[] = ['unsupported_media_type', 'payload_too_large', 'malformed_json'];

function versionView(v: VersionSummary) {
  return { version: v.version, status: v.status, created_at: iso(v.created_at), published_at: v.published_at === null ? null : iso(v.published_at), agent_uuids: v.agent_uuids };
}

function workflowView(w: WorkflowListItem) {
  return { ...w, created_at: iso(w.created_at), updated_at: iso(w.updated_at) };
}

/** Prefixes the validator's pointers (into the definition) with where the definition is in the body. */
function locatedUnder(prefix: string, error: unknown): unknown {
  if (!(error instanceof DialtoneError) || error.code !== 'validation_failed' || !error.errors) return error;
  return new DialtoneError('validation_failed', error.message, { errors: error.errors.map((e) => ({ pointer: `${prefix}${e.pointer}`, detail: e.detail })) });
}

export function workflowRoutes(deps: Deps): FastifyPluginAsync {
  const read = { tags: ['Workflows'], security: requiresScope('calls') };
  const manage = { tags: ['Management'], security: requiresScope('admin') };

  /** The workflow as GET shows it now (read on `on`: the store, or a creation's transaction), for the answer of a change. */
  const current = async (on: Connection, orgId: number, workflowUuid: string) => {
    const w = await getWorkflow(on, workflowUuid, orgId);
    return { ...workflowView(w), published: w.published && versionView(w.published), draft: w.draft && versionView(w.draft) };
  };

  return async (app) => {
    app.addSchema(Workflow);
    app.addSchema(WorkflowVersion);
    app.addSchema(WorkflowWithVersions);
    app.addSchema(WorkflowDefinitionVersion);

    app.get(
      '/workflows',
      {
        schema: {
          ...read,
          operationId: 'listWorkflows',
          summary: 'List Workflows',
          description: 'The organization\'s workflows (agents), oldest first, with their published and draft versions and the agent UUIDs of each.',
          response: { 200: withRateLimitHeaders(Type.Object({ data: Type.Array(Type.Ref('Workflow')) })), ...problemResponses(REFUSALS) },
        },
      },
      async (request) => ({ data: (await listWorkflows(deps.store, authOf(request).orgId)).map(workflowView) }),
    );

    app.post(
      '/workflows',
      {
        schema: {
          ...manage,
          operationId: 'createWorkflow',
          summary: 'Create Workflow',
          description:
            'Creates a workflow (agent) whose definition becomes its published version 1, callable at once through its agent UUIDs. Every problem of the definition is listed in the 422, each with its JSON Pointer into this body (`/definition/…`). Recorded in the audit log as `workflow.created`. Honours Idempotency-Key: a retry gets the first answer again and creates nothing.',
          headers: IdempotencyHeaders,
          body: Type.Object(
            {
              name: Type.String({ minLength: 1, maxLength: WORKFLOW_NAME_MAX_LENGTH, description: 'For people', examples: ['Appointment reminder'] }),
              definition: Definition,
            },
            { additionalProperties: false },
          ),
          response: {
            201: replayableResponse(withRateLimitHeaders(Type.Ref('WorkflowWithVersions'))),
            ...problemResponses([...REFUSALS, ...BODY, 'validation_failed', 'idempotency_key_in_use', 'idempotency_key_reused']),
          },
        },
      },
      async (request, reply: FastifyReply) => {
        const { orgId } = authOf(request);
        const body = request.body as { name: string; definition: unknown };
        return createOnce(deps, request, reply, orgId, async (remember, now) => {
          let stored: Awaited<ReturnType<typeof current>> | undefined;
          const created = await createWorkflow(deps.store, { orgId, name: body.name, definition: body.definition }, now, {
            actor: actorOf(request),
            onCreated: async (trx, made) => {
              if (!remember) return;
              // The answer a replay gets, and this request too: what GET shows right after the creation.
              stored = await current(trx, orgId, made.workflow_uuid);
              await remember(trx, stored);
            },
          }).catch((error: unknown) => {
            throw locatedUnder('/definition', error);
          });
          deps.signals.outbox();
          // Without a key, read after the commit rather than inside the creation's transaction.
          return stored ?? current(deps.store, orgId, created.workflow_uuid);
        });
      },
    );

    app.get(
      '/workflows/:workflow_uuid',
      {
        schema: {
          ...read,
          operationId: 'getWorkflow',
          summary: 'Get Workflow',
          description: 'One of the organization\'s workflows with its published version and its draft (every version: GET …/versions).',
          params: WorkflowParams,
          response: { 200: withRateLimitHeaders(Type.Ref('WorkflowWithVersions')), ...problemResponses([...REFUSALS, 'workflow_not_found']) },
        },
      },
      async (request) => current(deps.store, authOf(request).orgId, (request.params as { workflow_uuid: string }).workflow_uuid),
    );

    app.put(
      '/workflows/:workflow_uuid/draft',
      {
        schema: {
          ...manage,
          operationId: 'saveWorkflowDraft',
          summary: 'Save Workflow Draft',
          description:
            'Saves the body, a definition, as the workflow\'s draft: a new version, numbered after every earlier one; the previous draft is archived (runs that pinned it keep it). The test operations run the draft from now on; the published version is unchanged until the draft is published. Every problem is listed in the 422 with its JSON Pointer into the definition, exactly as the CLI lists them. An archived workflow answers 409 workflow_state_conflict. Recorded in the audit log as `workflow.draft_saved`, with the definition before and after.',
          params: WorkflowParams,
          body: Definition,
          response: {
            200: withRateLimitHeaders(Type.Ref('WorkflowDefinitionVersion')),
            ...problemResponses([...REFUSALS, ...BODY, 'workflow_not_found', 'workflow_state_conflict', 'validation_failed']),
          },
        },
      },
      async (request) => {
        const { workflow_uuid: uuid } = request.params as { workflow_uuid: string };
        const orgId = authOf(request).orgId;
        const saved = await saveDraft(deps.store, uuid, request.body, deps.clock.now(), { orgId, actor: actorOf(request) });
        deps.signals.outbox();
        return getDefinition(deps.store, saved.workflow_uuid, saved.version, orgId);
      },
    );

    app.post(
      '/workflows/:workflow_uuid/publish',
      {
        schema: {
          ...manage,
          operationId: 'publishWorkflow',
          summary: 'Publish Workflow',
          description:
            'Publishes the draft: the non-test operations run it from now on, and the previous published version is archived (runs in flight keep the version they pinned). Name the draft you reviewed with `version`: if another draft was saved since, the publish is refused (409 workflow_state_conflict, with the `draft_version` it has) and nothing changes. No draft, or an archived workflow, is 409 too. Recorded in the audit log as `workflow.published`.',
          params: WorkflowParams,
          body: Type.Object(
            { version: Type.Optional(Type.Integer({ minimum: 1, description: 'The draft version to publish; refused if the draft is another one', examples: [3] })) },
            { additionalProperties: false },
          ),
          [OPTIONAL_BODY]: true,
          response: {
            200: withRateLimitHeaders(Type.Ref('WorkflowWithVersions')),
            ...problemResponses([...REFUSALS, ...BODY, 'workflow_not_found', 'workflow_state_conflict', 'validation_failed']),
          },
        },
        // The body is optional: a publish without one publishes whatever the draft is.
        preValidation: async (request) => {
          request.body ??= {};
        },
      },
      async (request) => {
        const { workflow_uuid: uuid } = request.params as { workflow_uuid: string };
        const body = request.body as { version?: number };
        await publishDraft(deps.store, uuid, deps.clock.now(), { orgId: authOf(request).orgId, actor: actorOf(request), ...(body.version !== undefined ? { version: body.version } : {}) });
        deps.signals.outbox();
        return current(deps.store, authOf(request).orgId, uuid);
      },
    );

    app.post(
      '/workflows/:workflow_uuid/archive',
      {
        schema: {
          ...manage,
          operationId: 'archiveWorkflow',
          summary: 'Archive Workflow',
          description:
            'Archives the workflow: its agent UUIDs stop answering and it is changed no more. Runs already queued keep their definition. Archiving an archived workflow changes nothing and answers it as it is. Recorded in the audit log as `workflow.archived`.',
          params: WorkflowParams,
          response: { 200: withRateLimitHeaders(Type.Ref('WorkflowWithVersions')), ...problemResponses([...REFUSALS, ...BODY, 'workflow_not_found']) },
        },
      },
      async (request) => {
        const { workflow_uuid: uuid } = request.params as { workflow_uuid: string };
        await archiveWorkflow(deps.store, uuid, deps.clock.now(), { orgId: authOf(request).orgId, actor: actorOf(request) });
        deps.signals.outbox();
        return current(deps.store, authOf(request).orgId, uuid);
      },
    );

    app.get(
      '/workflows/:workflow_uuid/versions',
      {
        schema: {
          ...read,
          operationId: 'listWorkflowVersions',
          summary: 'List Workflow Versions',
          description: 'Every version of the workflow, newest first, without their definitions. Page with `after` (the `next_after` of the previous page).',
          params: WorkflowParams,
          querystring: Type.Object(
            {
              after: Type.Optional(Type.String({ pattern: VERSION_PATTERN, description: 'Return versions older than this version' })),
              limit: Type.Optional(PageLimit(20)),
            },
            { additionalProperties: false },
          ),
          response: {
            200: withRateLimitHeaders(
              Type.Object({
                data: Type.Array(Type.Ref('WorkflowVersion')),
                next_after: Type.Union([Type.Integer(), Type.Null()], { description: 'Pass as `after` for older versions; null on the last page' }),
              }),
            ),
            ...problemResponses([...REFUSALS, 'workflow_not_found', 'validation_failed']),
          },
        },
      },
      async (request) => {
        const { workflow_uuid: uuid } = request.params as { workflow_uuid: string };
        const query = request.query as { after?: string; limit?: string };
        const limit = Number(query.limit ?? 20);
        const rows = await listVersions(deps.store, uuid, authOf(request).orgId, { ...(query.after !== undefined ? { beforeVersion: Number(query.after) } : {}), limit: limit + 1 });
        const page = pageOf(rows, limit, (v) => v.version);
        return { data: page.data.map(versionView), next_after: page.next_after };
      },
    );

    app.get(
      '/workflows/:workflow_uuid/versions/:version',
      {
        schema: {
          ...read,
          operationId: 'getWorkflowVersion',
          summary: 'Get Workflow Version',
          description: 'One version\'s definition as saved (its trigger UUIDs filled in): edit it and save it as the draft.',
          params: VersionParams,
          response: { 200: withRateLimitHeaders(Type.Ref('WorkflowDefinitionVersion')), ...problemResponses([...REFUSALS, 'workflow_not_found', 'not_found']) },
        },
      },
      async (request) => {
        const { workflow_uuid: uuid, version } = request.params as { workflow_uuid: string; version: string };
        if (!new RegExp(VERSION_PATTERN).test(version)) throw new DialtoneError('not_found', `Workflow ${uuid} has no version ${version}.`);
        return getDefinition(deps.store, uuid, Number(version), authOf(request).orgId);
      },
    );
  };
}
