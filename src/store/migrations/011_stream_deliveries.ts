// The event stream's second source: one row per recorded webhook delivery attempt, for the
// organization's stream (stream/). Its ids are drawn from run_events' own id sequence, so run
// events and delivery events share one order and the stream keeps one integer cursor
// (`Last-Event-ID`) with the same gap rules for both; run creation is untouched (it writes only
// run_events, as before), and the attempt's write, already a transaction, carries the new row.
// On PostgreSQL the id's default is run_events' identity sequence; SQLite has no shared
// sequences, so store/event-stream-statements.ts takes the id from run_events'
// sqlite_sequence row and moves that row on (writes are serialized there, so this is exact).
// Rows carry their organization, so a resuming stream reads only its own with (org_id, id).
import { sql, type Kysely } from '../kysely.js';
import type { DialectName } from '../store.js';
import { column } from './columns.js';

export function up011(dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    const c = column(dialect);
    let table = db.schema.createTable('webhook_delivery_events');
    if (dialect === 'postgres') {
      const found = await sql<{ name: string }>`select pg_get_serial_sequence('run_events', 'id') as name`.execute(db);
      const sequence = found.rows[0]?.name;
      if (!sequence) throw new Error('run_events.id has no sequence');
      table = table.addColumn('id', 'bigint', (col) => col.primaryKey().defaultTo(sql`nextval(${sql.lit(sequence)}::regclass)`));
    } else {
      table = table.addColumn('id', 'integer', (col) => col.primaryKey());
    }
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
