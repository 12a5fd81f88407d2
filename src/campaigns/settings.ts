// A campaign's rules as pure values: the retry rule, the circuit breaker and the schedule, with
// their defaults, their validation (every problem listed, with a JSON pointer into the request)
// and the decisions the scheduler takes from them. No I/O here.
import type { FieldError } from '../errors.js';
import { insideCallingHours, nextCallingInstant, parseCallingHours, type CallingHours } from '../policy/calling-hours.js';
import type { TerminalState } from '../runs/states.js';
import type { AnsweredBy } from '../store/schema/schema.js';

/** The run states an attempt may be retried after (a completed run reached the contact; a canceled one was stopped on purpose). */
export const RETRYABLE_STATES = ['busy', 'no_answer', 'failed', 'rejected', 'expired'] as const satisfies readonly TerminalState[];
export type RetryableState = (typeof RETRYABLE_STATES)[number];

/**
 * What `retry.on` may name: those states, and `machine`: an attempt a machine (or a fax) answered
 * and Dialtone hung up on or left a message on (answering-machine detection), which reached no one.
 */
export const RETRY_CONDITIONS = [...RETRYABLE_STATES, 'machine'] as const;
export type RetryCondition = (typeof RETRY_CONDITIONS)[number];

/** How an attempt a machine answered ends when the agent did not keep the call (dispatch/machine-verdicts.ts). */
const MACHINE_OUTCOMES: readonly (string | null)[] = ['machine_hangup', 'voicemail_left'];

export interface RetryRule {
  maxAttempts: number;
  delaySeconds: number;
  on: RetryCondition[];
}

export interface CircuitBreaker {
  failureRatio: number;
  windowSeconds: number;
  minCalls: number;
}

/** The campaign's weekly windows: calling hours' shape, with no `outside` (outside, nothing is created). */
export interface CampaignSchedule {
  timezone: string;
  windows: CallingHours['windows'];
}

/**
 * The bounds of a campaign's numbers, one source for the HTTP schema (which refuses first) and for
 * createCampaign, which checks them again for callers that skip HTTP (the administration CLI).
 * Inclusive unless named exclusive.
 */
export const CAMPAIGN_LIMITS = {
  maxAttempts: { min: 1, max: 10 },
  delaySeconds: { min: 30, max: 30 * 86_400 },
  failureRatio: { exclusiveMin: 0, max: 1 },
  windowSeconds: { min: 10, max: 86_400 },
  minCalls: { min: 1, max: 100_000 },
  maxConcurrentCalls: { min: 1, max: 10_000 },
  callsPerSecond: { exclusiveMin: 0, max: 1_000 },
} as const;

type Bound = { min?: number; exclusiveMin?: number; max: number };

function checkNumber(value: number | null | undefined, bound: Bound, integer: boolean, pointer: string, problems: FieldError[]): void {
  if (value === undefined || value === null) return;
  const low = bound.min !== undefined ? `at least ${bound.min}` : `above ${bound.exclusiveMin ?? 0}`;
  const inRange = (bound.min === undefined || value >= bound.min) && (bound.exclusiveMin === undefined || value > bound.exclusiveMin) && value <= bound.max;
  if (!Number.isFinite(value) || !inRange || (integer && !Number.isInteger(value))) {
    problems.push({ pointer, detail: `Must be ${integer ? 'an integer ' : ''}${low} and at most ${bound.max}.` });
  }
}

/** The campaign's numbers against CAMPAIGN_LIMITS, every problem listed. */
export function limitProblems(
  body: { max_concurrent_calls?: number | undefined; calls_per_second?: number | undefined; retry?: RetryInput | undefined; circuit_breaker?: BreakerInput | undefined },
  problems: FieldError[],
): void {
  checkNumber(body.max_concurrent_calls, CAMPAIGN_LIMITS.maxConcurrentCalls, true, '/max_concurrent_calls', problems);
  checkNumber(body.calls_per_second, CAMPAIGN_LIMITS.callsPerSecond, false, '/calls_per_second', problems);
  checkNumber(body.retry?.max_attempts, CAMPAIGN_LIMITS.maxAttempts, true, '/retry/max_attempts', problems);
  checkNumber(body.retry?.delay_seconds, CAMPAIGN_LIMITS.delaySeconds, true, '/retry/delay_seconds', problems);
  checkNumber(body.circuit_breaker?.failure_ratio, CAMPAIGN_LIMITS.failureRatio, false, '/circuit_breaker/failure_ratio', problems);
  checkNumber(body.circuit_breaker?.window_seconds, CAMPAIGN_LIMITS.windowSeconds, true, '/circuit_breaker/window_seconds', problems);
  checkNumber(body.circuit_breaker?.min_calls, CAMPAIGN_LIMITS.minCalls, true, '/circuit_breaker/min_calls', problems);
}

export const DEFAULT_RETRY: RetryRule = { maxAttempts: 1, delaySeconds: 600, on: ['busy', 'no_answer', 'failed'] };
export const DEFAULT_BREAKER: CircuitBreaker = { failureRatio: 0.5, windowSeconds: 120, minCalls: 10 };

/** As the API takes and shows them. */
export interface RetryInput {
  max_attempts?: number;
  delay_seconds?: number;
  on?: string[];
}
export interface BreakerInput {
  failure_ratio?: number;
  window_seconds?: number;
  min_calls?: number;
}

export function retryRule(input: RetryInput | undefined, problems: FieldError[]): RetryRule {
  const on = input?.on ?? DEFAULT_RETRY.on;
  on.forEach((state, index) => {
    if (!(RETRY_CONDITIONS as readonly string[]).includes(state)) {
      problems.push({ pointer: `/retry/on/${index}`, detail: `"${state}" is not something an attempt is retried after; use ${RETRY_CONDITIONS.join(', ')}.` });
    }
  });
  return {
    maxAttempts: input?.max_attempts ?? DEFAULT_RETRY.maxAttempts,
    delaySeconds: input?.delay_seconds ?? DEFAULT_RETRY.delaySeconds,
    on: [...new Set(on)] as RetryCondition[],
  };
}

