// Reconciliation: when Dialtone last asked a run's provider about its call. A node claims the
// question by moving this column (compare-and-set), so two nodes never ask about the same run at
// once, and a run is asked again only after RECONCILE_AFTER_MS more without news.
import type { Kysely } from 'kysely';
import type { DialectName } from '../../engine/store.js';

export function up008(_dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema.alterTable('workflow_runs').addColumn('reconciled_at', 'bigint').execute();
  };
}
