// Managing the organization's API keys over the API (scope `admin`; auth/api-keys.ts does the
// work, each change recorded in the audit log in its transaction). The secret is in the creation's
// answer and nowhere else: not in a listing, not in the audit log, not in a replay of the creation
// under its Idempotency-Key (the stored answer has `key: null`: the secret is kept by no one).
// Another organization's key answers 404, like an absent one. GET /api-keys/current is the one
// operation any key may use: what the key itself is and may do, so a client (the console) shows
// only what the key can use instead of learning it from refusals.
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { Type } from '@sinclair/typebox';
import { createApiKey, getApiKey, listApiKeys, revokeApiKey, type ApiKeyView } from '../../auth/api-keys.js';
import { SCOPE_SUMMARIES, SCOPES, type Scope } from '../../auth/scopes.js';
import type { Deps } from '../../deps.js';
import { DialtoneError, type ErrorCode } from '../../errors.js';
import { actorOf, authOf } from '../authenticate.js';
import { createOnce } from '../create-once.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresAnyScope, requiresScope } from '../scopes.js';
import { IdempotencyHeaders, PathId, replayableResponse, StringEnum, withRateLimitHeaders } from '../schemas.js';
import { PageLimit, pageOf } from '../paging.js';

/** The longest key name, in characters. */
export const KEY_NAME_MAX_LENGTH = 100;
const ID_PATTERN = /^[1-9][0-9]{0,14}$/;
const when = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

const ScopeSchema = StringEnum(SCOPES, { description: SCOPES.map((scope) => `\`${scope}\`: ${SCOPE_SUMMARIES[scope]}`).join('; ') });
const apiKeyProperties = {
  id: Type.Integer(),
  name: Type.String(),
  prefix: Type.String({ description: 'The key\'s first characters, which identify it in listings and logs; not a secret', examples: ['dt_live_Xy12Ab34Cd'] }),
  scopes: Type.Array(ScopeSchema, { description: 'What the key may do (docs/api.md, "Scopes")' }),
  created_at: Type.String({ format: 'date-time' }),
  last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'Written at most once per API_KEY_LAST_USED_WRITE_INTERVAL_MS' }),
  revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'Set once revoked: the key is refused from then on' }),
};
const ApiKey = Type.Object(apiKeyProperties, { $id: 'ApiKey', title: 'ApiKey', description: 'An API key, never with its secret or hash' });
const CreatedApiKey = Type.Object(
  {
    ...apiKeyProperties,
    key: Type.Union([Type.String(), Type.Null()], {
      description: 'The whole secret, to send as X-API-Key: shown in this answer only. null in a replay of this answer under its Idempotency-Key (the secret is stored nowhere); revoke such a key and create another if the first answer was lost.',
    }),
  },
  { title: 'CreatedApiKey' },
);
const KeyParams = Type.Object({ id: PathId('API key id') });

/** What every operation here can refuse with. */
const REFUSALS: ErrorCode[] = ['missing_api_key', 'invalid_api_key', 'rate_limited'];
const BODY: ErrorCode[] = ['unsupported_media_type', 'payload_too_large', 'malformed_json'];

function view(key: ApiKeyView) {
  return { id: key.id, name: key.name, prefix: key.prefix, scopes: key.scopes, created_at: when(key.created_at), last_used_at: when(key.last_used_at), revoked_at: when(key.revoked_at) };
}

function keyId(text: string): number {
  if (!ID_PATTERN.test(text)) throw new DialtoneError('api_key_not_found', `No API key ${text}.`);
  return Number(text);
}

