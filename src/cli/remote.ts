// Remote mode: with `--url <base>` (or DIALTONE_URL) and an API key, a command asks a running
// service's HTTP API through @dialtone/client instead of opening the database. The client is
// imported when a remote command runs, so `dialtone --help` and direct commands never load it.
// The key comes from DIALTONE_API_KEY or `--api-key-file`; `--api-key` works too, with a warning,
// since a key on the command line lands in shell history and in the process list. It is never
// printed: not in output, not in an error.
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { Dialtone } from '@dialtone/client';
import type { Deps, DepsOverrides } from '../deps.js';
import { action, printOutput, wantsJson, type Output } from './action.js';
import { CliError } from './cli-error.js';

export interface RemoteTarget {
  url: string;
  apiKey: string;
}

interface RemoteOptions {
  url?: string;
  apiKey?: string;
  apiKeyFile?: string;
}

/** The answer in remote mode of a command that has no API form, with `why` it has none. */
export const directOnlyMessage = (name: string, why: string): string =>
  `dialtone ${name} needs direct database mode: ${why}. Run it where the service's DATABASE_URL (and DIALTONE_SECRET_KEY) are set, without --url or DIALTONE_URL.`;

function commandName(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

function readKeyFile(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (error) {
    throw new CliError('invalid_input', `Cannot read the API key file ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}

/** Where and with what key this invocation talks to a service; undefined in direct database mode. */
export function remoteTarget(command: Command, env: NodeJS.ProcessEnv = process.env): RemoteTarget | undefined {
  // The program's own options, not optsWithGlobals: a command's option of the same name
  // (`webhook create --url`) is that command's, never the service's.
  let program = command;
  while (program.parent) program = program.parent;
  const opts = program.opts<RemoteOptions>();
  const url = opts.url ?? (env.DIALTONE_URL || undefined);
  if (url === undefined) {
    if (opts.apiKey !== undefined || opts.apiKeyFile !== undefined) throw new CliError('invalid_input', 'An API key is for remote mode: give the service\'s --url (or DIALTONE_URL) too.');
    return undefined;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError('invalid_input', `--url (or DIALTONE_URL) is not a URL: ${url}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new CliError('invalid_input', `--url (or DIALTONE_URL) must be an http or https URL, not ${parsed.protocol}`);
  if (opts.apiKey !== undefined) {
    process.stderr.write('Warning: --api-key puts the key in your shell history and in the process list; prefer DIALTONE_API_KEY or --api-key-file <file>.\n');
  }
  const apiKey = opts.apiKey ?? (opts.apiKeyFile !== undefined ? readKeyFile(opts.apiKeyFile) : env.DIALTONE_API_KEY);
  if (apiKey === undefined || apiKey === '') throw new CliError('invalid_input', 'Remote mode needs an API key: set DIALTONE_API_KEY, or give --api-key-file <file>.');
  // Checked here so that no later error (fetch's own, about a header value) can quote it.
  if (!/^[\x21-\x7e]+$/.test(apiKey)) throw new CliError('invalid_input', 'The API key holds characters no Dialtone key has (spaces, line breaks or others): check DIALTONE_API_KEY or the key file.');
  return { url: parsed.href.replace(/\/+$/, ''), apiKey };
}

/** An error fetch() throws when nothing answered (refused, unknown host, TLS): said with the URL, never the key. */
function unreachable(error: unknown, url: string): CliError | undefined {
  if (!(error instanceof TypeError)) return undefined;
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  if (cause === undefined && error.message !== 'fetch failed') return undefined;
  return new CliError('service_unreachable', `Cannot reach the service at ${url}: ${cause?.code ?? cause?.message ?? error.message}`);
}

/** Runs one command against the service and prints its result as `action` does. */
async function runRemote<A extends unknown[]>(target: RemoteTarget, json: boolean, run: (client: Dialtone, ...args: A) => Promise<Output>, args: A): Promise<void> {
  const { createDialtone } = await import('@dialtone/client');
  // A command is one request a person waits for: one retry of a 429 or 503, not the default three.
  const client = createDialtone({ baseUrl: target.url, apiKey: target.apiKey, retry: { maxRetries: 1 } });
  let out: Output;
  try {
    out = await run(client, ...args);
  } catch (error) {
    throw unreachable(error, target.url) ?? error;
  }
  printOutput(out, json);
}

/** Refuses `--org` in remote mode: the API key decides the organization. */
function refuseOrg(args: unknown[]): void {
  const opts = args[args.length - 2];
  if (typeof opts === 'object' && opts !== null && (opts as { org?: unknown }).org !== undefined) {
    throw new CliError('invalid_input', '--org is for direct database mode: in remote mode the API key\'s organization is used.');
  }
}

/**
 * A command with both modes: `remote` when a service URL is given, else `direct` on the database
 * (as `action` runs it).
 */
export function dual<A extends unknown[]>(direct: (deps: Deps, ...args: A) => Promise<Output>, remote: (client: Dialtone, ...args: A) => Promise<Output>, overrides: DepsOverrides = {}) {
  const local = action(direct, overrides);
  return async (...args: A) => {
    const command = args[args.length - 1] as Command;
    const target = remoteTarget(command);
    if (target === undefined) return local(...args);
    refuseOrg(args);
    return runRemote(target, wantsJson(command), remote, args);
  };
}

/** A command only a service answers (no direct form): `call start`. */
export function remoteOnly<A extends unknown[]>(remote: (client: Dialtone, ...args: A) => Promise<Output>) {
  return async (...args: A) => {
    const command = args[args.length - 1] as Command;
    const target = remoteTarget(command);
    if (target === undefined) throw new CliError('invalid_input', `dialtone ${commandName(command)} asks a running service: give its --url (or DIALTONE_URL) and an API key (DIALTONE_API_KEY).`);
    return runRemote(target, wantsJson(command), remote, args);
  };
}

/**
 * A command with no API form (`org create`, `org list`: an API key belongs to one organization):
 * direct database mode only, said plainly in remote mode with `why`.
 */
export function directOnly<A extends unknown[]>(why: string, direct: (deps: Deps, ...args: A) => Promise<Output>, overrides: DepsOverrides = {}) {
  const local = action(direct, overrides);
  return async (...args: A) => {
    const command = args[args.length - 1] as Command;
    if (remoteTarget(command) !== undefined) throw new CliError('direct_mode_only', directOnlyMessage(commandName(command), why));
    return local(...args);
  };
}

/** `--org` in direct database mode, where nothing else names the organization. */
export function orgOf(opts: { org?: number }): number {
  if (opts.org === undefined) throw new CliError('invalid_input', "--org <id> is required in direct database mode (in remote mode the API key's organization is used).");
  return opts.org;
}

/**
 * The body of an answer of `client.api` (the typed openapi-fetch client, for the operations the
 * client's surface does not wrap: API keys, stats), or its refusal thrown as DialtoneApiError.
 */
export async function answer<T>(pending: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await pending;
  if (response.ok) return data as T;
  const { errorFromResponse } = await import('@dialtone/client');
  throw errorFromResponse(response, error);
}
