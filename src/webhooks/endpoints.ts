// An organization's webhook endpoints: registration (the URL checked against SSRF), the event
// filter, enabling, secret rotation, test messages and the deliveries' history. Another
// organization's endpoint is "not found", never "forbidden".
import { randomBytes } from 'node:crypto';
import type { Config } from '../config.js';
import { webhooksMayUsePrivateNetworks } from '../config.js';
import { DialtoneError } from '../errors.js';
import { iso } from '../runs/read-run.js';
import type { DeliveryStatus, WebhookAttemptRow, WebhookDeliveryRow, WebhookEndpointRow } from '../store/schema/schema.js';
import type { Store } from '../store/engine/store.js';
import {
  deleteEndpoint,
  insertDelivery,
  insertEndpointWithinLimit,
  requeueDelivery,
  selectDeliveries,
  selectEndpoint,
  selectRunDeliveries,
  selectEndpoints,
  updateEndpoint,
  type DeliveryWithAttempts,
  type EndpointColumns,
} from '../store/statements/webhook-statements.js';
import type { CredentialsCipher } from '../shared/credentials-cipher.js';
import { SecretKeyMissingError } from '../shared/credentials-cipher.js';
import type { WebhookEventType } from './event-types.js';
import { testMessageBody } from './message.js';
import { newWebhookSecret } from './signature.js';
import { checkWebhookUrl } from './url-policy.js';

export interface EndpointView {
  id: number;
  url: string;
  /** The subscribed types; empty means every type. */
  events: WebhookEventType[];
  enabled: boolean;
  /** Why it is disabled: `request` (by its owner), `gone` (it answered 410), `failing` (no success for WEBHOOK_DISABLE_AFTER_MS). */
  disabled_reason: string | null;
  description: string | null;
  created_at: string;
  updated_at: string;
}

export interface AttemptView {
  at: string;
  http_status: number | null;
  error: string | null;
  duration_ms: number;
  response_body: string | null;
}

export interface DeliveryView {
  id: number;
  endpoint_id: number;
  message_id: string;
  event_type: string;
  run_id: number | null;
  status: DeliveryStatus;
  attempts: AttemptView[];
  next_attempt_at: string | null;
  created_at: string;
}

export interface WebhookContext {
  store: Store;
  cipher: CredentialsCipher;
  clock: { now(): number };
  config: Pick<Config, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS' | 'WEBHOOK_SECRET_OVERLAP_MS' | 'WEBHOOK_MAX_ENDPOINTS'>;
  /** Wakes this node's delivery worker (a test message is sent at once). */
  wake(): void;
}

/** `,a,b,` for the store (see the migration); '' for every type. */
export function eventFilter(events: readonly string[] | undefined): string {
  const unique = [...new Set(events ?? [])];
  return unique.length === 0 ? '' : `,${unique.join(',')},`;
}

function eventsOf(filter: string): WebhookEventType[] {
  return filter === '' ? [] : (filter.slice(1, -1).split(',') as WebhookEventType[]);
}

