// Campaigns (campaigns/ does the work): create, read, steer (start, pause, resume, cancel), import
// contacts (JSON or CSV) and follow their contacts and runs. Another organization's campaign
// answers 404 campaign_not_found, like an absent one.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Readable } from 'node:stream';
import type { Deps } from '../../deps.js';
import { DialtoneError, type ErrorCode } from '../../errors.js';
import { actOnCampaign, createCampaign, getCampaign, listCampaignRuns, listCampaigns, updateCampaign, type CampaignAction, type CreateCampaignBody } from '../../campaigns/campaigns.js';
import { importContactCsv, importContactList, listContacts, type ContactInput } from '../../campaigns/contacts.js';
import { CAMPAIGN_LIMITS as L, RETRY_CONDITIONS } from '../../campaigns/settings.js';
import { TERMINAL_STATES } from '../../runs/states.js';
import { ANSWERED_BY, CAMPAIGN_STATES, CONTACT_STATUSES, PAUSED_REASONS, type ContactStatus } from '../../store/schema/schema.js';
import { DETECT_MODES, DETECTION_TIMEOUT_MS, MACHINE_ACTIONS } from '../../workflows/answering-machine.js';
import { WEEKDAYS } from '../../policy/calling-hours.js';
import { authOf } from '../authenticate.js';
import { allowQuietImport } from '../quiet-import.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { documentedAs, IdempotencyHeaders, MAX_ID, NullableStringEnum, PathId, replayableResponse, RunPageRef, RunStateRef, StringEnum, withRateLimitHeaders } from '../schemas.js';
import { PageLimit } from '../paging.js';

const literals = <T extends string>(values: readonly T[], options: Record<string, unknown> = {}) => StringEnum(values, options);
const Timestamp = Type.String({ format: 'date-time' });

const Schedule = Type.Object(
  {
    timezone: Type.String({ description: 'IANA time zone the windows are in, e.g. "America/New_York"' }),
    windows: Type.Object(Object.fromEntries(WEEKDAYS.map((day) => [day, Type.Optional(Type.Array(Type.String({ pattern: '^\\d{2}:\\d{2}-\\d{2}:\\d{2}$' }), { description: '"HH:MM-HH:MM" windows of local time' }))])), {
      additionalProperties: false,
    }),
  },
  { $id: 'CampaignSchedule', title: 'CampaignSchedule', additionalProperties: false, description: 'Attempts are created only inside these weekly windows (a missing day has none).' },
);

const Retry = Type.Object(
  {
    max_attempts: Type.Optional(Type.Integer({ minimum: L.maxAttempts.min, maximum: L.maxAttempts.max, description: 'Attempts per contact, the first included (default 1)' })),
    delay_seconds: Type.Optional(Type.Integer({ minimum: L.delaySeconds.min, maximum: L.delaySeconds.max, description: 'Wait after an attempt ends before the next (default 600)' })),
    on: Type.Optional(Type.Array(literals(RETRY_CONDITIONS), { uniqueItems: true, description: 'Run states that earn another attempt (default busy, no_answer, failed), and machine: an attempt a machine answered that was hung up on or left a message (answering-machine detection)' })),
  },
  { additionalProperties: false },
);

const Breaker = Type.Object(
  {
    failure_ratio: Type.Optional(Type.Number({ exclusiveMinimum: L.failureRatio.exclusiveMin, maximum: L.failureRatio.max, description: 'Share of ended attempts that ended failed which pauses the campaign (default 0.5)' })),
    window_seconds: Type.Optional(Type.Integer({ minimum: L.windowSeconds.min, maximum: L.windowSeconds.max, description: 'The window attempts are counted over (default 120)' })),
    min_calls: Type.Optional(Type.Integer({ minimum: L.minCalls.min, maximum: L.minCalls.max, description: 'Ended attempts needed in the window before it can trip (default 10)' })),
  },
  { additionalProperties: false },
);

