// The organization's numbers at a glance (the console's overview): runs created since a time by
// state and outcome, and what is queued and live on each route now.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { runStats } from '../../runs/list-runs.js';
import { ANSWERED_BY } from '../../store/schema/schema.js';
import { authOf } from '../authenticate.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { RunStateRef, withRateLimitHeaders } from '../schemas.js';

const HOUR_MS = 3_600_000;

const Stats = Type.Object({
  since: Type.String({ format: 'date-time' }),
  total: Type.Integer({ minimum: 0, description: 'Runs created since `since`' }),
  by_state: Type.Record(Type.String(), Type.Integer({ minimum: 0 }), { description: 'Those runs by their state now (every state listed)' }),
  by_outcome: Type.Array(
    Type.Object({ state: RunStateRef(), outcome_reason: Type.Union([Type.String(), Type.Null()]), count: Type.Integer({ minimum: 1 }) }),
    { description: 'Those runs by state and normalized outcome reason, most frequent first' },
  ),
  answered_by: Type.Object(Object.fromEntries([...ANSWERED_BY, 'none'].map((v) => [v, Type.Integer({ minimum: 0 })])), {
    description: 'Those runs by who answered (answering-machine detection\'s verdict: human, machine, fax, unknown); none: no verdict (detection not asked, or the call not answered)',
    additionalProperties: false,
  }),
  answer_rates: Type.Object(Object.fromEntries(ANSWERED_BY.map((v) => [v, Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()])])), {
    description: 'Each verdict\'s share of the runs that have one (0 to 1; null when none has): the answer rate by human and by machine',
    additionalProperties: false,
  }),
  routes: Type.Array(
    Type.Object({
      telephony_configuration_id: Type.Integer(),
      name: Type.String(),
      provider: Type.String(),
      status: Type.String(),
      queued: Type.Integer({ minimum: 0, description: 'Runs waiting to be dialed through this route now' }),
      live: Type.Integer({ minimum: 0, description: 'Calls dialing, ringing or in progress on this route now' }),
    }),
  ),
});

export function statsRoutes(deps: Deps): FastifyPluginAsync {
  return async (app) => {
    app.get(
      '/stats',
      {
        schema: {
          operationId: 'getStats',
          summary: 'Get Stats',
          description: 'Runs created since `since` (default: the last hour) counted by state, by outcome and by who answered (with the answer rates by human and by machine), and the queue depth and live calls of every route now.',
          tags: ['Workflow runs'],
          security: requiresScope('calls'),
          querystring: Type.Object(
            { since: Type.Optional(Type.String({ format: 'date-time', description: 'Count runs created at or after this time (RFC 3339); default one hour ago' })) },
            { additionalProperties: false },
          ),
          response: { 200: withRateLimitHeaders(Stats), ...problemResponses(['missing_api_key', 'invalid_api_key', 'rate_limited', 'validation_failed']) },
        },
      },
      async (request) => {
        const { since } = request.query as { since?: string };
        const from = since === undefined ? deps.clock.now() - HOUR_MS : Date.parse(since);
        return runStats(deps.store, authOf(request).orgId, from);
      },
    );
  };
}
