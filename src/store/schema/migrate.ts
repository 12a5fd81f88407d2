// Applies the numbered migrations. Kysely's Migrator takes a lock (a row lock on PostgreSQL) so
// that when several nodes start at once one applies the migrations and the others wait, then see
// them applied.
import { Migrator, sql } from '../engine/kysely.js';
import type { Migration, MigrationProvider, Migrator as KyselyMigrator } from 'kysely';
import { DatabaseNewerError } from '../engine/operator-errors.js';
import { up001 } from './migrations/001_initial.js';
import { up002 } from './migrations/002_dispatch.js';
import { up003 } from './migrations/003_caller_safety.js';
import { up004 } from './migrations/004_dispatcher_nodes.js';
import { up005 } from './migrations/005_webhooks.js';
import { up006 } from './migrations/006_suppressions.js';
import { up007 } from './migrations/007_calling_hours.js';
import { up008 } from './migrations/008_reconciliation.js';
import { up009 } from './migrations/009_run_listing.js';
import { up010 } from './migrations/010_campaigns.js';
import { up011 } from './migrations/011_stream_deliveries.js';
import { up012 } from './migrations/012_stream_campaigns.js';
import { up013 } from './migrations/013_campaign_run_states.js';
import { up014 } from './migrations/014_campaign_dial_pacing.js';
import { up015 } from './migrations/015_outbox_wakes_after_commit.js';
import { up016 } from './migrations/016_webhook_deliveries_by_run.js';
import { up017 } from './migrations/017_secret_key_check.js';
import { up018 } from './migrations/018_answered_by.js';
import { up019 } from './migrations/019_provider_names_unchecked.js';
import { up020 } from './migrations/020_run_results.js';
import { up021 } from './migrations/021_campaign_answered_by.js';
import { up022 } from './migrations/022_run_transfers.js';
import { up023 } from './migrations/023_retention.js';
import { up025 } from './migrations/025_audit_events.js';
import { up026 } from './migrations/026_api_key_scopes.js';
import { up027 } from './migrations/027_audit_events_by_target.js';
import type { DialectName, Store } from '../engine/store.js';

function migrations(dialect: DialectName): Record<string, Migration> {
  return {
    '001_initial': { up: up001(dialect) },
    '002_dispatch': { up: up002(dialect) },
    '003_caller_safety': { up: up003(dialect) },
    '004_dispatcher_nodes': { up: up004(dialect) },
    '005_webhooks': { up: up005(dialect) },
    '006_suppressions': { up: up006(dialect) },
    '007_calling_hours': { up: up007(dialect) },
    '008_reconciliation': { up: up008(dialect) },
    '009_run_listing': { up: up009(dialect) },
    '010_campaigns': { up: up010(dialect) },
    '011_stream_deliveries': { up: up011(dialect) },
    '012_stream_campaigns': { up: up012(dialect) },
    '013_campaign_run_states': { up: up013(dialect) },
    '014_campaign_dial_pacing': { up: up014(dialect) },
    '015_outbox_wakes_after_commit': { up: up015(dialect) },
    '016_webhook_deliveries_by_run': { up: up016(dialect) },
    '017_secret_key_check': { up: up017(dialect) },
    '018_answered_by': { up: up018(dialect) },
    '019_provider_names_unchecked': { up: up019(dialect) },
    '020_run_results': { up: up020(dialect) },
    '021_campaign_answered_by': { up: up021(dialect) },
    '022_run_transfers': { up: up022(dialect) },
    '023_retention': { up: up023(dialect) },
    '025_audit_events': { up: up025(dialect) },
    '026_api_key_scopes': { up: up026(dialect) },
    '027_audit_events_by_target': { up: up027(dialect) },
  };
}

function migrator(store: Store): KyselyMigrator {
  const provider: MigrationProvider = { getMigrations: async () => migrations(store.dialect) };
  return new Migrator({ db: store.db, provider });
}

/**
 * Applies every pending migration; refuses (DatabaseNewerError) a database that a newer version
 * has migrated, before touching it.
 */
export async function migrateToLatest(store: Store): Promise<string[]> {
  await refuseNewerDatabase(store);
  const { error, results } = await migrator(store).migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/**
 * Applies the migrations up to and including `name`, no further: the upgrade test builds a database
 * as an earlier version left it.
 */
export async function migrateTo(store: Store, name: string): Promise<void> {
  const { error } = await migrator(store).migrateTo(name);
  if (error) throw error instanceof Error ? error : new Error(String(error));
}

/** True when every known migration has been applied (used by readiness). */
export async function migrationsApplied(store: Store): Promise<boolean> {
  const list = await migrator(store).getMigrations();
  return list.every((m) => m.executedAt !== undefined);
}

export interface AppliedMigration {
  name: string;
  appliedAt: Date;
}

export interface MigrationStatus {
  applied: AppliedMigration[];
  /** Known to this version, not yet applied. */
  pending: string[];
  /** Applied by a newer version, unknown to this one: this version refuses the database. */
  unknown: AppliedMigration[];
}

/** What `dialtone migrate --status` shows; reads only, so it changes nothing, even on a fresh database. */
export async function migrationStatus(store: Store): Promise<MigrationStatus> {
  const known = Object.keys(migrations(store.dialect)).sort();
  const executed = await executedMigrations(store);
  const byName = new Map(executed.map((m) => [m.name, m]));
  return {
    applied: known.flatMap((name) => byName.get(name) ?? []),
    pending: known.filter((name) => !byName.has(name)),
    unknown: executed.filter((m) => !known.includes(m.name)),
  };
}

async function refuseNewerDatabase(store: Store): Promise<void> {
  const known = new Set(Object.keys(migrations(store.dialect)));
  const unknown = (await executedMigrations(store)).filter((m) => !known.has(m.name));
  if (unknown.length > 0) throw new DatabaseNewerError(unknown.map((m) => m.name));
}

/**
 * Kysely's own record of applied migrations, read directly: its Migrator reports only the migrations
 * it is given, and names a newer one only as "corrupted migrations". Empty before the first start.
 */
async function executedMigrations(store: Store): Promise<AppliedMigration[]> {
  const present =
    store.dialect === 'sqlite'
      ? await sql<{ present: number }>`select count(*) as present from sqlite_master where type = 'table' and name = 'kysely_migration'`.execute(store.db)
      : await sql<{ present: number }>`select count(*) as present from pg_catalog.pg_tables where tablename = 'kysely_migration' and schemaname = any(current_schemas(false))`.execute(store.db);
  if (!Number(present.rows[0]?.present)) return [];
  const rows = await sql<{ name: string; timestamp: string }>`select name, timestamp from kysely_migration order by name`.execute(store.db);
  return rows.rows.map((r) => ({ name: r.name, appliedAt: new Date(r.timestamp) }));
}
