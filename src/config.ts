// Configuration: one schema, validated once at boot, typed from that schema.
// Every variable is documented in `.env.example`; keep the two in step.
import { Type, type Static } from '@sinclair/typebox';
import { Errors } from '@sinclair/typebox/errors';
import { PROVIDER_CONFIG_KEYS } from './telephony/registry.js';
import { DEFAULT_RETRY_SCHEDULE, parseRetrySchedule } from './webhooks/retry-schedule.js';

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
  /**
   * PostgreSQL: prepare the hot statements once per connection (store/engine/prepared-statements.ts).
   * `false` behind a pooler in transaction mode that does not keep named statements (PgBouncer
   * without `max_prepared_statements`).
   */
  DATABASE_PREPARED_STATEMENTS: Type.Union([Type.Literal('true'), Type.Literal('false')], { default: 'true' }),
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
  SHUTDOWN_GRACE_MS: Integer(0, 600_000, 15_000),
  /** When set, GET /metrics requires `Authorization: Bearer <METRICS_TOKEN>`; unset, it is open to whoever reaches the port. */
  METRICS_TOKEN: Type.Optional(Type.String({ minLength: 16 })),
  /**
   * How long a node reuses what it read about an API key, an agent and its definitions, and a
   * telephony configuration; changes to them take effect on every node within this time. 0 reads on every request.
   */
  LOOKUP_CACHE_TTL_MS: Integer(0, 60_000, 1_000),
  /** An API key's `last_used_at` is written at most once per this interval. */
  API_KEY_LAST_USED_WRITE_INTERVAL_MS: Integer(0, 86_400_000, 60_000),

  // The agent runtime (docs/telephony.md, "Twilio").
  /** Media Streams WebSocket of the agent runtime; answered Twilio calls are connected to it. Unset: Dialtone speaks the greeting and hangs up. */
  AGENT_RUNTIME_URL: Type.Optional(Type.String({ pattern: '^wss?://' })),
  /** How long a per-run runtime token stays valid after the run is created. */
  RUNTIME_TOKEN_TTL_MS: Integer(60_000, 30 * 86_400_000, 86_400_000),
  /** How long the target of the agent runtime's transfer may ring before the transfer counts as not answered (whole seconds are sent to Twilio, 5 to 600). */
  TRANSFER_RING_TIMEOUT_MS: Integer(5_000, 600_000, 30_000),

  // Reconciliation (docs/telephony.md, "Reconciliation"): asking a provider whose calls outlive the node (Twilio) what became of a call.
  /** A live run with no news from its provider for this long is looked up at the provider. */
  RECONCILE_AFTER_MS: Integer(1_000, 86_400_000, 120_000),
  /** Most provider look-ups for one telephony configuration in one sweep (every REAPER_INTERVAL_MS); the rest wait for the next. */
  RECONCILE_MAX_READS_PER_ROUTE: Integer(1, 10_000, 50),
  /** Look-ups for one telephony configuration are spaced to at most this many per second. */
  RECONCILE_READS_PER_SECOND: Type.Number({ minimum: 0.1, maximum: 100, default: 5 }),

  // Caller safety (docs/design.md, "The contract"; docs/api.md, "Limits"): idempotency, rate limits, queue cap.
  /** How long an Idempotency-Key's record, and the response it replays, is kept. */
  IDEMPOTENCY_TTL_MS: Integer(60_000, 30 * 86_400_000, 86_400_000),
  /** An in-flight Idempotency-Key claim older than this is presumed abandoned (its process died) and may be taken over. */
  IDEMPOTENCY_LOCK_MS: Integer(1_000, 600_000, 30_000),
  /** Requests per second allowed per API key, and per organization (all its keys together); 0 turns that limit off. */
  RATE_LIMIT_KEY_PER_SECOND: Integer(0, 1_000_000, 20),
  RATE_LIMIT_ORG_PER_SECOND: Integer(0, 1_000_000, 50),
  /** Rate-limit window: each window allows rate × this many requests, all at once if the client likes (its burst). */
  RATE_LIMIT_WINDOW_SECONDS: Integer(1, 3_600, 2),
  /** Redis shared by the nodes for rate-limit counters; without it each node counts on its own. */
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  /** Prefix of the rate-limit keys in Redis, so several deployments can share one Redis. */
  RATE_LIMIT_REDIS_PREFIX: Type.String({ default: 'dialtone:rl', minLength: 1 }),
  /** Most runs an organization may have queued at once (429 queue_full beyond it). */
  MAX_QUEUED_RUNS_PER_ORG: Integer(1, 10_000_000, 10_000),
  /**
   * While an organization is more than this many runs below its queue cap (by a count at most 1 s
   * old), creating a run does not count its queue; nearer, every creation counts exactly (see runs/queue-cap.ts).
   */
  QUEUE_CAP_LOCK_MARGIN: Integer(0, 10_000_000, 1_000),
  /** Largest total size of a request's headers, in bytes (431 above it). */
  MAX_HEADER_BYTES: Integer(1_024, 1_048_576, 16_384),
  /** Time allowed for a client to send all the request headers (408 and the connection closed after it). */
  HEADERS_TIMEOUT_MS: Integer(100, 600_000, 10_000),

  /** What this node runs: the HTTP API, the dispatcher, or both. */
  DIALTONE_ROLE: Type.Union([Type.Literal('all'), Type.Literal('api'), Type.Literal('dispatcher')], { default: 'all' }),
  /** How often an idle dispatcher looks for work created on other nodes (same-node work wakes it at once). */
  DISPATCH_POLL_INTERVAL_MS: Integer(10, 60_000, 500),
  /**
   * PostgreSQL: least time between two wake-ups this node sends the other nodes' dispatchers for
   * runs it created (store/engine/coalescing-notifier.ts): every run created meanwhile rides on the next
   * one; 0 sends one whenever the last has been answered. The wake-ups of the other nodes' webhook
   * delivery workers, for deliveries this node wrote, are spaced the same way.
   */
  DISPATCH_WAKE_INTERVAL_MS: Integer(0, 1_000, 5),
  /** How far ahead of its pacing slot a call may be claimed; bounds the claimed-but-not-dialed window. */
  DISPATCH_LOOKAHEAD_MS: Integer(0, 5_000, 100),
  /**
   * Pacing headroom: dials are spaced (1 + headroom) / calls_per_second apart, so timer jitter on
   * busy nodes cannot push any one-second window over a carrier's hard limit.
   */
  DISPATCH_PACING_HEADROOM: Type.Number({ minimum: 0, maximum: 0.5, default: 0.05 }),
  /** Most runs claimed for one telephony configuration in one claim. */
  DISPATCH_BATCH_SIZE: Integer(1, 10_000, 200),
  /** Claim lease: a run still `dialing` with no provider call id after this ends `failed` (dispatch_interrupted). */
  DISPATCH_LEASE_MS: Integer(1_000, 3_600_000, 30_000),
  /**
   * Longest wait for a provider to accept a dial request; must be shorter than the lease. A run
   * whose dial went unanswered ends `failed` (dial_timeout), except on a provider whose calls
   * outlive the node (Twilio), which may have placed the call: the run stays `dialing` and, when
   * its lease ends, reconciliation looks for the call (followed if found, else dispatch_interrupted).
   */
  DIAL_TIMEOUT_MS: Integer(100, 600_000, 10_000),
  /** A run still queued this long after its creation ends `expired`. */
  QUEUE_TTL_MS: Integer(1_000, 7 * 86_400_000, 3_600_000),
  /** Default ring timeout; a configuration's `settings.ring_timeout_ms` overrides it. */
  RING_TIMEOUT_MS: Integer(1, 600_000, 30_000),
  /** An answered call is hung up after this long. */
  MAX_CALL_DURATION_MS: Integer(1, 86_400_000, 3_600_000),
  /** Extra silence tolerated past a run's ring timeout or maximum duration before the reaper ends it. */
  REAPER_GRACE_MS: Integer(0, 3_600_000, 60_000),
  /** How often the reaper and queue expiry run (and a dispatcher writes its heartbeat). */
  REAPER_INTERVAL_MS: Integer(10, 600_000, 5_000),
  /** How often a dispatcher asks which of its live calls' runs another node ended (an agent's hang-up taken there). */
  ENDED_ELSEWHERE_INTERVAL_MS: Integer(10, 60_000, 500),
  /** A dispatcher silent this long is presumed dead: its in-process calls (SIP, simulator) end failed (node_lost). */
  NODE_HEARTBEAT_TIMEOUT_MS: Integer(100, 3_600_000, 30_000),
  /** Longest a dispatcher waits on shutdown for dials already started (and, alongside, for webhook attempts in flight). */
  DISPATCH_SHUTDOWN_MS: Integer(0, 600_000, 10_000),

  // Retention (docs/operations.md, "Retention"): pruned by the maintenance pass, in small batches.
  /** Ended runs are deleted, with everything that hangs off them, this many days after they ended; 0 keeps them forever (an organization may set its own). */
  RETENTION_DAYS: Integer(0, 36_500, 0),
  /** Runs deleted per batch; each batch is one short transaction (its write lock held for that batch only). */
  RETENTION_BATCH_SIZE: Integer(1, 5_000, 100),
  /** Most batches one maintenance pass (every REAPER_INTERVAL_MS) deletes; the rest wait for the next pass. */
  RETENTION_BATCHES_PER_PASS: Integer(1, 10_000, 20),

  // Webhooks (docs/webhooks.md): delivered by every node that runs the dispatcher.
  /** Delays before each attempt of a delivery, comma-separated, in ms or with a unit (5s, 5m, 2h); ±10 % jitter is added. */
  WEBHOOK_RETRY_SCHEDULE: Type.String({ default: DEFAULT_RETRY_SCHEDULE, minLength: 1 }),
  /** An attempt succeeds with a 2xx answered within this time. */
  WEBHOOK_TIMEOUT_MS: Integer(100, 300_000, 15_000),
  /** Most deliveries to one endpoint in flight at once (all nodes together). */
  WEBHOOK_ENDPOINT_CONCURRENCY: Integer(1, 1_000, 10),
  /** After a secret rotation the old secret keeps signing beside the new one for this long. */
  WEBHOOK_SECRET_OVERLAP_MS: Integer(0, 30 * 86_400_000, 86_400_000),
  /** An endpoint failing without a success for this long is disabled. */
  WEBHOOK_DISABLE_AFTER_MS: Integer(60_000, 365 * 86_400_000, 5 * 86_400_000),
  /**
   * `true` allows http and private, loopback and link-local addresses (a receiver on this machine
   * or the local network, in development). Off unless set, whatever NODE_ENV says: a customer's URL
   * must not reach the service's own network (webhooks/url-policy.ts). A warning is logged at start-up when on.
   */
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: Type.Union([Type.Literal('true'), Type.Literal('false')], { default: 'false' }),
  /** How often an idle delivery worker looks for due deliveries written on other nodes (same-node ones wake it at once). */
  WEBHOOK_POLL_INTERVAL_MS: Integer(10, 60_000, 250),
  /** Most deliveries one node claims at once (and so sends in parallel). */
  WEBHOOK_BATCH_SIZE: Integer(1, 1_000, 100),
  /** Most webhook endpoints per organization, checked in the registering transaction so racing registrations cannot exceed it. */
  WEBHOOK_MAX_ENDPOINTS: Integer(1, 1_000, 20),

  /** Largest suppression CSV import, in bytes (413 above it); the default holds about a million numbers. */
  SUPPRESSION_IMPORT_MAX_BYTES: Integer(1024, 1024 * 1024 * 1024, 32 * 1024 * 1024),
  /** Most invalid lines an import answer lists (every one is counted in invalid_count). */
  SUPPRESSION_IMPORT_MAX_INVALID_LISTED: Integer(0, 100_000, 1_000),
  /** Most lines (after the header) a suppression import may hold, valid, invalid and repeated alike (422 above it). */
  SUPPRESSION_IMPORT_MAX_LINES: Integer(1, 100_000_000, 1_000_000),
  /** Longest line of a CSV import (suppressions or contacts), in bytes; a longer one refuses the file (422) as soon as it arrives. */
  CSV_IMPORT_MAX_LINE_BYTES: Integer(64, 16 * 1024 * 1024, 64 * 1024),
  /** Lines of a CSV import (or items of a JSON contacts import) checked, and rows written, between two yields to the event loop, so other requests are served meanwhile. */
  CSV_IMPORT_SLICE_LINES: Integer(1, 100_000, 250),
  /** How long a CSV import's connection may stay quiet once its file is received, while it is checked and written (receiving it must fit in REQUEST_TIMEOUT_MS). */
  CSV_IMPORT_TIMEOUT_MS: Integer(1_000, 3_600_000, 300_000),

  // Campaigns (docs/campaigns.md).
  /** How often a dispatching node's campaign scheduler settles ended attempts and creates due ones. */
  CAMPAIGN_TICK_INTERVAL_MS: Integer(10, 600_000, 1_000),
  /** Most attempts one campaign gets per tick (its max_concurrent_calls and calls_per_second bound it too). */
  CAMPAIGN_BATCH_SIZE: Integer(1, 10_000, 100),
  /** How long a node holds a campaign it works on; a node that dies lets it go after this. */
  CAMPAIGN_LEASE_MS: Integer(1_000, 3_600_000, 30_000),
  /** Largest contacts import (JSON or CSV), in bytes (413 above it). */
  CAMPAIGN_CONTACTS_MAX_BYTES: Integer(1024, 1024 * 1024 * 1024, 16 * 1024 * 1024),
  /** Most open campaigns (draft, running or paused) per organization, checked in the creating transaction so racing creations cannot exceed it. */
  CAMPAIGN_MAX_OPEN_PER_ORGANIZATION: Integer(1, 100_000, 100),
  /** Most contacts one import may carry, invalid and repeated ones included (422 above it). */
  CAMPAIGN_CONTACTS_MAX_PER_REQUEST: Integer(1, 1_000_000, 10_000),
  /** Most invalid contacts an import answer lists (every one is counted in invalid_count). */
  CAMPAIGN_CONTACTS_MAX_INVALID_LISTED: Integer(0, 100_000, 1_000),
  /** How long a campaign's counted progress serves its reads on a node (0: count on every read); the actions always count afresh. */
  CAMPAIGN_PROGRESS_CACHE_MS: Integer(0, 60_000, 1_000),

  // The event stream (GET /api/v1/public/stream) and the console (docs/console.md, "The event stream").
  /** A comment line is sent on every open stream this often, so proxies and clients see it alive. */
  STREAM_HEARTBEAT_MS: Integer(10, 600_000, 15_000),
  /** How often a node with open streams reads events written on any node (its own wake it at once). */
  STREAM_POLL_INTERVAL_MS: Integer(10, 60_000, 500),
  /** Bytes a stream's reader may leave untaken before it is disconnected (it resumes with Last-Event-ID). */
  STREAM_MAX_BUFFER_BYTES: Integer(1024, 64 * 1024 * 1024, 1024 * 1024),
  /** PostgreSQL: how long a stream waits for an event id drawn by a transaction not yet committed before passing it by. */
  STREAM_GAP_WAIT_MS: Integer(0, 60_000, 2_000),
  /** Most streams one node serves at once; past it a new stream is answered 503 (try another node, or shortly). */
  STREAM_MAX_CONNECTIONS: Integer(1, 100_000, 1_000),
  /** Most streams one organization holds on one node; past it a new one is answered 429 too_many_streams, so one tenant cannot take the node's every stream. */
  STREAM_MAX_CONNECTIONS_PER_ORG: Integer(1, 100_000, 100),
  /** Most streams one API key holds on one node; past it a new one is answered 429 too_many_streams (a console shares one stream between its tabs). */
  STREAM_MAX_CONNECTIONS_PER_KEY: Integer(1, 100_000, 20),
  /** Most events read from the store at once by a node's feed and by a resuming stream. */
  STREAM_BATCH_SIZE: Integer(1, 10_000, 500),

  /**
   * GET /stats/series (the overview's charts): the longest window, in days, and the most buckets one
   * request may ask for; beyond either, 422. A series is read whole on each request, in time linear in
   * the window's runs.
   */
  STATS_SERIES_MAX_WINDOW_DAYS: Integer(1, 366, 31),
  STATS_SERIES_MAX_BUCKETS: Integer(1, 10_000, 744),

  // Each provider's own settings (TWILIO_*, SIP_*, SIMULATOR_*), declared in its folder's
  // definition.ts and gathered by the registry (docs/telephony.md).
  ...PROVIDER_CONFIG_KEYS,
});

