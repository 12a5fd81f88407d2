// The calling policy at claim time: a run queued before its number was suppressed must not be
// dialed. The dispatcher's claim (runs/claim.ts) hands its whole batch here before moving it, so
// the check is one statement per batch (per organization in it: a configuration has one), not one
// per run; the runs named here end `canceled` with reason `suppressed`.
import { selectSuppressedAmong } from '../store/statements/suppression-statements.js';
import type { ClaimCandidate, ClaimScreen } from '../runs/claim.js';

/** The reason a run suppressed at claim time ends with. */
export const SUPPRESSED_REASON = 'suppressed';

/** The claim screen of the calling policy, at `now`. */
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
