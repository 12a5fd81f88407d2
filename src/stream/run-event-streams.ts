// The organization's run events, webhook delivery attempts and campaign state changes as
// Server-Sent Events (GET /api/v1/public/stream). Each message's `id:` is the event's id, drawn
// from one sequence for every kind (store/statements/event-stream-statements.ts): the one order of events
// across all runs, deliveries, campaigns and nodes. A client that reconnects with `Last-Event-ID:
// N` first gets its organization's events of every kind after N from the store (at the reader's
// pace), then the live ones, with none missing or repeated in between.
import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Clock } from '../shared/clock.js';
import { iso } from '../runs/read-run.js';
import { selectLastEventId, selectOrganizationEventsBetween, type CampaignStreamRow, type DeliveryStreamRow, type RunStreamRow, type StreamEventRow } from '../store/statements/event-stream-statements.js';
import type { CampaignEventRow, CampaignStreamEvent, WebhookDeliveryEventRow } from '../store/schema/schema.js';
import type { Store } from '../store/engine/store.js';
import { EventFeed } from './event-feed.js';
import { encodeSse, SseConnection, type SseCloseReason, type SseMessage } from './sse-connection.js';
import type { StreamSlot } from './stream-slots.js';

export interface StreamOptions {
  pollIntervalMs: number;
  gapWaitMs: number;
  heartbeatMs: number;
  maxBufferedBytes: number;
  /** Most events read from the store at once (the feed's batch and a backlog's page). */
  batchSize: number;
}

/** What a `run` message carries: the event and the run it belongs to. */
export interface RunEventMessage {
  id: number;
  run_id: number;
  run_name: string;
  /** The campaign the run is an attempt of; null for a direct run. */
  campaign_id: number | null;
  seq: number;
  /** The state the run entered. */
  type: string;
  at: string;
  data: Record<string, unknown>;
}

export const toMessage = (row: RunStreamRow): RunEventMessage => ({
  id: row.id,
  run_id: row.run_id,
  run_name: row.run_name ?? '',
  campaign_id: row.campaign_id,
  seq: row.seq,
  type: row.type,
  at: iso(row.at),
  data: row.data,
});

/**
 * What a `webhook.delivery` message carries: one recorded attempt and what became of the delivery.
 * Never the endpoint's URL or secret, the payload or the receiver's answer: the deliveries API
 * shows those to whoever needs them.
 */
export type DeliveryEventMessage = Omit<WebhookDeliveryEventRow, 'org_id' | 'next_attempt_at' | 'at'> & { next_attempt_at: string | null; at: string };

export const toDeliveryMessage = (row: DeliveryStreamRow): DeliveryEventMessage => ({
  id: row.id,
  delivery_id: row.delivery_id,
  endpoint_id: row.endpoint_id,
  message_id: row.message_id,
  event_type: row.event_type,
  run_id: row.run_id,
  attempt: row.attempt,
  status: row.status,
  http_status: row.http_status,
  error: row.error,
  next_attempt_at: row.next_attempt_at === null ? null : iso(row.next_attempt_at),
  endpoint_disabled: row.endpoint_disabled,
  at: iso(row.at),
});

/**
 * What a `campaign.<change>` message carries: the change (`type`, the message's event too, and
 * when) and the campaign as the change left it, in the shape of a campaign webhook's
 * `data.campaign`. Not the campaign's progress or settings: those move on without an event, and
 * GET /campaigns/{id} reads them as they are now.
 */
export interface CampaignEventMessage {
  id: number;
  type: CampaignStreamEvent;
  campaign: Pick<CampaignEventRow, 'name' | 'state' | 'paused_reason'> & { id: number };
  at: string;
}

export const toCampaignMessage = (row: CampaignStreamRow): CampaignEventMessage => ({
  id: row.id,
  type: row.type,
  campaign: { id: row.campaign_id, name: row.name, state: row.state, paused_reason: row.paused_reason },
  at: iso(row.at),
});

/** The SSE message of a stream event, whichever its kind. */
export function sseMessage(row: StreamEventRow): SseMessage {
  switch (row.kind) {
    case 'run':
      return { id: row.id, event: 'run', data: toMessage(row) };
    case 'delivery':
      return { id: row.id, event: 'webhook.delivery', data: toDeliveryMessage(row) };
    case 'campaign':
      return { id: row.id, event: row.type, data: toCampaignMessage(row) };
  }
}

