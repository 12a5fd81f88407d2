// The four Initiate Call operations. They differ only in how the target is named (agent UUID or
// workflow UUID) and which definition runs (published, or draft-else-published for tests).
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { requestFingerprint } from '../../calls/idempotency.js';
import { dryRunInitiateCall, initiateCall, type InitiateCallBody as Body } from '../../calls/initiate-call.js';
import type { Target } from '../../admission/target.js';
import type { Deps } from '../../deps.js';
import { DialtoneError, type ErrorCode } from '../../errors.js';
import type { RunMode } from '../../store/schema/schema.js';
import { authOf } from '../authenticate.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { DryRunQuery, IdempotencyHeaders, InitiateCallAnswer, InitiateCallBody, replayableResponse, uuidParam } from '../schemas.js';

interface Operation {
  operationId: string;
  summary: string;
  url: string;
  param: 'uuid' | 'workflow_uuid';
  target: Target['kind'];
  mode: RunMode;
  description: string;
}

export const OPERATIONS: readonly Operation[] = [
  {
    operationId: 'initiateCall',
    summary: 'Initiate Call',
    url: '/agent/:uuid',
    param: 'uuid',
    target: 'agent',
    mode: 'published',
    description: 'Starts a call with the published definition of the agent whose API trigger has this agent UUID.',
  },
  {
    operationId: 'initiateCallTest',
    summary: 'Initiate Call Test',
    url: '/agent/test/:uuid',
    param: 'uuid',
    target: 'agent',
    mode: 'test',
    description: 'Starts a test call with the latest draft of the agent, or its published definition when there is no draft.',
  },
  {
    operationId: 'initiateCallByWorkflowUuid',
    summary: 'Initiate Call By Workflow Uuid',
    url: '/agent/workflow/:workflow_uuid',
    param: 'workflow_uuid',
    target: 'workflow',
    mode: 'published',
    description: 'Starts a call with the published definition of the workflow.',
  },
  {
    operationId: 'initiateCallTestByWorkflowUuid',
    summary: 'Initiate Call Test By Workflow Uuid',
    url: '/agent/test/workflow/:workflow_uuid',
    param: 'workflow_uuid',
    target: 'workflow',
    mode: 'test',
    description: 'Starts a test call with the workflow\'s latest draft, or its published definition when there is no draft.',
  },
];

/** Content type and body are checked before the schema: a body not declared as JSON, or none at all, is refused. */
function requireJsonBody(request: FastifyRequest): void {
  const type = request.headers['content-type']?.split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') {
    throw new DialtoneError('unsupported_media_type', 'Send the body as application/json.');
  }
  if (request.body === undefined) {
    throw new DialtoneError('malformed_json', 'The request body is empty; send a JSON object.');
  }
}

/** Every code an Initiate Call operation can refuse with, in check order (docs/design.md, "Check order"). */
function refusalsOf(op: Operation): ErrorCode[] {
  return [
    'not_found', // a URL the router cannot decode
    'missing_api_key',
    'invalid_api_key',
    'rate_limited',
    'unsupported_media_type',
    'payload_too_large',
    'malformed_json',
    'validation_failed',
    'invalid_phone_number',
    op.target === 'agent' ? 'agent_not_found' : 'workflow_not_found',
    // A test operation runs the draft when there is one, and a workflow always has a draft or a published definition.
    ...(op.mode === 'published' ? (['workflow_not_published'] as const) : []),
    'telephony_configuration_not_found',
    'telephony_not_configured',
    'telephony_not_ready',
    'machine_detection_unsupported',
    'missing_template_variables',
    'number_suppressed',
    'number_frequency_capped',
    'outside_calling_hours',
    'idempotency_key_reused',
    'idempotency_key_in_use',
    'queue_full',
  ];
}

export function initiateCallRoutes(deps: Deps): FastifyPluginAsync {
  return async (app) => {
    const typed = app.withTypeProvider<TypeBoxTypeProvider>();
    for (const op of OPERATIONS) {
      typed.post(
        op.url,
        {
          preValidation: async (request) => requireJsonBody(request),
          schema: {
            operationId: op.operationId,
            summary: op.summary,
            description: op.description,
            tags: ['Calls'],
            security: requiresScope('calls'),
            params: uuidParam(op.param, op.target === 'agent' ? 'Agent UUID (the trigger UUID of an API trigger)' : 'Workflow UUID'),
            querystring: DryRunQuery,
            headers: IdempotencyHeaders,
            body: InitiateCallBody,
            response: {
              // Exactly one of the two shapes: the run (status queued or scheduled), or the dry run's "valid".
              200: replayableResponse(InitiateCallAnswer),
              ...problemResponses(refusalsOf(op)),
            },
          },
        },
        async (request, reply) => {
          const params = request.params as Record<string, string>;
          const target: Target = { kind: op.target, uuid: params[op.param] ?? '' };
          const plain = reply as unknown as FastifyReply;
          if ((request.query as { dry_run?: string }).dry_run === 'true') {
            const result = await dryRunInitiateCall(deps, authOf(request), target, op.mode, request.body as Body, { idempotencyHeader: request.headers['idempotency-key'] });
            return plain.code(200).type('application/json; charset=utf-8').send(JSON.stringify(result));
          }
          const outcome = await initiateCall(deps, authOf(request), target, op.mode, request.body as Body, {
            idempotency: {
              header: request.headers['idempotency-key'],
              fingerprint: () => requestFingerprint(request.method, request.url.split('?')[0] ?? '', request.body),
            },
          });
          if (outcome.replayed) reply.header('idempotent-replayed', 'true');
          // The exact text stored with an Idempotency-Key, so a replay is byte-for-byte the first answer.
          // It is already serialized, hence the untyped reply: the typed one only accepts the object.
          return plain.code(outcome.status).type('application/json; charset=utf-8').send(outcome.json);
        },
      );
    }
  };
}
