// Operational endpoints: liveness, readiness, metrics, the OpenAPI document. They take no API key:
// load balancers, orchestrators and Prometheus call them (metrics may require METRICS_TOKEN).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { DialtoneError } from '../../errors.js';
import { migrationsApplied } from '../../store/schema/migrate.js';
import { problemResponses } from '../problem-schemas.js';
import { StringEnum } from '../schemas.js';

const operation = { tags: ['Operations'], security: [] };

export function operationsRoutes(deps: Deps): FastifyPluginAsync {
  return async (app) => {
    app.get(
      '/healthz',
      {
        schema: {
          ...operation,
          operationId: 'getHealth',
          summary: 'Liveness',
          description: 'The process is up and serving HTTP. It does not look at the store (see /readyz).',
          response: { 200: Type.Object({ status: StringEnum(['ok'] as const) }), ...problemResponses([]) },
        },
      },
      async () => ({ status: 'ok' as const }),
    );

    app.get(
      '/readyz',
      {
        schema: {
          ...operation,
          operationId: 'getReadiness',
          summary: 'Readiness',
          description: 'The store is reachable and migrated: this node can take requests. 503 unavailable otherwise.',
          response: { 200: Type.Object({ status: StringEnum(['ready'] as const) }), ...problemResponses([]) },
        },
      },
      async (request) => {
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
        return { status: 'ready' as const };
      },
    );

    app.get(
      '/metrics',
      {
        schema: {
          ...operation,
          operationId: 'getMetrics',
          summary: 'Prometheus metrics',
          description:
            'Runs created, transitions, queue depth and age, dial latency, active calls, provider events, refusals; in the Prometheus text format. With METRICS_TOKEN set, requires Authorization: Bearer <METRICS_TOKEN>.',
          security: [{}, { MetricsToken: [] }],
          response: {
            200: { description: 'Prometheus text exposition format 0.0.4', content: { 'text/plain': { schema: Type.String() } } },
            ...problemResponses(['invalid_metrics_token']),
          },
        },
      },
      async (request, reply) => {
        if (deps.config.METRICS_TOKEN !== undefined && !presentsToken(request, deps.config.METRICS_TOKEN)) {
          reply.header('www-authenticate', 'Bearer realm="metrics"');
          throw new DialtoneError('invalid_metrics_token', 'Send the metrics token as Authorization: Bearer <METRICS_TOKEN>.');
        }
        reply.type(deps.metrics.registry.contentType);
        return deps.metrics.registry.metrics();
      },
    );

    app.get(
      '/openapi.json',
      {
        schema: {
          ...operation,
          operationId: 'getOpenApiDocument',
          summary: 'This OpenAPI document',
          description: 'The OpenAPI 3.1 description of this service, as the interactive reference at /docs shows it.',
          response: { 200: Type.Object({}, { additionalProperties: true, description: 'An OpenAPI 3.1 document' }), ...problemResponses([]) },
        },
      },
      async () => app.swagger(),
    );
  };
}

/** Compares digests, so the time taken says nothing about how much of the token was right. */
function presentsToken(request: FastifyRequest, expected: string): boolean {
  const match = /^Bearer +(\S+)\s*$/i.exec(request.headers.authorization ?? '');
  if (!match?.[1]) return false;
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(match[1]), digest(expected));
}
