// A transfer the agent runtime asked for (docs/agent-runtime.md, "Acting on the call"): where it stands, kept
// with the run so that its outcome is applied once whichever node receives it (a provider's
// callback retried, a second callback for the same transfer) and no second transfer starts while
// one is under way. `pending` from the request until the outcome; then the outcome (answered,
// busy, no_answer, failed, refused). NULL: the runtime never asked for one. TEXT in both stores.
import type { Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';

export function up022(_dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema.alterTable('workflow_runs').addColumn('transfer_status', 'text').execute();
  };
}
