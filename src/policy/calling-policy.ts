// The calling policy's request-time check (DESIGN.md section 7): whether a number may be dialed
// now, for the four initiate operations. It runs after the template variables and before
// idempotency (DESIGN.md section 2), so a refused request stores nothing and consumes no key.
// The checks, in order: the organization's suppression list, the per-number frequency cap, and
// calling hours in the callee's time zones (calling-hours-check.ts). The dispatcher checks
// suppression (claim-screen.ts) and calling hours (dispatch/claim-runs.ts) again when it claims a run.
import { DialtoneError } from '../errors.js';
import { selectActiveSuppression } from '../store/suppression-statements.js';
import type { Store } from '../store/store.js';
import { enforceCallingHours, type CallingHoursDestination } from './calling-hours-check.js';
import type { CallingHours } from './calling-hours.js';
import { checkNumberCap, numberCapCheck, type NumberCap, type NumberCapCheck } from './number-cap.js';

export type { NumberCap };

/** An organization's policy settings, read with its API key (auth/api-keys.ts), so checking them costs no query. */
export interface PolicySettings {
  /** Undefined or null: no per-number cap (the default). */
  numberCap?: NumberCap | null | undefined;
  /** Undefined or null: calling hours off (the default). */
  callingHours?: CallingHours | null | undefined;
}

export interface PolicyDeps {
  store: Pick<Store, 'db' | 'dialect'>;
}

/** What the request may go on with. */
export interface PolicyDecision {
  /**
   * The cap's exact check, for the insert that persists the run (the only place a count is exact);
   * undefined when there is no cap.
   */
  numberCap: NumberCapCheck | undefined;
  /** When the run is due: null at once, else deferred to the next calling-hours window. */
  scheduledFor: number | null;
}

export interface PolicyCheckOptions {
  /**
   * True when the caller persists a run next and hands `numberCap` to its insert: the cap is then
   * counted only there, where the count is exact, instead of twice. False (a check that creates
   * nothing, like a dry run) counts it now.
   */
  persisting?: boolean;
}

/**
 * Throws the refusal (422 number_suppressed, 429 number_frequency_capped, 422
 * outside_calling_hours) or returns when the run is due and what the persisting transaction must
 * check. Suppression and the cap govern phone numbers (E.164, as stored on the run); a SIP URI is
 * an address inside the caller's own network, checked against calling hours only (in the
 * organization's fallback zone).
 */
export async function checkCallingPolicy(
  deps: PolicyDeps,
  orgId: number,
  settings: PolicySettings,
  destination: CallingHoursDestination,
  now: number,
  options: PolicyCheckOptions = {},
): Promise<PolicyDecision> {
  if (destination.kind !== 'e164') return { numberCap: undefined, scheduledFor: enforceCallingHours(settings.callingHours, destination, now) };
  const phoneNumber = destination.value;
  const suppression = await selectActiveSuppression(deps.store, orgId, phoneNumber, now);
  if (suppression) {
    throw new DialtoneError('number_suppressed', "The number is on the organization's suppression (do-not-call) list.", {
      extra: { suppression_expires_at: suppression.expires_at === null ? null : new Date(suppression.expires_at).toISOString() },
    });
  }

  const cap = settings.numberCap ?? undefined;
  if (cap && !options.persisting) await checkNumberCap(deps.store, orgId, phoneNumber, cap, now);

  const scheduledFor = enforceCallingHours(settings.callingHours, destination, now);

  return {
    numberCap: cap ? numberCapCheck(cap, now) : undefined,
    scheduledFor,
  };
}
