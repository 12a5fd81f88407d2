// Retention (docs/operations.md, "Retention"): an organization's own window over the service's
// RETENTION_DAYS (null: the configured default; 0: keep forever), and the indexes the maintenance
// pass's pruning reads (dispatch/retention.ts), so each batch is a range of index entries rather
// than a scan of a table that only grows:
// - ended runs of an organization by when they ended (partial: only ended runs have ended_at);
// - the stream's delivery-attempt rows and the Idempotency-Key records of a run (partial: most
//   have one, but campaign messages and refused requests do not).
// Nullable column and new indexes only: the release before this one reads and writes as it did.
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';

export function up023(_dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema.alterTable('organizations').addColumn('retention_days', 'integer').execute();
    await db.schema.createIndex('workflow_runs_org_ended_idx').on('workflow_runs').columns(['org_id', 'ended_at']).where(sql.ref('ended_at'), 'is not', null).execute();
    await db.schema.createIndex('webhook_delivery_events_run_idx').on('webhook_delivery_events').column('run_id').where(sql.ref('run_id'), 'is not', null).execute();
    await db.schema.createIndex('idempotency_keys_run_idx').on('idempotency_keys').column('run_id').where(sql.ref('run_id'), 'is not', null).execute();
  };
}
