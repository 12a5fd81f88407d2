// Starts the service: migrations, first-run demo, the dispatcher and HTTP (as DIALTONE_ROLE says).
// Stops gracefully on SIGTERM/SIGINT.
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { loadConfig, webhooksMayUsePrivateNetworks } from './config.js';
import { buildDeps, type Deps } from './deps.js';
import { purgeExpiredIdempotencyKeys } from './calls/idempotency.js';
import { CampaignScheduler } from './campaigns/scheduler.js';
import { Dispatcher } from './dispatch/dispatcher.js';
import { demoBanner, seedDemoIfEmpty } from './first-run.js';
import { establishSecretKey, type SecretKeyOutcome } from './secret-key.js';
import { CONSOLE_PATH, DOCS_PATH } from './http/routes/root.js';
import { migrateToLatest } from './store/schema/migrate.js';
import { selectActiveConfigurations } from './store/statements/configuration-statements.js';
import { refuseUnreadyRoutes } from './telephony/readiness.js';
import { packageInfo } from './package-info.js';
import { DeliveryWorker } from './webhooks/delivery-worker.js';

export interface RunningService {
  app: FastifyInstance;
  url: string;
  dispatcher: Dispatcher | undefined;
  webhooks: DeliveryWorker | undefined;
  stop(): Promise<void>;
}

export async function startService(deps: Deps): Promise<RunningService> {
  const applied = await migrateToLatest(deps.store);
  if (applied.length > 0) deps.logger.info({ applied }, 'migrations applied');
  // Before anything reads a secret (the routes' check decrypts provider credentials).
  logSecretKey(deps, await establishSecretKey(deps));
  if (webhooksMayUsePrivateNetworks(deps.config)) {
    deps.logger.warn(
      'WEBHOOK_ALLOW_PRIVATE_NETWORKS=true: webhook endpoints may use http and reach loopback, private and link-local addresses (this machine, its network, a cloud metadata service); never set it where others register endpoints',
    );
  }
  if (deps.config.RETENTION_DAYS === 0) {
    deps.logger.info('RETENTION_DAYS is not set: ended runs, their events and webhook deliveries are kept forever (except for organizations with their own window); docs/operations.md, "Retention", recommends one');
  }
  await checkRoutes(deps);
  const role = deps.config.DIALTONE_ROLE;
  const app = await buildApp(deps, { publicApi: role !== 'dispatcher' });
  await listen(app, deps);
  // Only once the port is ours: the demo key is printed once, so it must not be created by a start
  // that then fails to serve.
  const seed = role === 'dispatcher' ? undefined : await seedDemoIfEmpty(deps);
  // Started once the node answers health checks: a backlog must not delay or starve start-up.
  const dispatcher =
    role === 'api'
      ? undefined
      : new Dispatcher(deps, {
          // An expired record is already treated as absent when its key is used again: removing it is housekeeping only.
          housekeeping: [(now) => purgeExpiredIdempotencyKeys(deps.store, now)],
        });
  dispatcher?.start();
  // Campaign attempts are created where runs are dispatched: an API-only node only records them.
  const campaigns = role === 'api' ? undefined : new CampaignScheduler(deps);
  campaigns?.start();
  // Webhooks go out from every node that dispatches: the API-only nodes stay request-serving only.
  const webhooks = role === 'api' ? undefined : new DeliveryWorker({ ...deps, version: packageInfo().version, onRecorded: () => deps.signals.journal() });
  const stopWaking = webhooks ? deps.signals.onOutbox(() => webhooks.wake()) : undefined;
  webhooks?.start();
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : deps.config.PORT;
  const url = `http://${deps.config.HOST.includes(':') ? `[${deps.config.HOST}]` : deps.config.HOST}:${port}`;
  const baseUrl = deps.config.PUBLIC_BASE_URL ?? url;
  if (seed) process.stdout.write(demoBanner(seed, baseUrl) + '\n');
  // Every start says where the console and the API reference are (the demo banner only prints once).
  else if (role !== 'dispatcher') deps.logger.info({ console: `${baseUrl}${CONSOLE_PATH}`, docs: `${baseUrl}${DOCS_PATH}` }, 'console and API reference');
  let stopping: Promise<void> | undefined;
  return {
    app,
    url,
    dispatcher,
    webhooks,
    stop() {
      stopping ??= (async () => {
        // Stop taking requests, then stop dialing (letting claimed dials finish), then let go.
        await app.close();
        // Webhook attempts in flight get the same time as the dials, alongside them.
        stopWaking?.();
        await campaigns?.stop();
        await Promise.all([dispatcher?.stop(), webhooks?.stop(deps.config.DISPATCH_SHUTDOWN_MS)]);
        await Promise.all(Object.values(deps.providers).map((p) => p.close()));
        await deps.rateLimits.close();
        await deps.store.close();
      })();
      return stopping;
    },
  };
}

