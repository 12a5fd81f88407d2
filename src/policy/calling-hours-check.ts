// The calling-hours rule as the request path and the dispatcher apply it: which zones a
// destination is checked in, and what happens outside the windows (refuse with the next allowed
// time, or defer the run to it).
import { parseDestination } from '../shared/phone-number.js';
import { DialtoneError } from '../errors.js';
import { calleeTimeZones } from './callee-time-zones.js';
import { nextCallingInstant, type CallingHours } from './calling-hours.js';

/** A destination as shared/phone-number.ts parses it. */
export interface CallingHoursDestination {
  kind: 'e164' | 'sip_uri';
  value: string;
}

/**
 * A run's stored destination as the request parsed it (E.164 or a SIP URI). One that no longer
 * parses (the number metadata changed since) is judged in the organization's fallback zone.
 */
export function storedDestination(value: string): CallingHoursDestination {
  const parsed = parseDestination(value);
  return parsed.ok ? parsed.destination : { kind: 'sip_uri', value };
}

/** The zones a destination is checked in: the number's own, else the organization's fallback zone. */
export function zonesOf(hours: CallingHours, destination: CallingHoursDestination): string[] {
  const zones = destination.kind === 'e164' ? calleeTimeZones(destination.value) : [];
  return zones.length > 0 ? zones : [hours.timezone];
}

export type CallingHoursVerdict =
  /** Inside (or calling hours off): dial when due. */
  | { kind: 'now' }
  /** Outside: the next instant every zone is inside a window, or null when their windows never meet. */
  | { kind: 'later'; at: number | null; zones: string[] };

/** `zones`: the callee's own zones when known (a campaign contact's time zone), else the destination's. */
export function callingHoursVerdict(hours: CallingHours | null | undefined, destination: CallingHoursDestination, now: number, zones?: readonly string[]): CallingHoursVerdict {
  if (!hours) return { kind: 'now' };
  return verdictIn(hours, zones && zones.length > 0 ? [...zones] : zonesOf(hours, destination), now);
}

/**
 * The claim-time check: inside now and still at `now + lookaheadMs` (when the run's pacing slot may
 * come), else the verdict at the first of the two instants that is outside. The zones are looked up once.
 */
export function claimCallingHoursVerdict(hours: CallingHours, destination: CallingHoursDestination, now: number, lookaheadMs: number): CallingHoursVerdict {
  const zones = zonesOf(hours, destination);
  const atNow = verdictIn(hours, zones, now);
  return atNow.kind === 'now' ? verdictIn(hours, zones, now + lookaheadMs) : atNow;
}

function verdictIn(hours: CallingHours, zones: string[], at: number): CallingHoursVerdict {
  const next = nextCallingInstant(hours, zones, at);
  return next === at ? { kind: 'now' } : { kind: 'later', at: next, zones };
}

/** What calling hours make of a call at `now`: dial it, defer it to `at`, or refuse it (with when it would be allowed, null: never). */
export type CallingHoursRuling = { kind: 'now' } | { kind: 'defer'; at: number } | { kind: 'refuse'; error: DialtoneError; at: number | null };

/**
 * The request-time rule: outside the windows a call is deferred to the next allowed time when the
 * organization defers (`outside: "defer"`), and refused with 422 `outside_calling_hours` when it
 * refuses such calls, or when the zones' windows never meet.
 */
export function callingHoursRuling(hours: CallingHours | null | undefined, destination: CallingHoursDestination, now: number, zones?: readonly string[]): CallingHoursRuling {
  const verdict = callingHoursVerdict(hours, destination, now, zones);
  if (verdict.kind === 'now' || !hours) return { kind: 'now' };
  if (hours.outside === 'defer' && verdict.at !== null) return { kind: 'defer', at: verdict.at };
  const nextAllowedAt = verdict.at === null ? null : new Date(verdict.at).toISOString();
  const zoneList = verdict.zones.join(', ');
  const detail =
    nextAllowedAt === null
      ? `The organization's calling hours are never open in every time zone of this number at once (${zoneList}).`
      : `It is outside the organization's calling hours in ${zoneList}; the next allowed time is ${nextAllowedAt}.`;
  return { kind: 'refuse', at: verdict.at, error: new DialtoneError('outside_calling_hours', detail, { extra: { next_allowed_at: nextAllowedAt, time_zones: verdict.zones } }) };
}
