// The statements of webhook endpoints, deliveries and attempts. Deliveries of run events are
// written by run-event-outbox.ts in the transaction of the event; this file holds everything else:
// the endpoints' rows, the delivery worker's claim and its record of each attempt, and the reads
// behind the deliveries API and the metrics.
import { sql } from '../engine/kysely.js';
import { insertDeliveryEvent } from './event-stream-statements.js';
import { lockingFreeRows, lockingRows } from '../engine/row-locks.js';
import type { DeliveryStatus, WebhookAttemptRow, WebhookDeliveryRow, WebhookEndpointRow, WebhookEndpointsTable } from '../schema/schema.js';
import { explainQuery } from '../engine/query-plans.js';
import { lockOrganization } from './run-reads.js';
import { atomically, batched, plainTransaction, queryable, type Connection } from '../engine/store.js';
import type { Updateable } from 'kysely';

export type EndpointColumns = Updateable<WebhookEndpointsTable>;

/** Announced (PostgreSQL) once a node has committed deliveries it wrote (deps.ts, signals.outbox): workers look at once. */
export const WEBHOOK_CHANNEL = 'dialtone_webhooks';

export interface NewEndpoint {
  orgId: number;
  url: string;
  description: string | null;
  eventFilter: string;
  secretEncrypted: string;
  at: number;
}

/**
 * Inserts an endpoint unless the organization already has `max`; undefined when it has. The count
 * and the insert share one transaction under the organization's row lock (PostgreSQL; SQLite's
 * single writer already serializes them), so registrations racing at the limit cannot all see room
 * for one more, while other organizations' registrations go on.
 */
export function insertEndpointWithinLimit(on: Connection, e: NewEndpoint, max: number): Promise<WebhookEndpointRow | undefined> {
  return plainTransaction(on, async (trx) => {
    await lockOrganization(trx, e.orgId);
    const { n } = await trx.selectFrom('webhook_endpoints').select((eb) => eb.fn.countAll<number | string>().as('n')).where('org_id', '=', e.orgId).executeTakeFirstOrThrow();
    if (Number(n) >= max) return undefined;
    return insertEndpoint(trx, e);
  });
}

