// Wire schemas (TypeBox): they validate requests, shape responses and generate the OpenAPI document.
// Objects more than one operation shows carry an `$id`: app.ts registers them as shared schemas,
// routes refer to them with Type.Ref, and the document names them under components.schemas (one
// WorkflowRun, not a copy per operation), so generated clients get one type each.
import { Type, type SchemaOptions, type TSchema, type TUnsafe } from '@sinclair/typebox';
import { RUN_STATES, type RunState } from '../runs/states.js';
import { ANSWERED_BY } from '../store/schema/schema.js';

export const MAX_ID = Number.MAX_SAFE_INTEGER;

/**
 * A string enum as one JSON Schema `enum`. TypeBox's Union of Literals becomes an `anyOf` of
 * one-value enums, which client generators turn into a class per value; this is one type with
 * its values, and one clear validation error.
 */
export function StringEnum<T extends string>(values: readonly T[], options: SchemaOptions = {}): TUnsafe<T> {
  return Type.Unsafe<T>({ ...options, type: 'string', enum: [...values] });
}

/** A string enum or null, as one schema (a `type` array, OpenAPI 3.1 style). */
export function NullableStringEnum<T extends string>(values: readonly T[], options: SchemaOptions = {}): TUnsafe<T | null> {
  return Type.Unsafe<T | null>({ ...options, type: ['string', 'null'], enum: [...values, null] });
}

/** Where a request member is documented otherwise than it is validated (see documentedAs). */
const DOCUMENTED_AS = Symbol('dialtone.documentedAs');

/**
 * A request member whose route validates it loosely and whose handler checks it, with an answer of
 * its own that the contract fixes (a malformed id is 404 like an unknown one; a bad Idempotency-Key
 * is 422 naming the header): the document shows `documented`, the exact rule, so clients and
 * generators see it, while validation stays `validated`. openapi.ts applies it (documentedSchema).
 */
export function documentedAs<T extends TSchema>(validated: T, documented: Record<string, unknown>): T {
  return Object.assign(validated, { [DOCUMENTED_AS]: documented });
}

/**
 * The route schema as the document shows it: every member made with documentedAs replaced by its
 * documented form. A copy: the route's own schema, which Fastify validates with, is left as it is.
 */
export function documentedSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(documentedSchema);
  if (typeof schema !== 'object' || schema === null) return schema;
  const documented = (schema as { [DOCUMENTED_AS]?: Record<string, unknown> })[DOCUMENTED_AS];
  if (documented) return documented;
  return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, documentedSchema(value)]));
}

/** The largest id a path accepts: the handlers read at most 15 digits (`^[1-9][0-9]{0,14}$`). */
export const MAX_PATH_ID = 999_999_999_999_999;

/**
 * A numeric id in a path, documented as the integer it is. Validated as a string: the handler
 * answers an id that is not one (`abc`, `0`, 16 digits) with the resource's 404, like an unknown id.
 */
export function PathId(description: string): TSchema {
  return documentedAs(Type.String({ description }), { type: 'integer', format: 'int64', minimum: 1, maximum: MAX_PATH_ID, description });
}

/**
 * A nullable member as one JSON Schema `type` array (OpenAPI 3.1 style) rather than TypeBox's
 * `anyOf`, so a wrong value yields one clear error instead of one per branch.
 */
function Nullable<T>(schema: Record<string, unknown>) {
  return Type.Unsafe<T | null>(schema);
}

export const InitiateCallBody = Type.Object(
  {
    phone_number: Type.String({
      minLength: 1,
      maxLength: 256,
      description: 'Destination in E.164 (for example +12025550123). SIP configurations also accept sip:user@host.',
      examples: ['+12025550123'],
    }),
    initial_context: Type.Optional(
      Nullable<Record<string, unknown>>({
        type: ['object', 'null'],
        additionalProperties: true,
        description: 'Values for the agent\'s template variables, stored with the run as given. Bounded in size and depth.',
      }),
    ),
    telephony_configuration_id: Type.Optional(
      Nullable<number>({
        type: ['integer', 'null'],
        minimum: 1,
        maximum: MAX_ID,
        description: 'Telephony configuration to dial through; omitted or null means the organization\'s default.',
      }),
    ),
  },
  { additionalProperties: false },
);

/** The `status` values of a created run's answer, which tell it from a dry run's (`valid`). */
export const INITIATE_CALL_STATUSES = ['queued', 'scheduled'] as const;

export const InitiateCallResponse = Type.Object(
  {
    status: StringEnum(INITIATE_CALL_STATUSES, {
      description: '"queued": the run was created and is due now; "scheduled": it was queued outside the organization\'s calling hours and deferred to scheduled_for.',
    }),
    workflow_run_id: Type.Integer(),
    workflow_run_name: Type.String({ examples: ['WR-API-123'] }),
    scheduled_for: Type.Optional(Type.String({ format: 'date-time', description: 'Present with status "scheduled": when the run becomes due (every time zone of the number inside a window).' })),
  },
  { $id: 'InitiateCallQueued', title: 'InitiateCallQueued', description: 'The run created (or, with an Idempotency-Key, the first answer again)' },
);

