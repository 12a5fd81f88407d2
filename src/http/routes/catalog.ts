// What an organization can call through: its telephony
// configurations and the providers they can use (the registry's, telephony/registry.ts),
// read-only. Credentials never leave the store: the configuration view here is an explicit list of
// fields, so a field added to the row is not shown until someone decides it may be.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { listTelephonyConfigurationRows, viewConfiguration } from '../../telephony/configurations.js';
import type { RouteFieldDescription } from '../../telephony/definition.js';
import { authOf } from '../authenticate.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { StringEnum, withRateLimitHeaders } from '../schemas.js';
import { PageLimit, pageOf } from '../paging.js';

/** A configuration as listed; its provider is one of the registry's (telephony/registry.ts). */
const telephonyConfiguration = (providers: readonly string[]) => Type.Object(
  {
    id: Type.Integer({ minimum: 1 }),
    name: Type.String(),
    provider: StringEnum(providers),
    caller_ids: Type.Array(Type.String()),
    is_default: Type.Boolean(),
    calls_per_second: Type.Number(),
    max_concurrent_calls: Type.Integer(),
    status: StringEnum(['active', 'inactive'] as const),
    has_credentials: Type.Boolean({ description: 'Whether credentials are stored (they are never shown)' }),
  },
  { additionalProperties: false },
);

/** A provider as the registry declares it (telephony/registry.ts): what its routes take and what it can do. */
const RouteField = Type.Object(
  {
    name: Type.String(),
    description: Type.String(),
    type: StringEnum(['string', 'integer'] as const),
    required: Type.Boolean(),
  },
  { additionalProperties: false },
);

const TelephonyProvider = Type.Object(
  {
    name: Type.String({ description: 'What a telephony configuration\'s `provider` names' }),
    summary: Type.String(),
    capabilities: Type.Object(
      {
        calls_outlive_node: Type.Boolean({ description: 'The provider holds its calls: they go on when the node that placed them stops' }),
        dials_sip_uris: Type.Boolean({ description: 'A sip: or sips: URI can be dialed through its routes' }),
        supports_machine_detection: Type.Boolean({ description: 'It can tell a person from an answering machine' }),
        supports_transfer: Type.Boolean({ description: 'An answered call can be handed on' }),
        sends_dtmf: Type.Boolean({ description: 'DTMF digits can be sent on an answered call' }),
      },
      { additionalProperties: false },
    ),
    settings: Type.Array(RouteField, { description: 'The keys of a route\'s settings' }),
    credentials: Type.Array(RouteField, { description: 'The keys of a route\'s credentials (stored encrypted, never shown)' }),
  },
  { additionalProperties: false },
);

const REFUSALS = ['missing_api_key', 'invalid_api_key', 'rate_limited'] as const;

export function catalogRoutes(deps: Deps): FastifyPluginAsync {
  const TelephonyConfiguration = telephonyConfiguration(deps.registry.names);
  return async (app) => {
    const providers = deps.registry.definitions.map((d) => {
      const field = (f: RouteFieldDescription) => ({ name: f.name, description: f.description, type: f.type, required: f.required === true });
      const c = d.capabilities;
      return {
        name: d.name,
        summary: d.summary,
        capabilities: {
          calls_outlive_node: c.callsOutliveNode,
          dials_sip_uris: c.dialsSipUris,
          supports_machine_detection: c.supportsMachineDetection,
          supports_transfer: c.supportsTransfer,
          sends_dtmf: c.sendsDtmf,
        },
        settings: d.settings.map(field),
        credentials: d.credentials.map(field),
      };
    });
    app.get(
      '/telephony-providers',
      {
        schema: {
          operationId: 'listTelephonyProviders',
          summary: 'List Telephony Providers',
          description: 'The providers this service can dial through, in the order it lists them: what each can do, and the settings and credentials a telephony configuration of it takes.',
          tags: ['Telephony'],
          security: requiresScope('calls'),
          response: { 200: withRateLimitHeaders(Type.Object({ data: Type.Array(TelephonyProvider) })), ...problemResponses([...REFUSALS]) },
        },
      },
      async () => ({ data: providers }),
    );

    app.get(
      '/telephony-configurations',
      {
        schema: {
          operationId: 'listTelephonyConfigurations',
          summary: 'List Telephony Configurations',
          description:
            'The organization\'s routes to the phone network, oldest first, disabled ones included. Credentials and provider settings are never shown (an `admin` key reads a configuration\'s settings with Get Telephony Configuration). Page with `after` (the `next_after` of the previous page).',
          tags: ['Telephony'],
          security: requiresScope('calls'),
          querystring: Type.Object(
            {
              after: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,14}$', description: 'Return configurations after this configuration id' })),
              limit: Type.Optional(PageLimit(100)),
            },
            { additionalProperties: false },
          ),
          response: {
            200: withRateLimitHeaders(
              Type.Object({
                data: Type.Array(TelephonyConfiguration),
                next_after: Type.Union([Type.Integer(), Type.Null()], { description: 'Pass as `after` for the next page; null on the last' }),
              }),
            ),
            ...problemResponses([...REFUSALS, 'validation_failed']),
          },
        },
      },
      async (request) => {
        const query = request.query as { after?: string; limit?: string };
        const limit = Number(query.limit ?? 100);
        const rows = await listTelephonyConfigurationRows(deps.store, authOf(request).orgId, { ...(query.after !== undefined ? { afterId: Number(query.after) } : {}), limit: limit + 1 });
        const page = pageOf(rows, limit, (row) => row.id);
        const configurations = page.data.map(viewConfiguration);
        return {
          next_after: page.next_after,
          data: configurations.map((c) => ({
            id: c.id,
            name: c.name,
            provider: c.provider,
            caller_ids: c.caller_ids,
            is_default: c.is_default,
            calls_per_second: c.calls_per_second,
            max_concurrent_calls: c.max_concurrent_calls,
            status: c.status,
            has_credentials: c.has_credentials,
          })),
        };
      },
    );
  };
}
