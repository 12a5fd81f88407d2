// The values `dialtone org …` takes and how it prints an organization's settings, in both modes:
// direct database mode reads the organizations table's columns, remote mode the API's
// OrganizationSettings (number_cap as one object, and the service's defaults beside it), printed
// as the same members. Light imports only (src/cli/README.md).
import { InvalidArgumentError } from 'commander';
import ms from 'ms';
import type { components, operations } from '@dialtone/client';
import { CliError } from '../cli-error.js';
import type { Limit } from '../parsers.js';

/** GET and PATCH /api/v1/public/organization's answer. */
export type ApiSettings = components['schemas']['OrganizationSettings'];
/** PATCH /api/v1/public/organization's body: the settings it names change. */
export type ApiSettingsChange = operations['updateOrganizationSettings']['requestBody']['content']['application/json'];

/** "default" is stored as null (commander turns a parser's null into an empty string, hence the word). */
export const storedLimit = (limit: Limit): number | null => (limit === 'default' ? null : limit);

/** The per-number cap's window: a duration like 30m, 24h or 7d, in whole seconds, at most a year; or "off". */
export function windowValue(text: string): number | 'off' {
  if (text === 'off') return 'off';
  const duration = /^[0-9]+(\.[0-9]+)?\s*[a-z]+$/i.test(text) ? ms(text as ms.StringValue) : Number.NaN;
  if (!Number.isFinite(duration) || duration < 1000 || duration % 1000 !== 0 || duration > 366 * 24 * 3600 * 1000) {
    throw new InvalidArgumentError('expected a duration of whole seconds up to a year, like 90s, 30m, 24h or 7d, or "off"');
  }
  return duration / 1000;
}

export function maxCallsValue(text: string): number | 'off' {
  if (text === 'off') return 'off';
  if (!/^[1-9][0-9]{0,8}$/.test(text)) throw new InvalidArgumentError('expected a whole number from 1, or "off"');
  return Number(text);
}

/** A retention window: whole days from 1 to 36500, "off" (keep forever) or "default" (RETENTION_DAYS). */
export function retentionValue(text: string): number | 'off' | 'default' {
  if (text === 'off' || text === 'default') return text;
  if (!/^[1-9][0-9]{0,4}$/.test(text) || Number(text) > 36_500) throw new InvalidArgumentError('expected whole days from 1 to 36500, "off" (keep forever) or "default" (RETENTION_DAYS)');
  return Number(text);
}

/** The stored retention_days of a `set-retention` value: 0 keeps forever, null follows RETENTION_DAYS. */
export const storedRetention = (days: number | 'off' | 'default'): number | null => (days === 'off' ? 0 : days === 'default' ? null : days);

/** How an organization's own retention column reads: its days, off (kept forever), or the configured default. */
export function retentionText(days: number | null, configured: number): string {
  if (days === null) return configured === 0 ? 'default (RETENTION_DAYS=0: kept forever)' : `default (RETENTION_DAYS=${configured} days)`;
  return days === 0 ? 'off (kept forever)' : `${days} days`;
}

export interface NumberCapColumns {
  number_max_calls: number | null;
  number_window_seconds: number | null;
}

/**
 * The per-number cap after a change: both settings or neither. "off" for either turns it off; a
 * new value keeps the other stored one. Refuses a cap left half set. Undefined: no change.
 */
export function numberCapChange(stored: NumberCapColumns, maxCalls: number | 'off' | undefined, window: number | 'off' | undefined): NumberCapColumns | undefined {
  if (maxCalls === undefined && window === undefined) return undefined;
  if (maxCalls === 'off' || window === 'off') return { number_max_calls: null, number_window_seconds: null };
  const next = { number_max_calls: maxCalls ?? stored.number_max_calls, number_window_seconds: window ?? stored.number_window_seconds };
  if (next.number_max_calls === null || next.number_window_seconds === null) {
    throw new CliError('invalid_input', 'The per-number cap needs both --number-max-calls and --number-window (or "off" to turn it off).');
  }
  return next;
}

/** The API's number_cap as the two columns direct database mode prints. */
export const capColumns = (settings: Pick<ApiSettings, 'number_cap'>): NumberCapColumns => ({
  number_max_calls: settings.number_cap?.max_calls ?? null,
  number_window_seconds: settings.number_cap?.window_seconds ?? null,
});

/** `org set-limits`'s answer in remote mode, the members direct database mode prints. */
export const limitsOf = (settings: ApiSettings) => ({
  id: settings.id,
  name: settings.name,
  rate_limit_per_second: settings.rate_limit_per_second,
  key_rate_limit_per_second: settings.key_rate_limit_per_second,
  max_queued_runs: settings.max_queued_runs,
  ...capColumns(settings),
});

/** `org show`'s record as text: calling hours and retention in words. */
export const showText = <T extends { calling_hours: unknown; retention_days: number | null }>(row: T, configuredRetention: number) => ({
  ...row,
  calling_hours: row.calling_hours === null ? 'off' : JSON.stringify(row.calling_hours),
  retention_days: retentionText(row.retention_days, configuredRetention),
});

/** `org set-calling-hours`'s answer text. */
export const callingHoursText = (id: number, hours: unknown): string =>
  hours ? `Calling hours of organization ${id} set: ${JSON.stringify(hours)}` : `Calling hours of organization ${id} are off.`;

/**
 * The organization an `org` command acts on. Direct database mode names it (`usage` says how);
 * remote mode acts on the API key's own and takes no id, so one given there is refused rather
 * than silently ignored (it could name another organization).
 */
export function directOrgId(id: number | undefined, usage: string): number {
  if (id === undefined) throw new CliError('invalid_input', `Direct database mode names the organization: dialtone ${usage}.`);
  return id;
}

export function refuseRemoteOrgId(id: unknown, usage: string): void {
  if (id !== undefined) throw new CliError('invalid_input', `In remote mode the API key's organization is used: dialtone ${usage}, without the organization id.`);
}
