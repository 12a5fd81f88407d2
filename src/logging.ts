// The one logger. Nothing secret and no full phone number may reach it, at any level: known
// secret-bearing fields are redacted (at the top level by pino's `redact`, one level down by this
// module's `log` formatter, see below), errors and requests are serialized by lists of fields known
// to be safe, so the raw bytes Node attaches to parse errors and a request's headers never reach a
// line, and phone numbers inside any logged text are masked, because provider errors quote the
// number they refused ("The 'To' number +1202… is not valid"). API keys are masked wherever they
// show in a logged URL or text, since a caller may put one in a query string (`?api_key=dt_live_…`)
// although the service only reads it from X-API-Key, and the value of any query parameter whose
// name says it holds a secret (`token`, `key`, `api_key`…) is censored whatever it looks like.
import { createRequire } from 'node:module';
import { isatty } from 'node:tty';
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import type Pretty from 'pino-pretty';

/** Fields that carry a secret wherever they appear: at the top of a logged object, or one level down. */
const SECRET_FIELDS = ['apiKey', 'api_key', 'key', 'secret', 'password', 'token', 'auth_token', 'authToken', 'api_key_secret', 'credentials'];
const CENSOR = '[redacted]';

/**
 * What pino's `redact` censors: the secret fields at the top level, and headers logged as such.
 * Paths that start with a wildcard (`*.token`) are not given to it, although it takes them: pino
 * then runs its redactor on every value of every line, and that redactor (@pinojs/redact 0.4.0,
 * its newest) parses each path again on every call, garbage and CPU spent on every line, most of
 * which have nothing to redact. The level below the
 * top is censored by `censorSecretFields`, in the pass over each line's values that masks numbers.
 * That pass does not see a child logger's bindings (pino formats them apart), which are therefore
 * censored at the top level only: the only child loggers are Fastify's, bound to a request id.
 * A request's headers need no path: the `req` serializer below writes none.
 */
const REDACT_PATHS = [...SECRET_FIELDS, 'headers["x-api-key"]', 'headers.authorization', 'headers.cookie', 'headers["x-twilio-signature"]'];

/** Keys whose serializers (below) write only fields known to be safe. */
const SERIALIZED_KEYS = new Set(['req', 'res', 'err']);

/**
 * A logged object with its secret fields censored, as `*.field` paths would, and more: an object
 * with a `toJSON` is censored in what that gives (what would be written). Copied only when it has
 * a secret field, never changed in place, since the caller still holds it.
 */
function censorSecretFields(value: object): unknown {
  const written: unknown = typeof (value as { toJSON?: unknown }).toJSON === 'function' ? (value as { toJSON(): unknown }).toJSON() : value;
  if (written === null || typeof written !== 'object') return written;
  let copy: Record<string, unknown> | undefined;
  for (const field of SECRET_FIELDS) {
    if (!Object.hasOwn(written, field)) continue;
    copy ??= { ...(written as Record<string, unknown>) };
    copy[field] = CENSOR;
  }
  return copy ?? written;
}

/** A value at the top of a log line, made fit to write: numbers and keys in text masked, secret fields one level down censored. */
function loggable(name: string, value: unknown): unknown {
  if (typeof value === 'string') return maskLoggedText(value);
  if (value !== null && typeof value === 'object' && !SERIALIZED_KEYS.has(name)) return censorSecretFields(value);
  return value;
}

/** E.164 numbers (and longer digit runs after a +) in free text, and percent-encoded in URLs (`%2B1202…`). */
const PHONE_NUMBER = /(?:\+|%2[bB])[1-9][0-9]{6,14}/g;

/** `+12025550123` → `+1202555****`: enough to tell calls apart in a log, not enough to dial. */
export function maskPhoneNumber(number: string): string {
  return number.length <= 5 ? '****' : `${number.slice(0, -4)}****`;
}

export function maskPhoneNumbersIn(text: string): string {
  return text.replace(PHONE_NUMBER, maskPhoneNumber);
}

/**
 * Anything shaped like a Dialtone API key (`dt_live_…`, and `dt_test_…` should test keys come):
 * the prefix is kept, so a line still says a key was there, the rest (public id and secret) is not.
 */
const API_KEY = /(dt_(?:live|test)_)[A-Za-z0-9_-]*/g;

export function maskApiKeysIn(text: string): string {
  // The cheap test first: almost no logged text holds a key, and this runs on every string logged.
  return text.includes('dt_') ? text.replace(API_KEY, `$1${CENSOR}`) : text;
}

/** Text fit for a log line: phone numbers and API keys masked. */
export function maskLoggedText(text: string): string {
  return maskApiKeysIn(maskPhoneNumbersIn(text));
}

/**
 * Whether a query parameter's name says its value is a secret: `key`, `api_key`, `apiKey`,
 * `x-api-key`, `token`, `access_token`, `secret`, `client_secret`, `password`, `signature`, `auth`…
 * Matched on the name with case and separators removed, by its ending, so variants need no list.
 */
const SECRET_PARAMETER = /(key|token|secret|password|passwd|pwd|signature|sig|auth|authorization|credentials?|session|sessionid)$/;

function isSecretParameter(name: string): boolean {
  return SECRET_PARAMETER.test(name.toLowerCase().replace(/[^a-z0-9]/g, ''));
}

