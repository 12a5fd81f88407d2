// Dispatcher nodes and their heartbeats: a live call whose dialog lives in a node (SIP, simulator)
// dies with that node, and the others end its run as soon as the node stops beating.
import type { Kysely } from 'kysely';
import type { DialectName } from '../../engine/store.js';

export function up004(_dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema
      .createTable('dispatcher_nodes')
      .addColumn('node_id', 'text', (col) => col.primaryKey())
      .addColumn('started_at', 'bigint', (col) => col.notNull())
      .addColumn('heartbeat_at', 'bigint', (col) => col.notNull())
      .execute();
  };
}
