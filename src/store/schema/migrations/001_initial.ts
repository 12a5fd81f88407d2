// Forward-only. Never edit a migration that has shipped: add the next number instead.
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';
import { column } from './columns.js';

export function up001(dialect: DialectName) {
  const c = column(dialect);
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema
      .createTable('organizations')
      .addColumn('id', c.idType, c.id)
      .addColumn('name', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .execute();

    await db.schema
      .createTable('api_keys')
      .addColumn('id', c.idType, c.id)
      .addColumn('org_id', c.refType, (col) => col.notNull().references('organizations.id'))
      .addColumn('name', 'text', (col) => col.notNull())
      .addColumn('prefix', 'text', (col) => col.notNull().unique())
      .addColumn('hash', 'text', (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('last_used_at', 'bigint')
      .addColumn('revoked_at', 'bigint')
      .execute();
    await db.schema.createIndex('api_keys_org_idx').on('api_keys').column('org_id').execute();

    await db.schema
      .createTable('workflows')
      .addColumn('id', c.idType, c.id)
      .addColumn('workflow_uuid', 'text', (col) => col.notNull().unique())
      .addColumn('org_id', c.refType, (col) => col.notNull().references('organizations.id'))
      .addColumn('name', 'text', (col) => col.notNull())
      .addColumn('status', 'text', (col) => col.notNull().check(sql`status in ('active', 'archived')`))
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .execute();

    await db.schema
      .createTable('workflow_definitions')
      .addColumn('id', c.idType, c.id)
      .addColumn('workflow_id', c.refType, (col) => col.notNull().references('workflows.id'))
      .addColumn('version', 'integer', (col) => col.notNull())
      .addColumn('status', 'text', (col) =>
        col.notNull().check(sql`status in ('draft', 'published', 'archived')`),
      )
      .addColumn('graph', c.jsonType, (col) => col.notNull())
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('published_at', 'bigint')
      .addUniqueConstraint('workflow_definitions_version_uq', ['workflow_id', 'version'])
      .execute();
    // "At most one draft and one published definition per workflow" is enforced by the store, so
    // two nodes publishing at once cannot both win.
    await db.schema
      .createIndex('workflow_definitions_one_draft')
      .on('workflow_definitions')
      .column('workflow_id')
      .unique()
      .where(sql.ref('status'), '=', 'draft')
      .execute();
    await db.schema
      .createIndex('workflow_definitions_one_published')
      .on('workflow_definitions')
      .column('workflow_id')
      .unique()
      .where(sql.ref('status'), '=', 'published')
      .execute();

    await db.schema
      .createTable('api_triggers')
      .addColumn('trigger_uuid', 'text', (col) => col.primaryKey())
      .addColumn('workflow_id', c.refType, (col) => col.notNull().references('workflows.id'))
      .addColumn('org_id', c.refType, (col) => col.notNull().references('organizations.id'))
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .execute();

    await db.schema
      .createTable('telephony_configurations')
      .addColumn('id', c.idType, c.id)
      .addColumn('org_id', c.refType, (col) => col.notNull().references('organizations.id'))
      .addColumn('name', 'text', (col) => col.notNull())
      .addColumn('provider', 'text', (col) =>
        col.notNull().check(sql`provider in ('simulator', 'twilio', 'sip')`),
      )
      .addColumn('credentials_encrypted', 'text')
      .addColumn('settings', c.jsonType, (col) => col.notNull())
      .addColumn('caller_ids', c.jsonType, (col) => col.notNull())
      .addColumn('is_default', 'integer', (col) => col.notNull().check(sql`is_default in (0, 1)`))
      .addColumn('calls_per_second', 'double precision', (col) => col.notNull().check(sql`calls_per_second > 0`))
      .addColumn('max_concurrent_calls', 'integer', (col) => col.notNull().check(sql`max_concurrent_calls > 0`))
      .addColumn('status', 'text', (col) => col.notNull().check(sql`status in ('active', 'inactive')`))
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .execute();
    await db.schema
      .createIndex('telephony_configurations_one_default')
      .on('telephony_configurations')
      .column('org_id')
      .unique()
      .where(sql.ref('is_default'), '=', 1)
      .execute();

    await db.schema
      .createTable('workflow_runs')
      .addColumn('id', c.idType, c.id)
      .addColumn('name', 'text', (col) => col.unique())
      .addColumn('org_id', c.refType, (col) => col.notNull().references('organizations.id'))
      .addColumn('workflow_id', c.refType, (col) => col.notNull().references('workflows.id'))
      .addColumn('definition_id', c.refType, (col) => col.notNull().references('workflow_definitions.id'))
      .addColumn('mode', 'text', (col) => col.notNull().check(sql`mode in ('published', 'test')`))
      .addColumn('trigger_uuid', 'text')
      .addColumn('phone_number', 'text', (col) => col.notNull())
      .addColumn('caller_id', 'text')
      .addColumn('telephony_configuration_id', c.refType, (col) =>
        col.notNull().references('telephony_configurations.id'),
      )
      .addColumn('initial_context', 'text')
      .addColumn('state', 'text', (col) => col.notNull())
      .addColumn('outcome_reason', 'text')
      .addColumn('provider_call_id', 'text')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .addColumn('ended_at', 'bigint')
      .execute();
    await db.schema.createIndex('workflow_runs_org_idx').on('workflow_runs').columns(['org_id', 'id']).execute();

    await db.schema
      .createTable('run_events')
      .addColumn('id', c.idType, c.id)
      .addColumn('run_id', c.refType, (col) => col.notNull().references('workflow_runs.id'))
      .addColumn('seq', 'integer', (col) => col.notNull())
      .addColumn('type', 'text', (col) => col.notNull())
      .addColumn('at', 'bigint', (col) => col.notNull())
      .addColumn('data', c.jsonType, (col) => col.notNull())
      .addUniqueConstraint('run_events_seq_uq', ['run_id', 'seq'])
      .execute();
  };
}
