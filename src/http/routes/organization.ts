// The organization's settings over the API (scope `admin`; orgs/settings.ts does the work, each
// change recorded in the audit log in its transaction): its own rate limits and queue cap, the
// per-number frequency cap, calling hours and retention window, read and changed as one, with the
// rules `dialtone org set-limits`, `set-calling-hours` and `set-retention` apply. A key only ever
// reaches its own organization, so there is no id to get wrong.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import type { ErrorCode } from '../../errors.js';
import { organizationSettings, updateOrganizationSettings, MAX_NUMBER_CALLS, MAX_NUMBER_WINDOW_SECONDS, MAX_QUEUED_RUNS, MAX_RATE_PER_SECOND, type OrganizationSettings, type OrganizationSettingsChange } from '../../orgs/settings.js';
import { MAX_RETENTION_DAYS } from '../../orgs/organizations.js';
import { WEEKDAYS } from '../../policy/calling-hours.js';
import { actorOf, authOf } from '../authenticate.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { documentedAs, StringEnum, withRateLimitHeaders } from '../schemas.js';

const PATH = '/organization';
const REFUSALS: ErrorCode[] = ['missing_api_key', 'invalid_api_key', 'rate_limited'];
const BODY: ErrorCode[] = ['unsupported_media_type', 'payload_too_large', 'malformed_json'];

const WINDOW = Type.String({ pattern: '^\\d{2}:\\d{2}-\\d{2}:\\d{2}$', description: 'HH:MM-HH:MM in 24-hour local time; a window may end at 24:00', examples: ['09:00-17:30'] });
const CallingHours = Type.Object(
  {
    timezone: Type.String({ description: 'IANA time zone used where the callee\'s is unknown (a number without a zone, a SIP URI)', examples: ['America/New_York'] }),
    outside: StringEnum(['defer', 'refuse'] as const, { description: '`defer`: a call outside the windows is queued until the next one (status scheduled); `refuse`: answered 422 outside_calling_hours' }),
    windows: Type.Object(Object.fromEntries(WEEKDAYS.map((day) => [day, Type.Optional(Type.Array(WINDOW))])), {
      additionalProperties: false,
      description: 'Per weekday, the windows of local time calls may be placed in; a missing day has none',
    }),
  },
  {
    $id: 'CallingHours',
    title: 'CallingHours',
    description: 'When calls may be placed, in the callee\'s local time (docs/calling-policy.md, "Calling hours")',
    examples: [{ timezone: 'America/New_York', outside: 'defer', windows: { mon: ['09:00-17:00'], tue: ['09:00-17:00'], wed: ['09:00-17:00'], thu: ['09:00-17:00'], fri: ['09:00-17:00'] } }],
  },
);

const limit = (min: number, max: number, what: string, variable: string) =>
  Type.Union([Type.Integer({ minimum: min, maximum: max }), Type.Null()], { description: `${what}; null follows ${variable}` });
const NumberCap = Type.Object(
  {
    max_calls: Type.Integer({ minimum: 1, maximum: MAX_NUMBER_CALLS, description: 'Most runs to one number within the window', examples: [3] }),
    window_seconds: Type.Integer({ minimum: 1, maximum: MAX_NUMBER_WINDOW_SECONDS, description: 'The sliding window, in seconds (at most a year)', examples: [86_400] }),
  },
  { additionalProperties: false },
);
const settingsProperties = {
  rate_limit_per_second: limit(0, MAX_RATE_PER_SECOND, 'Requests per second for all the organization\'s keys together (0: no limit)', 'RATE_LIMIT_ORG_PER_SECOND'),
  key_rate_limit_per_second: limit(0, MAX_RATE_PER_SECOND, 'Requests per second per API key (0: no limit)', 'RATE_LIMIT_KEY_PER_SECOND'),
  max_queued_runs: limit(1, MAX_QUEUED_RUNS, 'Most runs queued at once', 'MAX_QUEUED_RUNS_PER_ORG'),
  number_cap: Type.Union([NumberCap, Type.Null()], { description: 'The per-number frequency cap (docs/calling-policy.md); null: off' }),
  retention_days: Type.Union([Type.Integer({ minimum: 0, maximum: MAX_RETENTION_DAYS }), Type.Null()], {
    description: 'How many days ended runs are kept (docs/operations.md, "Retention"); 0 keeps them forever; null follows RETENTION_DAYS',
  }),
};