export const InitiateCallDryRunResponse = Type.Object(
  {
    status: StringEnum(['valid'] as const, { description: 'Every check passed (?dry_run=true); nothing was created or dialed and no Idempotency-Key was used.' }),
    workflow_run_id: Type.Null(),
    workflow_run_name: Type.Null(),
    definition_version: Type.Integer({ description: 'The definition version the call would run' }),
    telephony_configuration_id: Type.Integer({ description: 'The telephony configuration that would dial' }),
    scheduled_for: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the call would be due: null at once, else the next time inside the calling hours (outside: "defer")' }),
  },
  { $id: 'InitiateCallDryRun', title: 'InitiateCallDryRun', description: 'With ?dry_run=true: the checks passed and nothing was created' },
);

/**
 * The 200 of an Initiate Call operation: the run created, or the dry run's answer, told apart by
 * `status` (an OpenAPI discriminator, so generated clients pick the type by it).
 */
export const InitiateCallAnswer = Type.Unsafe<unknown>({
  oneOf: [Type.Ref('InitiateCallQueued'), Type.Ref('InitiateCallDryRun')],
  discriminator: {
    propertyName: 'status',
    mapping: {
      ...Object.fromEntries(INITIATE_CALL_STATUSES.map((status) => [status, '#/components/schemas/InitiateCallQueued'])),
      valid: '#/components/schemas/InitiateCallDryRun',
    },
  },
  description: 'The run created (or, with an Idempotency-Key, the first answer again); with ?dry_run=true, the checks passed and nothing was created',
});

export const DryRunQuery = Type.Object({
  dry_run: Type.Optional(
    StringEnum(['true', 'false'] as const, { description: 'true: run every check (authentication, rate limit, body, target, telephony, template variables, the Idempotency-Key\'s form, calling policy) and answer 200 "valid" or the problem the real request would get; nothing is created or dialed, and an Idempotency-Key is neither claimed nor looked up.' }),
  ),
});

/**
 * calls/idempotency.ts's rule as a header value arrives (HTTP strips the spaces around it): 1 to
 * 255 printable ASCII characters, either quoted (a structured-field string, `"abc"`) or bare,
 * where a bare key is one that is not itself in quotes.
 */
const IDEMPOTENCY_KEY_DOCUMENTED = {
  type: 'string',
  minLength: 1,
  maxLength: 257,
  pattern: '^(?:"[\\x20-\\x7e]{1,255}"|(?!"[\\x20-\\x7e]*"$)[\\x21-\\x7e](?:[\\x20-\\x7e]{0,253}[\\x21-\\x7e])?)$',
  examples: ['8e0f5b0c-4a8e-4a1e-9a57-2f1d3c6b7a90'],
};

const IDEMPOTENCY_KEY_DESCRIPTION =
  'Makes a retry safe: the same key and payload within 24 h returns the first response again (header Idempotent-Replayed: true) and never dials twice; the same key with another payload is 422 idempotency_key_reused; while the first request is in flight, 409 idempotency_key_in_use. Up to 255 printable ASCII characters, bare or as a quoted string; any other key is 422 validation_failed naming the header.';

export const IdempotencyHeaders = Type.Object({
  // Validated by the handler, which names the header in its 422 (a schema error would not).
  'idempotency-key': Type.Optional(documentedAs(Type.String({ description: IDEMPOTENCY_KEY_DESCRIPTION }), { ...IDEMPOTENCY_KEY_DOCUMENTED, description: IDEMPOTENCY_KEY_DESCRIPTION })),
});

export const RATE_LIMIT_HEADERS = {
  RateLimit: { type: 'string', description: 'Remaining quota and seconds to reset per policy, e.g. "key";r=39;t=2, "org";r=99;t=2 (draft-ietf-httpapi-ratelimit-headers-10).' },
  'RateLimit-Policy': { type: 'string', description: 'Quota per window per policy, e.g. "key";q=40;w=2, "org";q=100;w=2.' },
} as const;

/** Every authenticated answer carries the rate-limit fields. */
export function withRateLimitHeaders<T extends object>(schema: T): T & { headers: typeof RATE_LIMIT_HEADERS } {
  return { ...schema, headers: RATE_LIMIT_HEADERS };
}

/** The 200 of an Initiate Call operation, with the headers it may carry. */
export function replayableResponse<T extends object>(schema: T): T & { headers: Record<string, unknown> } {
  return {
    ...schema,
    headers: {
      ...RATE_LIMIT_HEADERS,
      'Idempotent-Replayed': { type: 'string', enum: ['true'], description: 'Present when this is the stored response of an earlier request with the same Idempotency-Key.' },
    },
  };
}

