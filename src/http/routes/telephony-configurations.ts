// Managing the organization's telephony configurations (routes) over the API (scope `admin`;
// telephony/configurations.ts does the work, each change recorded in the audit log in its
// transaction). Credentials are write-only: a creation or an update carries them, and no answer,
// listing, replay or audit entry shows more than whether each is set (`credentials_set`). Settings
// and credentials are checked by the provider's own schema (its definition's decoder), every
// problem with its JSON Pointer. Another organization's configuration answers 404, like an absent
// one. The read-only listing for scope `calls` is in catalog.ts.
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { DialtoneError, type ErrorCode } from '../../errors.js';
import type { TelephonyConfigurationRow } from '../../store/schema/schema.js';
import {
  createTelephonyConfiguration,
  disableTelephonyConfiguration,
  enableTelephonyConfiguration,
  getTelephonyConfigurationRow,
  managedView,
  setDefaultTelephonyConfiguration,
  updateTelephonyConfiguration,
  type ConfigurationChangeOptions,
} from '../../telephony/configurations.js';
import { actorOf, authOf } from '../authenticate.js';
import { createOnce } from '../create-once.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { IdempotencyHeaders, PathId, replayableResponse, StringEnum, withRateLimitHeaders } from '../schemas.js';

/** The longest configuration name, in characters. */
export const CONFIGURATION_NAME_MAX_LENGTH = 100;
/** Most caller IDs one configuration holds. */
export const MAX_CALLER_IDS = 100;
/** Most members of a configuration's settings, and of its credentials. */
const MAX_MEMBERS = 50;
const ID_PATTERN = /^[1-9][0-9]{0,14}$/;
const BASE = '/telephony-configurations';

const iso = (ms: number): string => new Date(ms).toISOString();

const settingsDescription = 'Non-secret provider settings, as the provider\'s definition lists them (GET /api/v1/public/telephony-providers)';
const CredentialsSet = Type.Object(
  {},
  {
    additionalProperties: Type.Boolean(),
    description: 'For each credential the provider takes (and any other stored), whether it is set. The values are never shown: credentials are write-only.',
    examples: [{ account_sid: true, auth_token: true, api_key_sid: false, api_key_secret: false }],
  },
);

const configurationProperties = (providers: readonly string[]) => ({
  id: Type.Integer({ minimum: 1 }),
  name: Type.String(),
  provider: StringEnum(providers),
  caller_ids: Type.Array(Type.String(), { description: 'E.164 numbers; the first is the caller ID of calls through it' }),
  is_default: Type.Boolean({ description: 'Runs that name no telephony_configuration_id dial this one' }),
  calls_per_second: Type.Number(),
  max_concurrent_calls: Type.Integer(),
  status: StringEnum(['active', 'inactive'] as const, { description: '`inactive`: disabled; new requests cannot use it' }),
  settings: Type.Object({}, { additionalProperties: true, description: settingsDescription, examples: [{ host: 'sip.example.net', transport: 'tls' }] }),
  has_credentials: Type.Boolean({ description: 'Whether any credentials are stored' }),
  credentials_set: CredentialsSet,
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
});

const ReadinessProblem = Type.Object({
  pointer: Type.String({ description: 'JSON Pointer (RFC 6901) into the configuration as this API shows it (`/settings/host`, `/credentials/auth_token`, `/caller_ids`); empty for the configuration as a whole or the service around it', examples: ['/caller_ids'] }),
  detail: Type.String({ examples: ['No caller ID is configured.'] }),
});
const Readiness = Type.Object(
  {
    id: Type.Integer({ minimum: 1 }),
    ready: Type.Boolean({ description: 'true when a call could be placed through it now: no problem below' }),
    problems: Type.Array(ReadinessProblem, { description: 'Every reason it cannot place calls now: its status, its provider\'s schema, then its provider\'s readiness' }),
  },
  { $id: 'TelephonyConfigurationReadiness', title: 'TelephonyConfigurationReadiness', description: 'Whether a telephony configuration can place calls now, and every reason it cannot' },
);

const ConfigParams = Type.Object({ id: PathId('Telephony configuration id') });
const Ref = Type.Ref('TelephonyConfigurationDetails');

/** What every operation here can refuse with. */
const REFUSALS: ErrorCode[] = ['missing_api_key', 'invalid_api_key', 'rate_limited'];
const BODY: ErrorCode[] = ['unsupported_media_type', 'payload_too_large', 'malformed_json'];