/** The answering_machine object as documented (the definition's, docs/telephony.md "Answering machines"). */
const ANSWERING_MACHINE_DOCUMENTED = {
  title: 'AnsweringMachine',
  type: 'object',
  additionalProperties: false,
  required: ['detect'],
  description:
    'Answering-machine detection, as the agent definition\'s top-level answering_machine: on_machine is required when detecting; leave_message needs detect "message_end" and a message (a template rendered with the run\'s context).',
  properties: {
    detect: { type: 'string', enum: [...DETECT_MODES] },
    on_machine: { type: 'string', enum: [...MACHINE_ACTIONS] },
    message: { type: 'string' },
    detection_timeout_ms: { type: 'integer', minimum: DETECTION_TIMEOUT_MS.min, maximum: DETECTION_TIMEOUT_MS.max },
  },
};

/**
 * A campaign's own answering_machine in a request: validated loosely here and by the handler like
 * the definition's (workflows/answering-machine.ts), so every problem is listed with its JSON
 * Pointer; the document shows the exact shape.
 */
const AnsweringMachineInput = (description: string) =>
  documentedAs(Type.Unknown({ description }), { anyOf: [ANSWERING_MACHINE_DOCUMENTED, { type: 'null' }], description });

const AnsweringMachineView = Type.Union(
  [
    Type.Object(
      {
        detect: literals(DETECT_MODES),
        on_machine: Type.Optional(literals(MACHINE_ACTIONS)),
        message: Type.Optional(Type.String()),
        detection_timeout_ms: Type.Optional(Type.Integer()),
      },
      { additionalProperties: false },
    ),
    Type.Null(),
  ],
  { description: 'The campaign\'s own answering-machine settings, which replace its agent\'s; null: the agent\'s apply' },
);

const CampaignBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    agent_uuid: Type.Optional(Type.String({ description: 'The agent to call with (or workflow_uuid)' })),
    workflow_uuid: Type.Optional(Type.String({ description: 'The workflow to call with (or agent_uuid)' })),
    mode: literals(['published', 'test'] as const, { description: 'published runs the published definition; test the draft, else the published one' }),
    telephony_configuration_id: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: MAX_ID }), Type.Null()], { description: 'Omitted or null: the organization\'s default route, fixed now' })),
    max_concurrent_calls: Type.Optional(Type.Integer({ minimum: L.maxConcurrentCalls.min, maximum: L.maxConcurrentCalls.max, description: 'Attempts queued or live at once (default: the route\'s max_concurrent_calls); the route\'s own cap also applies' })),
    calls_per_second: Type.Optional(Type.Number({ exclusiveMinimum: L.callsPerSecond.exclusiveMin, maximum: L.callsPerSecond.max, description: 'Dials per second at most, evenly spaced across every node (attempts are created no faster either); inside the route\'s own pacing, which also applies' })),
    starts_at: Type.Optional(Type.String({ format: 'date-time', description: 'No attempt before this time' })),
    ends_at: Type.Optional(Type.String({ format: 'date-time', description: 'The campaign pauses (paused_reason ends_at) at this time' })),
    schedule: Type.Optional(Type.Ref('CampaignSchedule')),
    retry: Type.Optional(Retry),
    circuit_breaker: Type.Optional(Breaker),
    answering_machine: Type.Optional(AnsweringMachineInput('The campaign\'s own answering-machine settings, in place of its agent\'s (omitted or null: the agent\'s)')),
  },
  { additionalProperties: false },
);

