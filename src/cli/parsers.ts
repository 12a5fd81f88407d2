// Parsers of argument and option values, shared by the command groups. Commander calls them while
// it parses, before any action runs, so they stay synchronous and light (no domain module).
import { InvalidArgumentError } from 'commander';
import { CliError } from './cli-error.js';
import { parseScopeList, SCOPES, type Scope } from '../auth/scopes.js';

/** `--scopes calls,campaigns`: scope names, comma-separated (auth/scopes.ts, which loads nothing). */
export function scopeList(text: string): Scope[] {
  const parsed = parseScopeList(text);
  if ('unknown' in parsed) throw new InvalidArgumentError(`not a scope: ${parsed.unknown.join(', ')} (the scopes: ${SCOPES.join(', ')})`);
  return parsed.scopes;
}

export function positiveInt(text: string): number {
  if (!/^[1-9][0-9]{0,14}$/.test(text)) throw new InvalidArgumentError('expected a positive whole number');
  return Number(text);
}

export function nonNegativeInt(text: string): number {
  if (!/^[0-9]{1,15}$/.test(text)) throw new InvalidArgumentError('expected a whole number from 0');
  return Number(text);
}

export function positiveNumber(text: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) throw new InvalidArgumentError('expected a number above 0');
  return value;
}

/** A time (RFC 3339, e.g. 2026-12-01T09:00:00Z), as the ISO 8601 text in UTC the API takes. */
export function rfc3339Time(text: string): string {
  if (Number.isNaN(Date.parse(text))) throw new InvalidArgumentError('expected an RFC 3339 time, e.g. 2026-12-01T09:00:00Z');
  return new Date(Date.parse(text)).toISOString();
}

export type Limit = number | 'default';

/** A limit: a whole number from `min`, or `default` for the service-wide value. */
export function limitValue(min: number) {
  return (text: string): Limit => {
    if (text === 'default') return 'default';
    if (!/^[0-9]{1,15}$/.test(text) || Number(text) < min) throw new InvalidArgumentError(`expected a whole number from ${min}, or "default"`);
    return Number(text);
  };
}

/** For a repeatable option: each use adds its value. */
export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** A positional value parsed inside an action (where it may be either of two arguments), refused as the CLI's own error. */
export function parsedArgument<T>(parse: (text: string) => T, text: string, name: string): T {
  try {
    return parse(text);
  } catch (error) {
    if (error instanceof InvalidArgumentError) throw new CliError('invalid_input', `${name} "${text}": ${error.message}`);
    throw error;
  }
}
