// The one dependencies object: built once at start-up, passed explicitly to the HTTP app, the
// dispatcher and the CLI. Tests build it with their own store, clock and logger.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { LookupCache } from './shared/lookup-cache.js';
import type { Config } from './config.js';
import { createLogger, wantsPrettyLogs } from './logging.js';
import { RateLimits } from './limits/rate-limits.js';
import { Metrics } from './metrics.js';
import { RunLifecycle } from './runs/lifecycle.js';
import { issueRunToken } from './runtime/run-token.js';
import { QueuedRunCounts } from './runs/queue-cap.js';
import { configuredSecretKey } from './secret-key.js';
import { systemClock, type Clock } from './shared/clock.js';
import { Signals } from './signals.js';
import { openStore, type Store } from './store/engine/store.js';
import { WEBHOOK_CHANNEL } from './store/statements/webhook-statements.js';
import { CredentialsCipher } from './shared/credentials-cipher.js';
import type { MachineVerdict, ProviderEvent, Providers, TelephonyProvider, TransferOutcome } from './telephony/provider.js';
import { builtInProviders, type ProviderRegistry } from './telephony/registry.js';
import { RouteDecoder } from './telephony/routes.js';

export interface Deps {
  config: Config;
  store: Store;
  clock: Clock;
  logger: Logger;
  cipher: CredentialsCipher;
  metrics: Metrics;
  signals: Signals;
  /** The providers this service knows, their definitions (telephony/registry.ts). */
  registry: ProviderRegistry;
  /** Each registered provider, built once. */
  providers: Providers;
  /** Telephony configuration rows made DecodedRoutes for the providers (telephony/routes.ts). */
  routes: RouteDecoder;
  rateLimits: RateLimits;
  /** This node's recent count of each organization's queued runs (runs/queue-cap.ts). */
  queuedRuns: QueuedRunCounts;
  /** The one writer of run state after creation (runs/lifecycle.ts). */
  lifecycle: RunLifecycle;
  /** This node's short-lived copies of keys, agents and routes (shared/lookup-cache.ts). */
  lookups: LookupCache;
  /** Names this process in leases, so a node knows which live calls are its own. */
  nodeId: string;
}

export interface DepsOverrides {
  store?: Store;
  clock?: Clock;
  logger?: Logger;
  /** The providers known, in place of the built-in ones (a test's registry with a fake provider added). */
  registry?: ProviderRegistry;
  providers?: Partial<Providers>;
}

export function buildDeps(config: Config, overrides: DepsOverrides = {}): Deps {
  const logger = overrides.logger ?? createLogger({ level: config.LOG_LEVEL, pretty: wantsPrettyLogs(config.NODE_ENV) });
  // The store opens before the metrics (which read it); its flush timings reach them once both exist.
  let observeWalFlush = (_seconds: number): void => undefined;
  let observeDurableWrite = (_seconds: number): void => undefined;
  const store =
    overrides.store ??
    openStore(config.DATABASE_URL, {
      poolSize: config.DATABASE_POOL_SIZE,
      preparedStatements: config.DATABASE_PREPARED_STATEMENTS === 'true',
      // A write committed but perhaps not on the disk, and the disk refusing: nothing this process
      // answers from now on can be trusted. Exit at once, answering no one (a caller that gets no
      // answer retries with its Idempotency-Key); a restart reads what the disk really holds.
      onFlushFailure: (error) => {
        logger.fatal({ err: error }, 'the disk failed to flush committed writes (fdatasync or a WAL checkpoint); exiting');
        process.exit(70);
      },
      onCheckpointTrouble: (error) => logger.warn({ err: error }, 'a SQLite WAL checkpoint did not run; the next one tries again'),
      onWalFlushed: (seconds) => observeWalFlush(seconds),
      onDurableWrite: (seconds) => observeDurableWrite(seconds),
      onAnnounceFailure: (error) => logger.warn({ err: error }, 'could not wake the other nodes after a write; their polling finds it'),
      announceIntervalMs: config.DISPATCH_WAKE_INTERVAL_MS,
    });
  const clock = overrides.clock ?? systemClock;
  const signals = new Signals();
  // Webhook deliveries written on this node, once committed, wake the delivery workers of the
  // other nodes too (PostgreSQL; a no-op on SQLite), coalesced with the other announcements of the
  // moment: the outbox trigger no longer notifies inside the writing transaction (migration 015).
  signals.onOutbox(() => store.announce(WEBHOOK_CHANNEL));
  // DIALTONE_SECRET_KEY, or an embedded database's key file; a first start generates one (server.ts).
  const cipher = new CredentialsCipher(configuredSecretKey(config));
  const metrics = new Metrics(store, { defaultMetrics: config.NODE_ENV !== 'test' });
  observeWalFlush = (seconds) => metrics.walFlush.observe(seconds);
  observeDurableWrite = (seconds) => metrics.durableWrite.observe(seconds);
  // Every registered provider, built from its definition with its own configuration keys.
  const registry = overrides.registry ?? builtInProviders;
  const emit = (event: ProviderEvent): void => signals.providerEvent(event);
  const emitVerdict = (verdict: MachineVerdict): void => signals.machineVerdict(verdict);
  const emitTransfer = (outcome: TransferOutcome): void => signals.transferOutcome(outcome);
  // A provider relaying media (SIP) hands the runtime what Twilio's answer does: the run id and a token.
  const runtimeUrl = config.AGENT_RUNTIME_URL;
  const agentRuntime = runtimeUrl
    ? { url: runtimeUrl, parameters: (runId: number) => ({ run_id: String(runId), token: issueRunToken(cipher, runId, clock.now() + config.RUNTIME_TOKEN_TTL_MS) }) }
    : undefined;
  const providers: Record<string, TelephonyProvider> = {};
  for (const definition of registry.definitions) {
    const provider = definition.create({ config, clock, logger, emit, emitVerdict, emitTransfer, agentRuntime });
    // The provider's type says it too (provider.ts): the two must not disagree.
    if (provider.name !== definition.name || provider.callsOutliveNode !== definition.capabilities.callsOutliveNode) {
      throw new Error(`Provider "${definition.name}" does not match its definition (name ${provider.name}, callsOutliveNode ${provider.callsOutliveNode}).`);
    }
    providers[definition.name] = provider;
  }
  Object.assign(providers, overrides.providers);
  return {
    config,
    store,
    clock,
    logger,
    cipher,
    metrics,
    lifecycle: new RunLifecycle(store, metrics.transitions, () => signals.outbox()),
    signals,
    registry,
    providers,
    routes: new RouteDecoder(cipher, providers, registry),
    queuedRuns: new QueuedRunCounts(),
    lookups: new LookupCache(config.LOOKUP_CACHE_TTL_MS, clock),
    rateLimits: new RateLimits({
      windowSeconds: config.RATE_LIMIT_WINDOW_SECONDS,
      redisUrl: config.REDIS_URL,
      redisPrefix: config.RATE_LIMIT_REDIS_PREFIX,
      logger,
    }),
    nodeId: `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`,
  };
}
