// Telephony configurations: the routes an organization dials through.
import { createRequire } from 'node:module';
import type * as LibPhoneNumber from 'libphonenumber-js/max';
import { DialtoneError, validationFailed, type FieldError } from '../errors.js';
import type { ProviderName, TelephonyConfigurationRow } from '../store/schema/schema.js';
import { NO_CACHE, type LookupCache } from '../shared/lookup-cache.js';
import {
  insertConfiguration,
  selectActiveConfiguration,
  selectConfigurationsOfOrganization,
  setConfigurationDisabled,
  setConfigurationStatus,
  setDefaultConfiguration,
} from '../store/statements/configuration-statements.js';
import { decodeJson, type Store } from '../store/engine/store.js';
import type { CredentialsCipher } from '../shared/credentials-cipher.js';
import { builtInProviders, type ProviderRegistry } from './registry.js';
import { routeInputProblems } from './routes.js';

export interface NewTelephonyConfiguration {
  orgId: number;
  name: string;
  provider: string;
  callerIds?: string[];
  isDefault?: boolean;
  callsPerSecond?: number;
  maxConcurrentCalls?: number;
  credentials?: Record<string, unknown> | undefined;
  settings?: Record<string, unknown> | undefined;
}

export interface TelephonyConfigurationView {
  id: number;
  org_id: number;
  name: string;
  provider: ProviderName;
  caller_ids: string[];
  is_default: boolean;
  calls_per_second: number;
  max_concurrent_calls: number;
  status: TelephonyConfigurationRow['status'];
  has_credentials: boolean;
  settings: Record<string, unknown>;
}

export function viewConfiguration(row: TelephonyConfigurationRow): TelephonyConfigurationView {
  return {
    id: row.id,
    org_id: row.org_id,
    name: row.name,
    provider: row.provider,
    caller_ids: decodeJson<string[]>(row.caller_ids),
    is_default: row.is_default === 1,
    calls_per_second: row.calls_per_second,
    max_concurrent_calls: row.max_concurrent_calls,
    status: row.status,
    has_credentials: row.credentials_encrypted !== null,
    settings: decodeJson<Record<string, unknown>>(row.settings),
  };
}

async function normalizeCallerIds(callerIds: string[]): Promise<{ values: string[]; errors: FieldError[] }> {
  // Required here: its full metadata is heavy, and only creating a configuration needs it (every
  // other command that loads this module, such as telephony list, starts faster without it). The
  // CommonJS build, as shared/phone-number.ts requires it: one copy per process.
  const { parsePhoneNumberFromString } = createRequire(import.meta.url)('libphonenumber-js/max') as typeof LibPhoneNumber;
  const errors: FieldError[] = [];
  const values = callerIds.map((raw, i) => {
    const parsed = parsePhoneNumberFromString(raw);
    if (!parsed || !parsed.isValid()) {
      errors.push({ pointer: `/caller_ids/${i}`, detail: `"${raw}" is not a valid E.164 number.` });
      return raw;
    }
    return parsed.number;
  });
  return { values, errors };
}

export async function createTelephonyConfiguration(
  store: Store,
  cipher: CredentialsCipher,
  input: NewTelephonyConfiguration,
  now: number,
  registry: ProviderRegistry = builtInProviders,
): Promise<TelephonyConfigurationView> {
  const errors: FieldError[] = [];
  const known = registry.has(input.provider);
  if (!known) errors.push({ pointer: '/provider', detail: `Must be one of ${registry.names.join(', ')}.` });
  const callerIds = await normalizeCallerIds(input.callerIds ?? []);
  errors.push(...callerIds.errors);
  const cps = input.callsPerSecond ?? 1;
  const maxConcurrent = input.maxConcurrentCalls ?? 10;
  if (!(cps > 0 && cps <= 10_000)) errors.push({ pointer: '/calls_per_second', detail: 'Must be above 0 and at most 10000.' });
  if (!Number.isInteger(maxConcurrent) || maxConcurrent < 1) {
    errors.push({ pointer: '/max_concurrent_calls', detail: 'Must be a whole number of at least 1.' });
  }
  if (input.name.trim().length === 0) errors.push({ pointer: '/name', detail: 'Must not be empty.' });
  // The provider's own schema (its definition's decoder), the same one readiness applies to the stored route.
  if (known) errors.push(...routeInputProblems(input.provider, { settings: input.settings ?? {}, credentials: input.credentials ?? null }, registry));
  if (errors.length > 0) throw validationFailed(errors, 'The telephony configuration is not valid.');

  const credentials = input.credentials ? cipher.encrypt(input.orgId, input.credentials) : null;
  const row = await insertConfiguration(
    store,
    {
      org_id: input.orgId,
      name: input.name,
      provider: input.provider,
      credentials_encrypted: credentials,
      settings: input.settings ?? {},
      caller_ids: callerIds.values,
      is_default: input.isDefault === true,
      calls_per_second: cps,
      max_concurrent_calls: maxConcurrent,
    },
    now,
  );
  return viewConfiguration(row);
}

export async function listTelephonyConfigurations(store: Store, orgId: number): Promise<TelephonyConfigurationView[]> {
  const rows = await selectConfigurationsOfOrganization(store, orgId);
  return rows.map(viewConfiguration);
}

export function setTelephonyStatus(store: Store, id: number, status: TelephonyConfigurationRow['status'], now: number): Promise<boolean> {
  return setConfigurationStatus(store, id, status, now);
}

/**
 * Makes a configuration its organization's default (and the previous default an ordinary one). Only
 * an active configuration can be the default: runs without a telephony_configuration_id dial it.
 */
export async function setDefaultTelephonyConfiguration(store: Store, id: number, now: number): Promise<TelephonyConfigurationView> {
  const row = await setDefaultConfiguration(store, id, now);
  if (!row) throw new DialtoneError('telephony_configuration_not_found', `No telephony configuration ${id}.`);
  if (row.status !== 'active') {
    throw new DialtoneError('telephony_configuration_not_found', `Telephony configuration ${id} is disabled: it cannot be the default.`);
  }
  return viewConfiguration(row);
}

/**
 * Disables a configuration: it is no longer dialed for new requests (selectTelephonyConfiguration
 * takes only active ones) and stops being the default, so requests without a
 * telephony_configuration_id are refused (telephony_not_configured) until another is made default.
 */
export async function disableTelephonyConfiguration(store: Store, id: number, now: number): Promise<TelephonyConfigurationView> {
  const row = await setConfigurationDisabled(store, id, now);
  if (!row) throw new DialtoneError('telephony_configuration_not_found', `No telephony configuration ${id}.`);
  return viewConfiguration(row);
}

/**
 * The configuration a run dials through: the one named (it must be the organization's and active),
 * or the organization's default active one.
 */
export async function selectTelephonyConfiguration(
  store: Store,
  orgId: number,
  requestedId: number | null | undefined,
  cache: LookupCache = NO_CACHE,
): Promise<TelephonyConfigurationRow> {
  const id = requestedId ?? undefined;
  const row = await cache.get(`route:${orgId}:${id ?? 'default'}`, () => selectActiveConfiguration(store, orgId, id));
  if (id !== undefined && !row) throw new DialtoneError('telephony_configuration_not_found', `No active telephony configuration ${id}.`);
  if (!row) {
    throw new DialtoneError(
      'telephony_not_configured',
      'The organization has no default active telephony configuration; pass telephony_configuration_id or set a default.',
    );
  }
  return row;
}
