// Configuration: one schema, validated once at boot, typed from that schema.
// Every variable is documented in `.env.example`; keep the two in step.
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

const Integer = (min: number, max: number, dflt: number) =>
  Type.Integer({ minimum: min, maximum: max, default: dflt });

export const ConfigSchema = Type.Object({
  NODE_ENV: Type.Union([Type.Literal('development'), Type.Literal('production'), Type.Literal('test')], {
    default: 'development',
  }),
  HOST: Type.String({ default: '127.0.0.1', minLength: 1 }),
  PORT: Integer(0, 65535, 3000),
  /** `sqlite:<path>` (embedded default) or `postgres://…` (several nodes). */
  DATABASE_URL: Type.String({ default: 'sqlite:./data/dialtone.db', pattern: '^(sqlite:|postgres(ql)?://)' }),
  /** Size of the PostgreSQL connection pool of one process. */
  DATABASE_POOL_SIZE: Integer(1, 200, 10),
  /** 32 bytes, base64 or hex: the AES-256-GCM key for provider credentials. Optional until a credential is stored. */
  DIALTONE_SECRET_KEY: Type.Optional(Type.String({ minLength: 1 })),
  /** `auto` creates the demo organization on an empty embedded (SQLite) database only. */
  DIALTONE_FIRST_RUN_DEMO: Type.Union([Type.Literal('auto'), Type.Literal('true'), Type.Literal('false')], {
    default: 'auto',
  }),
  /** Public URL of this service, used in printed examples and provider callbacks. */
  PUBLIC_BASE_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
  /** Largest request body accepted, in bytes (413 above it). */
  BODY_LIMIT_BYTES: Integer(1024, 10 * 1024 * 1024, 64 * 1024),
  /** Largest `initial_context`, in bytes of its JSON serialization. */
  INITIAL_CONTEXT_MAX_BYTES: Integer(2, 1024 * 1024, 16 * 1024),
  /** Deepest nesting of `initial_context` (an object of scalars has depth 1). */
  INITIAL_CONTEXT_MAX_DEPTH: Integer(1, 64, 8),
  /** Server timeouts, in milliseconds: a slow client cannot hold a connection longer than these. */
  REQUEST_TIMEOUT_MS: Integer(1000, 600_000, 30_000),
  KEEP_ALIVE_TIMEOUT_MS: Integer(1000, 600_000, 72_000),
  /** Time allowed for in-flight requests to finish on SIGTERM/SIGINT before the process exits. */
  SHUTDOWN_GRACE_MS: Integer(0, 600_000, 10_000),
  /** An API key's `last_used_at` is written at most once per this interval. */
  API_KEY_LAST_USED_WRITE_INTERVAL_MS: Integer(0, 86_400_000, 60_000),
});

export type Config = Static<typeof ConfigSchema>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Reads the configuration from an environment-like record. Numbers arrive as strings, so they are
 * converted before validation; anything the schema does not accept stops the process at boot with
 * every problem listed, rather than failing later on the first request that needs the value.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const raw: Record<string, unknown> = {};
  for (const key of Object.keys(ConfigSchema.properties)) {
    const value = env[key];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  const withDefaults = Value.Default(ConfigSchema, Value.Convert(ConfigSchema, raw));
  const problems = [...Value.Errors(ConfigSchema, withDefaults)].map(
    (e) => `${e.path.slice(1) || '(root)'}: ${e.message} (got ${JSON.stringify(e.value)})`,
  );
  if (problems.length > 0) throw new ConfigError(problems);
  return withDefaults as Config;
}
