// Operational endpoints: liveness, readiness, the OpenAPI document.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
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

    app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
      if (deps.config.METRICS_TOKEN !== undefined && !presentsToken(request, deps.config.METRICS_TOKEN)) {
        reply.header('www-authenticate', 'Bearer realm="metrics"');
        throw new DialtoneError('invalid_metrics_token', 'Send the metrics token as Authorization: Bearer <METRICS_TOKEN>.');
      }
      reply.type(deps.metrics.registry.contentType);
      return deps.metrics.registry.metrics();
    });

    app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  };
}

/** Compares digests, so the time taken says nothing about how much of the token was right. */
function presentsToken(request: FastifyRequest, expected: string): boolean {
  const match = /^Bearer +(\S+)\s*$/i.exec(request.headers.authorization ?? '');
  if (!match?.[1]) return false;
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(match[1]), digest(expected));
}
