// One error class for every refusal Dialtone answers: its body is an RFC 9457 problem
// (application/problem+json) with Dialtone's `code` and, for invalid input, `errors[]` with a JSON
// Pointer each. A caller branches on `code` (stable) rather than on `title` or `detail` (prose).

/** One invalid field of a request: where (a JSON Pointer into the body or the query) and why. */
export interface FieldProblem {
  pointer: string;
  detail: string;
}

/** A problem as Dialtone answers it (docs/api.md, "Problem types"). */
export interface Problem {
  type?: string;
  title?: string;
  status: number;
  detail?: string;
  code: string;
  errors?: FieldProblem[];
  request_id?: string;
  [extension: string]: unknown;
}

export class DialtoneApiError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** Dialtone's problem code (`invalid_request`, `suppressed`, `rate_limited`, …). */
  readonly code: string;
  /** Each invalid field, for a request that failed validation; empty otherwise. */
  readonly errors: readonly FieldProblem[];
  /** Seconds the service asked to wait before retrying (the Retry-After header), when it said. */
  readonly retryAfterSeconds: number | undefined;
  /** The request id the service logged this under (X-Request-Id). */
  readonly requestId: string | undefined;
  /** The whole problem, with its extensions (`state`, `scope`, …). */
  readonly problem: Problem;

  constructor(problem: Problem, retryAfterSeconds: number | undefined) {
    super(problem.detail ?? problem.title ?? `Dialtone answered ${problem.status} (${problem.code})`);
    this.name = 'DialtoneApiError';
    this.status = problem.status;
    this.code = problem.code;
    this.errors = problem.errors ?? [];
    this.retryAfterSeconds = retryAfterSeconds;
    this.requestId = problem.request_id;
    this.problem = problem;
  }
}

/** Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function retryAfterSeconds(header: string | null, now: number = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(header)) return Number(header);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

function isProblem(body: unknown): body is Problem {
  return typeof body === 'object' && body !== null && typeof (body as { code?: unknown }).code === 'string' && typeof (body as { status?: unknown }).status === 'number';
}

/**
 * The error for an answer that was not a success: the problem it carries, or, from something that
 * is not Dialtone (a proxy's HTML 502), a problem made from the status alone.
 */
export function errorFromResponse(response: Response, body: unknown): DialtoneApiError {
  const problem: Problem = isProblem(body)
    ? body
    : { status: response.status, code: `http_${response.status}`, title: response.statusText || `HTTP ${response.status}`, detail: typeof body === 'string' && body !== '' ? body.slice(0, 500) : undefined };
  return new DialtoneApiError(problem, retryAfterSeconds(response.headers.get('retry-after')));
}
