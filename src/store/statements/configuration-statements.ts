// Statements on telephony configurations as their organization manages them and as a new run picks
// one. (The dispatcher's statements on them, pacing and live calls, are in dispatch-statements.ts.)
// The store allows one default configuration per organization at any instant: every statement that
// makes one the default clears the previous default first, in the same transaction.
import type { ProviderName, TelephonyConfigurationRow, TelephonyStatus } from '../schema/schema.js';
import { lockingRows } from '../engine/row-locks.js';
import { plainTransaction, queryable, type Connection } from '../engine/store.js';

export interface NewConfiguration {
  org_id: number;
  name: string;
  provider: ProviderName;
  credentials_encrypted: string | null;
  settings: Record<string, unknown>;
  caller_ids: string[];
  is_default: boolean;
  calls_per_second: number;
  max_concurrent_calls: number;
}

/** Inserts an active configuration (the organization's default, in place of the previous one, when asked). */
export function insertConfiguration(on: Connection, configuration: NewConfiguration, now: number): Promise<TelephonyConfigurationRow> {
  return plainTransaction(on, async (trx) => {
    if (configuration.is_default) {
      await trx
        .updateTable('telephony_configurations')
        .set({ is_default: 0, updated_at: now })
        .where('org_id', '=', configuration.org_id)
        .where('is_default', '=', 1)
        .execute();
    }
    return trx
      .insertInto('telephony_configurations')
      .values({
        org_id: configuration.org_id,
        name: configuration.name,
        provider: configuration.provider,
        credentials_encrypted: configuration.credentials_encrypted,
        settings: JSON.stringify(configuration.settings),
        caller_ids: JSON.stringify(configuration.caller_ids),
        is_default: configuration.is_default ? 1 : 0,
        calls_per_second: configuration.calls_per_second,
        max_concurrent_calls: configuration.max_concurrent_calls,
        status: 'active',
        created_at: now,
        updated_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
  });
}

/** Active configurations of every organization, oldest first, at most `limit` (the start-up check). */
export function selectActiveConfigurations(on: Connection, limit: number): Promise<TelephonyConfigurationRow[]> {
  return queryable(on).selectFrom('telephony_configurations').selectAll().where('status', '=', 'active').orderBy('id').limit(limit).execute();
}

/** An organization's configurations, oldest first: every one, or a page after a configuration id. */
export function selectConfigurationsOfOrganization(on: Connection, orgId: number, page?: { afterId?: number; limit: number }): Promise<TelephonyConfigurationRow[]> {
  return queryable(on)
    .selectFrom('telephony_configurations')
    .selectAll()
    .where('org_id', '=', orgId)
    .$if(page?.afterId !== undefined, (q) => q.where('id', '>', page?.afterId as number))
    .orderBy('id')
    .$if(page !== undefined, (q) => q.limit(page?.limit as number))
    .execute();
}

/**
 * One configuration by id, whatever its organization (the caller checks the owner). Inside a
 * transaction that is about to change it, PostgreSQL locks the row until the end, so two changes
 * of one configuration read and write one after the other.
 */
export function selectConfiguration(on: Connection, id: number): Promise<TelephonyConfigurationRow | undefined> {
  return lockingRows(on, queryable(on).selectFrom('telephony_configurations').selectAll().where('id', '=', id)).executeTakeFirst();
}

/** The columns a change of a configuration may set (the organization, provider, status and default flag have their own statements). */
export interface ConfigurationChanges {
  name?: string;
  credentials_encrypted?: string | null;
  settings?: Record<string, unknown>;
  caller_ids?: string[];
  calls_per_second?: number;
  max_concurrent_calls?: number;
}

/** Sets the columns given; the configuration as it now is, or undefined when there is none. */
export function updateConfiguration(on: Connection, id: number, changes: ConfigurationChanges, now: number): Promise<TelephonyConfigurationRow | undefined> {
  return queryable(on)
    .updateTable('telephony_configurations')
    .set({
      ...(changes.name !== undefined ? { name: changes.name } : {}),
      ...(changes.credentials_encrypted !== undefined ? { credentials_encrypted: changes.credentials_encrypted } : {}),
      ...(changes.settings !== undefined ? { settings: JSON.stringify(changes.settings) } : {}),
      ...(changes.caller_ids !== undefined ? { caller_ids: JSON.stringify(changes.caller_ids) } : {}),
      ...(changes.calls_per_second !== undefined ? { calls_per_second: changes.calls_per_second } : {}),
      ...(changes.max_concurrent_calls !== undefined ? { max_concurrent_calls: changes.max_concurrent_calls } : {}),
      updated_at: now,
    })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** Enables a configuration (it does not become the default); undefined when there is none. */
export function setConfigurationEnabled(on: Connection, id: number, now: number): Promise<TelephonyConfigurationRow | undefined> {
  return queryable(on).updateTable('telephony_configurations').set({ status: 'active', updated_at: now }).where('id', '=', id).returningAll().executeTakeFirst();
}

/** Sets a configuration's status; false when there is no such configuration. */
export async function setConfigurationStatus(on: Connection, id: number, status: TelephonyStatus, now: number): Promise<boolean> {
  const result = await queryable(on).updateTable('telephony_configurations').set({ status, updated_at: now }).where('id', '=', id).executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * Makes an active configuration its organization's default (and the previous default an ordinary
 * one). Returns the configuration as it now is: undefined when there is none, unchanged when it is
 * not active.
 */
export function setDefaultConfiguration(on: Connection, id: number, now: number): Promise<TelephonyConfigurationRow | undefined> {
  return plainTransaction(on, async (trx) => {
    const row = await trx.selectFrom('telephony_configurations').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row || row.status !== 'active') return row;
    await trx
      .updateTable('telephony_configurations')
      .set({ is_default: 0, updated_at: now })
      .where('org_id', '=', row.org_id)
      .where('is_default', '=', 1)
      .where('id', '!=', id)
      .execute();
    return trx.updateTable('telephony_configurations').set({ is_default: 1, updated_at: now }).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
  });
}

/** Disables a configuration and stops it being the default; undefined when there is none. */
export function setConfigurationDisabled(on: Connection, id: number, now: number): Promise<TelephonyConfigurationRow | undefined> {
  return queryable(on)
    .updateTable('telephony_configurations')
    .set({ status: 'inactive', is_default: 0, updated_at: now })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** The organization's active configuration with this id, or (no id) its default active one. */
export function selectActiveConfiguration(on: Connection, orgId: number, id: number | undefined): Promise<TelephonyConfigurationRow | undefined> {
  return queryable(on)
    .selectFrom('telephony_configurations')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('status', '=', 'active')
    .$if(id !== undefined, (q) => q.where('id', '=', id as number))
    .$if(id === undefined, (q) => q.where('is_default', '=', 1))
    .executeTakeFirst();
}
