// Retention (docs/operations.md, "Retention"), a step of the maintenance pass: ended runs older
// than their organization's window (its own retention_days, else RETENTION_DAYS; 0 keeps forever)
// are deleted with everything that hangs off them, and an ended campaign once its last run is gone.
// In batches of RETENTION_BATCH_SIZE runs, each its own short transaction (so the write lock is
// held for one batch, never for the pass), at most RETENTION_BATCHES_PER_PASS per pass; on
// PostgreSQL one node at a time (an advisory lock per batch; a node that finds it taken leaves the
// pass to the holder). The window is measured from when a run ended, so a run that ends while the
// pass runs is young and kept. The statements say what is never deleted (store/statements/retention-statements.ts).
import type { Deps } from '../deps.js';
import { TERMINAL_STATES } from '../runs/states.js';
import {
  deleteEndedCampaignBatch,
  deleteEndedRunsBatch,
  selectOldestEndedAt,
  selectRetentionWindows,
  type BatchOutcome,
  type BatchStep,
  type PrunedTable,
} from '../store/statements/retention-statements.js';

const DAY_MS = 86_400_000;

export interface RetentionPass {
  /** Runs deleted, and rows by table (runs included). */
  runs: number;
  rows: Partial<Record<PrunedTable, number>>;
  batches: number;
  /** Another node held retention's lock (PostgreSQL): it prunes, this one left it. */
  busy: boolean;
}

/** An organization's window in days: its own, else the configured one; 0 keeps forever. */
export function retentionDaysOf(own: number | null, configured: number): number {
  return own ?? configured;
}

/**
 * One pass: prunes what is past each organization's window, up to the batch budget, counts the
 * rows in dialtone_retention_pruned_rows_total and sets the age of the oldest ended run kept.
 * `step` is called after each table's delete inside a batch (a test interrupts a batch there).
 */
export async function pruneExpiredRuns(deps: Deps, now: number, options: { step?: BatchStep } = {}): Promise<RetentionPass> {
  const { config, store, metrics } = deps;
  const pass: RetentionPass = { runs: 0, rows: {}, batches: 0, busy: false };
  const orgs = await selectRetentionWindows(store);
  const count = (outcome: BatchOutcome): boolean => {
    if (outcome.kind === 'busy') {
      pass.busy = true;
      return false;
    }
    // A batch that found nothing is no work: it does not spend the pass's budget.
    if (Object.keys(outcome.rows).length > 0) pass.batches += 1;
    pass.runs += outcome.runs;
    for (const [table, n] of Object.entries(outcome.rows) as [PrunedTable, number][]) {
      if (n === 0) continue;
      pass.rows[table] = (pass.rows[table] ?? 0) + n;
      metrics.retentionPrunedRows.inc({ table }, n);
    }
    return true;
  };
  for (const org of orgs) {
    const days = retentionDaysOf(org.retention_days, config.RETENTION_DAYS);
    if (days === 0) continue;
    const cutoff = now - days * DAY_MS;
    // Runs first, then the campaigns they leave empty.
    while (pass.batches < config.RETENTION_BATCHES_PER_PASS && !pass.busy) {
      const outcome = await deleteEndedRunsBatch(store, { orgId: org.id, cutoff, limit: config.RETENTION_BATCH_SIZE, ended: TERMINAL_STATES, ...(options.step ? { step: options.step } : {}) });
      if (!count(outcome) || outcome.kind !== 'pruned' || outcome.runs < config.RETENTION_BATCH_SIZE) break;
    }
    while (pass.batches < config.RETENTION_BATCHES_PER_PASS && !pass.busy) {
      const outcome = await deleteEndedCampaignBatch(store, { orgId: org.id, cutoff, limit: config.RETENTION_BATCH_SIZE });
      if (!count(outcome) || outcome.kind !== 'pruned' || Object.keys(outcome.rows).length === 0) break;
    }
    if (pass.busy || pass.batches >= config.RETENTION_BATCHES_PER_PASS) break;
  }
  // Every node sets the gauge, whichever pruned: it reads what is stored.
  let oldest: number | null = null;
  for (const org of orgs) {
    const endedAt = await selectOldestEndedAt(store, org.id);
    if (endedAt !== null && (oldest === null || endedAt < oldest)) oldest = endedAt;
  }
  metrics.retentionOldestRunAge.set(oldest === null ? 0 : Math.max(0, (now - oldest) / 1000));
  return pass;
}
