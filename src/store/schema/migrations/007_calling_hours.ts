// Calling hours: the organization's setting, and runs deferred to a time (`scheduled_for`, set when
// a run was queued outside the callee's calling hours; null for a run due at once). The queue's
// partial indexes part in two, so that deferred runs never sit in the way of due ones: the claim,
// the expiry sweep and the queue cap read the runs due at once by id or age as before, and the
// deferred ones by the time they become due.
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';
import { column } from './columns.js';

export function up007(dialect: DialectName) {
  const c = column(dialect);
  return async (db: Kysely<unknown>): Promise<void> => {
    // Null: calling hours off. Otherwise policy/calling-hours.ts's CallingHours.
    await db.schema.alterTable('organizations').addColumn('calling_hours', c.jsonType).execute();
    await db.schema.alterTable('workflow_runs').addColumn('scheduled_for', 'bigint').execute();

    const queuedNow = (name: string, columns: string[]) =>
      db.schema.createIndex(name).on('workflow_runs').columns(columns).where(sql.ref('state'), '=', 'queued').where(sql.ref('scheduled_for'), 'is', null).execute();
    const queuedLater = (name: string, columns: string[]) =>
      db.schema.createIndex(name).on('workflow_runs').columns(columns).where(sql.ref('state'), '=', 'queued').where(sql.ref('scheduled_for'), 'is not', null).execute();

    for (const name of ['workflow_runs_queued_idx', 'workflow_runs_queued_age_idx', 'workflow_runs_queued_org_idx']) {
      await db.schema.dropIndex(name).execute();
    }
    // Runs due at once: the claim (oldest first), the expiry sweep (by age), the queue cap (per organization).
    await queuedNow('workflow_runs_queued_idx', ['telephony_configuration_id', 'id']);
    await queuedNow('workflow_runs_queued_age_idx', ['created_at']);
    await queuedNow('workflow_runs_queued_org_idx', ['org_id']);
    // Deferred runs: the claim of those now due, the expiry sweep (counted from scheduled_for), their own cap.
    await queuedLater('workflow_runs_scheduled_idx', ['telephony_configuration_id', 'scheduled_for', 'id']);
    await queuedLater('workflow_runs_scheduled_due_idx', ['scheduled_for']);
    await queuedLater('workflow_runs_scheduled_org_idx', ['org_id']);
  };
}
