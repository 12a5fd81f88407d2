// An organization's settings as one thing, read and changed together (the management API): its own
// rate limits and queue cap, the per-number frequency cap, calling hours and retention window. The
// same rules as `dialtone org set-limits`, `set-calling-hours` and `set-retention`, every problem
// listed with its JSON Pointer and nothing changed when there is one; a change is recorded as
// `organization.settings_updated` with the settings before and after, in its own transaction.
// Requests see a change within LOOKUP_CACHE_TTL_MS on every node (limits, the cap and calling
// hours travel with the API key's lookup), the maintenance pass on its next run (retention).
import { CLI_ACTOR, recordAuditEvent, type AuditActor } from '../audit/audit-log.js';
import { DialtoneError, validationFailed, type FieldError } from '../errors.js';
import { parseCallingHours, type CallingHours } from '../policy/calling-hours.js';
import { plainTransaction, type Store } from '../store/engine/store.js';
import {
  selectOrganization,
  setOrganizationCallingHoursColumn,
  setOrganizationLimitColumns,
  setOrganizationRetentionDaysColumn,
  type OrganizationLimitColumns,
} from '../store/statements/organization-statements.js';
import { decodeCallingHours, MAX_RETENTION_DAYS } from './organizations.js';

/** The largest own rate limit (requests per second), as RATE_LIMIT_*_PER_SECOND allow. */
export const MAX_RATE_PER_SECOND = 1_000_000;
/** The largest own queue cap, as MAX_QUEUED_RUNS_PER_ORG allows. */
export const MAX_QUEUED_RUNS = 10_000_000;
/** The per-number cap's most calls within its window. */
export const MAX_NUMBER_CALLS = 999_999_999;
/** The per-number cap's longest window, in seconds: a year (366 days). */
export const MAX_NUMBER_WINDOW_SECONDS = 366 * 24 * 3600;

/** The per-number frequency cap: at most `max_calls` runs to one number within `window_seconds`. */
export interface NumberCapSetting {
  max_calls: number;
  window_seconds: number;
}

/**
 * An organization's settings. A null limit follows the service's configuration; `number_cap` and
 * `calling_hours` null are off; `retention_days` null follows RETENTION_DAYS and 0 keeps ended runs
 * forever.
 */
export interface OrganizationSettings {
  id: number;
  name: string;
  rate_limit_per_second: number | null;
  key_rate_limit_per_second: number | null;
  max_queued_runs: number | null;
  number_cap: NumberCapSetting | null;
  calling_hours: CallingHours | null;
  retention_days: number | null;
}

/** A change of the settings: absent members stay as they are; null returns one to its default (off for the cap and calling hours). */
export interface OrganizationSettingsChange {
  rate_limit_per_second?: number | null;
  key_rate_limit_per_second?: number | null;
  max_queued_runs?: number | null;
  number_cap?: NumberCapSetting | null;
  /** Validated here (policy/calling-hours.ts), so it arrives as the caller sent it. */
  calling_hours?: unknown;
  retention_days?: number | null;
}

type Row = NonNullable<Awaited<ReturnType<typeof selectOrganization>>>;

function settingsOf(row: Row): OrganizationSettings {
  return {
    id: row.id,
    name: row.name,
    rate_limit_per_second: row.rate_limit_per_second,
    key_rate_limit_per_second: row.key_rate_limit_per_second,
    max_queued_runs: row.max_queued_runs,
    number_cap: row.number_max_calls !== null && row.number_window_seconds !== null ? { max_calls: row.number_max_calls, window_seconds: row.number_window_seconds } : null,
    calling_hours: decodeCallingHours(row.calling_hours),
    retention_days: row.retention_days,
  };
}

/** An organization's settings, or undefined when there is none. */
export async function organizationSettings(store: Store, id: number): Promise<OrganizationSettings | undefined> {
  const row = await selectOrganization(store, id);
  return row ? settingsOf(row) : undefined;
}

