// How the CLI reports a failure: one JSON object on stderr with --json
// (`{"error":{"code","message","errors"?}}`), else a readable line (plus one line per problem),
// never a stack trace, and a non-zero exit either way. A script reads the code; a person the line.
// A refusal of the service's API (remote mode) is its problem: status, code, title, detail and
// errors[] with their JSON Pointers.
import { CommanderError } from 'commander';
import { DialtoneApiError } from '@dialtone/client';
import { ConfigError } from '../config.js';
import { DialtoneError, type FieldError } from '../errors.js';
import { SecretKeyError } from '../secret-key.js';
import { BackupRefusedError, BackupUnsupportedError, DatabaseNewerError } from '../store/engine/operator-errors.js';
import { SecretKeyMissingError } from '../shared/credentials-cipher.js';
import { CliError } from './cli-error.js';

export interface CliFailure {
  code: string;
  message: string;
  errors?: FieldError[];
  /** The HTTP status, for a refusal of the service's API. */
  status?: number;
  /** The service's X-Request-Id, to find the refusal in its logs. */
  request_id?: string;
}

/** "Title: detail" of an API problem, or whichever it has; a non-Dialtone answer (an HTML 404) says so. */
function problemMessage(error: DialtoneApiError): string {
  const { title, detail } = error.problem;
  const text = title && detail && !detail.startsWith(title) ? `${title}: ${detail}` : (detail ?? title ?? error.message);
  // errorFromResponse's code for an answer that was no problem document: likely not a Dialtone service.
  return error.code.startsWith('http_') ? `${text} (the answer was not Dialtone's: is --url the service's base URL?)` : text;
}

export function failureOf(error: unknown): CliFailure {
  if (error instanceof DialtoneApiError) {
    return {
      code: error.code,
      message: problemMessage(error),
      status: error.status,
      ...(error.errors.length > 0 ? { errors: [...error.errors] } : {}),
      ...(error.requestId !== undefined ? { request_id: error.requestId } : {}),
    };
  }
  if (error instanceof DialtoneError) return { code: error.code, message: error.message, ...(error.errors ? { errors: error.errors } : {}) };
  if (error instanceof CliError) return { code: error.code, message: error.message };
  if (error instanceof ConfigError) return { code: 'invalid_configuration', message: error.message };
  if (error instanceof SecretKeyMissingError) return { code: 'secret_key_missing', message: error.message };
  if (error instanceof SecretKeyError) return { code: error.code, message: error.message };
  if (error instanceof DatabaseNewerError || error instanceof BackupUnsupportedError || error instanceof BackupRefusedError) return { code: error.code, message: error.message };
  if (error instanceof CommanderError) {
    // "(outputHelp)" is commander's word for "no command given": say so.
    const message = error.code === 'commander.help' ? 'A command is required: see dialtone --help.' : error.message.replace(/^error: /, '');
    return { code: 'usage_error', message };
  }
  return { code: 'internal_error', message: error instanceof Error ? error.message : String(error) };
}

/** Writes the failure to stderr in the chosen form; returns the exit code. */
export function reportFailure(error: unknown, json: boolean): number {
  const exitCode = error instanceof CommanderError ? error.exitCode || 1 : 1;
  // In text mode commander has already printed its own usage error (and the help after it).
  if (error instanceof CommanderError && !json) return exitCode;
  const failure = failureOf(error);
  if (json) {
    process.stderr.write(`${JSON.stringify({ error: failure })}\n`);
    return exitCode;
  }
  const code = error instanceof DialtoneApiError ? ` (${failure.status} ${failure.code})` : error instanceof DialtoneError ? ` (${failure.code})` : '';
  process.stderr.write(`Error${code}: ${failure.message}\n`);
  for (const e of failure.errors ?? []) process.stderr.write(`  ${e.pointer || '/'}: ${e.detail}\n`);
  return exitCode;
}
