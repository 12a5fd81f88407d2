// When the attempts of one webhook delivery happen. The schedule is configuration
// (WEBHOOK_RETRY_SCHEDULE), not code: entry i is the delay before attempt i + 1, counted from the
// previous attempt (from the message for the first), so the default makes eight attempts spread
// over about a day — at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h later. After the
// last one the delivery has failed for good.
//
// Each delay is spread by ±10 % so that deliveries that failed together (a receiver that was down)
// do not all come back at the same instant.
import ms from 'ms';

export const DEFAULT_RETRY_SCHEDULE = '0,5s,5m,30m,2h,5h,10h,10h';

/** The share of a delay by which `delayWithJitter` may move it either way. */
export const RETRY_JITTER = 0.1;

/**
 * Parses a comma-separated schedule of delays, each in milliseconds (`5000`) or with a unit
 * (`5s`, `5m`, `2h`, `1d`, as the `ms` package reads them), into milliseconds. Throws an Error
 * naming the bad entry for an empty schedule, an empty or unreadable entry, or a negative delay,
 * so a mistyped setting stops the boot instead of retrying on a schedule nobody meant.
 */
export function parseRetrySchedule(text: string = DEFAULT_RETRY_SCHEDULE): number[] {
  if (text.trim() === '') throw new Error('retry schedule is empty: give at least one delay, e.g. "0,5s,5m"');
  return text.split(',').map((raw, i) => {
    const entry = raw.trim();
    const where = `retry schedule entry ${i + 1}`;
    if (entry === '') throw new Error(`${where} is empty`);
    // ms() reads a bare number as milliseconds and answers undefined (typed number) when it cannot read it.
    const value: number | undefined = ms(entry as ms.StringValue);
    if (value === undefined || !Number.isFinite(value)) {
      throw new Error(`${where} "${entry}" is not a duration: use milliseconds or a unit (5s, 5m, 2h)`);
    }
    if (value < 0) throw new Error(`${where} "${entry}" is negative`);
    return Math.round(value);
  });
}

/**
 * `delayMs` moved by up to ±10 %, rounded to whole milliseconds; 0 stays 0 (the first attempt is
 * immediate). `random` is injectable for tests and must return values in [0, 1), like Math.random.
 */
export function delayWithJitter(delayMs: number, random: () => number = Math.random): number {
  if (delayMs === 0) return 0;
  return Math.round(delayMs * (1 + RETRY_JITTER * (2 * random() - 1)));
}
