// The console's reads: an organization's runs filtered by number, by workflow or by creation time,
// newest first. Only columns that never change after a run is created are indexed, so each index
// gets one entry per run at insert and is never rewritten by the run's transitions (the hot path
// that migration 002's partial indexes keep small). A filter on state is served by the existing
// (org_id, id) index: the newest-first scan stops after a page of matches.
import type { Kysely } from 'kysely';
import type { DialectName } from '../../engine/store.js';

export function up009(_dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema.createIndex('workflow_runs_org_phone_idx').on('workflow_runs').columns(['org_id', 'phone_number', 'id']).execute();
    await db.schema.createIndex('workflow_runs_org_workflow_idx').on('workflow_runs').columns(['org_id', 'workflow_id', 'id']).execute();
    // Also the run counts since a time (GET /stats).
    await db.schema.createIndex('workflow_runs_org_created_idx').on('workflow_runs').columns(['org_id', 'created_at']).execute();
  };
}