const Settings = Type.Object(
  {
    id: Type.Integer({ minimum: 1 }),
    name: Type.String(),
    ...settingsProperties,
    calling_hours: Type.Union([Type.Ref('CallingHours'), Type.Null()], { description: 'null: off, calls at any hour' }),
    defaults: Type.Object(
      {
        rate_limit_per_second: Type.Integer({ description: 'RATE_LIMIT_ORG_PER_SECOND' }),
        key_rate_limit_per_second: Type.Integer({ description: 'RATE_LIMIT_KEY_PER_SECOND' }),
        max_queued_runs: Type.Integer({ description: 'MAX_QUEUED_RUNS_PER_ORG' }),
        retention_days: Type.Integer({ description: 'RETENTION_DAYS (0: kept forever)' }),
      },
      { description: 'What this service is configured with: the values a null setting follows' },
    ),
  },
  {
    $id: 'OrganizationSettings',
    title: 'OrganizationSettings',
    description: 'The organization\'s own limits, per-number cap, calling hours and retention window',
  },
);

const CALLING_HOURS_BODY_DESCRIPTION = 'Calling hours (every problem listed with its JSON Pointer under /calling_hours), or null to turn them off';

export function organizationRoutes(deps: Deps): FastifyPluginAsync {
  const common = { tags: ['Management'], security: requiresScope('admin') };
  const defaults = {
    rate_limit_per_second: deps.config.RATE_LIMIT_ORG_PER_SECOND,
    key_rate_limit_per_second: deps.config.RATE_LIMIT_KEY_PER_SECOND,
    max_queued_runs: deps.config.MAX_QUEUED_RUNS_PER_ORG,
    retention_days: deps.config.RETENTION_DAYS,
  };
  const show = (settings: OrganizationSettings) => ({ ...settings, defaults });
  return async (app) => {
    app.addSchema(CallingHours);
    app.addSchema(Settings);

    app.get(
      PATH,
      {
        schema: {
          ...common,
          operationId: 'getOrganizationSettings',
          summary: 'Get Organization Settings',
          description: 'The organization\'s own limits, per-number frequency cap, calling hours and retention window, with the service\'s defaults that a null setting follows.',
          response: { 200: withRateLimitHeaders(Type.Ref('OrganizationSettings')), ...problemResponses([...REFUSALS]) },
        },
      },
      async (request) => {
        const { orgId } = authOf(request);
        const settings = await organizationSettings(deps.store, orgId);
        // A key's organization is never deleted; a key without one is a broken store.
        if (!settings) throw new Error(`The organization ${orgId} of an authenticated key does not exist.`);
        return show(settings);
      },
    );

    app.patch(
      PATH,
      {
        schema: {
          ...common,
          operationId: 'updateOrganizationSettings',
          summary: 'Update Organization Settings',
          description:
            'Changes the settings the body names; the others stay. null returns a limit to the service\'s default and turns the per-number cap or calling hours off. The rules are the CLI\'s (`org set-limits`, `set-calling-hours`, `set-retention`): every problem is listed with its JSON Pointer (422 validation_failed) and nothing changes when there is one. Requests on every node see the change within LOOKUP_CACHE_TTL_MS (the limits, the cap and calling hours travel with the API key\'s lookup), retention on the next maintenance pass. Recorded in the audit log as `organization.settings_updated`, with the settings before and after, when anything changed.',
          body: Type.Object(
            {
              rate_limit_per_second: Type.Optional(settingsProperties.rate_limit_per_second),
              key_rate_limit_per_second: Type.Optional(settingsProperties.key_rate_limit_per_second),
              max_queued_runs: Type.Optional(settingsProperties.max_queued_runs),
              number_cap: Type.Optional(settingsProperties.number_cap),
              // Validated by orgs/settings.ts (the time zone against the tz database, each window),
              // which lists every problem; documented as the CallingHours it must be.
              calling_hours: Type.Optional(
                documentedAs(Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()], { description: CALLING_HOURS_BODY_DESCRIPTION }), {
                  oneOf: [{ $ref: '#/components/schemas/CallingHours' }, { type: 'null' }],
                  description: CALLING_HOURS_BODY_DESCRIPTION,
                }),
              ),
              retention_days: Type.Optional(settingsProperties.retention_days),
            },
            { additionalProperties: false, examples: [{ calling_hours: { timezone: 'America/New_York', outside: 'defer', windows: { mon: ['09:00-17:00'] } }, number_cap: { max_calls: 3, window_seconds: 86_400 } }] },
          ),
          response: { 200: withRateLimitHeaders(Type.Ref('OrganizationSettings')), ...problemResponses([...REFUSALS, ...BODY, 'validation_failed']) },
        },
      },
      async (request) => {
        const { orgId } = authOf(request);
        const settings = await updateOrganizationSettings(deps.store, orgId, request.body as OrganizationSettingsChange, deps.clock.now(), { actor: actorOf(request) });
        // Committed with its audit entry (when anything changed), whose audit.event message the delivery workers send now.
        deps.signals.outbox();
        return show(settings);
      },
    );
  };
}
