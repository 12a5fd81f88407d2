// The problem+json responses as the OpenAPI document declares them. There is one schema per HTTP
// status, whose `code` and `type` list only the codes PROBLEMS answers with that status, so a
// client sees which codes a 404 can carry, and a code added to PROBLEMS reaches the document
// without an edit here. Routes declare the codes they can answer; the statuses follow from them.
import { Type, type TObject, type TProperties } from '@sinclair/typebox';
import type { ErrorCode } from '../errors.js';
import { codesWithStatus, PROBLEMS, problemStatuses, problemType } from './problems.js';
import { RATE_LIMIT_HEADERS } from './schemas.js';

/** The `$id` of a status's problem schema, which is also its name under components.schemas. */
export function problemSchemaId(status: number): string {
  return `Problem${status}`;
}

const FieldErrorSchema = Type.Object({
  pointer: Type.String({ description: 'JSON Pointer (RFC 6901) into the request body', examples: ['/phone_number'] }),
  detail: Type.String({ examples: ['"phone_number" is required.'] }),
});

/**
 * Extension members some codes add, keyed by the status those codes are answered with. They are
 * optional: which code of the status is answered decides whether they are present.
 */
const EXTENSION_MEMBERS: Partial<Record<number, TProperties>> = {
  403: {
    required_scope: Type.Optional(Type.String({ description: 'The scope the operation requires and the key lacks (insufficient_scope)' })),
  },
  409: {
    header: Type.Optional(Type.String({ description: 'The request header the problem is about (idempotency_key_in_use: Idempotency-Key)' })),
    state: Type.Optional(Type.String({ description: 'The campaign\'s or workflow\'s state, which does not allow the action (campaign_state_conflict, workflow_state_conflict)' })),
    draft_version: Type.Optional(Type.Union([Type.Integer(), Type.Null()], { description: 'The workflow\'s draft version now, null when it has none (workflow_state_conflict)' })),
    runs: Type.Optional(
      Type.Array(Type.Object({ id: Type.Integer(), name: Type.Union([Type.String(), Type.Null()]), state: Type.String() }), {
        description: 'The runs to the number that have not ended (runs_not_ended)',
      }),
    ),
  },
  422: {
    errors: Type.Optional(
      Type.Array(FieldErrorSchema, {
        description: 'Every problem found in the request, each located by a JSON Pointer (validation_failed, invalid_phone_number, missing_template_variables)',
      }),
    ),
    missing_variables: Type.Optional(
      Type.Array(Type.String(), { description: 'Required template variables neither initial_context nor a default provides (missing_template_variables)' }),
    ),
    header: Type.Optional(Type.String({ description: 'The request header the problem is about (Idempotency-Key)' })),
    next_allowed_at: Type.Optional(
      Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
        description: 'The next time every time zone of the number is inside the organization\'s calling hours; null when its zones\' windows never meet (outside_calling_hours)',
      }),
    ),
    time_zones: Type.Optional(Type.Array(Type.String(), { description: 'The IANA time zones the calling hours were checked in (outside_calling_hours)' })),
    suppression_expires_at: Type.Optional(
      Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the suppression ends; null: never (number_suppressed)' }),
    ),
  },
  429: {
    number_max_calls: Type.Optional(Type.Integer({ description: 'Runs allowed to one number within the window (number_frequency_capped)' })),
    number_window_seconds: Type.Optional(Type.Integer({ description: 'The window of the per-number cap, in seconds (number_frequency_capped)' })),
    queued_runs: Type.Optional(Type.Integer({ description: 'Runs the organization has queued (queue_full)' })),
    max_queued_runs: Type.Optional(Type.Integer({ description: 'The organization\'s queue cap (queue_full)' })),
  },
};

