// Webhook endpoints of the key's organization (webhooks/endpoints.ts does the work). Another
// organization's endpoint ids answer 404, like unknown ones.
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { DialtoneError, type ErrorCode } from '../../errors.js';
import { AUDIT_WEBHOOK_TYPE, WEBHOOK_EVENT_TYPES } from '../../webhooks/event-types.js';
import {
  createEndpoint,
  getEndpoint,
  listDeliveries,
  listEndpoints,
  listRunDeliveries,
  patchEndpoint,
  removeEndpoint,
  retryDelivery,
  rotateSecret,
  sendTestMessage,
  type EndpointPatch,
  type WebhookContext,
} from '../../webhooks/endpoints.js';
import type { DeliveryStatus } from '../../store/schema/schema.js';
import type { WebhookEventType } from '../../webhooks/event-types.js';
import { authOf } from '../authenticate.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { NullableStringEnum, PathId, StringEnum, withRateLimitHeaders } from '../schemas.js';
import { PageLimit } from '../paging.js';

const ID_PATTERN = /^[1-9][0-9]{0,14}$/;
const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const satisfies readonly DeliveryStatus[];

function parseId(text: string, code: 'webhook_endpoint_not_found' | 'webhook_delivery_not_found', what: string): number {
  if (!ID_PATTERN.test(text)) throw new DialtoneError(code, `No ${what} ${text}.`);
  return Number(text);
}

/** The shared `WebhookEventType` schema (webhook-schemas.ts). */
const EventType = Type.Unsafe<WebhookEventType>(Type.Ref('WebhookEventType'));
const Events = Type.Array(EventType, { uniqueItems: true, maxItems: WEBHOOK_EVENT_TYPES.length, description: 'The message types sent to this endpoint; omitted or empty: every type but audit.event, which is sent only to endpoints that name it (and only a key with the admin scope may name it)' });
const Url = Type.String({ minLength: 1, maxLength: 2048, description: 'Where messages are POSTed: https, resolving only to public addresses (unless the operator set WEBHOOK_ALLOW_PRIVATE_NETWORKS)', examples: ['https://api.acmecrm.io/hooks/dialtone'] });
const Description = Type.Union([Type.String({ maxLength: 500 }), Type.Null()], { description: 'Free text for your own reference' });

