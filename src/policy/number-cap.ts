// The per-number frequency cap: at most `maxCalls` runs to one number within a sliding window,
// counted from the store's runs (so it holds across nodes). A request that creates a run has the
// insert itself count, under the number's lock (store/statements/insert-run.ts: on PostgreSQL in the inserting
// statement), so concurrent requests for one number cannot all see room; a check that creates
// nothing reads the count as it is.
import { DialtoneError } from '../errors.js';
import { selectCapOpening } from '../store/statements/suppression-statements.js';
import type { InsertChecks } from '../runs/create-run.js';
import type { Queryable } from '../store/engine/store.js';

export interface NumberCap {
  maxCalls: number;
  windowSeconds: number;
}

/** Throws 429 number_frequency_capped when `maxCalls` runs to the number were created within the window before `now`. */
export async function checkNumberCap(on: Queryable, orgId: number, phoneNumber: string, cap: NumberCap, now: number): Promise<void> {
  refuseWhenCapped(await selectCapOpening(on, orgId, phoneNumber, now - cap.windowSeconds * 1000, cap.maxCalls), cap, now);
}

/**
 * `opening`: the creation time of the maxCalls-th newest run in the window (null: there is room).
 * A place opens when that run leaves the window.
 */
function refuseWhenCapped(opening: number | null, cap: NumberCap, now: number): void {
  if (opening !== null) throw cappedError(opening, cap, now);
}

/** The cap for the creating insert to count exactly (runs/create-run.ts), without the suppression list (a caller that read it already). */
export function numberCapChecks(cap: NumberCap, now: number): InsertChecks {
  return {
    guards: { cap: { maxCalls: cap.maxCalls, since: now - cap.windowSeconds * 1000 } },
    refusal: (refused) => (refused.refused === 'capped' ? cappedError(refused.capOpening, cap, now) : new Error(`the insert refused (${refused.refused}) without being asked to check it`)),
  };
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