interface SerializedError {
  type: string;
  message: string;
  stack?: string;
  code?: string | number;
  status?: number;
  statusCode?: number;
  errno?: number;
  syscall?: string;
  cause?: SerializedError;
}

/**
 * Errors are logged by a list of fields known to be safe, never by copying what they carry: Node's
 * HTTP parser attaches the raw request (API key and body) as `rawPacket`, and an HTTP client's
 * error (the twilio SDK's axios) carries its request `config`, with the account's credentials in
 * `auth` and `headers.Authorization` and the callee's number in the form body. Numbers in the
 * message and stack are masked.
 */
function serializeError(error: unknown, depth = 0): SerializedError {
  if (!(error instanceof Error)) return { type: typeof error, message: maskLoggedText(String(error)) };
  const fields = error as Error & Partial<Record<'code' | 'status' | 'statusCode' | 'errno' | 'syscall', unknown>>;
  const serialized: SerializedError = { type: error.constructor.name, message: maskLoggedText(error.message) };
  if (typeof error.stack === 'string') serialized.stack = maskLoggedText(error.stack);
  if (typeof fields.code === 'string' || typeof fields.code === 'number') serialized.code = fields.code;
  if (typeof fields.status === 'number') serialized.status = fields.status;
  if (typeof fields.statusCode === 'number') serialized.statusCode = fields.statusCode;
  if (typeof fields.errno === 'number') serialized.errno = fields.errno;
  if (typeof fields.syscall === 'string') serialized.syscall = fields.syscall;
  if (error.cause !== undefined && depth < 3) serialized.cause = serializeError(error.cause, depth + 1);
  return serialized;
}

/** A number as a person may type it in a path segment: digits with spaces, dots, dashes or brackets, with or without +. */
const TYPED_PHONE_NUMBER = /\+?[0-9][0-9 ().-]{5,}[0-9]/g;

/**
 * A request URL fit for a log: the path decoded and any typed number in it masked (the
 * suppression routes name one in the path, in whatever form the caller wrote it), and the value
 * of a `phone_number` query parameter (the run list's filter) masked whatever its form; an API
 * key anywhere in it, and the value of a query parameter named like a secret, censored.
 */
export function maskUrl(url: string): string {
  const queryAt = url.indexOf('?');
  const rawPath = queryAt === -1 ? url : url.slice(0, queryAt);
  let path: string;
  try {
    path = decodeURIComponent(rawPath);
  } catch {
    path = rawPath;
  }
  path = maskLoggedText(path);
  // Only the suppression routes name a number in the path; elsewhere a long digit run is an id.
  if (path.includes('/suppressions/')) path = path.replace(TYPED_PHONE_NUMBER, maskPhoneNumber);
  if (queryAt === -1) return path;
  const query = new URLSearchParams(url.slice(queryAt + 1));
  for (const [name, value] of [...query]) {
    if (name === 'phone_number') query.set(name, maskPhoneNumber(value));
    else if (isSecretParameter(name)) query.set(name, CENSOR);
  }
  // The censor mark written as it reads, not percent-encoded.
  return `${path}?${maskLoggedText(query.toString()).replaceAll(encodeURIComponent(CENSOR), CENSOR)}`;
}

/** A request as Fastify logs it, with a number in its URL masked. */
function serializeRequest(request: { method?: string; url?: string; host?: string; ip?: string; socket?: { remotePort?: number } }): Record<string, unknown> {
  return {
    method: request.method,
    url: typeof request.url === 'string' ? maskUrl(request.url) : request.url,
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

export interface LoggerSettings {
  level: string;
  /** Pretty, human-readable lines: for a developer watching a terminal, never for log collectors. */
  pretty?: boolean;
}

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: REDACT_PATHS, censor: CENSOR },
    // `res` as Fastify writes it for its request loggers, here for every logger, so that no `res`
    // is written whole.
    serializers: { err: (error: unknown) => serializeError(error), req: serializeRequest, res: (reply: { statusCode?: number }) => ({ statusCode: reply.statusCode }) },
    formatters: {
      // Text fields beside the message are masked like the message: one built from a provider's
      // words may quote a number.
      log: (object) => {
        const safe: Record<string, unknown> = {};
        for (const [name, value] of Object.entries(object)) safe[name] = loggable(name, value);
        return safe;
      },
    },
    hooks: {
      // The message itself (and any printf-style arguments).
      logMethod(args, method) {
        const masked = args.map((arg) => (typeof arg === 'string' ? maskLoggedText(arg) : arg)) as Parameters<typeof method>;
        method.apply(this, masked);
      },
    },
  };
}

export function createLogger(settings: LoggerSettings, destination?: DestinationStream): Logger {
  const options = loggerOptions(settings.level);
  if (destination) return pino(options, destination);
  if (settings.pretty) {
    // Required only here: a node logging JSON lines (every deployed one) never loads the formatter.
    const pretty = createRequire(import.meta.url)('pino-pretty') as typeof Pretty;
    return pino(options, pretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }));
  }
  return pino(options);
}

/** Pretty logs in development when a person is watching the terminal; JSON lines otherwise. */
export function wantsPrettyLogs(nodeEnv: string): boolean {
  return nodeEnv === 'development' && isatty(1);
}
