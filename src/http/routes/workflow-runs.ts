import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { DialtoneError, type ErrorCode } from '../../errors.js';
import { cancelRun } from '../../runs/cancel-run.js';
import { listRunPage } from '../../runs/list-runs.js';
import { getRun, listRunEvents } from '../../runs/read-run.js';
import { RUN_STATES } from '../../runs/states.js';
import { ANSWERED_BY, type AnsweredBy, type RunState } from '../../store/schema/schema.js';
import { authOf } from '../authenticate.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { PathId, RunEventsPage, RunPageRef, StringEnum, withRateLimitHeaders, WorkflowRunRef } from '../schemas.js';
import { PageLimit } from '../paging.js';

/** Path ids that are not positive integers name no run: 404, like any unknown id. */
export function parseRunId(text: string): number {
  if (!/^[1-9][0-9]{0,14}$/.test(text)) throw new DialtoneError('workflow_run_not_found', `No workflow run ${text}.`);
  return Number(text);
}

/**
 * What every run operation can refuse with: a URL the router cannot decode, the key, the rate
 * limit, a run that is not the key's organization's.
 */
const READ_REFUSALS: ErrorCode[] = ['not_found', 'missing_api_key', 'invalid_api_key', 'rate_limited', 'workflow_run_not_found'];

export function workflowRunRoutes(deps: Deps): FastifyPluginAsync {
  return async (app) => {
    app.get(
      '/workflow-runs',
      {
        schema: {
          operationId: 'listWorkflowRuns',
          summary: 'List Workflow Runs',
          description:
            'The organization\'s runs, newest first, filtered by any of state, outcome reason, who answered, workflow, campaign, phone number and creation time. Page with `after` (the `next_after` of the previous page). The phone number is matched in E.164, however it is written here.',
          tags: ['Workflow runs'],
          security: requiresScope('calls'),
          querystring: Type.Object(
            {
              state: Type.Optional(StringEnum(RUN_STATES, { description: 'Only runs in this state' })),
              outcome_reason: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'Only runs that ended with this normalized outcome reason (`hangup`, `ring_timeout`, `agent_hangup`, …; docs/api.md)' })),
              answered_by: Type.Optional(StringEnum(ANSWERED_BY, { description: 'Only runs answered by this (answering-machine detection\'s verdict)' })),
              workflow_uuid: Type.Optional(Type.String({ format: 'uuid', description: 'Only runs of this workflow' })),
              phone_number: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'Only runs to this number (E.164, or a SIP URI as given)' })),
              campaign_id: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,14}$', description: 'Only the attempts of this campaign (another organization\'s campaign matches no run)' })),
              created_after: Type.Optional(Type.String({ format: 'date-time', description: 'Only runs created at or after this time (RFC 3339)' })),
              created_before: Type.Optional(Type.String({ format: 'date-time', description: 'Only runs created before this time (RFC 3339)' })),
              after: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,14}$', description: 'Return runs older than this run id (the previous page\'s `next_after`)' })),
              limit: Type.Optional(PageLimit(50)),
            },
            { additionalProperties: false },
          ),
          response: { 200: withRateLimitHeaders(RunPageRef()), ...problemResponses(['missing_api_key', 'invalid_api_key', 'rate_limited', 'validation_failed']) },
        },
      },
      async (request) => {
        const query = request.query as { state?: RunState; outcome_reason?: string; answered_by?: AnsweredBy; workflow_uuid?: string; phone_number?: string; campaign_id?: string; created_after?: string; created_before?: string; after?: string; limit?: string };
        return listRunPage(deps.store, authOf(request).orgId, {
          ...(query.state !== undefined ? { state: query.state } : {}),
          ...(query.outcome_reason !== undefined ? { outcomeReason: query.outcome_reason } : {}),
          ...(query.answered_by !== undefined ? { answeredBy: query.answered_by } : {}),
          ...(query.workflow_uuid !== undefined ? { workflowUuid: query.workflow_uuid.toLowerCase() } : {}),
          ...(query.phone_number !== undefined ? { phoneNumber: query.phone_number } : {}),
          ...(query.campaign_id !== undefined ? { campaignId: Number(query.campaign_id) } : {}),
          ...(query.created_after !== undefined ? { createdAfter: Date.parse(query.created_after) } : {}),
          ...(query.created_before !== undefined ? { createdBefore: Date.parse(query.created_before) } : {}),
          ...(query.after !== undefined ? { after: Number(query.after) } : {}),
          limit: Number(query.limit ?? 50),
        });
      },
    );

    app.get(
      '/workflow-runs/:id',
      {
        schema: {
          operationId: 'getWorkflowRun',
          summary: 'Get Workflow Run',
          description: 'A run of the key\'s organization: its state, outcome, the provider\'s own status and when each phase happened.',
          tags: ['Workflow runs'],
          security: requiresScope('calls'),
          params: Type.Object({ id: PathId('Workflow run id') }),
          response: { 200: withRateLimitHeaders(WorkflowRunRef()), ...problemResponses(READ_REFUSALS) },
        },
      },
      async (request) => {
        const { id } = request.params as { id: string };
        return getRun(deps.store, authOf(request).orgId, parseRunId(id));
      },
    );

    app.get(
      '/workflow-runs/:id/events',
      {
        schema: {
          operationId: 'listWorkflowRunEvents',
          summary: 'List Workflow Run Events',
          description: 'Every state the run entered, in order. Page with `after` (the last `seq` seen).',
          tags: ['Workflow runs'],
          security: requiresScope('calls'),
          params: Type.Object({ id: PathId('Workflow run id') }),
          querystring: Type.Object(
            {
              after: Type.Optional(Type.String({ pattern: '^[0-9]{1,9}$', description: 'Return events with seq greater than this (default 0)' })),
              limit: Type.Optional(Type.String({ pattern: '^([1-9][0-9]{0,2}|1000)$', description: 'Page size, 1 to 1000 (default 100)' })),
            },
            { additionalProperties: false },
          ),
          response: { 200: withRateLimitHeaders(RunEventsPage), ...problemResponses([...READ_REFUSALS, 'validation_failed']) },
        },
      },
      async (request) => {
        const { id } = request.params as { id: string };
        const query = request.query as { after?: string; limit?: string };
        const limit = Number(query.limit ?? 100);
        return listRunEvents(deps.store, authOf(request).orgId, parseRunId(id), Number(query.after ?? 0), limit);
      },
    );

    app.post(
      '/workflow-runs/:id/cancel',
      {
        schema: {
          operationId: 'cancelWorkflowRun',
          summary: 'Cancel Workflow Run',
          description:
            'A queued run is canceled at once and never dialed. A live call is ended by the node holding it: canceled before the answer, hung up (completed) after it; `cancel_requested_at` shows the request until then.',
          tags: ['Workflow runs'],
          security: requiresScope('calls'),
          params: Type.Object({ id: PathId('Workflow run id') }),
          response: {
            200: withRateLimitHeaders(WorkflowRunRef()),
            // Cancel ignores its body, but one that is sent is parsed: it must be JSON within the limit.
            ...problemResponses([...READ_REFUSALS, 'unsupported_media_type', 'payload_too_large', 'malformed_json', 'run_already_ended']),
          },
        },
      },
      async (request) => {
        const { id } = request.params as { id: string };
        return cancelRun(deps, authOf(request).orgId, parseRunId(id));
      },
    );
  };
}
