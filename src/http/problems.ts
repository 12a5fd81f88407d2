// The HTTP edge of errors: maps each domain error code to a status and renders RFC 9457
// problem+json with `code`, `request_id` and, for validation, `errors`. A 5xx never reveals
// internals: its detail goes to the log under the request id.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { DialtoneError, ERROR_CODES, type ErrorCode, type FieldError } from '../errors.js';
import { isStoreUnavailable } from '../store/engine/store.js';

interface ProblemSpec {
  status: number;
  title: string;
}

export const PROBLEMS: Record<ErrorCode, ProblemSpec> = {
  malformed_json: { status: 400, title: 'Malformed JSON' },
  bad_request: { status: 400, title: 'Bad request' },
  request_timeout: { status: 408, title: 'Request timeout' },
  request_header_fields_too_large: { status: 431, title: 'Request header fields too large' },
  missing_api_key: { status: 401, title: 'Missing API key' },
  invalid_api_key: { status: 401, title: 'Invalid API key' },
  invalid_run_token: { status: 401, title: 'Invalid run token' },
  invalid_metrics_token: { status: 401, title: 'Invalid metrics token' },
  invalid_signature: { status: 403, title: 'Invalid signature' },
  forbidden: { status: 403, title: 'Forbidden' },
  insufficient_scope: { status: 403, title: 'Insufficient scope' },
  agent_not_found: { status: 404, title: 'Agent not found' },
  workflow_not_found: { status: 404, title: 'Workflow not found' },
  telephony_configuration_not_found: { status: 404, title: 'Telephony configuration not found' },
  workflow_run_not_found: { status: 404, title: 'Workflow run not found' },
  webhook_endpoint_not_found: { status: 404, title: 'Webhook endpoint not found' },
  webhook_delivery_not_found: { status: 404, title: 'Webhook delivery not found' },
  suppression_not_found: { status: 404, title: 'Suppression not found' },
  campaign_not_found: { status: 404, title: 'Campaign not found' },
  api_key_not_found: { status: 404, title: 'API key not found' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  not_acceptable: { status: 406, title: 'Not acceptable' },
  precondition_failed: { status: 412, title: 'Precondition failed' },
  uri_too_long: { status: 414, title: 'URI too long' },
  range_not_satisfiable: { status: 416, title: 'Range not satisfiable' },
  expectation_failed: { status: 417, title: 'Expectation failed' },
  workflow_not_published: { status: 409, title: 'Workflow not published' },
  idempotency_key_in_use: { status: 409, title: 'Idempotency key in use' },
  run_already_ended: { status: 409, title: 'Run already ended' },
  run_not_answered: { status: 409, title: 'Run not answered' },
  transfer_in_progress: { status: 409, title: 'Transfer in progress' },
  campaign_state_conflict: { status: 409, title: 'Campaign state conflict' },
  telephony_configuration_disabled: { status: 409, title: 'Telephony configuration disabled' },
  workflow_state_conflict: { status: 409, title: 'Workflow state conflict' },
  runs_not_ended: { status: 409, title: 'Runs not ended' },
  webhook_delivery_pending: { status: 409, title: 'Webhook delivery pending' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  validation_failed: { status: 422, title: 'Validation failed' },
  invalid_phone_number: { status: 422, title: 'Invalid phone number' },
  missing_template_variables: { status: 422, title: 'Missing template variables' },
  number_suppressed: { status: 422, title: 'Number suppressed' },
  result_invalid: { status: 422, title: 'Result invalid' },
  call_control_unsupported: { status: 422, title: 'Call control unsupported' },
  transfer_target_refused: { status: 422, title: 'Transfer target refused' },
  invalid_webhook_url: { status: 422, title: 'Invalid webhook URL' },
  webhook_url_not_allowed: { status: 422, title: 'Webhook URL not allowed' },
  webhook_endpoint_limit: { status: 422, title: 'Webhook endpoint limit reached' },
  campaign_limit: { status: 422, title: 'Campaign limit reached' },
  telephony_not_configured: { status: 422, title: 'Telephony not configured' },
  telephony_not_ready: { status: 422, title: 'Telephony not ready' },
  machine_detection_unsupported: { status: 422, title: 'Machine detection unsupported' },
  idempotency_key_reused: { status: 422, title: 'Idempotency key reused' },
  outside_calling_hours: { status: 422, title: 'Outside calling hours' },
  rate_limited: { status: 429, title: 'Rate limited' },
  queue_full: { status: 429, title: 'Queue full' },
  number_frequency_capped: { status: 429, title: 'Number frequency capped' },
  too_many_streams: { status: 429, title: 'Too many streams' },
  unavailable: { status: 503, title: 'Service unavailable' },
  call_not_held_here: { status: 503, title: 'Call held by another node' },
  call_control_refused: { status: 502, title: 'Provider refused' },
  webhooks_not_configured: { status: 503, title: 'Webhooks not configured' },
  internal_error: { status: 500, title: 'Internal server error' },
};

/**
 * Where each code's documentation is: the service serves a page per code there
 * (routes/problem-pages.ts). A relative reference (RFC 9457 section 3.1.1: resolved against the
 * request's URL), so it resolves to the service that answered, whatever host it is reached by,
 * and never to a domain the project does not own.
 */
export const PROBLEM_TYPE_BASE = '/problems/';

/** The problem `type` URI of a code. */
export function problemType(code: ErrorCode): string {
  return `${PROBLEM_TYPE_BASE}${code}`;
}

/**
 * The codes answered with an HTTP status, in ERROR_CODES order. Derived from PROBLEMS so the
 * OpenAPI document's per-status schemas follow every code added there without being edited.
 */
export function codesWithStatus(status: number): ErrorCode[] {
  return ERROR_CODES.filter((code) => PROBLEMS[code].status === status);
}

/** Every status some problem is answered with, ascending. */
export function problemStatuses(): number[] {
  return [...new Set(ERROR_CODES.map((code) => PROBLEMS[code].status))].sort((a, b) => a - b);
}

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  request_id: string;
  errors?: FieldError[];
  [extra: string]: unknown;
}

export function sendProblem(reply: FastifyReply, error: DialtoneError): FastifyReply {
  const spec = PROBLEMS[error.code];
  const body: ProblemBody = {
    ...error.extra,
    type: problemType(error.code),
    title: spec.title,
    status: spec.status,
    detail: error.message,
    code: error.code,
    request_id: String(reply.request.id),
  };
  if (error.errors) body.errors = error.errors;
  if (error.retryAfterSeconds !== undefined) reply.header('retry-after', String(error.retryAfterSeconds));
  return reply.code(spec.status).type('application/problem+json').send(body);
}

interface AjvIssue {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** Turns Ajv's findings into JSON Pointers at the offending member, with readable sentences. */
export function fieldErrorsFromAjv(issues: AjvIssue[]): FieldError[] {
  return issues.map((issue) => {
    if (issue.keyword === 'additionalProperties') {
      const name = String(issue.params.additionalProperty);
      return { pointer: `${issue.instancePath}/${escapePointer(name)}`, detail: `Unknown field "${name}".` };
    }
    if (issue.keyword === 'required') {
      const name = String(issue.params.missingProperty);
      return { pointer: `${issue.instancePath}/${escapePointer(name)}`, detail: `"${name}" is required.` };
    }
    return { pointer: issue.instancePath, detail: `Must ${issue.message ?? 'be valid'}.`.replace('Must must', 'Must') };
  });
}

function escapePointer(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** Fastify's own errors (parsing, limits, schema) become the codes of the contract. */
export function toDialtoneError(error: FastifyError): DialtoneError | undefined {
  if (error instanceof DialtoneError) return error;
  if (error.validation) {
    return new DialtoneError('validation_failed', 'The request is not valid.', {
      errors: fieldErrorsFromAjv(error.validation as AjvIssue[]),
    });
  }
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new DialtoneError('unsupported_media_type', 'Send the body as application/json.');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new DialtoneError('payload_too_large', 'The request body is larger than the configured limit.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new DialtoneError('malformed_json', 'The request body is empty; send a JSON object.');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new DialtoneError('malformed_json', 'The request body is not valid JSON.');
    default:
      break;
  }
  if (error instanceof SyntaxError) {
    return new DialtoneError('malformed_json', 'The request body is not valid JSON.');
  }
  // A plugin's own refusal (the docs' static files answer 403 to a traversal path, 416 to a bad
  // range): keep its status, in our problem format. Its message is the plugin's, not ours, and may
  // name files, so the detail is the status's own sentence.
  const passedThrough = error.statusCode === undefined ? undefined : CLIENT_ERROR_CODES.get(error.statusCode);
  if (passedThrough) return new DialtoneError(passedThrough, `The request was refused (${PROBLEMS[passedThrough].title.toLowerCase()}).`);
  return undefined;
}

/** The one code for each 4xx status a plugin or Node may raise on its own. */
const CLIENT_ERROR_CODES = new Map<number, ErrorCode>([
  [400, 'bad_request'],
  [403, 'forbidden'],
  [404, 'not_found'],
  [405, 'method_not_allowed'],
  [406, 'not_acceptable'],
  [408, 'request_timeout'],
  [412, 'precondition_failed'],
  [413, 'payload_too_large'],
  [414, 'uri_too_long'],
  [415, 'unsupported_media_type'],
  [416, 'range_not_satisfiable'],
  [417, 'expectation_failed'],
  [431, 'request_header_fields_too_large'],
]);

export function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const known = toDialtoneError(error);
  if (known) {
    // Webhooks without a secret key is the operator's setting, not a fault: one warning line, no stack.
    if (known.code === 'webhooks_not_configured') request.log.warn({ code: known.code }, known.message);
    else if (PROBLEMS[known.code].status >= 500) request.log.error({ err: error }, 'request failed');
    return sendProblem(reply, known);
  }
  if (isStoreUnavailable(error)) {
    request.log.error({ err: error }, 'store unavailable');
    return sendProblem(reply, new DialtoneError('unavailable', 'The service is temporarily unavailable; retry shortly.', { retryAfterSeconds: 1 }));
  }
  request.log.error({ err: error }, 'unhandled error');
  return sendProblem(reply, new DialtoneError('internal_error', 'The server could not complete the request.'));
}
