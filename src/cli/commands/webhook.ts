// `dialtone webhook …`: webhook endpoints (register, enable, rotate the secret, test, delete) and their deliveries.
import { InvalidArgumentError, type Command } from 'commander';
import type { Deps } from '../../deps.js';
import { isWebhookEventType, WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../../webhooks/event-types.js';
import type { EndpointView, WebhookContext } from '../../webhooks/endpoints.js';
import { requireOrg } from '../action.js';
import { formatPage, formatRecord, formatTable, type Printable } from '../output.js';
import { positiveInt } from '../parsers.js';
import { dual, orgOf } from '../remote.js';

// Loaded when one of these commands runs (src/cli/README.md).
const endpoints = () => import('../../webhooks/endpoints.js');

function eventTypes(text: string): WebhookEventType[] {
  const types = text.split(',').map((t) => t.trim()).filter((t) => t !== '');
  const unknown = types.filter((t) => !isWebhookEventType(t));
  if (unknown.length > 0) throw new InvalidArgumentError(`unknown event type ${unknown.join(', ')}; expected some of ${WEBHOOK_EVENT_TYPES.join(', ')}`);
  return types as WebhookEventType[];
}

function deliveryStatus(text: string): 'pending' | 'succeeded' | 'failed' {
  if (text !== 'pending' && text !== 'succeeded' && text !== 'failed') throw new InvalidArgumentError('expected pending, succeeded or failed');
  return text;
}

/** An endpoint as one record, its subscribed types on one line. */
function endpointRecord(view: Pick<EndpointView, 'events'>): Printable {
  return { ...view, events: view.events.join(',') || '(all)' };
}

type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

interface DeliveryPage {
  data: { id: number; event_type: string; run_id: number | null; status: string; attempts: { http_status: number | null; error: string | null }[]; next_attempt_at: string | null }[];
  next_after: number | null;
}

function deliveriesOutput(page: DeliveryPage) {
  const rows = page.data.map((d) => {
    const last = d.attempts[d.attempts.length - 1];
    return { id: d.id, event_type: d.event_type, run_id: d.run_id, status: d.status, attempts: d.attempts.length, last_result: last ? (last.http_status ?? last.error) : null, next_attempt_at: d.next_attempt_at };
  });
  return { json: page, text: formatPage({ rows, next_after: page.next_after }, ['id', 'event_type', 'run_id', 'status', 'attempts', 'last_result', 'next_attempt_at'], 'No deliveries.') };
}

const createdText = (created: Pick<EndpointView, 'events'>) => `${formatRecord(endpointRecord(created))}\n\nKeep the secret: it is not shown again (rotate-secret makes a new one).`;
const retriedText = (deliveryId: number) => `Delivery ${deliveryId} queued again; a running service sends it within WEBHOOK_POLL_INTERVAL_MS.`;

/** The CLI's view of webhooks: a running service's delivery worker finds what it queues by polling. */
function webhookContext(deps: Deps): WebhookContext {
  return { store: deps.store, cipher: deps.cipher, clock: deps.clock, config: deps.config, wake: () => undefined };
}

export function webhookCommands(program: Command): void {
  const webhook = program.command('webhook').description('webhook endpoints and their deliveries');
  const endpointColumns = ['id', 'url', 'events', 'enabled', 'disabled_reason', 'description', 'created_at'];
  webhook
    .command('create')
    .description('register a webhook endpoint; prints its signing secret (shown only here and on rotation)')
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .requiredOption('--url <url>', 'where messages are POSTed (https, public addresses only unless WEBHOOK_ALLOW_PRIVATE_NETWORKS)')
    .option('--events <types>', `comma-separated types (default: all): ${WEBHOOK_EVENT_TYPES.join(', ')}`, eventTypes)
    .option('--description <text>', 'free text for your own reference')
    .action(
      dual(
        async (deps, opts: { org?: number; url: string; events?: WebhookEventType[]; description?: string }) => {
          const orgId = orgOf(opts);
          const { createEndpoint } = await endpoints();
          await requireOrg(deps, orgId);
          const created = await createEndpoint(webhookContext(deps), orgId, { url: opts.url, events: opts.events, description: opts.description ?? null });
          return { json: created, text: createdText(created) };
        },
        async (client, opts: { url: string; events?: WebhookEventType[]; description?: string }) => {
          const created = await client.webhookEndpoints.create({ url: opts.url, ...(opts.events !== undefined ? { events: opts.events } : {}), description: opts.description ?? null });
          return { json: created, text: createdText(created) };
        },
      ),
    );
  webhook
    .command('list')
    .description("list an organization's webhook endpoints")
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .action(
      dual(
        async (deps, opts: { org?: number }) => {
          const orgId = orgOf(opts);
          const { listEndpoints } = await endpoints();
          await requireOrg(deps, orgId);
          const rows = await listEndpoints(webhookContext(deps), orgId);
          return { json: rows, text: formatTable(rows.map(endpointRecord), endpointColumns) };
        },
        async (client) => {
          const rows = (await client.webhookEndpoints.list()).data;
          return { json: rows, text: formatTable(rows.map(endpointRecord), endpointColumns) };
        },
      ),
    );
  webhook
    .command('deliveries')
    .description("list an endpoint's deliveries, newest first, with their attempts")
    .argument('<endpoint_id>', 'webhook endpoint id', positiveInt)
    .option('--status <status>', 'pending, succeeded or failed', deliveryStatus)
    .option('--limit <n>', 'how many (at most 100)', positiveInt, 20)
    .option('--after <id>', 'deliveries older than this id (the next_after of the previous page)', positiveInt)
    .action(
      dual(
        async (deps, endpointId: number, opts: { status?: DeliveryStatus; limit: number; after?: number }) => {
          const { listDeliveries } = await endpoints();
          return deliveriesOutput(await listDeliveries(webhookContext(deps), undefined, endpointId, { status: opts.status, after: opts.after, limit: Math.min(opts.limit, 100) }));
        },
        async (client, endpointId: number, opts: { status?: DeliveryStatus; limit: number; after?: number }) =>
          deliveriesOutput(await client.webhookEndpoints.deliveries(endpointId, { status: opts.status, after: opts.after, limit: Math.min(opts.limit, 100) })),
      ),
    );
  webhook
    .command('retry')
    .description('queue a succeeded or failed delivery again, now')
    .argument('<endpoint_id>', 'webhook endpoint id', positiveInt)
    .argument('<delivery_id>', 'delivery id', positiveInt)
    .action(
      dual(
        async (deps, endpointId: number, deliveryId: number) => {
          const { retryDelivery } = await endpoints();
          const result = await retryDelivery(webhookContext(deps), undefined, endpointId, deliveryId);
          return { json: result, text: retriedText(deliveryId) };
        },
        async (client, endpointId: number, deliveryId: number) => {
          const result = await client.webhookEndpoints.retryDelivery(endpointId, deliveryId);
          return { json: result, text: retriedText(deliveryId) };
        },
      ),
    );
  for (const [name, enabled] of [['enable', true], ['disable', false]] as const) {
    webhook
      .command(name)
      .description(enabled ? 'enable an endpoint (its pending deliveries go out again)' : 'disable an endpoint (nothing is sent to it until it is enabled)')
      .argument('<endpoint_id>', 'webhook endpoint id', positiveInt)
      .action(
        dual(
          async (deps, endpointId: number) => {
            const { patchEndpoint } = await endpoints();
            const view = await patchEndpoint(webhookContext(deps), undefined, endpointId, { enabled });
            return { json: view, text: formatRecord(endpointRecord(view)) };
          },
          async (client, endpointId: number) => {
            const view = await client.webhookEndpoints.update(endpointId, { enabled });
            return { json: view, text: formatRecord(endpointRecord(view)) };
          },
        ),
      );
  }
  webhook
    .command('rotate-secret')
    .description('make a new signing secret; the old one keeps signing beside it for WEBHOOK_SECRET_OVERLAP_MS')
    .argument('<endpoint_id>', 'webhook endpoint id', positiveInt)
    .action(
      dual(
        async (deps, endpointId: number) => {
          const { rotateSecret } = await endpoints();
          const result = await rotateSecret(webhookContext(deps), undefined, endpointId);
          return { json: result, text: `New secret: ${result.secret}\nKeep it: it is not shown again.` };
        },
        async (client, endpointId: number) => {
          const result = await client.webhookEndpoints.rotateSecret(endpointId);
          return { json: result, text: `New secret: ${result.secret}\nKeep it: it is not shown again.` };
        },
      ),
    );
  webhook
    .command('test')
    .description('send a webhook.test message to an endpoint')
    .argument('<endpoint_id>', 'webhook endpoint id', positiveInt)
    .action(
      dual(
        async (deps, endpointId: number) => {
          const { sendTestMessage } = await endpoints();
          const result = await sendTestMessage(webhookContext(deps), undefined, endpointId);
          return { json: result, text: `Queued delivery ${result.delivery_id} (${result.message_id}).` };
        },
        async (client, endpointId: number) => {
          const result = await client.webhookEndpoints.test(endpointId);
          return { json: result, text: `Queued delivery ${result.delivery_id} (${result.message_id}).` };
        },
      ),
    );
  webhook
    .command('delete')
    .description('delete an endpoint with its deliveries (pending ones are never sent)')
    .argument('<endpoint_id>', 'webhook endpoint id', positiveInt)
    .action(
      dual(
        async (deps, endpointId: number) => {
          const { removeEndpoint } = await endpoints();
          await removeEndpoint(webhookContext(deps), undefined, endpointId);
          return { json: { id: endpointId, deleted: true }, text: `Deleted webhook endpoint ${endpointId}.` };
        },
        async (client, endpointId: number) => {
          await client.webhookEndpoints.delete(endpointId);
          return { json: { id: endpointId, deleted: true }, text: `Deleted webhook endpoint ${endpointId}.` };
        },
      ),
    );
}
