// Telephony configurations: the routes an organization dials through. Every change an operator
// makes (create, update, disable, enable, set default) is recorded in the audit log in the change's
// own transaction (docs/design.md, "Audit log"), with the configuration as the management API shows
// it: settings, and only whether each credential is set, never its value.
import { createRequire } from 'node:module';
import type * as LibPhoneNumber from 'libphonenumber-js/max';
import { CLI_ACTOR, recordAuditEvent, type AuditActor } from '../audit/audit-log.js';
import { DialtoneError, validationFailed, type FieldError } from '../errors.js';
import type { ProviderName, TelephonyConfigurationRow } from '../store/schema/schema.js';
import { NO_CACHE, type LookupCache } from '../shared/lookup-cache.js';
import {
  insertConfiguration,
  selectActiveConfiguration,
  selectConfiguration,
  selectConfigurationsOfOrganization,
  setConfigurationDisabled,
  setConfigurationEnabled,
  setConfigurationStatus,
  setDefaultConfiguration,
  updateConfiguration,
  type ConfigurationChanges,
} from '../store/statements/configuration-statements.js';
import { decodeJson, plainTransaction, type Store, type StoreTransaction } from '../store/engine/store.js';
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

/** The name's and pacing's problems, for a creation and an update alike (a member not given is not checked). */
function fieldProblems(fields: { name?: string; callsPerSecond?: number; maxConcurrentCalls?: number }): FieldError[] {
  const errors: FieldError[] = [];
  const { name, callsPerSecond: cps, maxConcurrentCalls: maxConcurrent } = fields;
  if (cps !== undefined && !(cps > 0 && cps <= 10_000)) errors.push({ pointer: '/calls_per_second', detail: 'Must be above 0 and at most 10000.' });
  if (maxConcurrent !== undefined && (!Number.isInteger(maxConcurrent) || maxConcurrent < 1)) {
    errors.push({ pointer: '/max_concurrent_calls', detail: 'Must be a whole number of at least 1.' });
  }
  if (name !== undefined && name.trim().length === 0) errors.push({ pointer: '/name', detail: 'Must not be empty.' });
  return errors;
}

export interface CreateConfigurationOptions {
  /** Who creates it, for the audit log (the CLI unless told). */
  actor?: AuditActor;
  /** Runs in the creating transaction, after the configuration and its audit entry (an Idempotency-Key's answer stored with them). */
  onCreated?: (trx: StoreTransaction, row: TelephonyConfigurationRow) => Promise<void>;
}

/**
 * Creates a configuration (checked against its provider's schema, every problem listed with its
 * JSON Pointer, nothing written when there is one) and records `telephony_configuration.created`
 * in the same transaction.
 */
