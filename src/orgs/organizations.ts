import {
  insertOrganization,
  selectOrganizationExists,
  selectOrganizationLimits,
  selectOrganizations,
  setOrganizationLimitColumns,
  type OrganizationLimitColumns,
} from '../store/organization-statements.js';
import type { Store } from '../store/store.js';

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

/** One organization with its own limits and policy settings, or undefined. */
export function getOrganization(store: Store, id: number) {
  return selectOrganizationLimits(store, id);
}

/** Every organization with its own limits (null: the configured default), oldest first. */
export function listOrganizations(store: Store) {
  return selectOrganizations(store);
}
