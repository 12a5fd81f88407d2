// GET /api/v1/public/stream: the organization's run events, webhook delivery attempts and campaign
// state changes as Server-Sent Events (stream/ does the work). The key travels in X-API-Key like on every other route, so a browser reads the stream with
// fetch() and a stream reader (EventSource cannot send headers, and a key in a URL ends up in logs).
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { DialtoneError } from '../../errors.js';
import { Counter, Gauge } from 'prom-client';
import { RunEventStreams } from '../../stream/run-event-streams.js';
import { isRefusal, StreamSlots, type SlotRefusal } from '../../stream/stream-slots.js';
import { authOf } from '../authenticate.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { sendProblem } from '../problems.js';
import { RATE_LIMIT_HEADERS } from '../schemas.js';

const EVENT_ID = '^(0|[1-9][0-9]{0,14})$';
const OPEN_STREAMS_METRIC = 'dialtone_stream_connections';
const STREAM_REQUESTS_METRIC = 'dialtone_stream_requests_total';

/** Retry-After of a refused stream: a slot comes free when any stream of the scope closes, so soon. */
const RETRY_STREAM_SECONDS = 5;

/** The answer to a stream over one of its caps: the tenant's own caps are 429, the node's is 503 (another node may serve it). */
function refusalProblem(refusal: SlotRefusal): DialtoneError {
  const options = { retryAfterSeconds: RETRY_STREAM_SECONDS, extra: { scope: refusal.refused, max_streams: refusal.limit } };
  switch (refusal.refused) {
    case 'key':
      return new DialtoneError('too_many_streams', `This API key has its most open streams on this node (STREAM_MAX_CONNECTIONS_PER_KEY=${refusal.limit}); close one, or retry shortly.`, options);
    case 'organization':
      return new DialtoneError('too_many_streams', `The organization has its most open streams on this node (STREAM_MAX_CONNECTIONS_PER_ORG=${refusal.limit}); close one, or retry shortly.`, options);
    case 'node':
      return new DialtoneError('unavailable', `This node serves its most streams (STREAM_MAX_CONNECTIONS=${refusal.limit}); retry shortly or on another node.`, options);
  }
}