/** The RFC 9457 problem schema of one status. */
export function problemSchema(status: number): TObject {
  const codes = codesWithStatus(status);
  if (codes.length === 0) throw new Error(`No problem code is answered with HTTP ${status}`);
  return Type.Object(
    {
      type: Type.String({ format: 'uri-reference', enum: codes.map(problemType), description: 'Identifies the problem: /problems/<code>, relative to the URL the request was sent to, where the service serves a page describing the code' }),
      title: Type.String({ description: 'Short summary, the same for every occurrence of the code', examples: [PROBLEMS[codes[0] as ErrorCode].title] }),
      status: Type.Integer({ enum: [status], description: 'The HTTP status, repeated' }),
      detail: Type.String({ description: 'What went wrong with this request, for a person to read' }),
      code: Type.Unsafe<ErrorCode>({ type: 'string', enum: codes, description: 'Stable, machine-readable reason' }),
      request_id: Type.String({ description: 'Also sent as the X-Request-Id header; quote it when asking for support' }),
      ...EXTENSION_MEMBERS[status],
    },
    // Problem details may carry extension members (RFC 9457 section 3.2); clients ignore unknown ones.
    { $id: problemSchemaId(status), additionalProperties: true, description: `Problem details (RFC 9457) answered with HTTP ${status}` },
  );
}

/** One schema per status any problem is answered with; app.ts registers them as shared schemas. */
export function problemSchemas(): TObject[] {
  return problemStatuses().map(problemSchema);
}

/** Details as the service writes them, for the examples; a code without one shows its title. */
const EXAMPLE_DETAILS: Partial<Record<ErrorCode, string>> = {
  malformed_json: 'The request body is not valid JSON.',
  bad_request: 'The request is not valid HTTP.',
  request_timeout: 'The request was not received in time (HEADERS_TIMEOUT_MS / REQUEST_TIMEOUT_MS).',
  request_header_fields_too_large: 'The request headers are larger than the limit (MAX_HEADER_BYTES).',
  missing_api_key: 'Send your API key in the X-API-Key header.',
  invalid_api_key: 'The API key is not valid.',
  invalid_run_token: 'Send the run token handed over with the call as "Authorization: Bearer <token>".',
  invalid_signature: 'The request is not signed by Twilio for this run.',
  insufficient_scope: 'This API key lacks the "admin" scope, which GET /api/v1/public/api-keys requires.',
  agent_not_found: 'No agent 0b5c2a8e-7f3d-4c1a-9e6b-2d4f8a1c3e57.',
  workflow_not_found: 'No workflow 6f1d3b2a-8c4e-4a9f-b7d1-5e2c9a0f4b36.',
  telephony_configuration_not_found: 'No active telephony configuration 7.',
  workflow_run_not_found: 'No workflow run 123.',
  not_found: 'No route matches this URL.',
  workflow_not_published: 'Workflow 6f1d3b2a-8c4e-4a9f-b7d1-5e2c9a0f4b36 has no published definition to run.',
  idempotency_key_in_use: 'A request with this Idempotency-Key is still being processed; retry shortly.',
  run_already_ended: 'Run WR-API-123 already ended (completed).',
  runs_not_ended: 'The organization has 1 run(s) to this number that have not ended (WR-API-123); cancel them or wait for them to end, then erase again. Nothing was changed.',
  payload_too_large: 'The request body is larger than the configured limit.',
  unsupported_media_type: 'Send the body as application/json.',
  validation_failed: 'The request is not valid.',
  invalid_phone_number: '"2025550123" is not in international format: start with + and the country code (E.164).',
  missing_template_variables: 'Required variables missing from initial_context: customer_name.',
  telephony_not_configured: 'The organization has no default active telephony configuration; pass telephony_configuration_id or set a default.',
  telephony_not_ready: 'Telephony configuration 7 cannot place calls: PUBLIC_BASE_URL is not set, so Twilio would have nowhere to send the call\'s progress.',
  idempotency_key_reused: 'This Idempotency-Key was used with a different request (another operation, target or body). Use a new key for a new request.',
  outside_calling_hours: 'It is outside the organization\'s calling hours in America/New_York; the next allowed time is 2026-11-24T14:00:00.000Z.',
  rate_limited: 'Rate limit reached: key (40 per 2 s). Retry after 1 s.',
  queue_full: 'The organization has 10000 runs queued; the limit is 10000. Retry after 1 s.',
  number_suppressed: "The number is on the organization's suppression (do-not-call) list.",
  number_frequency_capped: "This number was called 3 times within 86400 s, the organization's limit. Retry after 5400 s.",
  suppression_not_found: 'No suppression of +12025550123.',
  too_many_streams: 'This API key has its most open streams on this node (STREAM_MAX_CONNECTIONS_PER_KEY=20); close one, or retry shortly.',
  unavailable: 'The service is temporarily unavailable; retry shortly.',
  internal_error: 'The server could not complete the request.',
};

