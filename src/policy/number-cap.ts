// The per-number frequency cap: at most `maxCalls` runs to one number within a sliding window,
// counted from the store's runs (store/statements/suppression-statements.ts, selectCapOpening), so
// it holds across nodes. Admission (admission/policy.ts) decides where it is counted: by the
// creating insert itself, under the number's lock (store/statements/insert-run.ts: on PostgreSQL in
// the inserting statement), so concurrent requests for one number cannot all see room; or at once
// by a check that creates nothing.
import { DialtoneError } from '../errors.js';

export interface NumberCap {
  maxCalls: number;
  windowSeconds: number;
}

/** The refusal when the cap is reached: a place opens when the run created at `opening` leaves the window. */
export function cappedError(opening: number, cap: NumberCap, now: number): DialtoneError {
  const retryAfterSeconds = Math.max(1, Math.ceil((opening + cap.windowSeconds * 1000 - now) / 1000));
  return new DialtoneError(
    'number_frequency_capped',
    `This number was called ${cap.maxCalls} times within ${cap.windowSeconds} s, the organization's limit. Retry after ${retryAfterSeconds} s.`,
    { retryAfterSeconds, extra: { number_max_calls: cap.maxCalls, number_window_seconds: cap.windowSeconds } },
  );
}