function logSecretKey(deps: Deps, outcome: SecretKeyOutcome): void {
  if (outcome.kind === 'generated' && outcome.keyFile !== undefined) {
    deps.logger.info({ keyFile: outcome.keyFile }, 'generated the secret key (DIALTONE_SECRET_KEY was not set); it is kept in the key file beside the database: back it up with the database');
  }
  if (outcome.kind === 'absent') {
    deps.logger.warn('DIALTONE_SECRET_KEY is not set: webhook endpoints, provider credentials and agent runtime tokens are refused until every node is given the same key');
  }
}

/** A start that cannot serve, said in one line (no stack): the operator's to fix, not a bug. */
export class ListenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ListenError';
  }
}

/** Routes checked at start-up; past this many, the rest are checked when used (requests and dials always check). */
const STARTUP_ROUTE_CHECK_LIMIT = 10_000;

/**
 * Every active route is judged against its provider's schema and readiness at start-up, and each
 * that cannot dial is logged with all its problems: requests through it are refused (422
 * telephony_not_ready) and its queued runs end failed (dial_refused, provider status route_invalid)
 * instead of dialing.
 */
async function checkRoutes(deps: Deps): Promise<void> {
  const rows = await selectActiveConfigurations(deps.store, STARTUP_ROUTE_CHECK_LIMIT);
  // One line per refused route, with its problems; a summary after them would only repeat them.
  refuseUnreadyRoutes(deps.routes, rows, { publicBaseUrl: deps.config.PUBLIC_BASE_URL }, deps.logger);
}

async function listen(app: FastifyInstance, deps: Deps): Promise<void> {
  const { HOST: host, PORT: port } = deps.config;
  try {
    await app.listen({ host, port });
  } catch (error) {
    await app.close().catch(() => undefined);
    await deps.store.close().catch(() => undefined);
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new ListenError(`Port ${port} on ${host} is already in use: stop what uses it, or set PORT to another port.`);
    if (code === 'EACCES') throw new ListenError(`Not allowed to listen on ${host}:${port}: choose a PORT above 1023, or run with the needed privilege.`);
    if (code === 'EADDRNOTAVAIL') throw new ListenError(`${host} is not an address of this machine: set HOST to one of its addresses.`);
    throw error;
  }
}

export async function main(): Promise<void> {
  const config = loadConfig();
  const deps = buildDeps(config);
  // Listening for signals before starting: a SIGTERM that arrives while the service starts (say,
  // right after the port is bound) stops it once started, instead of killing it mid-way.
  let started: Promise<RunningService> | undefined;
  const shutdown = (signal: string) => {
    deps.logger.info({ signal }, 'shutting down');
    // In-flight requests get SHUTDOWN_GRACE_MS to finish; after that the process exits anyway.
    const timer = setTimeout(() => {
      deps.logger.error('shutdown grace period over; exiting');
      process.exit(1);
    }, config.SHUTDOWN_GRACE_MS);
    timer.unref();
    (started ?? Promise.reject(new Error('not started')))
      .then((service) => service.stop())
      .then(
        () => process.exit(0),
        (error: unknown) => {
          deps.logger.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  started = startService(deps);
  await started;
}