export async function createTelephonyConfiguration(
  store: Store,
  cipher: CredentialsCipher,
  input: NewTelephonyConfiguration,
  now: number,
  registry: ProviderRegistry = builtInProviders,
  options: CreateConfigurationOptions = {},
): Promise<TelephonyConfigurationView> {
  const errors: FieldError[] = [];
  const known = registry.has(input.provider);
  if (!known) errors.push({ pointer: '/provider', detail: `Must be one of ${registry.names.join(', ')}.` });
  const callerIds = await normalizeCallerIds(input.callerIds ?? []);
  errors.push(...callerIds.errors);
  const cps = input.callsPerSecond ?? 1;
  const maxConcurrent = input.maxConcurrentCalls ?? 10;
  errors.push(...fieldProblems({ callsPerSecond: cps, maxConcurrentCalls: maxConcurrent, name: input.name }));
  // The provider's own schema (its definition's decoder), the same one readiness applies to the stored route.
  if (known) errors.push(...routeInputProblems(input.provider, { settings: input.settings ?? {}, credentials: input.credentials ?? null }, registry));
  if (errors.length > 0) throw validationFailed(errors, 'The telephony configuration is not valid.');

  const credentials = input.credentials ? cipher.encrypt(input.orgId, input.credentials) : null;
  const row = await plainTransaction(store, async (trx) => {
    const inserted = await insertConfiguration(
      trx,
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
    const after = managedView(inserted, cipher, registry);
    await recordAuditEvent(trx, { orgId: input.orgId, actor: options.actor ?? CLI_ACTOR, action: 'telephony_configuration.created', target: { type: 'telephony_configuration', id: inserted.id }, after, at: now });
    await options.onCreated?.(trx, inserted);
    return inserted;
  });
  return viewConfiguration(row);
}

export async function listTelephonyConfigurations(store: Store, orgId: number): Promise<TelephonyConfigurationView[]> {
  const rows = await selectConfigurationsOfOrganization(store, orgId);
  return rows.map(viewConfiguration);
}

/** A page of an organization's configurations, oldest first, after a configuration id. */
export async function listTelephonyConfigurationRows(store: Store, orgId: number, page: { afterId?: number; limit: number }): Promise<TelephonyConfigurationRow[]> {
  return selectConfigurationsOfOrganization(store, orgId, page);
}

/** One of the organization's configurations, or undefined (another organization's too). */
export async function getTelephonyConfigurationRow(store: Store, orgId: number, id: number): Promise<TelephonyConfigurationRow | undefined> {
  const row = await selectConfiguration(store, id);
  return row && row.org_id === orgId ? row : undefined;
}

/** Sets a configuration's status directly, unaudited: for tests and the service's own repairs, not for operators. */
export function setTelephonyStatus(store: Store, id: number, status: TelephonyConfigurationRow['status'], now: number): Promise<boolean> {
  return setConfigurationStatus(store, id, status, now);
}

/**
 * A configuration as the management API shows it (and the audit log records it): its settings, and
 * for credentials only whether each is set (`credentials_set`), never a value. Every credential the
 * provider declares is listed; stored credentials that cannot be decrypted (DIALTONE_SECRET_KEY
 * changed) read as not set, and readiness says why.
 */
export interface ManagedConfigurationView extends Omit<TelephonyConfigurationView, 'org_id'> {
  credentials_set: Record<string, boolean>;
  created_at: number;
  updated_at: number;
}

export function managedView(row: TelephonyConfigurationRow, cipher: CredentialsCipher, registry: ProviderRegistry = builtInProviders): ManagedConfigurationView {
  const { org_id: _org, ...view } = viewConfiguration(row);
  const stored = storedCredentials(row, cipher) ?? {};
  const declared = registry.find(row.provider)?.credentials.map((c) => c.name) ?? [];
  const names = [...new Set([...declared, ...Object.keys(stored)])];
  const credentials_set = Object.fromEntries(names.map((name) => [name, isSet(stored[name])]));
  return { ...view, credentials_set, created_at: row.created_at, updated_at: row.updated_at };
}

const isSet = (value: unknown): boolean => value !== undefined && value !== null && value !== '';

/** The stored credentials, decrypted; null when none are stored or they cannot be decrypted. */
function storedCredentials(row: TelephonyConfigurationRow, cipher: CredentialsCipher): Record<string, unknown> | null {
  if (row.credentials_encrypted === null) return null;
  try {
    return cipher.decrypt(row.org_id, row.credentials_encrypted);
  } catch {
    return null;
  }
}

/** Who changes a configuration, and whose it must be. */
export interface ConfigurationChangeOptions {
  /** Only a configuration of this organization is found (the API); the CLI on the database names any. */
  orgId?: number;
  /** Who acts, for the audit log (the CLI unless told). */
  actor?: AuditActor;
  /** For the audit log's view of the configuration (which credentials the provider declares). */
  cipher?: CredentialsCipher;
  registry?: ProviderRegistry;
}

/**
 * A change of one configuration, in one transaction: the row read (locked on PostgreSQL) and
 * checked to be the organization's, `change` applied, and, when it changed something, the audit
 * entry with the configuration before and after. `change` answers the row as it now is, or
 * undefined when it changed nothing. `note` adds members to the entry's `after` that the view
 * cannot show (which credentials an update replaced).
 */
async function changeConfiguration(
  store: Store,
  id: number,
  now: number,
  action: string,
  options: ConfigurationChangeOptions,
  change: (trx: StoreTransaction, row: TelephonyConfigurationRow) => Promise<TelephonyConfigurationRow | undefined>,
  note: () => Record<string, unknown> = () => ({}),
): Promise<TelephonyConfigurationRow> {
  return plainTransaction(store, async (trx) => {
    const row = await selectConfiguration(trx, id);
    if (!row || (options.orgId !== undefined && row.org_id !== options.orgId)) throw new DialtoneError('telephony_configuration_not_found', `No telephony configuration ${id}.`);
    const changed = await change(trx, row);
    if (!changed) return row;
    const show = (r: TelephonyConfigurationRow) => (options.cipher ? managedView(r, options.cipher, options.registry) : viewConfiguration(r));
    await recordAuditEvent(trx, {
      orgId: row.org_id,
      actor: options.actor ?? CLI_ACTOR,
      action,
      target: { type: 'telephony_configuration', id },
      before: show(row),
      after: { ...show(changed), ...note() },
      at: now,
    });
    return changed;
  });
}

/**
 * Makes a configuration its organization's default (and the previous default an ordinary one),
 * recording `telephony_configuration.default_set`. Only an active configuration can be the default
 * (runs without a telephony_configuration_id dial it): a disabled one is refused with
 * `telephony_configuration_disabled`. Making the default the default again changes nothing.
 */
export async function setDefaultTelephonyConfiguration(store: Store, id: number, now: number, options: ConfigurationChangeOptions = {}): Promise<TelephonyConfigurationView> {
  const row = await changeConfiguration(store, id, now, 'telephony_configuration.default_set', options, async (trx, current) => {
    if (current.status !== 'active') {
      throw new DialtoneError('telephony_configuration_disabled', `Telephony configuration ${id} is disabled: enable it before making it the default.`);
    }
    if (current.is_default === 1) return undefined;
    return setDefaultConfiguration(trx, id, now);
  });
  return viewConfiguration(row);
}

/**
 * Disables a configuration, recording `telephony_configuration.disabled`: it is no longer dialed
 * for new requests (selectTelephonyConfiguration takes only active ones) and stops being the
 * default, so requests without a telephony_configuration_id are refused (telephony_not_configured)
 * until another is made default. Disabling a disabled one changes nothing.
 */
export async function disableTelephonyConfiguration(store: Store, id: number, now: number, options: ConfigurationChangeOptions = {}): Promise<TelephonyConfigurationView> {
  const row = await changeConfiguration(store, id, now, 'telephony_configuration.disabled', options, (trx, current) =>
    current.status === 'inactive' ? Promise.resolve(undefined) : setConfigurationDisabled(trx, id, now),
  );
  return viewConfiguration(row);
}

/**
 * Enables a disabled configuration, recording `telephony_configuration.enabled`: new requests may
 * name it again. It does not become the default (set that separately). Enabling an active one
 * changes nothing.
 */
export async function enableTelephonyConfiguration(store: Store, id: number, now: number, options: ConfigurationChangeOptions = {}): Promise<TelephonyConfigurationView> {
  const row = await changeConfiguration(store, id, now, 'telephony_configuration.enabled', options, (trx, current) =>
    current.status === 'active' ? Promise.resolve(undefined) : setConfigurationEnabled(trx, id, now),
  );
  return viewConfiguration(row);
}

/**
 * A partial change of a configuration. Absent members stay as they are. `settings` and
 * `credentials` are merged into the stored ones member by member (a member set to null is
 * removed); `credentials: null` removes every credential. The provider and the organization never
 * change.
 */
export interface TelephonyConfigurationUpdate {
  name?: string;
  callerIds?: string[];
  callsPerSecond?: number;
  maxConcurrentCalls?: number;
  settings?: Record<string, unknown>;
  credentials?: Record<string, unknown> | null;
}

function merged(stored: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const out = { ...stored };
  for (const [name, value] of Object.entries(patch)) {
    if (value === null) delete out[name];
    else out[name] = value;
  }
  return out;
}

/**
 * Updates a configuration, recording `telephony_configuration.updated` when anything changed.
 * The result is checked as a creation is (caller IDs, pacing, the provider's schema over the merged
 * settings and credentials), every problem listed with its JSON Pointer into the update, and
 * nothing is written when there is one. Credentials are re-encrypted only when they change, and the
 * audit entry records only whether each is set.
 */
export async function updateTelephonyConfiguration(
  store: Store,
  cipher: CredentialsCipher,
  id: number,
  update: TelephonyConfigurationUpdate,
  now: number,
  options: ConfigurationChangeOptions = {},
): Promise<TelephonyConfigurationView> {
  const registry = options.registry ?? builtInProviders;
  // Caller IDs are normalized before the transaction (their metadata loads once, outside any lock).
  const callerIds = update.callerIds === undefined ? undefined : await normalizeCallerIds(update.callerIds);
  // Which credentials the update replaced, for the audit entry: credentials_set alone cannot tell a
  // rotated token from an untouched one. A map of booleans, which the audit log keeps (whether, never what).
  let credentialsChanged: Record<string, boolean> = {};
  const row = await changeConfiguration(store, id, now, 'telephony_configuration.updated', { ...options, cipher, registry }, async (trx, current) => {
    const errors: FieldError[] = [...(callerIds?.errors ?? []), ...fieldProblems(update)];
    const cps = update.callsPerSecond;
    const maxConcurrent = update.maxConcurrentCalls;
    const storedSettings = decodeJson<Record<string, unknown>>(current.settings) ?? {};
    const settings = update.settings === undefined ? storedSettings : merged(storedSettings, update.settings);
    let credentials: Record<string, unknown> | null = null;
    // Undecryptable stored credentials (DIALTONE_SECRET_KEY changed) read as none: a merge cannot
    // keep what cannot be read, so such an update must carry every credential, which the provider's
    // schema then checks.
    const storedCredentialsNow = storedCredentials(current, cipher);
    if (update.credentials !== undefined && update.credentials !== null) {
      credentials = merged(storedCredentialsNow ?? {}, update.credentials);
    } else if (update.credentials === undefined) {
      credentials = storedCredentialsNow;
    }
    // The provider's schema over the configuration as it would be. Credentials left untouched and
    // undecryptable are not checked here: readiness reports them.
    const untouchedUnreadable = update.credentials === undefined && current.credentials_encrypted !== null && credentials === null;
    const decoded = routeInputProblems(current.provider, { settings, credentials: Object.keys(credentials ?? {}).length > 0 ? credentials : null }, registry);
    errors.push(...decoded.filter((problem) => !(untouchedUnreadable && problem.pointer.startsWith('/credentials'))));
    if (errors.length > 0) throw validationFailed(errors, 'The telephony configuration update is not valid.');

    const changes: ConfigurationChanges = {};
    if (update.name !== undefined && update.name !== current.name) changes.name = update.name;
    if (callerIds !== undefined && JSON.stringify(callerIds.values) !== JSON.stringify(decodeJson<string[]>(current.caller_ids))) changes.caller_ids = callerIds.values;
    if (cps !== undefined && cps !== current.calls_per_second) changes.calls_per_second = cps;
    if (maxConcurrent !== undefined && maxConcurrent !== current.max_concurrent_calls) changes.max_concurrent_calls = maxConcurrent;
    if (update.settings !== undefined && JSON.stringify(settings) !== JSON.stringify(storedSettings)) changes.settings = settings;
    if (update.credentials === null) {
      if (current.credentials_encrypted !== null) changes.credentials_encrypted = null;
    } else if (update.credentials !== undefined && JSON.stringify(credentials) !== JSON.stringify(storedCredentialsNow)) {
      changes.credentials_encrypted = Object.keys(credentials ?? {}).length > 0 ? cipher.encrypt(current.org_id, credentials ?? {}) : null;
    }
    const before = storedCredentialsNow ?? {};
    const after = update.credentials === undefined ? before : (credentials ?? {});
    credentialsChanged = Object.fromEntries(
      [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((name) => JSON.stringify(before[name]) !== JSON.stringify(after[name])).map((name) => [name, true]),
    );
    if (Object.keys(changes).length === 0) return undefined;
    return updateConfiguration(trx, id, changes, now);
  }, () => ({ credentials_changed: credentialsChanged }));
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
