// What an attempt's result makes of its delivery and endpoint: the retry schedule, 410 Gone, and
// disabling an endpoint that has failed for too long. Pure, so it is tested without a network.
import type { DeliveryStatus } from '../store/schema/schema.js';
import type { EndpointColumns } from '../store/statements/webhook-statements.js';

export interface AttemptResult {
  httpStatus: number | null;
}

export interface OutcomeInput {
  result: AttemptResult;
  /** Attempts made before this one since the delivery was (re)queued. */
  attemptsBefore: number;
  /** Delays before each attempt (the first is the delay before attempt 1). */
  schedule: readonly number[];
  now: number;
  /** When the endpoint's current run of failures began, or null. */
  failingSince: number | null;
  disableAfterMs: number;
  jitter: (delayMs: number) => number;
}

export interface Outcome {
  status: DeliveryStatus;
  nextAttemptAt: number | null;
  endpoint: EndpointColumns;
  /** Why the endpoint was disabled by this attempt, if it was. */
  disabled?: 'gone' | 'failing';
}

export function attemptOutcome(input: OutcomeInput): Outcome {
  const { httpStatus } = input.result;
  if (httpStatus !== null && httpStatus >= 200 && httpStatus < 300) {
    return { status: 'succeeded', nextAttemptAt: null, endpoint: { failing_since: null } };
  }
  if (httpStatus === 410) {
    return { status: 'failed', nextAttemptAt: null, endpoint: { enabled: 0, disabled_reason: 'gone', updated_at: input.now }, disabled: 'gone' };
  }
  const failingSince = input.failingSince ?? input.now;
  if (input.now - failingSince >= input.disableAfterMs) {
    return { status: 'failed', nextAttemptAt: null, endpoint: { enabled: 0, disabled_reason: 'failing', updated_at: input.now }, disabled: 'failing' };
  }
  const made = input.attemptsBefore + 1;
  const endpoint = { failing_since: failingSince };
  if (made >= input.schedule.length) return { status: 'failed', nextAttemptAt: null, endpoint };
  return { status: 'pending', nextAttemptAt: input.now + input.jitter(input.schedule[made] ?? 0), endpoint };
}
