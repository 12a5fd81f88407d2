// The event stream's third source: one row per change of a campaign's state (created, started,
// paused, resumed, completed, canceled), written in the transaction that makes the change
// (campaigns/campaigns.ts), for the organization's stream (stream/). Like migration 011's
// webhook_delivery_events, its ids are drawn from run_events' own sequence (columns.ts's
// createJournalTable), so the stream's one integer cursor orders all three sources and its gap
// rules hold for each; nothing on a run's hot path writes more.
// The row keeps what the change fixed (the campaign's name, state and paused reason then), so a
// resuming stream reads what happened, not what the campaign has become since; rows carry their
// organization, so that read is by (org_id, id).
import type { Kysely } from 'kysely';
import type { DialectName } from '../../engine/store.js';
import { column, createJournalTable } from './columns.js';

export function up012(dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    const c = column(dialect);
    const table = await createJournalTable(db, dialect, 'campaign_events');
    await table
      .addColumn('org_id', c.refType, (col) => col.notNull().references('organizations.id'))
      .addColumn('campaign_id', c.refType, (col) => col.notNull().references('campaigns.id'))
      // campaign.created | started | paused | resumed | completed | canceled
      .addColumn('type', 'text', (col) => col.notNull())
      .addColumn('name', 'text', (col) => col.notNull())
      .addColumn('state', 'text', (col) => col.notNull())
      .addColumn('paused_reason', 'text')
      .addColumn('at', 'bigint', (col) => col.notNull())
      .execute();
    await db.schema.createIndex('campaign_events_org_idx').on('campaign_events').columns(['org_id', 'id']).execute();
  };
}