const Endpoint = Type.Object(
  {
    id: Type.Integer({ minimum: 1 }),
    url: Type.String(),
    events: Type.Array(EventType, { description: 'Subscribed types; empty means every type but audit.event' }),
    enabled: Type.Boolean(),
    disabled_reason: NullableStringEnum(['request', 'gone', 'failing'] as const, {
      description: '`request`: disabled through the API; `gone`: the endpoint answered 410; `failing`: no success for WEBHOOK_DISABLE_AFTER_MS',
    }),
    description: Type.Union([Type.String(), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'WebhookEndpoint', title: 'WebhookEndpoint' },
);

const Secret = Type.String({ pattern: '^whsec_[A-Za-z0-9+/]{43}=$', description: 'The signing secret (Standard Webhooks): shown only here', examples: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/pMSuqlFkFI='] });

const CreatedEndpoint = Type.Intersect([Type.Ref('WebhookEndpoint'), Type.Object({ secret: Secret })]);

const Attempt = Type.Object({
  at: Type.String({ format: 'date-time' }),
  http_status: Type.Union([Type.Integer(), Type.Null()], { description: 'The status answered; null when no answer came (see error)' }),
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why no answer came: timeout, connection refused, address not allowed, …' }),
  duration_ms: Type.Integer({ minimum: 0 }),
  response_body: Type.Union([Type.String(), Type.Null()], { description: 'The first 1 KiB of the answer' }),
});

const Delivery = Type.Object({
  id: Type.Integer({ minimum: 1 }),
  endpoint_id: Type.Integer({ minimum: 1, description: 'The endpoint it is sent to' }),
  message_id: Type.String({ description: 'The `webhook-id` header: the same on every attempt and for every endpoint' }),
  event_type: EventType,
  run_id: Type.Union([Type.Integer(), Type.Null()]),
  status: StringEnum(DELIVERY_STATUSES),
  attempts: Type.Array(Attempt),
  next_attempt_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  created_at: Type.String({ format: 'date-time' }),
});

const DeliveryPage = Type.Object({
  data: Type.Array(Delivery),
  next_after: Type.Union([Type.Integer(), Type.Null()], { description: 'Pass as `after` for older deliveries; null when there are none' }),
});

const EndpointParams = Type.Object({ id: PathId('Webhook endpoint id') });

const DeliveryStatusFilter = StringEnum(DELIVERY_STATUSES, { description: 'Only deliveries in this status' });
const After = Type.String({ pattern: '^[1-9][0-9]{0,14}$', description: 'Return deliveries older than this id' });
const Limit = PageLimit(20);

function pageQuery(query: { status?: DeliveryStatus; after?: string; limit?: string }) {
  return { status: query.status, after: query.after === undefined ? undefined : Number(query.after), limit: Number(query.limit ?? 20) };
}

/** What every endpoint operation can refuse with. */
const REFUSALS: ErrorCode[] = ['missing_api_key', 'invalid_api_key', 'rate_limited'];
/** And those naming an endpoint: a URL the router cannot decode, an endpoint not the organization's. */
const OWN: ErrorCode[] = [...REFUSALS, 'not_found', 'webhook_endpoint_not_found'];
/** A body that is sent is parsed even where none is read. */
const BODY: ErrorCode[] = ['unsupported_media_type', 'payload_too_large', 'malformed_json'];

/**
 * The audit log is the admin scope's to read (GET /audit-events), so only a key holding it may
 * subscribe an endpoint to `audit.event`, or change an endpoint that is: otherwise a key that may
 * only manage webhooks could have the log sent to a URL of its choosing.
 */
function requireAdminForAudit(request: FastifyRequest, events: readonly string[] | undefined): void {
  if (!events?.includes(AUDIT_WEBHOOK_TYPE) || authOf(request).scopes.includes('admin')) return;
  throw new DialtoneError('insufficient_scope', `Only an API key with the "admin" scope may subscribe an endpoint to ${AUDIT_WEBHOOK_TYPE}, or change, delete or rotate the secret of one that is.`, { extra: { required_scope: 'admin' } });
}

export function webhookEndpointRoutes(deps: Deps): FastifyPluginAsync {
  const ctx: WebhookContext = { store: deps.store, cipher: deps.cipher, clock: deps.clock, config: deps.config, wake: () => deps.signals.outbox() };
  const common = { tags: ['Webhooks'], security: requiresScope('webhooks') };
  return async (app) => {
    app.addSchema(Endpoint);

    app.post(
      '/webhook-endpoints',
      {
        schema: {
          ...common,
          operationId: 'createWebhookEndpoint',
          summary: 'Create Webhook Endpoint',
          description:
            'Registers a URL that receives a signed message (Standard Webhooks) for every change of the organization\'s runs it subscribes to. The URL is checked now and at every connection: https, public unicast addresses only. The response carries the signing secret, shown only here and on rotation.',
          body: Type.Object({ url: Url, events: Type.Optional(Events), description: Type.Optional(Description) }, { additionalProperties: false }),
          response: {
            201: withRateLimitHeaders(CreatedEndpoint),
            ...problemResponses([...REFUSALS, ...BODY, 'validation_failed', 'invalid_webhook_url', 'webhook_url_not_allowed', 'webhook_endpoint_limit', 'webhooks_not_configured']),
          },
        },
      },
      async (request, reply) => {
        const body = request.body as { url: string; events?: WebhookEventType[]; description?: string | null };
        requireAdminForAudit(request, body.events);
        reply.code(201);
        return createEndpoint(ctx, authOf(request).orgId, body);
      },
    );

    app.get(
      '/webhook-endpoints',
      {
        schema: {
          ...common,
          operationId: 'listWebhookEndpoints',
          summary: 'List Webhook Endpoints',
          description: 'The organization\'s endpoints, oldest first (at most WEBHOOK_MAX_ENDPOINTS). Secrets are never listed.',
          response: { 200: withRateLimitHeaders(Type.Object({ data: Type.Array(Type.Ref('WebhookEndpoint')) })), ...problemResponses(REFUSALS) },
        },
      },
      async (request) => ({ data: await listEndpoints(ctx, authOf(request).orgId) }),
    );

    app.get(
      '/webhook-endpoints/:id',
      {
        schema: {
          ...common,
          operationId: 'getWebhookEndpoint',
          summary: 'Get Webhook Endpoint',
          description: 'One endpoint of the organization (its secret is not shown).',
          params: EndpointParams,
          response: { 200: withRateLimitHeaders(Type.Ref('WebhookEndpoint')), ...problemResponses(OWN) },
        },
      },
      async (request) => {
        const { id } = request.params as { id: string };
        return getEndpoint(ctx, authOf(request).orgId, parseId(id, 'webhook_endpoint_not_found', 'webhook endpoint'));
      },
    );

    app.patch(
      '/webhook-endpoints/:id',
      {
        schema: {
          ...common,
          operationId: 'updateWebhookEndpoint',
          summary: 'Update Webhook Endpoint',
          description:
            'Changes the URL (checked like at creation), the subscribed types, the description, or enables/disables it. A disabled endpoint is sent nothing; its pending deliveries wait and go out once it is enabled again.',
          params: EndpointParams,
          body: Type.Object(
            { url: Type.Optional(Url), events: Type.Optional(Events), enabled: Type.Optional(Type.Boolean()), description: Type.Optional(Description) },
            { additionalProperties: false, minProperties: 1 },
          ),
          response: {
            200: withRateLimitHeaders(Type.Ref('WebhookEndpoint')),
            ...problemResponses([...OWN, ...BODY, 'validation_failed', 'invalid_webhook_url', 'webhook_url_not_allowed']),
          },
        },
      },
      async (request) => {
        const { id } = request.params as { id: string };
        const endpointId = parseId(id, 'webhook_endpoint_not_found', 'webhook endpoint');
        const patch = request.body as EndpointPatch;
        requireAdminForAudit(request, patch.events);
        // Nor may it redirect, or otherwise change, an endpoint that receives the audit log.
        requireAdminForAudit(request, (await getEndpoint(ctx, authOf(request).orgId, endpointId)).events);
        return patchEndpoint(ctx, authOf(request).orgId, endpointId, patch);
      },
    );

    app.delete(
      '/webhook-endpoints/:id',
      {
        schema: {
          ...common,
          operationId: 'deleteWebhookEndpoint',
          summary: 'Delete Webhook Endpoint',
          description: 'Deletes the endpoint with its delivery history; pending deliveries are never sent.',
          params: EndpointParams,
          response: { 204: withRateLimitHeaders(Type.Null({ description: 'Deleted' })), ...problemResponses([...OWN, ...BODY]) },
        },
      },
      async (request, reply) => {
        const { id } = request.params as { id: string };
        const endpointId = parseId(id, 'webhook_endpoint_not_found', 'webhook endpoint');
        // Deleting the audit log's endpoint silences it: the admin scope's, as changing it is.
        requireAdminForAudit(request, (await getEndpoint(ctx, authOf(request).orgId, endpointId)).events);
        await removeEndpoint(ctx, authOf(request).orgId, endpointId);
        return reply.code(204).send();
      },
    );

    app.post(
      '/webhook-endpoints/:id/rotate-secret',
      {
        schema: {
          ...common,
          operationId: 'rotateWebhookSecret',
          summary: 'Rotate Webhook Secret',
          description:
            'A new signing secret. For WEBHOOK_SECRET_OVERLAP_MS (default 24 h) messages carry two signatures, by the old and the new secret, so receivers can switch without rejecting a message.',
          params: EndpointParams,
          response: { 200: withRateLimitHeaders(Type.Object({ secret: Secret })), ...problemResponses([...OWN, ...BODY, 'webhooks_not_configured']) },
        },
      },
      async (request) => {
        const { id } = request.params as { id: string };
        const endpointId = parseId(id, 'webhook_endpoint_not_found', 'webhook endpoint');
        // The new secret verifies the audit log's messages: the admin scope's to hold.
        requireAdminForAudit(request, (await getEndpoint(ctx, authOf(request).orgId, endpointId)).events);
        return rotateSecret(ctx, authOf(request).orgId, endpointId);
      },
    );

    app.post(
      '/webhook-endpoints/:id/test',
      {
        schema: {
          ...common,
          operationId: 'testWebhookEndpoint',
          summary: 'Send Test Message',
          description: 'Sends a `webhook.test` message to the endpoint now (retried like any other). Its delivery can be followed in the deliveries list.',
          params: EndpointParams,
          response: {
            202: withRateLimitHeaders(Type.Object({ delivery_id: Type.Integer({ minimum: 1 }), message_id: Type.String() })),
            ...problemResponses([...OWN, ...BODY]),
          },
        },
      },
      async (request, reply) => {
        const { id } = request.params as { id: string };
        reply.code(202);
        return sendTestMessage(ctx, authOf(request).orgId, parseId(id, 'webhook_endpoint_not_found', 'webhook endpoint'));
      },
    );

    app.get(
      '/webhook-endpoints/:id/deliveries',
      {
        schema: {
          ...common,
          operationId: 'listWebhookDeliveries',
          summary: 'List Webhook Deliveries',
          description: 'The endpoint\'s deliveries, newest first, each with every attempt. Page with `after` (the `next_after` of the previous page).',
          params: EndpointParams,
          querystring: Type.Object(
            { status: Type.Optional(DeliveryStatusFilter), after: Type.Optional(After), limit: Type.Optional(Limit) },
            { additionalProperties: false },
          ),
          response: { 200: withRateLimitHeaders(DeliveryPage), ...problemResponses([...OWN, 'validation_failed']) },
        },
      },
      async (request) => {
        const { id } = request.params as { id: string };
        const query = request.query as { status?: DeliveryStatus; after?: string; limit?: string };
        return listDeliveries(ctx, authOf(request).orgId, parseId(id, 'webhook_endpoint_not_found', 'webhook endpoint'), pageQuery(query));
      },
    );

    app.get(
      '/webhook-deliveries',
      {
        schema: {
          ...common,
          operationId: 'listRunWebhookDeliveries',
          summary: 'List a Run\'s Webhook Deliveries',
          description:
            'The deliveries of one run\'s messages to every endpoint of the organization, newest first, each with its `endpoint_id` and every attempt, however many other deliveries the endpoints have had since. `run_id` is required: it is what the list is read by. Another organization\'s run, or a run with no delivery, lists nothing. Page with `after` (the `next_after` of the previous page).',
          querystring: Type.Object(
            {
              run_id: Type.String({ pattern: '^[1-9][0-9]{0,14}$', description: 'The workflow run whose deliveries are listed' }),
              status: Type.Optional(DeliveryStatusFilter),
              after: Type.Optional(After),
              limit: Type.Optional(Limit),
            },
            { additionalProperties: false },
          ),
          response: { 200: withRateLimitHeaders(DeliveryPage), ...problemResponses([...REFUSALS, 'validation_failed']) },
        },
      },
      async (request) => {
        const query = request.query as { run_id: string; status?: DeliveryStatus; after?: string; limit?: string };
        return listRunDeliveries(ctx, authOf(request).orgId, { runId: Number(query.run_id), ...pageQuery(query) });
      },
    );

    app.post(
      '/webhook-endpoints/:id/deliveries/:delivery_id/retry',
      {
        schema: {
          ...common,
          operationId: 'retryWebhookDelivery',
          summary: 'Retry Webhook Delivery',
          description: 'Queues a succeeded or failed delivery again, now, with the full retry schedule. 409 while it is still pending.',
          params: Type.Object({ id: PathId('Webhook endpoint id'), delivery_id: PathId('Delivery id') }),
          response: {
            202: withRateLimitHeaders(Type.Object({ delivery_id: Type.Integer({ minimum: 1 }), status: StringEnum(['pending'] as const) })),
            ...problemResponses([...OWN, ...BODY, 'webhook_delivery_not_found', 'webhook_delivery_pending']),
          },
        },
      },
      async (request, reply) => {
        const { id, delivery_id: deliveryId } = request.params as { id: string; delivery_id: string };
        const endpointId = parseId(id, 'webhook_endpoint_not_found', 'webhook endpoint');
        reply.code(202);
        return retryDelivery(ctx, authOf(request).orgId, endpointId, parseId(deliveryId, 'webhook_delivery_not_found', 'delivery'));
      },
    );
  };
}
