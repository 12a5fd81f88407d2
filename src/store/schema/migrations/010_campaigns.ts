// Campaigns (issue 15): a list of contacts called through one agent with a schedule, retry rules and
// a circuit breaker. Each attempt is an ordinary run created lazily by the campaign scheduler
// (campaigns/scheduler.ts), so the runs table stays the only queue. A run of a campaign names its
// campaign, contact and attempt number; (contact_id, attempt) is unique, the store's own guarantee
// that an attempt is created at most once whatever nodes or crashes do.
import { sql, type Kysely } from '../../engine/kysely.js';
import type { DialectName } from '../../engine/store.js';
import { column } from './columns.js';

export function up010(dialect: DialectName) {
  const c = column(dialect);
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema
      .createTable('campaigns')
      .addColumn('id', c.idType, c.id)
      .addColumn('org_id', c.refType, (col) => col.notNull().references('organizations.id'))
      .addColumn('name', 'text', (col) => col.notNull())
      .addColumn('workflow_id', c.refType, (col) => col.notNull().references('workflows.id'))
      // The agent UUID the campaign was created with (null: by workflow UUID); checked again per attempt.
      .addColumn('trigger_uuid', 'text')
      .addColumn('mode', 'text', (col) => col.notNull())
      // Resolved when the campaign is created (the default route then), so every attempt dials one route.
      .addColumn('telephony_configuration_id', c.refType, (col) => col.notNull().references('telephony_configurations.id'))
      .addColumn('max_concurrent_calls', 'integer', (col) => col.notNull())
      // Null: only the route's pacing applies.
      .addColumn('calls_per_second', 'real')
      .addColumn('starts_at', 'bigint')
      .addColumn('ends_at', 'bigint')
      .addColumn('schedule', c.jsonType)
      .addColumn('retry', c.jsonType, (col) => col.notNull())
      .addColumn('circuit_breaker', c.jsonType, (col) => col.notNull())
      .addColumn('state', 'text', (col) => col.notNull())
      .addColumn('paused_reason', 'text')
      // Bumped by every contacts import: completion compares it, so a campaign is never completed
      // over contacts committed while it counted.
      .addColumn('contacts_version', 'integer', (col) => col.notNull().defaultTo(0))
      // The circuit breaker counts only attempts that ended after this (the start or last resume).
      .addColumn('breaker_since', 'bigint')
      // Pacing: the earliest time the next attempt may be created (calls_per_second).
      .addColumn('pacing_next_at', 'bigint')
      // The scheduler's lease: one node works a campaign at a time. Once released, lease_expires_at
      // keeps when, so the claim takes the least recently worked campaigns first.
      .addColumn('lease_owner', 'text')
      .addColumn('lease_expires_at', 'bigint')
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .addColumn('started_at', 'bigint')
      // Set when nothing is left for the scheduler: completed, or canceled with every attempt settled.
      .addColumn('finished_at', 'bigint')
      .execute();
    await db.schema.createIndex('campaigns_org_idx').on('campaigns').columns(['org_id', 'id']).execute();
    // The scheduler's claim: campaigns it still has work on.
    await db.schema.createIndex('campaigns_unfinished_idx').on('campaigns').columns(['id']).where(sql.ref('finished_at'), 'is', null).execute();

    await db.schema
      .createTable('campaign_contacts')
      .addColumn('id', c.idType, c.id)
      .addColumn('campaign_id', c.refType, (col) => col.notNull().references('campaigns.id'))
      .addColumn('phone_number', 'text', (col) => col.notNull())
      // The contact's initial_context as serialized JSON text (like a run's), or null.
      .addColumn('initial_context', 'text')
      // An IANA zone: calling hours are checked there instead of in the number's zones.
      .addColumn('timezone', 'text')
      .addColumn('status', 'text', (col) => col.notNull())
      // Runs created for the contact; the latest run's attempt number.
      .addColumn('attempts', 'integer', (col) => col.notNull().defaultTo(0))
      // Attempts canceled by a pause before they were dialed: they do not count against max_attempts.
      .addColumn('refunded', 'integer', (col) => col.notNull().defaultTo(0))
      .addColumn('next_attempt_at', 'bigint', (col) => col.notNull())
      .addColumn('last_run_id', c.refType)
      .addColumn('created_at', 'bigint', (col) => col.notNull())
      .addColumn('updated_at', 'bigint', (col) => col.notNull())
      .addUniqueConstraint('campaign_contacts_number_key', ['campaign_id', 'phone_number'])
      .execute();
    // Due pending contacts of a campaign (status = pending, by next_attempt_at), its in-progress
    // ones, and the progress counts per status.
    await db.schema.createIndex('campaign_contacts_due_idx').on('campaign_contacts').columns(['campaign_id', 'status', 'next_attempt_at']).execute();
    // The contacts listing, in id order.
    await db.schema.createIndex('campaign_contacts_list_idx').on('campaign_contacts').columns(['campaign_id', 'id']).execute();

    await db.schema.alterTable('workflow_runs').addColumn('campaign_id', c.refType).execute();
    await db.schema.alterTable('workflow_runs').addColumn('contact_id', c.refType).execute();
    await db.schema.alterTable('workflow_runs').addColumn('attempt', 'integer').execute();
    // Partial: a direct run adds no entry, so creating one costs what it did.
    await db.schema
      .createIndex('workflow_runs_contact_attempt_key')
      .unique()
      .on('workflow_runs')
      .columns(['contact_id', 'attempt'])
      .where(sql.ref('contact_id'), 'is not', null)
      .execute();
    // A campaign's runs in id order (its runs listing, outcome counts) and by end (the circuit breaker).
    await db.schema.createIndex('workflow_runs_campaign_idx').on('workflow_runs').columns(['campaign_id', 'id']).where(sql.ref('campaign_id'), 'is not', null).execute();
    await db.schema.createIndex('workflow_runs_campaign_ended_idx').on('workflow_runs').columns(['campaign_id', 'ended_at']).where(sql.ref('campaign_id'), 'is not', null).execute();
  };
}
