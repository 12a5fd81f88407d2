// Operational endpoints: liveness, readiness, the OpenAPI document.
import type { FastifyPluginAsync } from 'fastify';
import type { Deps } from '../../deps.js';
import { DialtoneError } from '../../errors.js';
import { migrationsApplied } from '../../store/migrate.js';

export function operationsRoutes(deps: Deps): FastifyPluginAsync {
  return async (app) => {
    app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

    app.get('/readyz', { schema: { hide: true } }, async (request) => {
      try {
        await deps.store.ping();
        if (!(await migrationsApplied(deps.store))) {
          throw new DialtoneError('unavailable', 'Migrations are not applied.', { retryAfterSeconds: 5 });
        }
      } catch (error) {
        if (error instanceof DialtoneError) throw error;
        request.log.warn({ err: error }, 'readiness check failed');
        throw new DialtoneError('unavailable', 'The store is not reachable.', { retryAfterSeconds: 5 });
      }
      return { status: 'ready' };
    });

    app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
      reply.type(deps.metrics.registry.contentType);
      return deps.metrics.registry.metrics();
    });

    app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  };
}
