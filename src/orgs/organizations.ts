import { DialtoneError } from '../errors.js';
import { parseCallingHours, type CallingHours } from '../policy/calling-hours.js';
import {
  insertOrganization,
  selectOrganization,
  setOrganizationCallingHoursColumn,
  selectOrganizationExists,
  selectOrganizationLimits,
  selectOrganizations,
  setOrganizationLimitColumns,
  setOrganizationRetentionDaysColumn,
  type OrganizationLimitColumns,
} from '../store/statements/organization-statements.js';
import { decodeJson, type Store } from '../store/engine/store.js';

export function createOrganization(store: Store, name: string, now: number) {
  return insertOrganization(store, name, now);
}

export function organizationExists(store: Store, id: number): Promise<boolean> {
  return selectOrganizationExists(store, id);
}

/** A number sets the organization's own limit; null returns it to the configuration's default. */
export type LimitChanges = OrganizationLimitColumns;

/** Sets an organization's own limits; returns the organization with all three, or undefined when there is none. */
export async function setOrganizationLimits(store: Store, id: number, changes: LimitChanges) {
  if (Object.keys(changes).length > 0) await setOrganizationLimitColumns(store, id, changes);
  return selectOrganizationLimits(store, id);
}

/** Every organization with its own limits (null: the configured default), oldest first. */
export function listOrganizations(store: Store) {
  return selectOrganizations(store);
}

/** One organization with its limits and calling hours (decoded; null when off), or undefined. */
export async function showOrganization(store: Store, id: number) {
  const row = await selectOrganization(store, id);
  if (!row) return undefined;
  return { ...row, calling_hours: decodeCallingHours(row.calling_hours) };
}

/** A stored calling_hours column as the setting, or null when off. */
export function decodeCallingHours(column: unknown): CallingHours | null {
  return column === null || column === undefined ? null : decodeJson<CallingHours>(column);
}

/**
 * Sets an organization's calling hours (validated: a bad setting is refused with every problem
 * listed, and nothing changes) or turns them off with null. False when there is no such organization.
 * Requests see the change within LOOKUP_CACHE_TTL_MS (the setting travels with the API key's lookup).
 */
export async function setCallingHours(store: Store, id: number, setting: unknown | null): Promise<boolean> {
  if (setting === null) return setOrganizationCallingHoursColumn(store, id, null);
  const parsed = parseCallingHours(setting);
  if (!parsed.ok) throw new DialtoneError('validation_failed', 'The calling hours are not valid.', { errors: parsed.problems });
  return setOrganizationCallingHoursColumn(store, id, JSON.stringify(parsed.hours));
}

/** The longest own retention window an organization may set: a hundred years, as RETENTION_DAYS allows. */
export const MAX_RETENTION_DAYS = 36_500;

/**
 * Sets an organization's own retention window (docs/operations.md, "Retention"): a number of days
 * (1 to MAX_RETENTION_DAYS), `off` to keep its runs forever whatever RETENTION_DAYS says, or
 * `default` to follow RETENTION_DAYS again. False when there is no such organization. The
 * maintenance pass reads it on its next run.
 */
export async function setRetention(store: Store, id: number, setting: number | 'off' | 'default'): Promise<boolean> {
  if (typeof setting === 'number' && (!Number.isInteger(setting) || setting < 1 || setting > MAX_RETENTION_DAYS)) {
    throw new DialtoneError('validation_failed', `A retention window is a whole number of days from 1 to ${MAX_RETENTION_DAYS}.`);
  }
  return setOrganizationRetentionDaysColumn(store, id, setting === 'off' ? 0 : setting === 'default' ? null : setting);
}