export function apiKeyRoutes(deps: Deps): FastifyPluginAsync {
  const common = { tags: ['Management'], security: requiresScope('admin') };
  return async (app) => {
    app.addSchema(ApiKey);

    app.post(
      '/api-keys',
      {
        schema: {
          ...common,
          operationId: 'createApiKey',
          summary: 'Create API Key',
          description:
            'Creates a key of this organization holding the given scopes. The answer carries the whole secret (`key`) once: it is stored only as a hash, never shown again, and never written to the audit log (`api_key.created` records the key without it). Honours Idempotency-Key: a retry gets the first answer again with `key: null`, and creates nothing.',
          headers: IdempotencyHeaders,
          body: Type.Object(
            {
              name: Type.String({ minLength: 1, maxLength: KEY_NAME_MAX_LENGTH, description: 'For people: which system holds the key', examples: ['crm'] }),
              scopes: Type.Array(ScopeSchema, { minItems: 1, uniqueItems: true, description: 'What the key may do', examples: [['calls']] }),
            },
            { additionalProperties: false },
          ),
          response: {
            201: replayableResponse(withRateLimitHeaders(CreatedApiKey)),
            ...problemResponses([...REFUSALS, ...BODY, 'validation_failed', 'idempotency_key_in_use', 'idempotency_key_reused']),
          },
        },
      },
      async (request, reply: FastifyReply) => {
        const { orgId } = authOf(request);
        const body = request.body as { name: string; scopes: Scope[] };
        return createOnce(deps, request, reply, orgId, async (remember, now) => {
          const created = await createApiKey(deps.store, orgId, body.name, now, {
            scopes: body.scopes,
            actor: actorOf(request),
            onCreated: async (trx, made) => remember?.(trx, { ...view({ ...made, created_at: now, last_used_at: null, revoked_at: null }), key: null }),
          });
          // Committed with its audit entry, whose audit.event message the delivery workers send now.
          deps.signals.outbox();
          return { ...view({ ...created, created_at: now, last_used_at: null, revoked_at: null }), key: created.key };
        });
      },
    );

    app.get(
      '/api-keys',
      {
        schema: {
          ...common,
          operationId: 'listApiKeys',
          summary: 'List API Keys',
          description: 'The organization\'s keys, oldest first, revoked ones included, never with a secret or a hash. Page with `after` (the `next_after` of the previous page).',
          querystring: Type.Object(
            {
              after: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,14}$', description: 'Return keys after this key id' })),
              limit: Type.Optional(PageLimit(20)),
            },
            { additionalProperties: false },
          ),
          response: {
            200: withRateLimitHeaders(
              Type.Object({
                data: Type.Array(Type.Ref('ApiKey')),
                next_after: Type.Union([Type.Integer(), Type.Null()], { description: 'Pass as `after` for the next page; null on the last' }),
              }),
            ),
            ...problemResponses([...REFUSALS, 'validation_failed']),
          },
        },
      },
      async (request) => {
        const query = request.query as { after?: string; limit?: string };
        const limit = Number(query.limit ?? 20);
        const rows = await listApiKeys(deps.store, authOf(request).orgId, { ...(query.after !== undefined ? { afterId: Number(query.after) } : {}), limit: limit + 1 });
        const page = pageOf(rows, limit, (key) => key.id);
        return { data: page.data.map(view), next_after: page.next_after };
      },
    );

    app.get(
      '/api-keys/current',
      {
        schema: {
          tags: ['Management'],
          security: requiresAnyScope(),
          operationId: 'getCurrentApiKey',
          summary: 'Get Current API Key',
          description:
            'The key this request is made with, never with its secret or hash: its name, prefix and `scopes`, so a client can offer only what the key may do. Any valid key may read itself, whatever its scopes; it reads no other key.',
          response: { 200: withRateLimitHeaders(Type.Ref('ApiKey')), ...problemResponses(REFUSALS) },
        },
      },
      async (request) => {
        const { orgId, keyId: id } = authOf(request);
        const key = await getApiKey(deps.store, orgId, id);
        // Revoked between authentication and this read (or erased with its organization).
        if (!key) throw new DialtoneError('invalid_api_key', 'The API key is not valid.');
        return view(key);
      },
    );

    app.get(
      '/api-keys/:id',
      {
        schema: {
          ...common,
          operationId: 'getApiKey',
          summary: 'Get API Key',
          description: 'One of the organization\'s keys, never with its secret or hash.',
          params: KeyParams,
          response: { 200: withRateLimitHeaders(Type.Ref('ApiKey')), ...problemResponses([...REFUSALS, 'api_key_not_found']) },
        },
      },
      async (request) => {
        const id = keyId((request.params as { id: string }).id);
        const key = await getApiKey(deps.store, authOf(request).orgId, id);
        if (!key) throw new DialtoneError('api_key_not_found', `No API key ${id}.`);
        return view(key);
      },
    );

    app.post(
      '/api-keys/:id/revoke',
      {
        schema: {
          ...common,
          operationId: 'revokeApiKey',
          summary: 'Revoke API Key',
          description:
            'Revokes the key: it is refused from now on (on every node once LOOKUP_CACHE_TTL_MS has passed). Revoking a revoked key changes nothing and answers it as it is. A key may revoke itself. Recorded in the audit log as `api_key.revoked`.',
          params: KeyParams,
          response: { 200: withRateLimitHeaders(Type.Ref('ApiKey')), ...problemResponses([...REFUSALS, ...BODY, 'api_key_not_found']) },
        },
      },
      async (request) => {
        const id = keyId((request.params as { id: string }).id);
        const { orgId } = authOf(request);
        const revoked = await revokeApiKey(deps.store, id, deps.clock.now(), { orgId, actor: actorOf(request) });
        if (!revoked) throw new DialtoneError('api_key_not_found', `No API key ${id}.`);
        deps.signals.outbox();
        return view(revoked);
      },
    );
  };
}
