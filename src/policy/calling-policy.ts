// The calling policy's request-time check (docs/design.md, "Calling policy"): whether a number may
// be dialed now, for the four initiate operations. It runs after the template variables and before
// idempotency (docs/design.md, "Check order"), so a refused request stores nothing and consumes no
// key (the creating insert checks the list and the cap again, exactly: see below). The checks, in
// order: the organization's suppression list, the per-number frequency cap, and calling hours in
// the callee's time zones (calling-hours-check.ts). A request that persists its run hands the first
// two to the creating insert, the one place where they are exact (and, on PostgreSQL, part of the
// inserting statement). The dispatcher checks suppression (claim-screen.ts) and calling hours
// (dispatch/claim-runs.ts) again when it claims a run.
import { DialtoneError } from '../errors.js';
import { selectActiveSuppression } from '../store/statements/suppression-statements.js';
import type { Store } from '../store/engine/store.js';
import { enforceCallingHours, type CallingHoursDestination } from './calling-hours-check.js';
import type { CallingHours } from './calling-hours.js';
import { cappedError, checkNumberCap, type NumberCap } from './number-cap.js';
import type { InsertChecks } from '../runs/create-run.js';

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
   * The checks for the insert that persists the run to make, where alone they are exact (the
   * suppression list, and the cap's count under the number's lock); undefined for a SIP URI.
   */
  atInsert: InsertChecks | undefined;
  /** When the run is due: null at once, else deferred to the next calling-hours window. */
  scheduledFor: number | null;
}

export interface PolicyCheckOptions {
  /**
   * True when the caller persists a run next and hands `atInsert` to its insert: the suppression
   * list is then read and the cap counted only there, where both are exact, instead of twice
   * (on PostgreSQL inside the inserting statement, so the whole policy costs no round trip of its
   * own). False (a check that creates nothing, like a dry run) reads and counts now.
   */
  persisting?: boolean;
  /**
   * With `persisting`: read the suppression list now as well (the insert checks it again), because
   * a step that must come after the policy (an Idempotency-Key's claim) stands before the insert.
   */
  beforeIdempotency?: boolean;
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
  if (destination.kind !== 'e164') return { atInsert: undefined, scheduledFor: enforceCallingHours(settings.callingHours, destination, now) };
  const phoneNumber = destination.value;
  const cap = settings.numberCap ?? undefined;
  const atInsert: InsertChecks = {
    guards: { suppressedAt: now, ...(cap ? { cap: { maxCalls: cap.maxCalls, since: now - cap.windowSeconds * 1000 } } : {}) },
    refusal: (refused) => {
      if (refused.refused === 'suppressed') return suppressedError(refused.expiresAt);
      return cap ? cappedError(refused.capOpening, cap, now) : new Error('the insert reported a cap it was not given');
    },
  };
  if (options.persisting) {
    if (options.beforeIdempotency) await refuseWhenSuppressed(deps, orgId, phoneNumber, now);
    try {
      return { atInsert, scheduledFor: enforceCallingHours(settings.callingHours, destination, now) };
    } catch (error) {
      // A suppressed number is refused as suppressed, whatever the hour: the list comes first.
      await refuseWhenSuppressed(deps, orgId, phoneNumber, now);
      throw error;
    }
  }
  await refuseWhenSuppressed(deps, orgId, phoneNumber, now);
  if (cap) await checkNumberCap(deps.store, orgId, phoneNumber, cap, now);
  return { atInsert, scheduledFor: enforceCallingHours(settings.callingHours, destination, now) };
}

async function refuseWhenSuppressed(deps: PolicyDeps, orgId: number, phoneNumber: string, now: number): Promise<void> {
  const suppression = await selectActiveSuppression(deps.store, orgId, phoneNumber, now);
  if (suppression) throw suppressedError(suppression.expires_at);
}

function suppressedError(expiresAt: number | null): DialtoneError {
  return new DialtoneError('number_suppressed', "The number is on the organization's suppression (do-not-call) list.", {
    extra: { suppression_expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString() },
  });
}