const Timestamp = Type.String({ format: 'date-time' });
const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

export const RunStateSchema = StringEnum(RUN_STATES, { $id: 'RunState', title: 'RunState', description: 'Where a run is in its lifecycle' });
/** A run's state, as the shared `RunState` schema. */
export const RunStateRef = () => Type.Unsafe<RunState>(Type.Ref('RunState'));

export const RUN_MODES = ['published', 'test'] as const;

export const WorkflowRun = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    state: RunStateRef(),
    mode: StringEnum(RUN_MODES),
    workflow_uuid: Type.String({ format: 'uuid' }),
    agent_uuid: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
    definition_id: Type.Integer(),
    definition_version: Type.Integer(),
    phone_number: Type.String(),
    caller_id: Type.Union([Type.String(), Type.Null()]),
    telephony_configuration_id: Type.Integer(),
    initial_context: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
    outcome_reason: Type.Union([Type.String(), Type.Null()], { description: 'Why the run ended, normalized (for example ring_timeout, hangup, dispatch_interrupted)' }),
    raw_provider_status: Type.Union([Type.String(), Type.Null()], { description: 'The provider\'s own latest status (SIP status line, Twilio CallStatus)' }),
    provider_call_id: Type.Union([Type.String(), Type.Null()]),
    created_at: Timestamp,
    updated_at: Timestamp,
    scheduled_for: Type.Union([Timestamp, Type.Null()], {
      description: 'When a run queued outside the organization\'s calling hours becomes due (the dispatcher does not dial it before); null when it was due at once',
    }),
    claimed_at: NullableTimestamp,
    dial_sent_at: NullableTimestamp,
    ringing_at: NullableTimestamp,
    answered_at: NullableTimestamp,
    ended_at: NullableTimestamp,
    cancel_requested_at: NullableTimestamp,
    campaign_id: Type.Union([Type.Integer(), Type.Null()], { description: 'The campaign this run is an attempt of; null for a run started by an Initiate Call operation' }),
    contact_id: Type.Union([Type.Integer(), Type.Null()], { description: 'The campaign contact this run calls; null outside campaigns' }),
    attempt: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], { description: 'The attempt number for that contact (1, 2, …); null outside campaigns' }),
    answered_by: Type.Union([StringEnum(ANSWERED_BY), Type.Null()], {
      description: 'Who answered, when the agent asks for answering-machine detection: human, machine, fax or unknown; null until the provider decides, and on runs that never asked',
    }),
    raw_answered_by: Type.Union([Type.String(), Type.Null()], { description: 'The provider\'s own verdict (for example Twilio\'s machine_end_beep)' }),
    result: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()], { description: 'What the agent runtime reported the call concluded (POST /runtime/runs/{id}/result), valid against the definition\'s result_schema when it declares one; null until reported' }),
  },
  { $id: 'WorkflowRun', title: 'WorkflowRun', description: 'A workflow run: one call, from queued to its end' },
);

/** A run, as the shared `WorkflowRun` schema: what every operation that returns a run answers. */
export const WorkflowRunRef = () => Type.Ref('WorkflowRun');

/** A page of runs, as the shared `WorkflowRunPage` schema. */
export const RunPageRef = () => Type.Ref('WorkflowRunPage');

export const RunPage = Type.Object(
  {
    data: Type.Array(WorkflowRunRef()),
    next_after: Type.Union([Type.Integer(), Type.Null()], { description: 'Pass as `after` for the next (older) page; null when this is the last page' }),
  },
  { $id: 'WorkflowRunPage', title: 'WorkflowRunPage' },
);

export const WorkflowRunEvent = Type.Object(
  {
    seq: Type.Integer({ description: 'Monotonic per run, starting at 1' }),
    type: Type.String({ description: 'The state the run entered' }),
    at: Timestamp,
    data: Type.Object({}, { additionalProperties: true }),
  },
  { $id: 'WorkflowRunEvent', title: 'WorkflowRunEvent', description: 'A state a run entered' },
);

export const RunEventsPage = Type.Object({
  data: Type.Array(Type.Ref('WorkflowRunEvent')),
  next_after: Type.Union([Type.Integer(), Type.Null()], {
    description: 'Cursor for the next page (pass as `after`). Null only when the run has ended and this page holds its last event; a live run\'s last page gives the cursor to poll from.',
  }),
});

/** The schemas app.ts shares before any route refers to them (by `$id`). */
export function sharedSchemas(): TSchema[] {
  return [RunStateSchema, WorkflowRun, RunPage, WorkflowRunEvent, InitiateCallResponse, InitiateCallDryRunResponse];
}

export function uuidParam(name: string, description: string): TSchema {
  return Type.Object({ [name]: Type.String({ description }) });
}
