// Domain errors. Code anywhere below the HTTP edge throws a DialtoneError with a code from this
// closed set; the edge (http/problems.ts) alone decides the HTTP status and the body.

export const ERROR_CODES = [
  'malformed_json',
  'bad_request',
  'request_timeout',
  'request_header_fields_too_large',
  'missing_api_key',
  'invalid_api_key',
  'invalid_run_token',
  'invalid_signature',
  'invalid_metrics_token',
  'forbidden',
  'insufficient_scope',
  'agent_not_found',
  'workflow_not_found',
  'telephony_configuration_not_found',
  'workflow_run_not_found',
  'webhook_endpoint_not_found',
  'webhook_delivery_not_found',
  'suppression_not_found',
  'campaign_not_found',
  'api_key_not_found',
  'not_found',
  'method_not_allowed',
  'not_acceptable',
  'precondition_failed',
  'range_not_satisfiable',
  'expectation_failed',
  'uri_too_long',
  'workflow_not_published',
  'idempotency_key_in_use',
  'run_already_ended',
  'run_not_answered',
  'transfer_in_progress',
  'campaign_state_conflict',
  'telephony_configuration_disabled',
  'workflow_state_conflict',
  'runs_not_ended',
  'webhook_delivery_pending',
  'payload_too_large',
  'unsupported_media_type',
  'validation_failed',
  'invalid_phone_number',
  'missing_template_variables',
  'result_invalid',
  'call_control_unsupported',
  'transfer_target_refused',
  'number_suppressed',
  'invalid_webhook_url',
  'webhook_url_not_allowed',
  'webhook_endpoint_limit',
  'campaign_limit',
  'telephony_not_configured',
  'telephony_not_ready',
  'machine_detection_unsupported',
  'idempotency_key_reused',
  'outside_calling_hours',
  'rate_limited',
  'queue_full',
  'number_frequency_capped',
  'too_many_streams',
  'unavailable',
  'call_not_held_here',
  'call_control_refused',
  'webhooks_not_configured',
  'internal_error',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** One problem in a request, located by a JSON Pointer (RFC 6901) into the request body. */
export interface FieldError {
  pointer: string;
  detail: string;
}

export interface DialtoneErrorOptions {
  errors?: FieldError[];
  /** Seconds the client should wait before retrying (429, 503). */
  retryAfterSeconds?: number;
  /** Extra members for the problem body (for example the missing variable names). */
  extra?: Record<string, unknown>;
}

export class DialtoneError extends Error {
  readonly errors: FieldError[] | undefined;
  readonly retryAfterSeconds: number | undefined;
  readonly extra: Record<string, unknown> | undefined;

  constructor(
    readonly code: ErrorCode,
    detail: string,
    options: DialtoneErrorOptions = {},
  ) {
    super(detail);
    this.name = 'DialtoneError';
    this.errors = options.errors;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.extra = options.extra;
  }
}

/** Refused input: a list of problems found at once, so the caller can fix them all in one go. */
export function validationFailed(errors: FieldError[], detail = 'The request body is not valid.'): DialtoneError {
  return new DialtoneError('validation_failed', detail, { errors });
}
