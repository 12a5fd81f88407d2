// The per-number frequency cap: at most `maxCalls` runs to one number within a sliding window,
// counted from the store's runs (so it holds across nodes). A request that creates a run counts
// inside the transaction that persists it, after taking the number's lock
// (store/suppression-statements.ts), so concurrent requests for one number cannot all see room; a
// check that creates nothing reads the count as it is.
import { DialtoneError } from '../errors.js';
import { lockNumberForCreation, selectRecentRunTimes } from '../store/suppression-statements.js';
import type { Queryable, Store, StoreTransaction } from '../store/store.js';

export interface NumberCap {
  maxCalls: number;
  windowSeconds: number;
}

/** Throws 429 number_frequency_capped when `maxCalls` runs to the number were created within the window before `now`. */
export async function checkNumberCap(on: Queryable, orgId: number, phoneNumber: string, cap: NumberCap, now: number): Promise<void> {
  const windowMs = cap.windowSeconds * 1000;
  const times = await selectRecentRunTimes(on, orgId, phoneNumber, now - windowMs, cap.maxCalls);
  // Newest first: with `maxCalls` of them in the window, a place opens when the last of these
  // (the maxCalls-th newest) leaves it.
  const opening = times[cap.maxCalls - 1];
  if (opening === undefined) return;
  const retryAfterSeconds = Math.max(1, Math.ceil((opening + windowMs - now) / 1000));
  throw new DialtoneError(
    'number_frequency_capped',
    `This number was called ${cap.maxCalls} times within ${cap.windowSeconds} s, the organization's limit. Retry after ${retryAfterSeconds} s.`,
    { retryAfterSeconds, extra: { number_max_calls: cap.maxCalls, number_window_seconds: cap.windowSeconds } },
  );
}

/** The exact check, inside the transaction that creates the run. */
export async function enforceNumberCap(store: Pick<Store, 'dialect'>, trx: StoreTransaction, orgId: number, phoneNumber: string, cap: NumberCap, now: number): Promise<void> {
  await lockNumberForCreation(store, trx, orgId, phoneNumber);
  await checkNumberCap(trx, orgId, phoneNumber, cap, now);
}
