// Retries of a refused request: only 429 (rate limited, or too many streams) and 503 (the node is
// draining, or over its own cap), the two answers that say "the same request may succeed later",
// and only for a request that cannot do anything twice: a method that is idempotent by definition
// (GET, HEAD, OPTIONS, PUT, DELETE), or a POST carrying an Idempotency-Key (Dialtone answers its
// repeat with the first answer and never creates a second run). A POST without a key is never
// retried: its refusal may have come after something was done.
import { retryAfterSeconds } from './errors.js';

export interface RetryOptions {
  /** Retries after the first attempt (default 3; 0 turns retries off). */
  maxRetries?: number;
  /** The first backoff when the answer names no Retry-After, doubled each time (default 500 ms). */
  baseDelayMs?: number;
  /** The longest wait between attempts, whatever Retry-After says (default 30 s). */
  maxDelayMs?: number;
  /** Waits; replaced in tests. */
  sleep?: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
}

const RETRIED_STATUSES = new Set([429, 503]);
const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

export function mayRetry(request: Request): boolean {
  return IDEMPOTENT_METHODS.has(request.method.toUpperCase()) || request.headers.has('idempotency-key');
}

function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** How long to wait before retry number `retry` (0-based): Retry-After when the answer gives it, else exponential backoff with jitter. */
export function retryDelayMs(response: Response, retry: number, options: Required<Pick<RetryOptions, 'baseDelayMs' | 'maxDelayMs'>>): number {
  const named = retryAfterSeconds(response.headers.get('retry-after'));
  if (named !== undefined) return Math.min(named * 1000, options.maxDelayMs);
  const backoff = options.baseDelayMs * 2 ** retry;
  // Full jitter halves the herd of clients refused together.
  return Math.min(backoff / 2 + Math.random() * (backoff / 2), options.maxDelayMs);
}

/** A fetch that retries as said above; the request is cloned for each attempt, so its body is sent whole every time. */
export function retryingFetch(fetchImpl: typeof fetch, options: RetryOptions = {}): (request: Request) => Promise<Response> {
  const maxRetries = options.maxRetries ?? 3;
  const delays = { baseDelayMs: options.baseDelayMs ?? 500, maxDelayMs: options.maxDelayMs ?? 30_000 };
  const sleep = options.sleep ?? abortableSleep;
  return async (request: Request) => {
    const retryable = maxRetries > 0 && mayRetry(request);
    for (let retry = 0; ; retry++) {
      const response = await fetchImpl(retryable ? request.clone() : request);
      if (!retryable || retry >= maxRetries || !RETRIED_STATUSES.has(response.status)) return response;
      const delay = retryDelayMs(response, retry, delays);
      // The refused answer's body is not read: release it before waiting.
      await response.body?.cancel().catch(() => undefined);
      await sleep(delay, request.signal);
    }
  };
}
