// How a command runs: `action` opens the store (migrating it), runs the command, prints its result
// (text, or JSON with --json) and closes the store. The service's dependencies and the domain
// modules are imported when a command runs, not when the CLI starts, so `dialtone --help` and a
// usage error load none of them, and each command loads only the modules its group imports.
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { Deps, DepsOverrides } from '../deps.js';
import { CliError } from './cli-error.js';
import type { Printable } from './output.js';

export interface Output {
  json: unknown;
  text: string;
  /** Print the JSON on one line (after NDJSON lines already printed: `campaign status --watch`). */
  compact?: boolean;
}

/** True when this invocation prints JSON (`--json` is a global option). */
export const wantsJson = (command: Command): boolean => Boolean(command.optsWithGlobals().json);

/** Prints a command's result: its text, or its JSON with --json. */
export function printOutput(out: Output, json: boolean): void {
  process.stdout.write(`${json ? JSON.stringify(out.json, null, out.compact ? undefined : 2) : out.text}\n`);
}

/**
 * Opens the store (migrating it), runs one command, prints its result, closes the store.
 * `overrides` go to buildDeps (the telephony commands pass a test's provider registry).
 */
export function action<A extends unknown[]>(run: (deps: Deps, ...args: A) => Promise<Output>, overrides: DepsOverrides = {}) {
  return async (...args: A) => {
    const json = wantsJson(args[args.length - 1] as Command);
    const [{ loadConfig }, { buildDeps }, { migrateToLatest }, { establishSecretKey }] = await Promise.all([
      import('../config.js'),
      import('../deps.js'),
      import('../store/schema/migrate.js'),
      import('../secret-key.js'),
    ]);
    const deps = buildDeps(loadConfig(), overrides);
    try {
      await migrateToLatest(deps.store);
      // As the service does at start-up: a key generated here is the one it reads later.
      await establishSecretKey(deps);
      printOutput(await run(deps, ...args), json);
    } finally {
      await deps.store.close();
    }
  };
}

export function readJsonFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new CliError('invalid_input', `Cannot read ${path}: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new CliError('invalid_input', `${path} is not valid JSON: ${(error as Error).message}`);
  }
}

/** A JSON file that must hold an object (a definition, settings, credentials), as the API takes it. */
export function readJsonObjectFile(path: string): Record<string, unknown> {
  const value = readJsonFile(path);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new CliError('invalid_input', `${path} does not hold a JSON object.`);
  return value as Record<string, unknown>;
}

export async function requireOrg(deps: Deps, orgId: number): Promise<void> {
  const { organizationExists } = await import('../orgs/organizations.js');
  if (!(await organizationExists(deps.store, orgId))) throw new CliError('not_found', `No organization ${orgId}.`);
}

/** The row with its millisecond timestamps among `keys` as ISO 8601 text. */
export const withTimes = <T extends Record<string, unknown>>(row: T, keys: string[]): Printable => {
  const out: Printable = { ...row };
  for (const key of keys) if (typeof out[key] === 'number') out[key] = new Date(out[key] as number).toISOString();
  return out;
};
