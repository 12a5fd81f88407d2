// The audit log read by its target (GET /audit-events?target_type=&target_id=: one agent's or one
// key's history): without this index the filter walks the organization's whole log newest first
// (migration 025's (org_id, id)) until it has a page, however few of the entries are the target's.
import type { Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';

export function up027(_dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema.createIndex('audit_events_target_idx').on('audit_events').columns(['org_id', 'target_type', 'target_id', 'id']).execute();
  };
}