export type Config = Static<typeof ConfigSchema>;

/** Whether webhooks may reach http URLs and non-public addresses (see WEBHOOK_ALLOW_PRIVATE_NETWORKS). */
export function webhooksMayUsePrivateNetworks(config: Pick<Config, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'>): boolean {
  return config.WEBHOOK_ALLOW_PRIVATE_NETWORKS === 'true';
}

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
  for (const [key, schema] of Object.entries(ConfigSchema.properties)) {
    const value = env[key];
    if (value !== undefined && value !== '') raw[key] = toNumber(schema.type, value);
  }
  // The schema is flat and its defaults are plain values, so filling them in is a loop; TypeBox's
  // Value module (Value.Default) would load some forty more modules, about 0.6 MB of heap kept for
  // the process's life, to do it once.
  const withDefaults: Record<string, unknown> = { ...raw };
  for (const [key, schema] of Object.entries(ConfigSchema.properties)) {
    if (withDefaults[key] === undefined && 'default' in schema) withDefaults[key] = schema.default;
  }
  const problems = [...Errors(ConfigSchema, withDefaults)].map(
    (e) => `${e.path.slice(1) || '(root)'}: ${e.message} (got ${JSON.stringify(e.value)})`,
  );
  const config = withDefaults as Config;
  if (problems.length === 0 && config.DIAL_TIMEOUT_MS >= config.DISPATCH_LEASE_MS) {
    problems.push(`DIAL_TIMEOUT_MS (${config.DIAL_TIMEOUT_MS}) must be shorter than DISPATCH_LEASE_MS (${config.DISPATCH_LEASE_MS})`);
  }
  if (problems.length === 0 && config.NODE_HEARTBEAT_TIMEOUT_MS <= 2 * config.REAPER_INTERVAL_MS) {
    problems.push(`NODE_HEARTBEAT_TIMEOUT_MS (${config.NODE_HEARTBEAT_TIMEOUT_MS}) must exceed twice REAPER_INTERVAL_MS (${config.REAPER_INTERVAL_MS}), the heartbeat period`);
  }
  if (problems.length === 0 && config.DISPATCH_SHUTDOWN_MS >= config.SHUTDOWN_GRACE_MS) {
    problems.push(`DISPATCH_SHUTDOWN_MS (${config.DISPATCH_SHUTDOWN_MS}) must be shorter than SHUTDOWN_GRACE_MS (${config.SHUTDOWN_GRACE_MS}), which bounds the whole shutdown`);
  }
  if (problems.length === 0 && config.HEADERS_TIMEOUT_MS > config.REQUEST_TIMEOUT_MS) {
    problems.push(`HEADERS_TIMEOUT_MS (${config.HEADERS_TIMEOUT_MS}) must not exceed REQUEST_TIMEOUT_MS (${config.REQUEST_TIMEOUT_MS})`);
  }
  if (problems.length === 0) {
    try {
      parseRetrySchedule(config.WEBHOOK_RETRY_SCHEDULE);
    } catch (error) {
      problems.push(`WEBHOOK_RETRY_SCHEDULE: ${(error as Error).message}`);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/**
 * The value of a numeric variable: integers in decimal digits only, numbers in decimal notation.
 * Anything else stays text, so the schema refuses it: TypeBox's own conversion would parseInt it,
 * turning PORT=80.5 into 80, 1e3 into 1 and "true" into 1.
 */
function toNumber(type: unknown, text: string): number | string {
  if (type === 'integer') return /^\s*[+-]?[0-9]+\s*$/.test(text) ? Number(text) : text;
  if (type === 'number') return /^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$/.test(text) ? Number(text) : text;
  return text;
}