/** Inserts an endpoint, whatever the organization has (tests; registrations go through insertEndpointWithinLimit). */
export function insertEndpoint(on: Connection, e: NewEndpoint): Promise<WebhookEndpointRow> {
  return queryable(on)
    .insertInto('webhook_endpoints')
    .values({
      org_id: e.orgId,
      url: e.url,
      description: e.description,
      event_filter: e.eventFilter,
      enabled: 1,
      disabled_reason: null,
      secret_encrypted: e.secretEncrypted,
      previous_secret_encrypted: null,
      previous_secret_expires_at: null,
      failing_since: null,
      created_at: e.at,
      updated_at: e.at,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function selectEndpoints(on: Connection, orgId: number): Promise<WebhookEndpointRow[]> {
  return queryable(on).selectFrom('webhook_endpoints').selectAll().where('org_id', '=', orgId).orderBy('id').execute();
}

/** One endpoint, of this organization when one is given. */
export function selectEndpoint(on: Connection, endpointId: number, orgId?: number): Promise<WebhookEndpointRow | undefined> {
  return queryable(on)
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('id', '=', endpointId)
    .$if(orgId !== undefined, (q) => q.where('org_id', '=', orgId as number))
    .executeTakeFirst();
}

export function updateEndpoint(on: Connection, endpointId: number, columns: EndpointColumns): Promise<WebhookEndpointRow | undefined> {
  return queryable(on).updateTable('webhook_endpoints').set(columns).where('id', '=', endpointId).returningAll().executeTakeFirst();
}

/** Deletes an endpoint; its deliveries and their attempts go with it (the foreign keys cascade). */
export async function deleteEndpoint(on: Connection, endpointId: number): Promise<void> {
  // Durable: the caller is told nothing more will be sent there.
  await atomically(on, 'durable', (trx) => trx.deleteFrom('webhook_endpoints').where('id', '=', endpointId).execute());
}

export interface NewDelivery {
  endpointId: number;
  messageId: string;
  eventType: string;
  payload: string;
  at: number;
}

/** A delivery not caused by a run event (`webhook.test`): due now. */
export async function insertDelivery(on: Connection, d: NewDelivery): Promise<number> {
  const row = await queryable(on)
    .insertInto('webhook_deliveries')
    .values({
      endpoint_id: d.endpointId,
      message_id: d.messageId,
      event_type: d.eventType,
      run_id: null,
      seq: null,
      payload: d.payload,
      status: 'pending',
      attempt_count: 0,
      next_attempt_at: d.at,
      locked_by: null,
      locked_until: null,
      created_at: d.at,
      updated_at: d.at,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/**
 * A message not about a run (a campaign's change, an audit entry) to every enabled endpoint of the
 * organization subscribed to its type, in the caller's transaction (an outbox, like run events');
 * how many. `onlyNamed`: not to endpoints subscribed to every type (the audit log's messages).
 */
export async function insertOrganizationDeliveries(on: Connection, orgId: number, m: Omit<NewDelivery, 'endpointId'> & { onlyNamed?: boolean }): Promise<number> {
  const trx = queryable(on);
  const endpoints = await trx.selectFrom('webhook_endpoints').select(['id', 'event_filter']).where('org_id', '=', orgId).where('enabled', '=', 1).execute();
  const subscribed = endpoints.filter((e) => (e.event_filter === '' && m.onlyNamed !== true) || e.event_filter.includes(`,${m.eventType},`));
  if (subscribed.length === 0) return 0;
  await trx
    .insertInto('webhook_deliveries')
    .values(
      subscribed.map((e) => ({
        endpoint_id: e.id,
        message_id: m.messageId,
        event_type: m.eventType,
        run_id: null,
        seq: null,
        payload: m.payload,
        status: 'pending' as const,
        attempt_count: 0,
        next_attempt_at: m.at,
        locked_by: null,
        locked_until: null,
        created_at: m.at,
        updated_at: m.at,
      })),
    )
    .execute();
  return subscribed.length;
}

export interface DeliveryPageQuery {
  endpointId: number;
  status?: DeliveryStatus | undefined;
  /** Deliveries with a smaller id than this (newest first). */
  before?: number | undefined;
  limit: number;
}

export interface DeliveryWithAttempts {
  delivery: WebhookDeliveryRow;
  attempts: WebhookAttemptRow[];
}

/** An endpoint's deliveries, newest first, with their attempts in order. */
export async function selectDeliveries(on: Connection, q: DeliveryPageQuery): Promise<DeliveryWithAttempts[]> {
  const deliveries = await queryable(on)
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('endpoint_id', '=', q.endpointId)
    .$if(q.status !== undefined, (b) => b.where('status', '=', q.status as DeliveryStatus))
    .$if(q.before !== undefined, (b) => b.where('id', '<', q.before as number))
    .orderBy('id', 'desc')
    .limit(q.limit)
    .execute();
  return withAttempts(on, deliveries);
}

export interface RunDeliveryPageQuery {
  orgId: number;
  runId: number;
  status?: DeliveryStatus | undefined;
  /** Deliveries with a smaller id than this (newest first). */
  before?: number | undefined;
  limit: number;
}

/**
 * A run's deliveries to the organization's endpoints, newest first: a range of the run's index
 * (migration 016), whatever the endpoints' history. The organization is checked on the endpoint,
 * so another organization's run lists nothing.
 */
function runDeliveriesQuery(on: Connection, q: RunDeliveryPageQuery) {
  return queryable(on)
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .selectAll('d')
    .where('d.run_id', '=', q.runId)
    .where('e.org_id', '=', q.orgId)
    .$if(q.status !== undefined, (b) => b.where('d.status', '=', q.status as DeliveryStatus))
    .$if(q.before !== undefined, (b) => b.where('d.id', '<', q.before as number))
    .orderBy('d.id', 'desc')
    .limit(q.limit);
}

export async function selectRunDeliveries(on: Connection, q: RunDeliveryPageQuery): Promise<DeliveryWithAttempts[]> {
  return withAttempts(on, await runDeliveriesQuery(on, q).execute());
}

/** The plan of selectRunDeliveries' query (tests: it reads the run's index). */
export function explainRunDeliveries(on: Connection, q: RunDeliveryPageQuery): Promise<string> {
  return explainQuery(on, runDeliveriesQuery(on, q));
}

/** The deliveries with their attempts in order, in one more query. */
async function withAttempts(on: Connection, deliveries: WebhookDeliveryRow[]): Promise<DeliveryWithAttempts[]> {
  if (deliveries.length === 0) return [];
  const attempts = await queryable(on)
    .selectFrom('webhook_attempts')
    .selectAll()
    .where('delivery_id', 'in', deliveries.map((d) => d.id))
    .orderBy('delivery_id')
    .orderBy('id')
    .execute();
  const byDelivery = new Map<number, WebhookAttemptRow[]>();
  for (const a of attempts) {
    const list = byDelivery.get(a.delivery_id) ?? [];
    list.push(a);
    byDelivery.set(a.delivery_id, list);
  }
  return deliveries.map((delivery) => ({ delivery, attempts: byDelivery.get(delivery.id) ?? [] }));
}

export type RequeueResult = 'requeued' | 'pending' | 'not_found';

/** Queues a finished delivery again, due now, from the start of the retry schedule. */
export async function requeueDelivery(on: Connection, endpointId: number, deliveryId: number, at: number): Promise<RequeueResult> {
  return atomically(on, 'durable', async (trx) => {
    const row = await lockingRows(on, trx.selectFrom('webhook_deliveries').select('status').where('id', '=', deliveryId).where('endpoint_id', '=', endpointId)).executeTakeFirst();
    if (!row) return 'not_found';
    if (row.status === 'pending') return 'pending';
    await trx
      .updateTable('webhook_deliveries')
      .set({ status: 'pending', attempt_count: 0, next_attempt_at: at, locked_by: null, locked_until: null, updated_at: at })
      .where('id', '=', deliveryId)
      .execute();
    return 'requeued';
  });
}

/** A delivery a node has claimed, with what it needs to send it. */
export interface ClaimedDelivery {
  id: number;
  endpoint_id: number;
  org_id: number;
  message_id: string;
  event_type: string;
  run_id: number | null;
  seq: number | null;
  payload: string;
  attempt_count: number;
  created_at: number;
  url: string;
  secret_encrypted: string;
  previous_secret_encrypted: string | null;
  previous_secret_expires_at: number | null;
  failing_since: number | null;
  /** Of the run's workflow and definition (they never change for a run); null for test messages. */
  workflow_uuid: string | null;
  definition_version: number | null;
}

export interface DeliveryClaim {
  now: number;
  nodeId: string;
  /** Until when the claim holds: past it another node may send the delivery again. */
  lockUntil: number;
  /** Most deliveries to claim in all. */
  limit: number;
  /** Most deliveries of one endpoint in flight at once, across nodes. */
  perEndpoint: number;
}

/**
 * Claims due deliveries: pending, due, not held by a live claim, of an enabled endpoint, and not
 * behind an earlier message of the same run still pending for the same endpoint (per-run order).
 * Each endpoint is served on its own, up to its room (its concurrency less what is in flight on
 * any node), so one endpoint's backlog cannot fill the batch and hold up the others. Endpoints are
 * locked while their room is counted and their deliveries claimed, so nodes claiming at once never
 * exceed it; every query here is an index range of one endpoint, however long the outbox.
 */
export async function claimDueDeliveries(on: Connection, claim: DeliveryClaim): Promise<ClaimedDelivery[]> {
  return atomically(on, 'relaxed', async (trx) => {
    // The endpoints with pending deliveries, by a skip scan of the pending index (one probe per
    // endpoint, not one per delivery).
    const withWork = await sql<{ id: number }>`
      with recursive pending_endpoint(id) as (
        select min(endpoint_id) from webhook_deliveries where status = 'pending'
        union all
        select (select min(endpoint_id) from webhook_deliveries where status = 'pending' and endpoint_id > pending_endpoint.id)
        from pending_endpoint where pending_endpoint.id is not null
      )
      select pending_endpoint.id from pending_endpoint where pending_endpoint.id is not null`.execute(trx);
    if (withWork.rows.length === 0) return [];
    const endpointIds = withWork.rows.map((r) => Number(r.id));
    const endpoints = await lockingRows(on, trx.selectFrom('webhook_endpoints').select('id').where('id', 'in', endpointIds).where('enabled', '=', 1).orderBy('id')).execute();
    if (endpoints.length === 0) return [];
    const inFlight = await trx
      .selectFrom('webhook_deliveries')
      .select(['endpoint_id', (eb) => eb.fn.countAll<number>().as('n')])
      .where('endpoint_id', 'in', endpoints.map((e) => e.id))
      .where('locked_until', 'is not', null)
      .where('locked_until', '>=', claim.now)
      .where('status', '=', 'pending')
      .groupBy('endpoint_id')
      .execute();
    const busy = new Map(inFlight.map((r) => [r.endpoint_id, Number(r.n)]));
    // From a random place in the list, so that when the batch is smaller than the work no endpoint
    // always comes last.
    const ids = endpoints.map((e) => e.id);
    const start = Math.floor(Math.random() * ids.length);
    const order = [...ids.slice(start), ...ids.slice(0, start)];
    const chosen: number[] = [];
    for (const endpointId of order) {
      const room = Math.min(claim.perEndpoint - (busy.get(endpointId) ?? 0), claim.limit - chosen.length);
      if (room <= 0) continue;
      const rows = await lockingFreeRows(
        on,
        trx
          .selectFrom('webhook_deliveries as d')
          .select('d.id')
          .where('d.endpoint_id', '=', endpointId)
          .where('d.status', '=', 'pending')
          .where('d.next_attempt_at', '<=', claim.now)
          .where((eb) => eb.or([eb('d.locked_until', 'is', null), eb('d.locked_until', '<', claim.now)]))
          .where((eb) =>
            eb.not(
              eb.exists(
                eb
                  .selectFrom('webhook_deliveries as p')
                  .select(sql.lit(1).as('one'))
                  .where('p.endpoint_id', '=', endpointId)
                  .whereRef('p.run_id', '=', 'd.run_id')
                  .whereRef('p.seq', '<', 'd.seq')
                  .where('p.status', '=', 'pending'),
              ),
            ),
          )
          .orderBy('d.next_attempt_at')
          .orderBy('d.id')
          .limit(room),
      ).execute();
      chosen.push(...rows.map((r) => r.id));
      if (chosen.length >= claim.limit) break;
    }
    if (chosen.length === 0) return [];
    await trx.updateTable('webhook_deliveries').set({ locked_by: claim.nodeId, locked_until: claim.lockUntil }).where('id', 'in', chosen).execute();
    return trx
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
      .leftJoin('workflow_runs as r', 'r.id', 'd.run_id')
      .leftJoin('workflows as w', 'w.id', 'r.workflow_id')
      .leftJoin('workflow_definitions as v', 'v.id', 'r.definition_id')
      .select([
        'd.id', 'd.endpoint_id', 'e.org_id', 'd.message_id', 'd.event_type', 'd.run_id', 'd.seq', 'd.payload', 'd.attempt_count', 'd.created_at',
        'e.url', 'e.secret_encrypted', 'e.previous_secret_encrypted', 'e.previous_secret_expires_at', 'e.failing_since',
        'w.workflow_uuid', 'v.version as definition_version',
      ])
      .where('d.id', 'in', chosen)
      .orderBy('d.id')
      .execute();
  });
}

export interface AttemptRecord {
  deliveryId: number;
  endpointId: number;
  nodeId: string;
  at: number;
  httpStatus: number | null;
  error: string | null;
  durationMs: number;
  responseBody: string | null;
  /** What becomes of the delivery: succeeded, failed for good, or pending again at `nextAttemptAt`. */
  status: DeliveryStatus;
  nextAttemptAt: number | null;
  /** Changes to the endpoint this outcome causes (failing streak, disabling). */
  endpoint?: EndpointColumns | undefined;
  /** Why this attempt disabled the endpoint, if it did (for the stream's event). */
  endpointDisabled: 'gone' | 'failing' | null;
  /** What the organization's event stream says of the attempt besides the above. */
  orgId: number;
  messageId: string;
  eventType: string;
  runId: number | null;
  /** When it is recorded (`at` is when it started). */
  recordedAt: number;
}

/**
 * Records an attempt and its consequence, if this node still holds the delivery (a claim that ran
 * out may have passed to another node: then its record wins and this one is dropped), and journals
 * it for the organization's event stream in the same transaction. Returns whether it was recorded.
 */
export async function recordAttempt(on: Connection, a: AttemptRecord): Promise<boolean> {
  // Group-committed with the other records of the moment: a relaxed write (a record lost to a
  // machine crash means one more attempt, which at-least-once allows).
  return batched(on, async (trx) => {
    const updated = await trx
      .updateTable('webhook_deliveries')
      .set((eb) => ({
        status: a.status,
        attempt_count: eb('attempt_count', '+', 1),
        next_attempt_at: a.nextAttemptAt,
        locked_by: null,
        locked_until: null,
        updated_at: a.at,
      }))
      .where('id', '=', a.deliveryId)
      .where('locked_by', '=', a.nodeId)
      .where('status', '=', 'pending')
      .returning('attempt_count')
      .executeTakeFirst();
    if (!updated) return false;
    await trx
      .insertInto('webhook_attempts')
      .values({ delivery_id: a.deliveryId, at: a.at, http_status: a.httpStatus, error: a.error, duration_ms: a.durationMs, response_body: a.responseBody })
      .execute();
    if (a.endpoint) await trx.updateTable('webhook_endpoints').set(a.endpoint).where('id', '=', a.endpointId).execute();
    await insertDeliveryEvent(trx, {
      org_id: a.orgId,
      endpoint_id: a.endpointId,
      delivery_id: a.deliveryId,
      message_id: a.messageId,
      event_type: a.eventType,
      run_id: a.runId,
      attempt: Number(updated.attempt_count),
      status: a.status,
      http_status: a.httpStatus,
      error: a.error,
      next_attempt_at: a.nextAttemptAt,
      endpoint_disabled: a.endpointDisabled,
      at: a.recordedAt,
    });
    return true;
  });
}


/** Pending deliveries of enabled endpoints: how many, and when the oldest was written. */
export async function selectOutboxDepth(on: Connection): Promise<{ pending: number; oldestCreatedAt: number | null }> {
  const row = await queryable(on)
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.min('d.created_at').as('oldest')])
    .where('d.status', '=', 'pending')
    .where('e.enabled', '=', 1)
    .executeTakeFirstOrThrow();
  return { pending: Number(row.n), oldestCreatedAt: row.oldest === null ? null : Number(row.oldest) };
}

