// The calling-policy stage of admission (docs/design.md, "Check order"): the organization's
// suppression list, then its per-number frequency cap, then calling hours in the callee's zones,
// always in this order, for a direct call, a dry run and a campaign's attempt alike.
//
// Two of the questions are answered exactly only by the insert that creates the run (the list and
// the cap's count under the number's lock; on PostgreSQL inside the inserting statement,
// store/statements/insert-run.ts). A caller whose insert follows says so (`answeredAtInsert`), and
// those questions are then not asked now, on the way to admitting the call: the insert asks them,
// once, and a refusal there creates nothing. What never changes with the caller is the order: when
// a later question refuses now, the earlier ones left to the insert are asked now first, so the
// answer is always the first refusal in the written order (a suppressed number outside calling
// hours is "suppressed" everywhere). That extra read costs only on a refusal, never on the path
// that admits.
import { DialtoneError } from '../errors.js';
import { callingHoursRuling, type CallingHoursDestination } from '../policy/calling-hours-check.js';
import type { CallingHours } from '../policy/calling-hours.js';
import { cappedError, type NumberCap } from '../policy/number-cap.js';
import type { InsertChecks } from '../runs/create-run.js';
import { selectActiveSuppression, selectCapOpening } from '../store/statements/suppression-statements.js';
import type { Connection } from '../store/engine/store.js';

export type { NumberCap };

/** An organization's policy settings (read with its API key, auth/api-keys.ts, so checking them costs no query). */
export interface PolicySettings {
  /** Undefined or null: no per-number cap (the default). */
  numberCap?: NumberCap | null | undefined;
  /** Undefined or null: calling hours off (the default). */
  callingHours?: CallingHours | null | undefined;
}

/** The questions the creating insert can answer exactly. */
export type InsertQuestion = 'suppression' | 'cap';

/** Where each question is answered, as the caller stands. */
export interface PolicyPlace {
  /**
   * The questions the caller's creating insert answers (it is handed `atInsert`): not asked now
   * unless a later question refuses. Empty for a caller that creates nothing (a dry run).
   */
  answeredAtInsert: readonly InsertQuestion[];
  /**
   * The suppression list as already read for a whole batch (a campaign's due contacts, one
   * statement): the numbers suppressed now. Absent: read when asked.
   */
  suppressedAmong?: ReadonlySet<string>;
}

/** Who is called: the destination, and the callee's own time zone when known (a campaign contact's). */
export interface PolicySubject {
  orgId: number;
  destination: CallingHoursDestination;
  timezone?: string | null;
}

export type PolicyVerdict =
  /**
   * Admitted: due at once (`scheduledFor` null) or deferred to the next calling-hours window, and
   * the checks the creating insert makes (undefined for a SIP URI, which neither question governs).
   */
  | { admitted: true; scheduledFor: number | null; atInsert: InsertChecks | undefined }
  /** Refused: the problem, and when the answer may change (a place under the cap, the next window, the suppression's end; null: not by waiting). */
  | { admitted: false; refusal: DialtoneError; retryAt: number | null };

/**
 * The policy stage for one call at `now`. Suppression and the cap govern phone numbers (E.164, as
 * stored on the run); a SIP URI is an address inside the caller's own network, checked against
 * calling hours only (in the organization's fallback zone).
 */
export async function askCallingPolicy(store: Connection, settings: PolicySettings, subject: PolicySubject, now: number, place: PolicyPlace): Promise<PolicyVerdict> {
  const { destination } = subject;
  const hours = callingHoursRuling(settings.callingHours, destination, now, subject.timezone ? [subject.timezone] : undefined);
  if (destination.kind !== 'e164') {
    if (hours.kind === 'refuse') return { admitted: false, refusal: hours.error, retryAt: hours.at };
    return { admitted: true, scheduledFor: hours.kind === 'defer' ? hours.at : null, atInsert: undefined };
  }
  const cap = settings.numberCap ?? undefined;
  // A batch that read the list just now leaves the insert the cap alone (the claim screens the list again).
  const atInsert = insertChecks(cap, now, place.suppressedAmong === undefined);
  const laterRefuses = hours.kind === 'refuse';
  // 1. The suppression list.
  if (!place.answeredAtInsert.includes('suppression') || laterRefuses) {
    const suppressed = await suppressionOf(store, subject.orgId, destination.value, now, place.suppressedAmong);
    if (suppressed) return { admitted: false, refusal: suppressedError(suppressed.expiresAt), retryAt: suppressed.expiresAt };
  }
  // 2. The per-number cap.
  if (cap && (!place.answeredAtInsert.includes('cap') || laterRefuses)) {
    const opening = await selectCapOpening(store, subject.orgId, destination.value, now - cap.windowSeconds * 1000, cap.maxCalls);
    if (opening !== null) return { admitted: false, refusal: cappedError(opening, cap, now), retryAt: opening + cap.windowSeconds * 1000 };
  }
  // 3. Calling hours.
  if (hours.kind === 'refuse') return { admitted: false, refusal: hours.error, retryAt: hours.at };
  return { admitted: true, scheduledFor: hours.kind === 'defer' ? hours.at : null, atInsert };
}

async function suppressionOf(store: Connection, orgId: number, phoneNumber: string, now: number, among: ReadonlySet<string> | undefined): Promise<{ expiresAt: number | null } | undefined> {
  if (among) return among.has(phoneNumber) ? { expiresAt: null } : undefined;
  const row = await selectActiveSuppression(store, orgId, phoneNumber, now);
  return row ? { expiresAt: row.expires_at } : undefined;
}

/** The questions for the creating insert (runs/create-run.ts): the list, and the cap's count under the number's lock. */
function insertChecks(cap: NumberCap | undefined, now: number, suppression: boolean): InsertChecks {
  return {
    guards: { ...(suppression ? { suppressedAt: now } : {}), ...(cap ? { cap: { maxCalls: cap.maxCalls, since: now - cap.windowSeconds * 1000 } } : {}) },
    refusal: (refused) => {
      if (refused.refused === 'suppressed') return suppressedError(refused.expiresAt);
      return cap ? cappedError(refused.capOpening, cap, now) : new Error('the insert reported a cap it was not given');
    },
  };
}

function suppressedError(expiresAt: number | null): DialtoneError {
  return new DialtoneError('number_suppressed', "The number is on the organization's suppression (do-not-call) list.", {
    extra: { suppression_expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString() },
  });
}