const Progress = Type.Object({
  total: Type.Integer({ description: 'Contacts in the campaign' }),
  pending: Type.Integer({ description: 'Waiting for an attempt (first or next)' }),
  in_progress: Type.Integer({ description: 'With an attempt queued or live' }),
  reached: Type.Integer({ description: 'An attempt completed' }),
  exhausted: Type.Integer({ description: 'Every attempt used without reaching them' }),
  suppressed: Type.Integer({ description: 'On the suppression list when due' }),
  invalid: Type.Integer({ description: 'Missing a variable the agent requires' }),
  canceled: Type.Integer({ description: 'Left pending when the campaign was canceled' }),
  attempts: Type.Integer({ description: 'Runs created' }),
  outcomes: Type.Object(Object.fromEntries(TERMINAL_STATES.map((s) => [s, Type.Optional(Type.Integer())])), { description: 'Ended runs per terminal state', additionalProperties: false }),
  answered_by: Type.Object(Object.fromEntries(ANSWERED_BY.map((verdict) => [verdict, Type.Integer({ minimum: 0 })])), {
    description: 'Runs by who answered (answering-machine detection\'s verdict; runs that asked nothing are not counted): machines apart from people',
    additionalProperties: false,
  }),
});

const Campaign = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    state: literals(CAMPAIGN_STATES),
    paused_reason: NullableStringEnum(PAUSED_REASONS, { description: 'Why a paused campaign is paused: request, circuit_breaker or ends_at' }),
    mode: literals(['published', 'test'] as const),
    agent_uuid: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
    workflow_uuid: Type.String({ format: 'uuid' }),
    telephony_configuration_id: Type.Integer(),
    max_concurrent_calls: Type.Integer(),
    calls_per_second: Type.Union([Type.Number(), Type.Null()]),
    starts_at: Type.Union([Timestamp, Type.Null()]),
    ends_at: Type.Union([Timestamp, Type.Null()]),
    schedule: Type.Union([Type.Ref('CampaignSchedule'), Type.Null()]),
    retry: Type.Object({ max_attempts: Type.Integer(), delay_seconds: Type.Integer(), on: Type.Array(Type.String()) }),
    circuit_breaker: Type.Object({ failure_ratio: Type.Number(), window_seconds: Type.Integer(), min_calls: Type.Integer() }),
    answering_machine: AnsweringMachineView,
    progress: Progress,
    created_at: Timestamp,
    updated_at: Timestamp,
    started_at: Type.Union([Timestamp, Type.Null()]),
  },
  { $id: 'Campaign', title: 'Campaign' },
);

const Contact = Type.Object({
  id: Type.Integer(),
  phone_number: Type.String(),
  status: literals(CONTACT_STATUSES),
  timezone: Type.Union([Type.String(), Type.Null()]),
  attempts: Type.Array(Type.Object({ attempt: Type.Integer(), run_id: Type.Integer(), state: RunStateRef() })),
  next_attempt_at: Type.Union([Timestamp, Type.Null()], { description: 'When a pending contact is next due' }),
});

const ContactItem = Type.Object(
  {
    phone_number: Type.String({ maxLength: 256, description: 'E.164 (any form libphonenumber reads)' }),
    initial_context: Type.Optional(Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()])),
    timezone: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()], { description: 'IANA zone: calling hours are checked there instead of in the number\'s zones' })),
  },
  { additionalProperties: false },
);

const ImportResult = Type.Object({
  added: Type.Integer({ minimum: 0, description: 'Contacts added' }),
  duplicates: Type.Integer({ minimum: 0, description: 'Numbers given twice, or already in the campaign (a number appears once per campaign)' }),
  invalid: Type.Array(
    Type.Object({
      index: Type.Optional(Type.Integer({ minimum: 0, description: 'JSON: the item\'s index' })),
      line: Type.Optional(Type.Integer({ minimum: 2, description: 'CSV: the line (the header is line 1)' })),
      detail: Type.String(),
    }),
    { description: 'Contacts skipped, at most CAMPAIGN_CONTACTS_MAX_INVALID_LISTED of them' },
  ),
  invalid_count: Type.Integer({ minimum: 0, description: 'Every contact skipped, listed or not' }),
});

const IdParams = Type.Object({ id: PathId('Campaign id') });
const REFUSALS: ErrorCode[] = ['missing_api_key', 'invalid_api_key', 'rate_limited'];
const BODY: ErrorCode[] = ['unsupported_media_type', 'payload_too_large', 'malformed_json'];
const OWN: ErrorCode[] = [...REFUSALS, 'not_found', 'campaign_not_found'];

