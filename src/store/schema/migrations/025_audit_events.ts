// The audit log (docs/design.md, "Audit log"): one row per change an organization's operators
// made (a key created, settings changed, a person's data erased), written in the change's own
// transaction by audit/audit-log.ts. Append-only: nothing updates a row. Who acted is an API key
// (its id and its name as it was then, so a later rename or revocation does not rewrite history)
// or the CLI on the database (`actor` = 'cli', no key), or the service itself ('system').
// `before` and `after` are JSON text with secrets already redacted; TEXT in both stores, like
// initial_context, since they are written and read whole and never queried into.
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';
import { column } from './columns.js';

export function up025(dialect: DialectName) {
  const c = column(dialect);
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema
      .createTable('audit_events')
      .addColumn('id', c.idType, c.id)
      .addColumn('org_id', c.refType, (col) => col.notNull().references('organizations.id'))
      .addColumn('actor', 'text', (col) => col.notNull().check(sql`actor in ('api_key', 'cli', 'system')`))
      // No foreign key: the entry outlives whatever happens to the key.
      .addColumn('actor_key_id', c.refType)
      .addColumn('actor_key_name', 'text')
      .addColumn('action', 'text', (col) => col.notNull())
      .addColumn('target_type', 'text', (col) => col.notNull())
      .addColumn('target_id', 'text')
      .addColumn('before', 'text')
      .addColumn('after', 'text')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .execute();
    // The listing: an organization's entries newest first, paged by id.
    await db.schema.createIndex('audit_events_org_idx').on('audit_events').columns(['org_id', 'id']).execute();
  };
}
