// Dispatch: leases, deadlines, phase times and pacing state.
import type { Kysely } from 'kysely';
import type { DialectName } from '../store.js';

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

    await db.schema
      .createIndex('workflow_runs_claim_idx')
      .on('workflow_runs')
      .columns(['state', 'telephony_configuration_id', 'id'])
      .execute();
    await db.schema.createIndex('workflow_runs_deadline_idx').on('workflow_runs').columns(['state', 'deadline_at']).execute();
    await db.schema.createIndex('workflow_runs_lease_owner_idx').on('workflow_runs').columns(['lease_owner']).execute();
  };
}