/** Extension members of the examples, as the codes that carry them send them. */
const EXAMPLE_EXTENSIONS: Partial<Record<ErrorCode, Record<string, unknown>>> = {
  validation_failed: { errors: [{ pointer: '/phone_number', detail: '"phone_number" is required.' }, { pointer: '/priority', detail: 'Unknown field "priority".' }] },
  invalid_phone_number: {
    errors: [{ pointer: '/phone_number', detail: '"2025550123" is not in international format: start with + and the country code (E.164).' }],
  },
  missing_template_variables: {
    errors: [{ pointer: '/initial_context/customer_name', detail: '"customer_name" is required by the agent.' }],
    missing_variables: ['customer_name'],
  },
  idempotency_key_in_use: { header: 'Idempotency-Key' },
  idempotency_key_reused: { header: 'Idempotency-Key' },
  queue_full: { queued_runs: 10000, max_queued_runs: 10000 },
  runs_not_ended: { runs: [{ id: 123, name: 'WR-API-123', state: 'in_progress' }] },
  outside_calling_hours: { next_allowed_at: '2026-11-24T14:00:00.000Z', time_zones: ['America/New_York'] },
  number_suppressed: { suppression_expires_at: null },
  number_frequency_capped: { number_max_calls: 3, number_window_seconds: 86400 },
  too_many_streams: { scope: 'key', max_streams: 20 },
  insufficient_scope: { required_scope: 'admin' },
};

const EXAMPLE_REQUEST_ID = '3f6c1e9a-2b7d-4d58-9a0e-5c1b8f2d7e64';

export function problemExample(code: ErrorCode): Record<string, unknown> {
  const { status, title } = PROBLEMS[code];
  return {
    type: problemType(code),
    title,
    status,
    detail: EXAMPLE_DETAILS[code] ?? `${title}.`,
    code,
    request_id: EXAMPLE_REQUEST_ID,
    ...EXAMPLE_EXTENSIONS[code],
  };
}

/**
 * Codes any route can answer whatever it does, so every operation declares them: Node refuses the
 * request before routing (client-errors.ts: not HTTP, too slow, headers too large), the node is
 * shutting down or its store is unreachable, or the error handler's last resort.
 */
export const ANY_ROUTE_CODES: readonly ErrorCode[] = [
  'bad_request',
  'request_timeout',
  'request_header_fields_too_large',
  'expectation_failed',
  'internal_error',
  'unavailable',
];

/** Codes whose answer carries Retry-After. */
const RETRY_AFTER_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['idempotency_key_in_use', 'rate_limited', 'queue_full', 'number_frequency_capped', 'too_many_streams', 'unavailable']);

/**
 * Response entries for the problems an operation can answer: the given codes plus ANY_ROUTE_CODES,
 * grouped by their status. Each entry refers to its status's schema, is described by the codes it
 * carries here and shows one example per code.
 */
export function problemResponses(codes: readonly ErrorCode[]): Record<number, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of new Set([...codes, ...ANY_ROUTE_CODES])) {
    const { status } = PROBLEMS[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const out: Record<number, unknown> = {};
  for (const [status, carried] of [...byStatus].sort(([a], [b]) => a - b)) {
    const headers = {
      ...(carried.includes('rate_limited') ? RATE_LIMIT_HEADERS : {}),
      ...(carried.some((code) => RETRY_AFTER_CODES.has(code)) ? { 'Retry-After': { type: 'integer', description: 'Seconds to wait before retrying.' } } : {}),
    };
    out[status] = {
      description: carried.map((code) => `${PROBLEMS[code].title} (\`${code}\`)`).join('; '),
      content: {
        'application/problem+json': {
          schema: Type.Ref(problemSchemaId(status)),
          examples: Object.fromEntries(carried.map((code) => [code, { summary: PROBLEMS[code].title, value: problemExample(code) }])),
        },
      },
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
    };
  }
  return out;
}
