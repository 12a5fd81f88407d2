// Statements on organizations (tenants) and their own limits.
import { lockingRows } from '../engine/row-locks.js';
import { queryable, type Connection } from '../engine/store.js';

export async function insertOrganization(on: Connection, name: string, now: number): Promise<{ id: number; name: string }> {
  return queryable(on).insertInto('organizations').values({ name, created_at: now }).returning(['id', 'name']).executeTakeFirstOrThrow();
}

export async function selectOrganizationExists(on: Connection, id: number): Promise<boolean> {
  return (await queryable(on).selectFrom('organizations').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
}

/** True when the store holds at least one organization. */
export async function selectAnyOrganizationExists(on: Connection): Promise<boolean> {
  return (await queryable(on).selectFrom('organizations').select('id').limit(1).executeTakeFirst()) !== undefined;
}

/** An organization's own limits, as columns: a number is its own limit, null the configuration's default. */
export interface OrganizationLimitColumns {
  rate_limit_per_second?: number | null;
  key_rate_limit_per_second?: number | null;
  max_queued_runs?: number | null;
  /** The per-number frequency cap: set together, or both null (off). */
  number_max_calls?: number | null;
  number_window_seconds?: number | null;
}

/** Sets the limits given (the statement names only those columns). */
export async function setOrganizationLimitColumns(on: Connection, id: number, changes: OrganizationLimitColumns): Promise<void> {
  await queryable(on).updateTable('organizations').set(changes).where('id', '=', id).execute();
}

export function selectOrganizationLimits(on: Connection, id: number) {
  return queryable(on)
    .selectFrom('organizations')
    .select(['id', 'name', 'rate_limit_per_second', 'key_rate_limit_per_second', 'max_queued_runs', 'number_max_calls', 'number_window_seconds'])
    .where('id', '=', id)
    .executeTakeFirst();
}

/** Every organization, oldest first. */
export function selectOrganizations(on: Connection) {
  return queryable(on)
    .selectFrom('organizations')
    .select(['id', 'name', 'created_at', 'rate_limit_per_second', 'key_rate_limit_per_second', 'max_queued_runs', 'number_max_calls', 'number_window_seconds'])
    .orderBy('id')
    .execute();
}

/** Sets an organization's calling hours (serialized JSON), or turns them off (null); false when there is no such organization. */
export async function setOrganizationCallingHoursColumn(on: Connection, id: number, callingHoursJson: string | null): Promise<boolean> {
  const result = await queryable(on).updateTable('organizations').set({ calling_hours: callingHoursJson }).where('id', '=', id).executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * One organization with all its settings (`dialtone org show`). Inside a transaction that is about
 * to change them, PostgreSQL locks the row until the end, so two changes read and write in turn.
 */
export function selectOrganization(on: Connection, id: number) {
  return lockingRows(
    on,
    queryable(on)
      .selectFrom('organizations')
      .select(['id', 'name', 'created_at', 'rate_limit_per_second', 'key_rate_limit_per_second', 'max_queued_runs', 'number_max_calls', 'number_window_seconds', 'calling_hours', 'retention_days'])
      .where('id', '=', id),
  ).executeTakeFirst();
}

/** Sets an organization's own retention window in days (0: keep forever; null: back to RETENTION_DAYS); false when there is no such organization. */
export async function setOrganizationRetentionDaysColumn(on: Connection, id: number, days: number | null): Promise<boolean> {
  const result = await queryable(on).updateTable('organizations').set({ retention_days: days }).where('id', '=', id).executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}