const nameSchema = Type.String({ minLength: 1, maxLength: CONFIGURATION_NAME_MAX_LENGTH, description: 'For people', examples: ['Twilio main'] });
const callerIdsSchema = Type.Array(Type.String({ maxLength: 32 }), { maxItems: MAX_CALLER_IDS, description: 'E.164 numbers (normalized); the first is the caller ID', examples: [['+12025550100']] });
const cpsSchema = Type.Number({ exclusiveMinimum: 0, maximum: 10_000, description: 'Dials per second through it, across every node', examples: [1] });
const concurrentSchema = Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'Calls at once through it, across every node', examples: [10] });

function configurationId(text: string): number {
  if (!ID_PATTERN.test(text)) throw new DialtoneError('telephony_configuration_not_found', `No telephony configuration ${text}.`);
  return Number(text);
}

export function telephonyConfigurationRoutes(deps: Deps): FastifyPluginAsync {
  const common = { tags: ['Management'], security: requiresScope('admin') };
  const Details = Type.Object(configurationProperties(deps.registry.names), {
    $id: 'TelephonyConfigurationDetails',
    title: 'TelephonyConfigurationDetails',
    description: 'A telephony configuration as its organization\'s administrators see it: its settings, and only whether each credential is set',
  });
  const show = (row: TelephonyConfigurationRow) => {
    const view = managedView(row, deps.cipher, deps.registry);
    return { ...view, created_at: iso(view.created_at), updated_at: iso(view.updated_at) };
  };
  /** The configuration as it now is, read after a change (the change answers the CLI's view, which has no credentials_set). */
  const current = async (orgId: number, id: number) => {
    const row = await getTelephonyConfigurationRow(deps.store, orgId, id);
    if (!row) throw new DialtoneError('telephony_configuration_not_found', `No telephony configuration ${id}.`);
    return show(row);
  };
  const changeOptions = (request: Parameters<typeof actorOf>[0]): ConfigurationChangeOptions => ({ orgId: authOf(request).orgId, actor: actorOf(request), cipher: deps.cipher, registry: deps.registry });

  return async (app) => {
    app.addSchema(Details);
    app.addSchema(Readiness);

    app.post(
      BASE,
      {
        schema: {
          ...common,
          operationId: 'createTelephonyConfiguration',
          summary: 'Create Telephony Configuration',
          description:
            'Creates a route to the phone network through one of the providers this service knows. Settings and credentials are checked by the provider\'s own schema, every problem listed with its JSON Pointer (422 validation_failed), and nothing is created when there is one. Credentials are stored encrypted and never shown again: answers say only whether each is set (`credentials_set`). With `is_default`, it replaces the organization\'s default. Honours Idempotency-Key. Recorded in the audit log as `telephony_configuration.created`, without a credential.',
          headers: IdempotencyHeaders,
          body: Type.Object(
            {
              name: nameSchema,
              provider: StringEnum(deps.registry.names, { description: 'One of GET /api/v1/public/telephony-providers', examples: ['twilio'] }),
              caller_ids: Type.Optional(callerIdsSchema),
              is_default: Type.Optional(Type.Boolean({ description: 'Make it the organization\'s default (the previous default stays, as an ordinary configuration)' })),
              calls_per_second: Type.Optional(cpsSchema),
              max_concurrent_calls: Type.Optional(concurrentSchema),
              settings: Type.Optional(Type.Object({}, { additionalProperties: true, maxProperties: MAX_MEMBERS, description: settingsDescription, examples: [{}] })),
              credentials: Type.Optional(
                Type.Object({}, {
                  additionalProperties: true,
                  maxProperties: MAX_MEMBERS,
                  description: 'The provider\'s credentials (GET /api/v1/public/telephony-providers lists them): stored encrypted, never shown, never logged or audited',
                  examples: [{ account_sid: 'AC0123456789abcdef0123456789abcdef', auth_token: 'your-auth-token' }],
                }),
              ),
            },
            { additionalProperties: false },
          ),
          response: {
            201: replayableResponse(withRateLimitHeaders(Ref)),
            ...problemResponses([...REFUSALS, ...BODY, 'validation_failed', 'idempotency_key_in_use', 'idempotency_key_reused']),
          },
        },
      },
      async (request, reply: FastifyReply) => {
        const { orgId } = authOf(request);
        const body = request.body as {
          name: string;
          provider: string;
          caller_ids?: string[];
          is_default?: boolean;
          calls_per_second?: number;
          max_concurrent_calls?: number;
          settings?: Record<string, unknown>;
          credentials?: Record<string, unknown>;
        };
        return createOnce(deps, request, reply, orgId, async (remember, now) => {
          let answer: ReturnType<typeof show> | undefined;
          await createTelephonyConfiguration(
            deps.store,
            deps.cipher,
            {
              orgId,
              name: body.name,
              provider: body.provider,
              callerIds: body.caller_ids ?? [],
              isDefault: body.is_default === true,
              ...(body.calls_per_second !== undefined ? { callsPerSecond: body.calls_per_second } : {}),
              ...(body.max_concurrent_calls !== undefined ? { maxConcurrentCalls: body.max_concurrent_calls } : {}),
              settings: body.settings,
              credentials: body.credentials !== undefined && Object.keys(body.credentials).length > 0 ? body.credentials : undefined,
            },
            now,
            deps.registry,
            {
              actor: actorOf(request),
              onCreated: async (trx, row) => {
                answer = show(row);
                await remember?.(trx, answer);
              },
            },
          );
          // Committed with its audit entry, whose audit.event message the delivery workers send now.
          deps.signals.outbox();
          return answer;
        });
      },
    );

    app.get(
      `${BASE}/:id`,
      {
        schema: {
          ...common,
          operationId: 'getTelephonyConfiguration',
          summary: 'Get Telephony Configuration',
          description: 'One of the organization\'s configurations with its settings, and only whether each credential is set.',
          params: ConfigParams,
          response: { 200: withRateLimitHeaders(Ref), ...problemResponses([...REFUSALS, 'telephony_configuration_not_found']) },
        },
      },
      async (request) => current(authOf(request).orgId, configurationId((request.params as { id: string }).id)),
    );

    app.patch(
      `${BASE}/:id`,
      {
        schema: {
          ...common,
          operationId: 'updateTelephonyConfiguration',
          summary: 'Update Telephony Configuration',
          description:
            'Changes what the body names; everything else stays. `settings` and `credentials` are merged into the stored ones member by member (a member set to null is removed), so one credential can be rotated without sending the others; `credentials: null` removes them all. The provider cannot change (create another configuration). The result is checked as a creation is, every problem listed with its JSON Pointer, and nothing changes when there is one. New requests use the change on every node within LOOKUP_CACHE_TTL_MS. Recorded in the audit log as `telephony_configuration.updated` (before and after, with only whether each credential is set) when anything changed.',
          params: ConfigParams,
          body: Type.Object(
            {
              name: Type.Optional(nameSchema),
              caller_ids: Type.Optional(callerIdsSchema),
              calls_per_second: Type.Optional(cpsSchema),
              max_concurrent_calls: Type.Optional(concurrentSchema),
              settings: Type.Optional(Type.Object({}, { additionalProperties: true, maxProperties: MAX_MEMBERS, description: `${settingsDescription}: merged into the stored ones; null removes a member`, examples: [{ transport: 'tls', outbound_proxy: null }] })),
              credentials: Type.Optional(
                Type.Union(
                  [
                    Type.Object({}, { additionalProperties: true, maxProperties: MAX_MEMBERS, description: 'Merged into the stored credentials; null removes a member. Never shown, logged or audited', examples: [{ auth_token: 'the-new-auth-token' }] }),
                    Type.Null(),
                  ],
                  { description: 'Credentials to merge in, or null to remove every credential' },
                ),
              ),
            },
            { additionalProperties: false },
          ),
          response: { 200: withRateLimitHeaders(Ref), ...problemResponses([...REFUSALS, ...BODY, 'telephony_configuration_not_found', 'validation_failed']) },
        },
      },
      async (request) => {
        const id = configurationId((request.params as { id: string }).id);
        const body = request.body as { name?: string; caller_ids?: string[]; calls_per_second?: number; max_concurrent_calls?: number; settings?: Record<string, unknown>; credentials?: Record<string, unknown> | null };
        await updateTelephonyConfiguration(
          deps.store,
          deps.cipher,
          id,
          {
            ...(body.name !== undefined ? { name: body.name } : {}),
            ...(body.caller_ids !== undefined ? { callerIds: body.caller_ids } : {}),
            ...(body.calls_per_second !== undefined ? { callsPerSecond: body.calls_per_second } : {}),
            ...(body.max_concurrent_calls !== undefined ? { maxConcurrentCalls: body.max_concurrent_calls } : {}),
            ...(body.settings !== undefined ? { settings: body.settings } : {}),
            ...(body.credentials !== undefined ? { credentials: body.credentials } : {}),
          },
          deps.clock.now(),
          changeOptions(request),
        );
        deps.signals.outbox();
        return current(authOf(request).orgId, id);
      },
    );

    const actions = [
      {
        verb: 'disable',
        operationId: 'disableTelephonyConfiguration',
        summary: 'Disable Telephony Configuration',
        description:
          'New requests can no longer use it (on every node within LOOKUP_CACHE_TTL_MS), and it stops being the default: requests that name no configuration are refused (422 telephony_not_configured) until another is made the default. Runs already queued through it are still dialed. Disabling a disabled one changes nothing. Recorded in the audit log as `telephony_configuration.disabled`.',
        codes: [] as ErrorCode[],
        act: disableTelephonyConfiguration,
      },
      {
        verb: 'enable',
        operationId: 'enableTelephonyConfiguration',
        summary: 'Enable Telephony Configuration',
        description:
          'New requests may name it again (on every node within LOOKUP_CACHE_TTL_MS). It does not become the default again: set that separately. Enabling an active one changes nothing. Recorded in the audit log as `telephony_configuration.enabled`.',
        codes: [] as ErrorCode[],
        act: enableTelephonyConfiguration,
      },
      {
        verb: 'set-default',
        operationId: 'setDefaultTelephonyConfiguration',
        summary: 'Set Default Telephony Configuration',
        description:
          'Makes it the organization\'s default, the one runs dial when they name no telephony_configuration_id (the previous default stays, as an ordinary configuration). Only an active configuration can be the default: a disabled one is 409 telephony_configuration_disabled. Recorded in the audit log as `telephony_configuration.default_set`.',
        codes: ['telephony_configuration_disabled'] as ErrorCode[],
        act: setDefaultTelephonyConfiguration,
      },
    ];
    for (const action of actions) {
      app.post(
        `${BASE}/:id/${action.verb}`,
        {
          schema: {
            ...common,
            operationId: action.operationId,
            summary: action.summary,
            description: action.description,
            params: ConfigParams,
            response: { 200: withRateLimitHeaders(Ref), ...problemResponses([...REFUSALS, ...BODY, 'telephony_configuration_not_found', ...action.codes]) },
          },
        },
        async (request) => {
          const id = configurationId((request.params as { id: string }).id);
          await action.act(deps.store, id, deps.clock.now(), changeOptions(request));
          deps.signals.outbox();
          return current(authOf(request).orgId, id);
        },
      );
    }

    app.get(
      `${BASE}/:id/readiness`,
      {
        schema: {
          ...common,
          operationId: 'getTelephonyConfigurationReadiness',
          summary: 'Get Telephony Configuration Readiness',
          description:
            'Whether a call could be placed through the configuration now, with every reason it cannot, each with its JSON Pointer: disabled (`/status`), its settings or credentials not fitting its provider\'s schema (or not decrypting under this DIALTONE_SECRET_KEY), and what its provider still lacks (a caller ID, PUBLIC_BASE_URL). A request through a configuration that is not ready is refused with 422 telephony_not_ready.',
          params: ConfigParams,
          response: { 200: withRateLimitHeaders(Type.Ref('TelephonyConfigurationReadiness')), ...problemResponses([...REFUSALS, 'telephony_configuration_not_found']) },
        },
      },
      async (request) => {
        const id = configurationId((request.params as { id: string }).id);
        const row = await getTelephonyConfigurationRow(deps.store, authOf(request).orgId, id);
        if (!row) throw new DialtoneError('telephony_configuration_not_found', `No telephony configuration ${id}.`);
        const problems = [
          ...(row.status === 'active' ? [] : [{ pointer: '/status', detail: 'Disabled: new requests cannot use it until it is enabled.' }]),
          ...deps.routes.readinessProblems(row, { publicBaseUrl: deps.config.PUBLIC_BASE_URL }),
        ];
        return { id, ready: problems.length === 0, problems };
      },
    );
  };
}