export class RunEventStreams {
  readonly feed: EventFeed;
  private readonly connections = new Set<SseConnection>();

  constructor(
    private readonly store: Store,
    clock: Clock,
    private readonly options: StreamOptions,
    private readonly logger: Logger,
  ) {
    this.feed = new EventFeed(store, clock, { pollIntervalMs: options.pollIntervalMs, gapWaitMs: options.gapWaitMs, batchSize: options.batchSize }, logger);
  }

  /**
   * Serves one stream on a response whose headers were written, and gives `slot` back when it ends
   * (at once when the client has already gone). `lastEventId` (from Last-Event-ID) resumes after
   * that event; without it the stream starts with the next event written.
   */
  async serve(response: ServerResponse, slot: StreamSlot, orgId: number, lastEventId: number | undefined): Promise<void> {
    let live = false;
    let lastSent = 0;
    let pending: StreamEventRow[] = [];
    let pendingBytes = 0;
    let unsubscribe: (() => void) | undefined;
    const connection = new SseConnection(response, {
      maxBufferedBytes: this.options.maxBufferedBytes,
      heartbeatMs: this.options.heartbeatMs,
      onClose: (reason: SseCloseReason, closed: SseConnection) => {
        unsubscribe?.();
        slot.release();
        this.connections.delete(closed);
        if (reason === 'slow_reader') this.logger.info({ orgId, lastSent }, 'event stream: disconnected a reader that fell behind');
      },
    });
    if (connection.isClosed) return;
    this.connections.add(connection);
    const deliver = (rows: readonly StreamEventRow[]) => {
      for (const row of rows) {
        if (row.org_id !== orgId || row.id <= lastSent) continue;
        if (!connection.send(sseMessage(row))) return;
        lastSent = row.id;
      }
    };
    const subscription = await this.feed.subscribe((rows) => {
      if (live) return deliver(rows);
      // While the backlog is read, live events wait here, bounded like the socket's buffer.
      for (const row of rows) {
        if (row.org_id !== orgId) continue;
        pending.push(row);
        pendingBytes += encodeSse(sseMessage(row)).length;
      }
      if (pendingBytes > this.options.maxBufferedBytes) connection.end('slow_reader');
    });
    unsubscribe = subscription.unsubscribe;
    if (connection.isClosed) return unsubscribe();
    lastSent = lastEventId ?? subscription.horizon;
    if (lastEventId !== undefined && lastEventId > subscription.horizon) {
      // Past this node's horizon: another node may just be ahead of this one (then the id exists
      // and the stream goes on from it), or the id was never written here: the database was
      // restored to an earlier point, or the id came from another deployment. Resuming after it
      // would stay silent until the ids caught up and then skip everything written below it, so
      // the stream starts from now and says so; a client drops what it built from the old ids.
      const highest = await selectLastEventId(this.store);
      if (connection.isClosed) return;
      if (lastEventId > highest) {
        lastSent = subscription.horizon;
        connection.send({ id: lastSent, event: 'reset', data: { last_event_id: lastSent, requested_last_event_id: lastEventId, highest_event_id: highest } });
        this.logger.info({ orgId, lastEventId, highest }, 'event stream: Last-Event-ID is past the highest event id; starting from now with a reset message');
      }
    }
    // Gives a client that connected without an id its starting point, so its first reconnection
    // resumes without a gap even when no event came in between.
    connection.send({ id: lastSent, event: 'ready', data: { last_event_id: lastSent } });
    while (lastSent < subscription.horizon && !connection.isClosed) {
      const rows = await selectOrganizationEventsBetween(this.store, orgId, lastSent, subscription.horizon, this.options.batchSize);
      if (rows.length === 0 || connection.isClosed) break;
      // Not before their writes are on the disk (store.durable: at once when flushes cover them).
      await this.store.durable();
      for (const row of rows) {
        if (!(await connection.sendPaced(sseMessage(row)))) break;
        lastSent = row.id;
      }
    }
    live = true;
    const waiting = pending;
    pending = [];
    pendingBytes = 0;
    deliver(waiting);
  }

  /** Ends every stream (the node is shutting down); clients reconnect elsewhere with their last id. */
  async closeAll(): Promise<void> {
    for (const connection of [...this.connections]) connection.end('server');
    await this.feed.stop();
  }
}
