// Caller safety: idempotency records, per-organization limits, and the index that counts an
// organization's queued runs for the queue cap.
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';
import { column } from './columns.js';

export function up003(dialect: DialectName) {
  const c = column(dialect);
  return async (db: Kysely<unknown>): Promise<void> => {
    // One row per (organization, Idempotency-Key). `state` is `in_flight` from the first request's
    // claim until the run and its response commit together (`completed`). `owner` names the claim so
    // a request that lost its claim to a takeover cannot complete someone else's record.
    await db.schema
      .createTable('idempotency_keys')
      .addColumn('org_id', c.refType, (col) => col.notNull().references('organizations.id'))
      .addColumn('key', 'text', (col) => col.notNull())
      .addColumn('fingerprint', 'text', (col) => col.notNull())
      .addColumn('state', 'text', (col) => col.notNull().check(sql`state in ('in_flight', 'completed')`))
      .addColumn('owner', 'text', (col) => col.notNull())
      .addColumn('locked_until', 'bigint', (col) => col.notNull())
      .addColumn('response_status', 'integer')
      .addColumn('response_body', 'text')
      .addColumn('run_id', c.refType)
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('expires_at', 'bigint', (col) => col.notNull())
      .addPrimaryKeyConstraint('idempotency_keys_pk', ['org_id', 'key'])
      .execute();
    await db.schema.createIndex('idempotency_keys_expires_idx').on('idempotency_keys').column('expires_at').execute();

    // Per-organization overrides; null means the service-wide default from the configuration.
    for (const name of ['rate_limit_per_second', 'key_rate_limit_per_second', 'max_queued_runs']) {
      await db.schema.alterTable('organizations').addColumn(name, 'integer').execute();
    }

    await db.schema
      .createIndex('workflow_runs_queued_org_idx')
      .on('workflow_runs')
      .column('org_id')
      .where(sql.ref('state'), '=', 'queued')
      .execute();
  };
}
