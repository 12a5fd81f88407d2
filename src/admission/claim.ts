// Admission at claim time (docs/design.md, "Check order"): a run admitted when it was created may
// no longer be dialable when the dispatcher claims it (dispatch/claim-runs.ts, runs/claim.ts). Two
// questions of the policy stage are asked again, with the organization's current settings, for a
// whole claim batch at once:
//
// - the suppression list (`claimScreen`): a run whose number was suppressed since it was queued
//   ends `canceled` with reason `suppressed`, in one statement per batch (per organization in it:
//   a configuration has one), not one per run;
// - calling hours (`callingHoursHold`): dial now, defer again to the next window, or cancel when
//   the zones' windows can no longer meet (`outside_calling_hours`).
//
// The per-number cap is not asked again: it counts runs created, and the run was counted when it was.
import { decodeCallingHours } from '../orgs/organizations.js';
import { claimCallingHoursVerdict, storedDestination } from '../policy/calling-hours-check.js';
import type { CallingHours } from '../policy/calling-hours.js';
import type { ClaimCandidate, ClaimScreen, HoldDecision } from '../runs/claim.js';
import { selectSuppressedAmong } from '../store/statements/suppression-statements.js';

/** The reason a run suppressed at claim time ends with. */
export const SUPPRESSED_REASON = 'suppressed';

/** The claim screen of the suppression list, at `now`. */
export function claimScreen(now: number): ClaimScreen {
  return async (trx, candidates) => {
    const refused = new Map<number, string>();
    const byOrg = new Map<number, ClaimCandidate[]>();
    for (const candidate of candidates) {
      const runs = byOrg.get(candidate.org_id);
      if (runs) runs.push(candidate);
      else byOrg.set(candidate.org_id, [candidate]);
    }
    for (const [orgId, runs] of byOrg) {
      const suppressed = await selectSuppressedAmong(trx, orgId, runs.map((r) => r.phone_number), now);
      for (const run of runs) if (suppressed.has(run.phone_number)) refused.set(run.id, SUPPRESSED_REASON);
    }
    return refused;
  };
}

/**
 * The claim-time calling-hours decision for each candidate of one batch, at `now` and at the end of
 * the lookahead (when its pacing slot may come). A batch's runs share their organization's
 * setting: it is decoded once per organization and batch (and its weekly windows parsed once), not
 * for every run.
 */
export function callingHoursHold(now: number, lookaheadMs: number): (candidate: ClaimCandidate) => HoldDecision {
  const settings = new Map<number, CallingHours | null>();
  return (candidate) => {
    let hours = settings.get(candidate.org_id);
    if (hours === undefined) {
      hours = decodeCallingHours(candidate.calling_hours);
      settings.set(candidate.org_id, hours);
    }
    if (!hours) return { kind: 'dial' };
    const verdict = claimCallingHoursVerdict(hours, storedDestination(candidate.phone_number), now, lookaheadMs);
    if (verdict.kind === 'now') return { kind: 'dial' };
    return verdict.at === null ? { kind: 'cancel', reason: 'outside_calling_hours' } : { kind: 'defer', until: verdict.at, reason: 'outside_calling_hours' };
  };
}
