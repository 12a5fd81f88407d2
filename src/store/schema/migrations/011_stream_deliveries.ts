// The event stream's second source: one row per recorded webhook delivery attempt, for the
// organization's stream (stream/). Its ids are drawn from run_events' own id sequence, so run
// events and delivery events share one order and the stream keeps one integer cursor
// (`Last-Event-ID`) with the same gap rules for both; run creation is untouched (it writes only
// run_events, as before), and the attempt's write, already a transaction, carries the new row.
// On PostgreSQL the id's default is run_events' identity sequence; SQLite has no shared
// sequences, so store/statements/event-stream-statements.ts takes the id from run_events'
// sqlite_sequence row and moves that row on (writes are serialized there, so this is exact):
// columns.ts's createJournalTable, which migration 012's campaign_events shares.
// Rows carry their organization, so a resuming stream reads only its own with (org_id, id).
import type { Kysely } from 'kysely';
import type { DialectName } from '../../engine/store.js';
import { column, createJournalTable } from './columns.js';

export function up011(dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    const c = column(dialect);
    const table = await createJournalTable(db, dialect, 'webhook_delivery_events');
    await table
      .addColumn('org_id', c.refType, (col) => col.notNull().references('organizations.id'))
      // No foreign keys to the endpoint and delivery: like run_events, the journal is append-only
      // and outlives an endpoint deleted later (its rows name no URL and hold no secret).
      .addColumn('endpoint_id', c.refType, (col) => col.notNull())
      .addColumn('delivery_id', c.refType, (col) => col.notNull())
      .addColumn('message_id', 'text', (col) => col.notNull())
      .addColumn('event_type', 'text', (col) => col.notNull())
      .addColumn('run_id', c.refType)
      .addColumn('attempt', 'integer', (col) => col.notNull())
      .addColumn('status', 'text', (col) => col.notNull())
      .addColumn('http_status', 'integer')
      .addColumn('error', 'text')
      .addColumn('next_attempt_at', 'bigint')
      .addColumn('endpoint_disabled', 'text')
      .addColumn('at', 'bigint', (col) => col.notNull())
      .execute();
    await db.schema.createIndex('webhook_delivery_events_org_idx').on('webhook_delivery_events').columns(['org_id', 'id']).execute();
  };
}
