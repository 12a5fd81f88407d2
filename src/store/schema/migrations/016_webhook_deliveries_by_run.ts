// A run's webhook deliveries, across every endpoint of its organization (GET
// /webhook-deliveries?run_id=, the console's call page): an index from the run, newest first, so
// the list is a range of the run's own deliveries rather than a walk of each endpoint's history.
// Partial: test and campaign messages have no run.
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';

export function up016(_dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema
      .createIndex('webhook_deliveries_run_idx')
      .on('webhook_deliveries')
      .columns(['run_id', 'id'])
      .where(sql.ref('run_id'), 'is not', null)
      .execute();
  };
}
