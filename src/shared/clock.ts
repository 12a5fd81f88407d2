// What time it is, behind an interface so tests can hold time still or move it by hand. It lives
// here, not in deps.ts, because the providers need it and deps.ts builds the providers: keeping it
// there made telephony/ and deps.ts import each other.
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
