// Wire schemas (TypeBox): they validate requests, shape responses and generate the OpenAPI document.
import { Type, type TSchema } from '@sinclair/typebox';
import { RUN_STATES } from '../runs/states.js';

export const MAX_ID = Number.MAX_SAFE_INTEGER;

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

export const InitiateCallResponse = Type.Object({
  status: Type.String({
    description: 'The run\'s state when the response was sent (normally "queued"), or "scheduled" for a run queued outside the organization\'s calling hours and deferred to scheduled_for.',
  }),
  workflow_run_id: Type.Integer(),
  workflow_run_name: Type.String({ examples: ['WR-API-123'] }),
  scheduled_for: Type.Optional(Type.String({ format: 'date-time', description: 'Present with status "scheduled": when the run becomes due (every time zone of the number inside a window).' })),
});

export const InitiateCallDryRunResponse = Type.Object(
  {
    status: Type.Literal('valid', { description: 'Every check passed (?dry_run=true); nothing was created or dialed and no Idempotency-Key was used.' }),
    workflow_run_id: Type.Null(),
    workflow_run_name: Type.Null(),
    definition_version: Type.Integer({ description: 'The definition version the call would run' }),
    telephony_configuration_id: Type.Integer({ description: 'The telephony configuration that would dial' }),
    scheduled_for: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the call would be due: null at once, else the next time inside the calling hours (outside: "defer")' }),
  },
  { title: 'InitiateCallDryRun' },
);

export const DryRunQuery = Type.Object({
  dry_run: Type.Optional(
    Type.Union([Type.Literal('true'), Type.Literal('false')], { description: 'true: run every check (authentication, rate limit, body, target, telephony, template variables, the Idempotency-Key\'s form, calling policy) and answer 200 "valid" or the problem the real request would get; nothing is created or dialed, and an Idempotency-Key is neither claimed nor looked up.' }),
  ),
});

export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      description:
        'Makes a retry safe: the same key and payload within 24 h returns the first response again (header Idempotent-Replayed: true) and never dials twice; the same key with another payload is 422 idempotency_key_reused; while the first request is in flight, 409 idempotency_key_in_use. Up to 255 printable ASCII characters, bare or as a quoted string.',
    }),
  ),
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
const RunStateSchema = Type.Union(RUN_STATES.map((s) => Type.Literal(s)));

export const WorkflowRun = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  state: RunStateSchema,
  mode: Type.Union([Type.Literal('published'), Type.Literal('test')]),
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
});

export const RunPage = Type.Object({
  data: Type.Array(WorkflowRun),
  next_after: Type.Union([Type.Integer(), Type.Null()], { description: 'Pass as `after` for the next (older) page; null when this is the last page' }),
});

export const RunEventsPage = Type.Object({
  data: Type.Array(
    Type.Object({
      seq: Type.Integer({ description: 'Monotonic per run, starting at 1' }),
      type: Type.String({ description: 'The state the run entered' }),
      at: Timestamp,
      data: Type.Object({}, { additionalProperties: true }),
    }),
  ),
  next_after: Type.Union([Type.Integer(), Type.Null()], {
    description: 'Cursor for the next page (pass as `after`). Null only when the run has ended and this page holds its last event; a live run\'s last page gives the cursor to poll from.',
  }),
});

export function uuidParam(name: string, description: string): TSchema {
  return Type.Object({ [name]: Type.String({ description }) });
}
