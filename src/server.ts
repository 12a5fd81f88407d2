// Starts the service: migrations, first-run demo, the dispatcher and HTTP (as DIALTONE_ROLE says).
// Stops gracefully on SIGTERM/SIGINT.
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { loadConfig } from './config.js';
import { buildDeps, type Deps } from './deps.js';
import { Dispatcher } from './dispatch/dispatcher.js';
import { demoBanner, seedDemoIfEmpty } from './first-run.js';
import { migrateToLatest } from './store/migrate.js';

export interface RunningService {
  app: FastifyInstance;
  url: string;
  dispatcher: Dispatcher | undefined;
  stop(): Promise<void>;
}

export async function startService(deps: Deps): Promise<RunningService> {
  const applied = await migrateToLatest(deps.store);
  if (applied.length > 0) deps.logger.info({ applied }, 'migrations applied');
  const role = deps.config.DIALTONE_ROLE;
  const seed = role === 'dispatcher' ? undefined : await seedDemoIfEmpty(deps);
  const app = await buildApp(deps, { publicApi: role !== 'dispatcher' });
  await app.listen({ host: deps.config.HOST, port: deps.config.PORT });
  // Started once the node answers health checks: a backlog must not delay or starve start-up.
  const dispatcher = role === 'api' ? undefined : new Dispatcher(deps);
  dispatcher?.start();
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : deps.config.PORT;
  const url = `http://${deps.config.HOST.includes(':') ? `[${deps.config.HOST}]` : deps.config.HOST}:${port}`;
  if (seed) process.stdout.write(demoBanner(seed, deps.config.PUBLIC_BASE_URL ?? url) + '\n');
  let stopping: Promise<void> | undefined;
  return {
    app,
    url,
    dispatcher,
    stop() {
      stopping ??= (async () => {
        // Stop taking requests, then stop dialing (letting claimed dials finish), then let go.
        await app.close();
        await dispatcher?.stop();
        await Promise.all(Object.values(deps.providers).map((p) => p.close()));
        await deps.rateLimits.close();
        await deps.store.close();
      })();
      return stopping;
    },
  };
}

export async function main(): Promise<void> {
  const config = loadConfig();
  const deps = buildDeps(config);
  const service = await startService(deps);
  const shutdown = (signal: string) => {
    deps.logger.info({ signal }, 'shutting down');
    // In-flight requests get SHUTDOWN_GRACE_MS to finish; after that the process exits anyway.
    const timer = setTimeout(() => {
      deps.logger.error('shutdown grace period over; exiting');
      process.exit(1);
    }, config.SHUTDOWN_GRACE_MS);
    timer.unref();
    service.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        deps.logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}
