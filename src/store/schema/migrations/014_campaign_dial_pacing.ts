// Campaign dial pacing (issue 15): a campaign's `calls_per_second` holds where the calls are placed,
// in the dispatcher's claim, not only where its attempts are created. One row per paced campaign
// that has dialed: the time of its next free dial slot, taken and moved on by the claims (and
// re-slots) of its route. Every writer holds the route's configuration row lock (FOR UPDATE on
// PostgreSQL, SQLite's single writer), and a campaign dials only its one route, so these rows
// need no lock of their own. They are apart from `campaigns` on purpose: the scheduler share-locks
// a campaign row and then inserts a run (whose foreign key waits on the configuration row a claim
// holds); a claim writing the campaign row itself would wait on that share lock: a deadlock.
import type { Kysely } from 'kysely';
import type { DialectName } from '../../engine/store.js';
import { column } from './columns.js';

export function up014(dialect: DialectName) {
  const c = column(dialect);
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema
      .createTable('campaign_dial_pacing')
      .addColumn('campaign_id', c.refType, (col) => col.primaryKey().references('campaigns.id'))
      // The campaign's route (fixed when it is created): the claim reads its route's campaigns.
      .addColumn('telephony_configuration_id', c.refType, (col) => col.notNull().references('telephony_configurations.id'))
      .addColumn('next_at', 'bigint', (col) => col.notNull())
      .execute();
    // A claim reads the campaigns of its route whose next slot is still ahead.
    await db.schema.createIndex('campaign_dial_pacing_route_idx').on('campaign_dial_pacing').columns(['telephony_configuration_id', 'next_at']).execute();
  };
}