function parseCampaignId(text: string): number {
  if (!/^[1-9][0-9]{0,14}$/.test(text)) throw new DialtoneError('campaign_not_found', `No campaign ${text}.`);
  return Number(text);
}

function idOf(request: FastifyRequest): number {
  return parseCampaignId((request.params as { id: string }).id);
}

function mediaType(request: FastifyRequest): string {
  return request.headers['content-type']?.split(';')[0]?.trim().toLowerCase() ?? '';
}

const ACTIONS: { action: CampaignAction; summary: string; description: string }[] = [
  { action: 'start', summary: 'Start Campaign', description: 'draft → running: the scheduler begins creating attempts as contacts become due.' },
  { action: 'pause', summary: 'Pause Campaign', description: 'running → paused (paused_reason request): no new dial from now; attempts queued and not yet claimed end canceled (reason campaign_paused) and their contacts get the attempt back; calls in progress finish.' },
  { action: 'resume', summary: 'Resume Campaign', description: 'paused → running (whatever paused it; the circuit breaker counts afresh). Refused once ends_at has passed.' },
  { action: 'cancel', summary: 'Cancel Campaign', description: 'draft, running or paused → canceled: queued attempts end canceled, pending contacts end canceled; calls in progress finish.' },
];

export function campaignRoutes(deps: Deps): FastifyPluginAsync {
  const common = { tags: ['Campaigns'], security: requiresScope('campaigns') };
  return async (app) => {
    app.addSchema(Schedule);
    app.addSchema(Campaign);

    app.post(
      '/campaigns',
      {
        schema: {
          ...common,
          operationId: 'createCampaign',
          summary: 'Create Campaign',
          description: 'A campaign in state draft: add contacts, then start it. An organization may have at most CAMPAIGN_MAX_OPEN_PER_ORGANIZATION campaigns open (draft, running or paused; default 100): one more is refused with 422 campaign_limit. Each attempt is an ordinary workflow run (with campaign_id, contact_id and attempt), created when its contact is due.',
          body: CampaignBody,
          response: {
            201: withRateLimitHeaders(Type.Ref('Campaign')),
            ...problemResponses([...REFUSALS, ...BODY, 'validation_failed', 'agent_not_found', 'workflow_not_found', 'workflow_not_published', 'telephony_configuration_not_found', 'telephony_not_configured', 'telephony_not_ready', 'machine_detection_unsupported', 'campaign_limit']),
          },
        },
      },
      async (request, reply) => reply.code(201).send(await createCampaign(deps, authOf(request).orgId, request.body as CreateCampaignBody)),
    );

    app.get(
      '/campaigns',
      {
        schema: {
          ...common,
          operationId: 'listCampaigns',
          summary: 'List Campaigns',
          description: 'The organization\'s campaigns, newest first. Page with `after` (the `next_after` of the previous page).',
          querystring: Type.Object(
            {
              after: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,14}$', description: 'Return campaigns older than this id' })),
              limit: Type.Optional(PageLimit(20)),
            },
            { additionalProperties: false },
          ),
          response: {
            200: withRateLimitHeaders(Type.Object({ data: Type.Array(Type.Ref('Campaign')), next_after: Type.Union([Type.Integer(), Type.Null()]) })),
            ...problemResponses([...REFUSALS, 'validation_failed']),
          },
        },
      },
      async (request) => {
        const query = request.query as { after?: string; limit?: string };
        return listCampaigns(deps, authOf(request).orgId, { after: query.after === undefined ? undefined : Number(query.after), limit: Number(query.limit ?? 20) });
      },
    );

    app.patch(
      '/campaigns/:id',
      {
        schema: {
          ...common,
          operationId: 'updateCampaign',
          summary: 'Update Campaign',
          description:
            'Changes the campaign\'s own answering_machine settings (null: its agent\'s again) while it is draft, running or paused; attempts dialed from then on use them, calls already placed keep theirs. Checked like at creation: every problem listed with its JSON Pointer (422 validation_failed), and detection through a route that cannot detect is 422 machine_detection_unsupported. An ended campaign answers 409 campaign_state_conflict.',
          params: IdParams,
          body: Type.Object({ answering_machine: AnsweringMachineInput('The campaign\'s own answering-machine settings, or null for its agent\'s') }, { additionalProperties: false }),
          response: {
            200: withRateLimitHeaders(Type.Ref('Campaign')),
            ...problemResponses([...OWN, ...BODY, 'validation_failed', 'campaign_state_conflict', 'machine_detection_unsupported', 'agent_not_found', 'workflow_not_found', 'workflow_not_published']),
          },
        },
      },
      async (request) => updateCampaign(deps, authOf(request).orgId, idOf(request), request.body as { answering_machine?: unknown }),
    );

    app.get(
      '/campaigns/:id',
      {
        schema: { ...common, operationId: 'getCampaign', summary: 'Get Campaign', description: 'The campaign with its progress.', params: IdParams, response: { 200: withRateLimitHeaders(Type.Ref('Campaign')), ...problemResponses(OWN) } },
      },
      async (request) => getCampaign(deps, authOf(request).orgId, idOf(request)),
    );

    for (const { action, summary, description } of ACTIONS) {
      app.post(
        `/campaigns/:id/${action}`,
        {
          schema: {
            ...common,
            operationId: `${action}Campaign`,
            summary,
            description: `${description} Any other state answers 409 campaign_state_conflict and changes nothing.`,
            params: IdParams,
            response: { 200: withRateLimitHeaders(Type.Ref('Campaign')), ...problemResponses([...OWN, ...BODY, 'campaign_state_conflict']) },
          },
        },
        async (request) => actOnCampaign(deps, authOf(request).orgId, idOf(request), action),
      );
    }

    // The contacts import alone takes text/csv: its parser lives in a scope of its own, so every
    // other route here refuses a CSV body with 415 like any body that is not JSON. The body is
    // handed over unread, as a stream (shared/csv-body.ts receives it, enforcing the byte limit).
    await app.register(async (csv) => {
      csv.addContentTypeParser('text/csv', (_request, payload, done) => done(null, payload));
      csv.post(
        '/campaigns/:id/contacts',
        {
          bodyLimit: deps.config.CAMPAIGN_CONTACTS_MAX_BYTES,
          preValidation: async (request) => {
            const type = mediaType(request);
            if (type !== 'application/json' && type !== 'text/csv') throw new DialtoneError('unsupported_media_type', 'Send the contacts as application/json (an array) or text/csv.');
            if (request.body === undefined) throw new DialtoneError('validation_failed', 'The body is empty; send a list of contacts.', { errors: [{ pointer: '', detail: 'Required: the contacts.' }] });
            if (Number(request.headers['content-length'] ?? 0) > deps.config.CAMPAIGN_CONTACTS_MAX_BYTES) {
              throw new DialtoneError('payload_too_large', `The contacts are larger than ${deps.config.CAMPAIGN_CONTACTS_MAX_BYTES} bytes (CAMPAIGN_CONTACTS_MAX_BYTES).`);
            }
          },
          schema: {
            ...common,
            operationId: 'addCampaignContacts',
            summary: 'Add Campaign Contacts',
            description:
              'Adds contacts, as a JSON array (each with phone_number, and optionally initial_context and timezone) or as CSV (a header with a phone_number column, optionally timezone; every other column becomes an initial_context string value). A number appears once per campaign: repeats are counted as duplicates. Invalid contacts are listed by index (JSON) or line (CSV) and skipped. At most CAMPAIGN_CONTACTS_MAX_PER_REQUEST contacts (10,000; invalid and repeated ones count) and CAMPAIGN_CONTACTS_MAX_BYTES per request; a CSV must be UTF-8, each line at most CSV_IMPORT_MAX_LINE_BYTES, and a header alone adds nothing. Honours Idempotency-Key: a retry with the key gets the first answer again, even after the campaign has ended. An upload cut off before its end imports nothing (400 bad_request).',
            params: IdParams,
            headers: IdempotencyHeaders,
            body: {
              content: {
                'application/json': { schema: Type.Array(ContactItem, { maxItems: deps.config.CAMPAIGN_CONTACTS_MAX_PER_REQUEST }) },
                'text/csv': { schema: Type.Unsafe<Readable>({ description: 'CSV with a header row', examples: ['phone_number,timezone,name\n+12025550123,America/New_York,Ada\n'] }) },
              },
            },
            response: {
              200: replayableResponse(ImportResult),
              ...problemResponses([...OWN, ...BODY, 'validation_failed', 'campaign_state_conflict', 'idempotency_key_in_use', 'idempotency_key_reused']),
            },
          },
        },
        async (request, reply: FastifyReply) => {
          const orgId = authOf(request).orgId;
          const imported = { idempotencyKey: request.headers['idempotency-key'], path: request.url.split('?')[0] ?? '' };
          let answer;
          if (mediaType(request) === 'text/csv') {
            allowQuietImport(request, deps.config.CSV_IMPORT_TIMEOUT_MS);
            answer = await importContactCsv(deps, orgId, idOf(request), request.body as Readable, imported);
          } else {
            answer = await importContactList(deps, orgId, idOf(request), request.body as ContactInput[], imported);
          }
          if (answer.replayed) reply.header('idempotent-replayed', 'true');
          return reply.code(answer.status).type('application/json').send(answer.json);
        },
      );
    });

    app.get(
      '/campaigns/:id/contacts',
      {
        schema: {
          ...common,
          operationId: 'listCampaignContacts',
          summary: 'List Campaign Contacts',
          description: 'The campaign\'s contacts in the order they were added, each with its attempts. Page with `after` (the `next_after` of the previous page).',
          params: IdParams,
          querystring: Type.Object(
            {
              status: Type.Optional(literals(CONTACT_STATUSES, { description: 'Only contacts in this status' })),
              after: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,14}$', description: 'Return contacts after this id' })),
              limit: Type.Optional(Type.String({ pattern: '^([1-9][0-9]{0,2}|1000)$', description: 'Page size, 1 to 1000 (default 100)' })),
            },
            { additionalProperties: false },
          ),
          response: {
            200: withRateLimitHeaders(Type.Object({ data: Type.Array(Contact), next_after: Type.Union([Type.Integer(), Type.Null()]) })),
            ...problemResponses([...OWN, 'validation_failed']),
          },
        },
      },
      async (request) => {
        const query = request.query as { status?: ContactStatus; after?: string; limit?: string };
        return listContacts(deps, authOf(request).orgId, idOf(request), { status: query.status, after: query.after === undefined ? undefined : Number(query.after), limit: Number(query.limit ?? 100) });
      },
    );

    app.get(
      '/campaigns/:id/runs',
      {
        schema: {
          ...common,
          operationId: 'listCampaignRuns',
          summary: 'List Campaign Runs',
          description: 'The runs (attempts) of the campaign, newest first, as the workflow runs API shows them. Page with `after`.',
          params: IdParams,
          querystring: Type.Object(
            {
              after: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,14}$', description: 'Return runs older than this run id' })),
              limit: Type.Optional(PageLimit(50)),
            },
            { additionalProperties: false },
          ),
          response: { 200: withRateLimitHeaders(RunPageRef()), ...problemResponses([...OWN, 'validation_failed']) },
        },
      },
      async (request) => {
        const query = request.query as { after?: string; limit?: string };
        return listCampaignRuns(deps, authOf(request).orgId, idOf(request), { after: query.after === undefined ? undefined : Number(query.after), limit: Number(query.limit ?? 50) });
      },
    );
  };
}