/** JSON with every object's members in name order: PostgreSQL's JSONB gives calling hours back in an order of its own. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_name, member: unknown) =>
    member !== null && typeof member === 'object' && !Array.isArray(member) ? Object.fromEntries(Object.entries(member).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : member,
  );
}

const wholeIn = (value: unknown, min: number, max: number): boolean => typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max;

/** Every problem of a change, with its JSON Pointer, and the calling hours parsed when they are set. */
function check(change: OrganizationSettingsChange): { errors: FieldError[]; callingHours: CallingHours | null | undefined } {
  const errors: FieldError[] = [];
  const limit = (name: 'rate_limit_per_second' | 'key_rate_limit_per_second' | 'max_queued_runs', min: number, max: number) => {
    const value = change[name];
    if (value !== undefined && value !== null && !wholeIn(value, min, max)) errors.push({ pointer: `/${name}`, detail: `A whole number from ${min} to ${max}, or null for the service's default.` });
  };
  limit('rate_limit_per_second', 0, MAX_RATE_PER_SECOND);
  limit('key_rate_limit_per_second', 0, MAX_RATE_PER_SECOND);
  limit('max_queued_runs', 1, MAX_QUEUED_RUNS);
  const cap = change.number_cap;
  if (cap !== undefined && cap !== null) {
    if (!wholeIn(cap.max_calls, 1, MAX_NUMBER_CALLS)) errors.push({ pointer: '/number_cap/max_calls', detail: `A whole number from 1 to ${MAX_NUMBER_CALLS}.` });
    if (!wholeIn(cap.window_seconds, 1, MAX_NUMBER_WINDOW_SECONDS)) errors.push({ pointer: '/number_cap/window_seconds', detail: `Whole seconds from 1 to ${MAX_NUMBER_WINDOW_SECONDS} (a year).` });
  }
  const retention = change.retention_days;
  if (retention !== undefined && retention !== null && !wholeIn(retention, 0, MAX_RETENTION_DAYS)) {
    errors.push({ pointer: '/retention_days', detail: `Whole days from 1 to ${MAX_RETENTION_DAYS}, 0 to keep ended runs forever, or null for RETENTION_DAYS.` });
  }
  let callingHours: CallingHours | null | undefined;
  if (change.calling_hours === null) callingHours = null;
  else if (change.calling_hours !== undefined) {
    const parsed = parseCallingHours(change.calling_hours);
    if (parsed.ok) callingHours = parsed.hours;
    else errors.push(...parsed.problems.map((problem) => ({ pointer: `/calling_hours${problem.pointer}`, detail: problem.detail })));
  }
  return { errors, callingHours };
}

export interface SettingsChangeOptions {
  /** Who acts, for the audit log (the CLI unless told). */
  actor?: AuditActor;
}

/**
 * Changes an organization's settings in one transaction and records
 * `organization.settings_updated` with the settings before and after, when anything changed.
 * Refuses a change with any problem (422 validation_failed, every problem listed) and changes
 * nothing. Answers the settings as they now are.
 */
export async function updateOrganizationSettings(store: Store, id: number, change: OrganizationSettingsChange, now: number, options: SettingsChangeOptions = {}): Promise<OrganizationSettings> {
  const { errors, callingHours } = check(change);
  if (errors.length > 0) throw validationFailed(errors, 'The organization settings are not valid.');
  return plainTransaction(store, async (trx) => {
    const row = await selectOrganization(trx, id);
    if (!row) throw new DialtoneError('not_found', `No organization ${id}.`);
    const before = settingsOf(row);
    const limits: OrganizationLimitColumns = {};
    if (change.rate_limit_per_second !== undefined) limits.rate_limit_per_second = change.rate_limit_per_second;
    if (change.key_rate_limit_per_second !== undefined) limits.key_rate_limit_per_second = change.key_rate_limit_per_second;
    if (change.max_queued_runs !== undefined) limits.max_queued_runs = change.max_queued_runs;
    if (change.number_cap !== undefined) {
      limits.number_max_calls = change.number_cap?.max_calls ?? null;
      limits.number_window_seconds = change.number_cap?.window_seconds ?? null;
    }
    const after: OrganizationSettings = {
      ...before,
      ...(change.rate_limit_per_second !== undefined ? { rate_limit_per_second: change.rate_limit_per_second } : {}),
      ...(change.key_rate_limit_per_second !== undefined ? { key_rate_limit_per_second: change.key_rate_limit_per_second } : {}),
      ...(change.max_queued_runs !== undefined ? { max_queued_runs: change.max_queued_runs } : {}),
      ...(change.number_cap !== undefined ? { number_cap: change.number_cap === null ? null : { max_calls: change.number_cap.max_calls, window_seconds: change.number_cap.window_seconds } } : {}),
      ...(callingHours !== undefined ? { calling_hours: callingHours } : {}),
      ...(change.retention_days !== undefined ? { retention_days: change.retention_days } : {}),
    };
    if (canonical(after) === canonical(before)) return before;
    if (Object.keys(limits).length > 0) await setOrganizationLimitColumns(trx, id, limits);
    if (callingHours !== undefined) await setOrganizationCallingHoursColumn(trx, id, callingHours === null ? null : JSON.stringify(callingHours));
    if (change.retention_days !== undefined) await setOrganizationRetentionDaysColumn(trx, id, change.retention_days);
    await recordAuditEvent(trx, { orgId: id, actor: options.actor ?? CLI_ACTOR, action: 'organization.settings_updated', target: { type: 'organization', id }, before, after, at: now });
    return after;
  });
}
