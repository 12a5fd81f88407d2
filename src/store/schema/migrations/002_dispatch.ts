// Dispatch: leases, deadlines, phase times and pacing state.
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';

export function up002(_dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    const runColumns: [string, 'bigint' | 'text' | 'integer'][] = [
      ['lease_owner', 'text'],
      ['lease_expires_at', 'bigint'],
      ['deadline_at', 'bigint'],
      ['claimed_at', 'bigint'],
      ['dial_sent_at', 'bigint'],
      ['ringing_at', 'bigint'],
      ['answered_at', 'bigint'],
      ['raw_provider_status', 'text'],
      ['cancel_requested_at', 'bigint'],
    ];
    for (const [name, type] of runColumns) {
      await db.schema.alterTable('workflow_runs').addColumn(name, type).execute();
    }
    // The seq of the run's latest event: transitions bump it in the same statement that changes
    // the state, so event numbers are assigned without a read-then-write race.
    await db.schema.alterTable('workflow_runs').addColumn('last_event_seq', 'integer', (col) => col.notNull().defaultTo(1)).execute();
    await db.schema.alterTable('telephony_configurations').addColumn('pacing_next_at', 'bigint').execute();

    // Partial indexes: each covers only the runs one part of the dispatcher looks for, so a run
    // moving between live states rewrites as few index entries as possible.
    await db.schema
      .createIndex('workflow_runs_queued_idx')
      .on('workflow_runs')
      .columns(['telephony_configuration_id', 'id'])
      .where(sql.ref('state'), '=', 'queued')
      .execute();
    await db.schema
      .createIndex('workflow_runs_queued_age_idx')
      .on('workflow_runs')
      .column('created_at')
      .where(sql.ref('state'), '=', 'queued')
      .execute();
    // A run has a deadline exactly while it is live (dialing, ringing, in progress), and
    // "deadline_at is not null" is a condition both planners can match with bound parameters.
    await db.schema
      .createIndex('workflow_runs_live_idx')
      .on('workflow_runs')
      .column('telephony_configuration_id')
      .where(sql.ref('deadline_at'), 'is not', null)
      .execute();
    await db.schema
      .createIndex('workflow_runs_live_deadline_idx')
      .on('workflow_runs')
      .column('deadline_at')
      .where(sql.ref('deadline_at'), 'is not', null)
      .execute();
    await db.schema
      .createIndex('workflow_runs_cancel_requested_idx')
      .on('workflow_runs')
      .column('lease_owner')
      .where(sql.ref('cancel_requested_at'), 'is not', null)
      .execute();
  };
}