export function breakerOf(input: BreakerInput | undefined): CircuitBreaker {
  return {
    failureRatio: input?.failure_ratio ?? DEFAULT_BREAKER.failureRatio,
    windowSeconds: input?.window_seconds ?? DEFAULT_BREAKER.windowSeconds,
    minCalls: input?.min_calls ?? DEFAULT_BREAKER.minCalls,
  };
}

/** Validates a schedule with calling hours' own rules (policy/calling-hours.ts), its problems pointed under /schedule. */
export function scheduleOf(input: { timezone: string; windows: Record<string, unknown> } | null | undefined, problems: FieldError[]): CampaignSchedule | null {
  if (input === null || input === undefined) return null;
  const parsed = parseCallingHours({ timezone: input.timezone, windows: input.windows, outside: 'defer' });
  if (!parsed.ok) {
    for (const problem of parsed.problems) problems.push({ pointer: `/schedule${problem.pointer}`, detail: problem.detail });
    return null;
  }
  return { timezone: parsed.hours.timezone, windows: parsed.hours.windows };
}

function asHours(schedule: CampaignSchedule): CallingHours {
  return { timezone: schedule.timezone, windows: schedule.windows, outside: 'defer' };
}

/** True when the campaign may create attempts at `now` (no schedule: always). */
export function insideSchedule(schedule: CampaignSchedule | null, now: number): boolean {
  return schedule === null || insideCallingHours(asHours(schedule), [schedule.timezone], now);
}

/** The next instant the schedule opens (null: never); `now` when it is open. */
export function nextScheduleOpening(schedule: CampaignSchedule | null, now: number): number | null {
  return schedule === null ? now : nextCallingInstant(asHours(schedule), [schedule.timezone], now);
}

/** What a settled attempt makes of its contact. */
export type Settlement =
  | { status: 'reached' | 'exhausted' | 'suppressed' | 'canceled' }
  | { status: 'pending'; nextAttemptAt: number; refund: boolean };

/** Why an attempt was canceled before it was dialed, so its contact gets the attempt back. */
export const PAUSE_REASON = 'campaign_paused';
/** An attempt still queued when the schedule's window closed: canceled undialed, given back too. */
export const SCHEDULE_REASON = 'outside_campaign_schedule';
export const CANCEL_REASON = 'campaign_canceled';
/** What the dispatcher's claim screen says of a run to a number suppressed since it was queued (admission/claim.ts). */
export const SUPPRESSED_REASON = 'suppressed';

/**
 * How an ended attempt settles its contact: `completed` reached it, unless a machine answered and
 * Dialtone hung up or left a message (then it is retried when `retry.on` names `machine`); canceled undialed by a pause
 * or the schedule's close it waits for the resume or the next window with its attempt given back; a state in `retry.on` with attempts left retries
 * `delay_seconds` after the end; anything else used it up.
 */
export function settle(
  ended: { state: TerminalState; reason: string | null; endedAt: number; attempts: number; refunded: number; answeredBy?: AnsweredBy | null },
  retry: RetryRule,
  campaignCanceled: boolean,
  now: number,
): Settlement {
  const machine = ended.state === 'completed' && (ended.answeredBy === 'machine' || ended.answeredBy === 'fax') && MACHINE_OUTCOMES.includes(ended.reason);
  if (ended.state === 'completed' && !machine) return { status: 'reached' };
  if (ended.state === 'canceled' && ended.reason === SUPPRESSED_REASON) return { status: 'suppressed' };
  if (campaignCanceled) return { status: 'canceled' };
  if (ended.state === 'canceled' && (ended.reason === PAUSE_REASON || ended.reason === SCHEDULE_REASON)) return { status: 'pending', nextAttemptAt: now, refund: true };
  const used = ended.attempts - ended.refunded;
  if ((retry.on as readonly string[]).includes(machine ? 'machine' : ended.state) && used < retry.maxAttempts) {
    return { status: 'pending', nextAttemptAt: ended.endedAt + retry.delaySeconds * 1000, refund: false };
  }
  return { status: 'exhausted' };
}

/** True when the breaker trips: at least `minCalls` attempts ended and the failed share reaches `failureRatio`. */
export function breakerTrips(breaker: CircuitBreaker, counts: { ended: number; failed: number }): boolean {
  return counts.ended >= breaker.minCalls && counts.ended > 0 && counts.failed / counts.ended >= breaker.failureRatio;
}

/**
 * How many attempts pacing allows now, and the pacing state after taking `taken` of them:
 * `callsPerSecond` attempts a second, with at most one second's worth saved up (and at least the
 * one slot that is due, for a campaign slower than one call a second).
 */
export function pacingAllowance(callsPerSecond: number | null, nextAt: number | null, now: number): { allowed: number; after: (taken: number) => number | null } {
  if (callsPerSecond === null) return { allowed: Number.POSITIVE_INFINITY, after: () => null };
  const spacing = 1000 / callsPerSecond;
  // At most one second's worth saved up: the slots within the last second, this instant included.
  // Slower than one a second, that is the due slot alone (now − 1000 + spacing would lie ahead of
  // now, and no attempt would ever be allowed).
  const from = Math.max(nextAt ?? Number.NEGATIVE_INFINITY, now - Math.max(0, 1000 - spacing));
  const allowed = from > now ? 0 : Math.floor((now - from) / spacing) + 1;
  return { allowed, after: (taken) => from + taken * spacing };
}
