// The organization's numbers at a glance (the console's overview): runs created since a time by
// state and outcome, and what is queued and live on each route now; and the same runs over time,
// per hour or day, with the answer rate and the time to answer (the overview's charts).
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { runStats } from '../../runs/list-runs.js';
import { SERIES_BUCKETS, statsSeries, type SeriesBucket } from '../../runs/run-series.js';
import { RUN_STATES } from '../../runs/states.js';
import { ANSWERED_BY } from '../../store/schema/schema.js';
import { authOf } from '../authenticate.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { RunStateRef, StringEnum, withRateLimitHeaders } from '../schemas.js';

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

const Percentile = Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]);

const EXAMPLE_BY_STATE = Object.fromEntries(RUN_STATES.map((s) => [s, 0]));

/** One bucket, the example of both the bucket's schema and the series'. */
const EXAMPLE_BUCKET = {
  start: '2026-11-27T14:00:00.000Z',
  end: '2026-11-27T15:00:00.000Z',
  total: 40,
  by_state: { ...EXAMPLE_BY_STATE, completed: 28, busy: 4, no_answer: 6, failed: 2 },
  answered: 30,
  answer_rate: 0.75,
  time_to_answer_ms: { p50: 6200, p95: 14800 },
};

export const StatsSeriesBucket = Type.Object(
  {
    start: Type.String({ format: 'date-time', description: 'The bucket\'s first instant (inclusive)' }),
    end: Type.String({ format: 'date-time', description: 'Its end (exclusive): start plus the bucket, or the window\'s `until` for the last one' }),
    total: Type.Integer({ minimum: 0, description: 'Runs created in the bucket' }),
    by_state: Type.Record(Type.String(), Type.Integer({ minimum: 0 }), { description: 'Those runs by their state now (every state listed): the ended ones by outcome' }),
    answered: Type.Integer({ minimum: 0, description: 'Those runs that were answered (by a person or a machine)' }),
    answer_rate: Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()], {
      description: '`answered` ÷ the runs whose answer is settled (dialed, and answered or ended), 0 to 1; null when none is',
    }),
    time_to_answer_ms: Type.Object(
      { p50: Percentile, p95: Percentile },
      { description: 'From the dial sent to the answer (`answered_at` − `dial_sent_at`), in milliseconds: the nearest-rank 50th and 95th percentiles of the answered runs; null when none was answered', additionalProperties: false },
    ),
  },
  {
    $id: 'StatsSeriesBucket',
    title: 'StatsSeriesBucket',
    description: 'The runs created in one hour or day of the window',
    additionalProperties: false,
    examples: [EXAMPLE_BUCKET],
  },
);

export const StatsSeries = Type.Object(
  {
    since: Type.String({ format: 'date-time', description: 'The window\'s start: the `since` asked for, moved back to the start of its hour or day (UTC)' }),
    until: Type.String({ format: 'date-time', description: 'The window\'s end (exclusive)' }),
    bucket: StringEnum(Object.keys(SERIES_BUCKETS) as SeriesBucket[], { description: 'The bucket asked for' }),
    bucket_seconds: Type.Integer({ minimum: 1, description: 'Its length in seconds' }),
    buckets: Type.Array(Type.Ref('StatsSeriesBucket'), { description: 'Every bucket of the window in order, the empty ones included' }),
  },
  {
    $id: 'StatsSeries',
    title: 'StatsSeries',
    description: 'An organization\'s runs created in a window, per hour or day',
    additionalProperties: false,
    examples: [
      {
        since: '2026-11-27T14:00:00.000Z',
        until: '2026-11-27T15:30:00.000Z',
        bucket: 'hour',
        bucket_seconds: 3600,
        buckets: [
          EXAMPLE_BUCKET,
          { start: '2026-11-27T15:00:00.000Z', end: '2026-11-27T15:30:00.000Z', total: 0, by_state: EXAMPLE_BY_STATE, answered: 0, answer_rate: null, time_to_answer_ms: { p50: null, p95: null } },
        ],
      },
    ],
  },
);

export function statsRoutes(deps: Deps): FastifyPluginAsync {
  return async (app) => {
    app.addSchema(StatsSeriesBucket);
    app.addSchema(StatsSeries);
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

    app.get(
      '/stats/series',
      {
        schema: {
          operationId: 'getStatsSeries',
          summary: 'Get Stats Series',
          description:
            'The runs created in a window (default: the 24 hours before `until`, which defaults to now), per hour or per day (UTC): in each bucket, the runs by state, how many were answered, the answer rate, and the 50th and 95th percentiles of the time to answer. Every bucket is listed, the empty ones included; `since` is moved back to the start of its bucket. A window longer than STATS_SERIES_MAX_WINDOW_DAYS or holding more than STATS_SERIES_MAX_BUCKETS buckets is refused with 422, as is an empty one.',
          tags: ['Workflow runs'],
          security: requiresScope('calls'),
          querystring: Type.Object(
            {
              since: Type.Optional(Type.String({ format: 'date-time', description: 'The window\'s start (RFC 3339); default 24 hours before `until`', examples: ['2026-11-26T15:00:00Z'] })),
              until: Type.Optional(Type.String({ format: 'date-time', description: 'The window\'s end, exclusive (RFC 3339); default now', examples: ['2026-11-27T15:00:00Z'] })),
              bucket: Type.Optional(StringEnum(Object.keys(SERIES_BUCKETS) as SeriesBucket[], { description: 'The length of a bucket; default hour' })),
            },
            { additionalProperties: false },
          ),
          response: { 200: withRateLimitHeaders(Type.Ref('StatsSeries')), ...problemResponses(['missing_api_key', 'invalid_api_key', 'rate_limited', 'validation_failed']) },
        },
      },
      async (request) => {
        const query = request.query as { since?: string; until?: string; bucket?: SeriesBucket };
        return statsSeries(
          deps.store,
          authOf(request).orgId,
          {
            bucket: query.bucket ?? 'hour',
            ...(query.since !== undefined ? { since: Date.parse(query.since) } : {}),
            ...(query.until !== undefined ? { until: Date.parse(query.until) } : {}),
          },
          deps.clock.now(),
          { maxWindowDays: deps.config.STATS_SERIES_MAX_WINDOW_DAYS, maxBuckets: deps.config.STATS_SERIES_MAX_BUCKETS },
        );
      },
    );
  };
}