export function toEndpointView(row: WebhookEndpointRow): EndpointView {
  return {
    id: row.id,
    url: row.url,
    events: eventsOf(row.event_filter),
    enabled: row.enabled === 1,
    disabled_reason: row.disabled_reason,
    description: row.description,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

function toDeliveryView(delivery: WebhookDeliveryRow, attempts: WebhookAttemptRow[]): DeliveryView {
  return {
    id: delivery.id,
    endpoint_id: delivery.endpoint_id,
    message_id: delivery.message_id,
    event_type: delivery.event_type,
    run_id: delivery.run_id,
    status: delivery.status,
    attempts: attempts.map((a) => ({ at: iso(a.at), http_status: a.http_status, error: a.error, duration_ms: a.duration_ms, response_body: a.response_body })),
    next_attempt_at: delivery.next_attempt_at === null ? null : iso(delivery.next_attempt_at),
    created_at: iso(delivery.created_at),
  };
}

async function checkedUrl(ctx: WebhookContext, url: string): Promise<string> {
  const verdict = await checkWebhookUrl(url, { allowPrivateNetworks: webhooksMayUsePrivateNetworks(ctx.config) });
  if (!verdict.ok) throw new DialtoneError(verdict.code, verdict.detail, { errors: [{ pointer: '/url', detail: verdict.detail }] });
  return verdict.url.href;
}

function encryptSecret(ctx: WebhookContext, orgId: number, secret: string): string {
  try {
    return ctx.cipher.encrypt(orgId, { secret });
  } catch (error) {
    if (error instanceof SecretKeyMissingError) {
      throw new DialtoneError('webhooks_not_configured', 'Webhook secrets are stored encrypted: the operator must give every node the same DIALTONE_SECRET_KEY (and restart them) before endpoints can be registered.');
    }
    throw error;
  }
}

async function ownEndpoint(ctx: WebhookContext, orgId: number | undefined, endpointId: number): Promise<WebhookEndpointRow> {
  const row = await selectEndpoint(ctx.store, endpointId, orgId);
  if (!row) throw new DialtoneError('webhook_endpoint_not_found', `No webhook endpoint ${endpointId}.`);
  return row;
}

export interface EndpointInput {
  url: string;
  events?: WebhookEventType[] | undefined;
  description?: string | null | undefined;
}

/** Registers an endpoint; its secret is returned here (and on rotation) only. */
export async function createEndpoint(ctx: WebhookContext, orgId: number, input: EndpointInput): Promise<EndpointView & { secret: string }> {
  const url = await checkedUrl(ctx, input.url);
  const secret = newWebhookSecret();
  // The limit is checked in the inserting transaction, the only place it can be exact.
  const row = await insertEndpointWithinLimit(
    ctx.store,
    {
      orgId,
      url,
      description: input.description ?? null,
      eventFilter: eventFilter(input.events),
      secretEncrypted: encryptSecret(ctx, orgId, secret),
      at: ctx.clock.now(),
    },
    ctx.config.WEBHOOK_MAX_ENDPOINTS,
  );
  if (!row) throw new DialtoneError('webhook_endpoint_limit', `An organization may register at most ${ctx.config.WEBHOOK_MAX_ENDPOINTS} webhook endpoints (WEBHOOK_MAX_ENDPOINTS).`);
  return { ...toEndpointView(row), secret };
}

export async function listEndpoints(ctx: WebhookContext, orgId: number): Promise<EndpointView[]> {
  return (await selectEndpoints(ctx.store, orgId)).map(toEndpointView);
}

export async function getEndpoint(ctx: WebhookContext, orgId: number | undefined, endpointId: number): Promise<EndpointView> {
  return toEndpointView(await ownEndpoint(ctx, orgId, endpointId));
}

export interface EndpointPatch {
  url?: string | undefined;
  events?: WebhookEventType[] | undefined;
  enabled?: boolean | undefined;
  description?: string | null | undefined;
}

export async function patchEndpoint(ctx: WebhookContext, orgId: number | undefined, endpointId: number, patch: EndpointPatch): Promise<EndpointView> {
  const current = await ownEndpoint(ctx, orgId, endpointId);
  const columns: EndpointColumns = { updated_at: ctx.clock.now() };
  if (patch.url !== undefined) columns.url = await checkedUrl(ctx, patch.url);
  if (patch.events !== undefined) columns.event_filter = eventFilter(patch.events);
  if (patch.description !== undefined) columns.description = patch.description;
  if (patch.enabled === true) Object.assign(columns, { enabled: 1, disabled_reason: null, failing_since: null });
  if (patch.enabled === false) Object.assign(columns, { enabled: 0, disabled_reason: current.enabled === 1 ? 'request' : current.disabled_reason });
  const row = await updateEndpoint(ctx.store, endpointId, columns);
  if (!row) throw new DialtoneError('webhook_endpoint_not_found', `No webhook endpoint ${endpointId}.`);
  return toEndpointView(row);
}

/** Deletes an endpoint; its pending deliveries go with it and are never sent. */
export async function removeEndpoint(ctx: WebhookContext, orgId: number | undefined, endpointId: number): Promise<void> {
  await ownEndpoint(ctx, orgId, endpointId);
  await deleteEndpoint(ctx.store, endpointId);
}

/**
 * A new secret. The old one keeps signing beside it for WEBHOOK_SECRET_OVERLAP_MS, so receivers
 * can switch without dropping a message; a secret already overlapping is dropped now.
 */
export async function rotateSecret(ctx: WebhookContext, orgId: number | undefined, endpointId: number): Promise<{ secret: string }> {
  const current = await ownEndpoint(ctx, orgId, endpointId);
  const now = ctx.clock.now();
  const secret = newWebhookSecret();
  const overlap = ctx.config.WEBHOOK_SECRET_OVERLAP_MS;
  await updateEndpoint(ctx.store, endpointId, {
    secret_encrypted: encryptSecret(ctx, current.org_id, secret),
    previous_secret_encrypted: overlap > 0 ? current.secret_encrypted : null,
    previous_secret_expires_at: overlap > 0 ? now + overlap : null,
    updated_at: now,
  });
  return { secret };
}

/** Queues a `webhook.test` message to the endpoint, due now. */
export async function sendTestMessage(ctx: WebhookContext, orgId: number | undefined, endpointId: number): Promise<{ delivery_id: number; message_id: string }> {
  await ownEndpoint(ctx, orgId, endpointId);
  const at = ctx.clock.now();
  const messageId = `msg_test_${randomBytes(12).toString('base64url')}`;
  const id = await insertDelivery(ctx.store, { endpointId, messageId, eventType: 'webhook.test', payload: testMessageBody(endpointId, at), at });
  ctx.wake();
  return { delivery_id: id, message_id: messageId };
}

export interface DeliveryPage {
  data: DeliveryView[];
  /** Pass as `after` for the next page (older deliveries); null when there is none. */
  next_after: number | null;
}

export async function listDeliveries(
  ctx: WebhookContext,
  orgId: number | undefined,
  endpointId: number,
  query: { status?: DeliveryStatus | undefined; after?: number | undefined; limit: number },
): Promise<DeliveryPage> {
  await ownEndpoint(ctx, orgId, endpointId);
  return deliveryPage(await selectDeliveries(ctx.store, { endpointId, status: query.status, before: query.after, limit: query.limit + 1 }), query.limit);
}

/**
 * A run's deliveries to every endpoint of the organization, newest first. Another organization's
 * run, or one with no delivery, lists nothing (a filter, like `status`).
 */
export async function listRunDeliveries(
  ctx: WebhookContext,
  orgId: number,
  query: { runId: number; status?: DeliveryStatus | undefined; after?: number | undefined; limit: number },
): Promise<DeliveryPage> {
  const rows = await selectRunDeliveries(ctx.store, { orgId, runId: query.runId, status: query.status, before: query.after, limit: query.limit + 1 });
  return deliveryPage(rows, query.limit);
}

/** A page of `limit` from `limit + 1` rows read: the extra one says whether there is a next page. */
function deliveryPage(rows: DeliveryWithAttempts[], limit: number): DeliveryPage {
  const page = rows.slice(0, limit).map((r) => toDeliveryView(r.delivery, r.attempts));
  const last = page[page.length - 1];
  return { data: page, next_after: rows.length > limit && last ? last.id : null };
}

/** Queues a finished (succeeded or failed) delivery again, now, from the start of the retry schedule. */
export async function retryDelivery(ctx: WebhookContext, orgId: number | undefined, endpointId: number, deliveryId: number): Promise<{ delivery_id: number; status: 'pending' }> {
  await ownEndpoint(ctx, orgId, endpointId);
  const result = await requeueDelivery(ctx.store, endpointId, deliveryId, ctx.clock.now());
  if (result === 'not_found') throw new DialtoneError('webhook_delivery_not_found', `No delivery ${deliveryId} for webhook endpoint ${endpointId}.`);
  if (result === 'pending') throw new DialtoneError('webhook_delivery_pending', `Delivery ${deliveryId} is still pending: it will be attempted on its schedule.`);
  ctx.wake();
  return { delivery_id: deliveryId, status: 'pending' };
}