export function streamRoutes(deps: Deps): FastifyPluginAsync {
  const { config } = deps;
  const streams = new RunEventStreams(
    deps.store,
    deps.clock,
    {
      pollIntervalMs: config.STREAM_POLL_INTERVAL_MS,
      gapWaitMs: config.STREAM_GAP_WAIT_MS,
      heartbeatMs: config.STREAM_HEARTBEAT_MS,
      maxBufferedBytes: config.STREAM_MAX_BUFFER_BYTES,
      batchSize: config.STREAM_BATCH_SIZE,
    },
    deps.logger,
  );
  const slots = new StreamSlots({ perNode: config.STREAM_MAX_CONNECTIONS, perOrganization: config.STREAM_MAX_CONNECTIONS_PER_ORG, perKey: config.STREAM_MAX_CONNECTIONS_PER_KEY });
  // Read when scraped; an app built again on the same deps (tests) replaces the metrics of the last.
  deps.metrics.registry.removeSingleMetric(OPEN_STREAMS_METRIC);
  deps.metrics.registry.removeSingleMetric(STREAM_REQUESTS_METRIC);
  const streamRequests = new Counter({
    name: STREAM_REQUESTS_METRIC,
    help: 'Authenticated stream requests, by outcome: served (given a slot), refused_key, refused_organization, refused_node (a cap of open streams reached)',
    labelNames: ['outcome'],
    registers: [deps.metrics.registry],
  });
  new Gauge({
    name: OPEN_STREAMS_METRIC,
    help: 'Event streams (GET /api/v1/public/stream) this node serves now',
    registers: [deps.metrics.registry],
    collect() {
      this.set(slots.open);
    },
  });
  return async (app) => {
    // Runs created or moved on this node are read at once, not at the next poll.
    const stopWork = deps.signals.onWork(() => streams.feed.wake());
    const stopOutbox = deps.signals.onOutbox(() => streams.feed.wake());
    const stopJournal = deps.signals.onJournal(() => streams.feed.wake());
    app.addHook('preClose', async () => {
      stopWork();
      stopOutbox();
      stopJournal();
      await streams.closeAll();
    });

    app.get(
      '/stream',
      {
        schema: {
          operationId: 'streamEvents',
          summary: 'Stream Events',
          description: [
            'The organization\'s run events, webhook delivery attempts and campaign state changes as Server-Sent Events (`text/event-stream`), as they happen on any node.',
            'The first message is `event: ready` whose `id` is the stream\'s starting point. Each `event: run` message\'s `data` is a JSON object',
            '(`id`, `run_id`, `run_name`, `campaign_id`: the campaign the run is an attempt of, or null, `seq`, `type`: the state entered, `at`, `data`); each `event: webhook.delivery` message\'s `data` reports one recorded attempt',
            '(`id`, `delivery_id`, `endpoint_id`, `message_id`, `event_type`, `run_id`, `attempt`, `status`: the delivery\'s after it, `pending` meaning it is tried again at `next_attempt_at`,',
            '`http_status`, `error`, `next_attempt_at`, `endpoint_disabled`: `gone` or `failing` when this attempt disabled the endpoint, `at`; never the URL, the secret or the payload).',
            'Each change of a campaign\'s state is an `event: campaign.created`, `campaign.started`, `campaign.paused`, `campaign.resumed`, `campaign.completed` or `campaign.canceled` message',
            'whose `data` is `id`, `type` (the event\'s name again), `campaign` as the change left it (`id`, `name`, `state`, `paused_reason`: `request`, `circuit_breaker` or `ends_at` when paused, else null) and `at`;',
            'a campaign\'s progress is not in it (GET /campaigns/{id} reads it; its attempts\' run events carry its `campaign_id`).',
            'All kinds share one order, and a message\'s `id` is a cursor: reconnect with `Last-Event-ID` set to the last one',
            'received (or `last_event_id` in the query) to get every event of every kind after it, none missing or repeated.',
            'An id above the highest event id written (the database was restored to an earlier point, or the id is from another deployment) is not resumed from, which would stay silent and then skip events:',
            'the stream starts from now and its first message is `event: reset` (`id` and `data.last_event_id`: the new starting point; `requested_last_event_id`; `highest_event_id`), then `ready`;',
            'a client drops what it built from the old ids and reads afresh.',
            'Each API key holds at most STREAM_MAX_CONNECTIONS_PER_KEY (default 20) and each organization STREAM_MAX_CONNECTIONS_PER_ORG (default 100) open streams on a node: past either a new stream is `429 too_many_streams` (`scope`: `key` or `organization`, `max_streams`) with `Retry-After`;',
            'past the node\'s STREAM_MAX_CONNECTIONS (default 1000) it is `503 unavailable`.',
            `A \`: heartbeat\` comment comes every STREAM_HEARTBEAT_MS (default 15 s). A reader that leaves more than STREAM_MAX_BUFFER_BYTES unread is disconnected; it resumes with its last id.`,
            'Send the key in `X-API-Key` (from a browser, read the stream with `fetch()`: EventSource cannot send headers).',
          ].join(' '),
          tags: ['Workflow runs'],
          security: requiresScope('calls'),
          headers: Type.Object({ 'last-event-id': Type.Optional(Type.String({ pattern: EVENT_ID, description: 'Resume after this event id' })) }),
          querystring: Type.Object(
            { last_event_id: Type.Optional(Type.String({ pattern: EVENT_ID, description: 'Resume after this event id (for clients that cannot set Last-Event-ID; the header wins)' })) },
            { additionalProperties: false },
          ),
          response: {
            200: {
              description: 'The event stream; it stays open until the client or the node closes it.',
              headers: RATE_LIMIT_HEADERS,
              content: {
                'text/event-stream': {
                  schema: Type.String({
                    examples: [
                      'id: 41\nevent: campaign.started\ndata: {"id":41,"type":"campaign.started","campaign":{"id":3,"name":"Spring renewals","state":"running","paused_reason":null},"at":"2026-01-01T00:00:00.000Z"}\n\n' +
                        'id: 42\nevent: run\ndata: {"id":42,"run_id":7,"run_name":"WR-API-7","campaign_id":3,"seq":3,"type":"ringing","at":"2026-01-01T00:00:00.000Z","data":{}}\n\n' +
                        'id: 43\nevent: webhook.delivery\ndata: {"id":43,"delivery_id":12,"endpoint_id":2,"message_id":"msg_run7_3","event_type":"run.ringing","run_id":7,"attempt":1,"status":"pending","http_status":503,"error":null,"next_attempt_at":"2026-01-01T00:00:05.000Z","endpoint_disabled":null,"at":"2026-01-01T00:00:00.100Z"}\n\n',
                    ],
                  }),
                },
              },
            },
            ...problemResponses(['missing_api_key', 'invalid_api_key', 'rate_limited', 'too_many_streams', 'validation_failed']),
          },
        },
      },
      async (request, reply) => {
        const header = request.headers['last-event-id'];
        const { last_event_id: fromQuery } = request.query as { last_event_id?: string };
        const given = typeof header === 'string' ? header : fromQuery;
        const { orgId, keyId } = authOf(request);
        const slot = slots.acquire({ orgId, keyId });
        if (isRefusal(slot)) {
          streamRequests.inc({ outcome: `refused_${slot.refused}` });
          // A limit doing its job, not a fault of the node: a warning without a stack.
          request.log.warn({ orgId, keyId, refused: slot.refused, limit: slot.limit }, 'event stream refused: its cap of open streams is reached');
          return sendProblem(reply, refusalProblem(slot));
        }
        streamRequests.inc({ outcome: 'served' });
        const response = reply.raw;
        try {
          reply.hijack();
          for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) response.setHeader(name, value);
          response.writeHead(200, {
            'content-type': 'text/event-stream; charset=utf-8',
            'cache-control': 'no-store',
            // Proxies that buffer responses (nginx) pass this one through as it comes.
            'x-accel-buffering': 'no',
          });
          response.flushHeaders();
          // From here the stream gives the slot back when it ends, whenever and however it ends.
          await streams.serve(response, slot, orgId, given === undefined ? undefined : Number(given));
        } catch (error) {
          slot.release();
          request.log.warn({ err: error }, 'event stream: could not start; closing it (the client reconnects)');
          response.destroy();
        }
      },
    );
  };
}
