// The calling policy's request-time check (DESIGN.md section 7): whether a number may be dialed
// now, for the four initiate operations. It runs after the template variables and before
// idempotency (DESIGN.md section 2), so a refused request stores nothing and consumes no key.
// The checks, in order: the organization's suppression list, the per-number frequency cap, and
// calling hours (see below). The dispatcher checks suppression again when it claims a run
// (claim-screen.ts).
import { DialtoneError } from '../errors.js';
import { selectActiveSuppression } from '../store/suppression-statements.js';
import type { Store, StoreTransaction } from '../store/store.js';
import { checkNumberCap, enforceNumberCap, type NumberCap } from './number-cap.js';

export type { NumberCap };

/** An organization's policy settings, read with its API key (auth/api-keys.ts), so checking them costs no query. */
export interface PolicySettings {
  /** Undefined or null: no per-number cap (the default). */
  numberCap?: NumberCap | null | undefined;
}

export interface PolicyDeps {
  store: Pick<Store, 'db' | 'dialect'>;
}

/** What the request may go on with. */
export interface PolicyDecision {
  /**
   * Runs inside the transaction that persists the run, where alone a count is exact (the cap);
   * undefined when nothing needs checking there.
   */
  enforceInTransaction: ((trx: StoreTransaction) => Promise<void>) | undefined;
}

export interface PolicyCheckOptions {
  /**
   * True when the caller persists a run next and runs `enforceInTransaction` there: the cap is then
   * counted only there, where the count is exact, instead of twice. False (a check that creates
   * nothing, like a dry run) counts it now.
   */
  persisting?: boolean;
}

/**
 * Throws the refusal (422 number_suppressed, 429 number_frequency_capped) or returns what the
 * persisting transaction must check. `phoneNumber` is E.164 as stored on the run.
 */
export async function checkCallingPolicy(
  deps: PolicyDeps,
  orgId: number,
  settings: PolicySettings,
  phoneNumber: string,
  now: number,
  options: PolicyCheckOptions = {},
): Promise<PolicyDecision> {
  const suppression = await selectActiveSuppression(deps.store, orgId, phoneNumber, now);
  if (suppression) {
    throw new DialtoneError('number_suppressed', "The number is on the organization's suppression (do-not-call) list.", {
      extra: { suppression_expires_at: suppression.expires_at === null ? null : new Date(suppression.expires_at).toISOString() },
    });
  }

  const cap = settings.numberCap ?? undefined;
  if (cap && !options.persisting) await checkNumberCap(deps.store, orgId, phoneNumber, cap, now);

  // Calling hours in the callee's local time zones come here (issue 14, built separately): they may
  // refuse, or defer the run to a later moment the decision would then carry.

  return {
    enforceInTransaction: cap ? (trx) => enforceNumberCap(deps.store, trx, orgId, phoneNumber, cap, now) : undefined,
  };
}
