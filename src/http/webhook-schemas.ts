// The webhook messages as the OpenAPI document describes them (its `webhooks` section, OpenAPI
// 3.1): one entry per event type of the registry (webhooks/event-types.ts), so a type added there
// is documented without an edit here. Each type belongs to a family whose body it is sent with
// (webhooks/message.ts builds them); a type no family claims stops the document from being built,
// and test/openapi.test.ts with it, rather than being documented wrongly.
import { Type, type TSchema } from '@sinclair/typebox';
import { CAMPAIGN_STATES, PAUSED_REASONS } from '../store/schema/schema.js';
import { WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../webhooks/event-types.js';
import { NullableStringEnum, StringEnum } from './schemas.js';

export const WebhookEventTypeSchema = StringEnum(WEBHOOK_EVENT_TYPES, { $id: 'WebhookEventType', title: 'WebhookEventType', description: 'A webhook message type' });

interface Family {
  /** Its component's name under components.schemas. */
  schemaName: string;
  claims: (type: WebhookEventType) => boolean;
  /** What a message of this type reports. */
  summary: (type: WebhookEventType) => string;
  /** Its body, whose `type` is one of the family's types. */
  body: (types: readonly WebhookEventType[]) => TSchema;
  /** Sent only to endpoints that name the type, not to those subscribed to every type. */
  onlyNamed?: boolean;
}

const Timestamp = Type.String({ format: 'date-time', description: 'When the event happened' });

/** What each run event type reports, where the generic sentence says too little. */
const RUN_EVENT_SUMMARIES: Partial<Record<WebhookEventType, string>> = {
  'run.deferred': 'A queued run was put off to its next calling-hours window when it was claimed (it stays queued).',
  'run.answered_by': 'Answering-machine detection decided who answered (the run\'s answered_by and raw_answered_by say what; the event\'s data says what Dialtone did about it).',
  'run.ended': 'A run ended, in any terminal state (the run in the message says which, and why).',
  'run.result': 'The agent runtime reported what the call concluded, or replaced its report (the run\'s `result`; the event\'s data carries it too).',
  'run.agent_event': 'The agent runtime appended an event of its own to the run (its type is `agent.<name>`, its data as the runtime sent it).',
  'run.transfer': 'The agent runtime asked for a transfer (the event\'s data: `status` requested, `to`, `caller_id`), or the transfer ended without the target answering (`status` busy, no_answer, failed or refused, and the provider\'s words); the call then returns to the agent. A transfer the target answered ends the run instead (run.ended, outcome_reason transferred).',
  'run.dtmf': 'Digits were sent on the call at the agent runtime\'s word (the event\'s data: `digits`).',
};

const FAMILIES: readonly Family[] = [
  {
    schemaName: 'RunWebhookMessage',
    claims: (type) => type.startsWith('run.'),
    summary: (type) => RUN_EVENT_SUMMARIES[type] ?? `A run entered the state ${type.slice('run.'.length)}.`,
    body: (types) =>
      Type.Object(
        {
          type: StringEnum(types),
          timestamp: Timestamp,
          data: Type.Object({
            // Documentation only (never compiled), so the references are the document's own.
            run: Type.Unsafe({ $ref: '#/components/schemas/WorkflowRun', description: 'The run as GET /workflow-runs/{id} showed it when the event happened' }),
            event: Type.Unsafe({ $ref: '#/components/schemas/WorkflowRunEvent' }),
          }),
        },
        { title: 'RunWebhookMessage', description: 'A change of one of the organization\'s runs. Messages of one run are sent in order.' },
      ),
  },
  {
    schemaName: 'CampaignWebhookMessage',
    claims: (type) => type.startsWith('campaign.'),
    summary: (type) => `A campaign's state changed: ${type}.`,
    body: (types) =>
      Type.Object(
        {
          type: StringEnum(types),
          timestamp: Timestamp,
          data: Type.Object({
            campaign: Type.Object(
              {
                id: Type.Integer(),
                name: Type.String(),
                state: StringEnum(CAMPAIGN_STATES),
                paused_reason: NullableStringEnum(PAUSED_REASONS, { description: 'Why a paused campaign is paused; null otherwise' }),
              },
              { description: 'The campaign as the change left it (its progress: GET /campaigns/{id})' },
            ),
          }),
        },
        { title: 'CampaignWebhookMessage', description: 'A change of one of the organization\'s campaigns.' },
      ),
  },
  {
    schemaName: 'AuditWebhookMessage',
    claims: (type) => type.startsWith('audit.'),
    summary: () => 'An entry was written to the organization\'s audit log (a key created or revoked, a workflow created, drafted, published or archived, …), as GET /audit-events lists it, secrets redacted. Only a key with the admin scope may subscribe an endpoint to it.',
    onlyNamed: true,
    body: (types) =>
      Type.Object(
        {
          type: StringEnum(types),
          timestamp: Timestamp,
          data: Type.Object({ audit_event: Type.Unsafe({ $ref: '#/components/schemas/AuditEvent' }) }),
        },
        { title: 'AuditWebhookMessage', description: 'A change of how the organization is set up, as its audit log recorded it. No order between messages: sort by the entry\'s id.' },
      ),
  },
  {
    schemaName: 'TestWebhookMessage',
    claims: (type) => type === 'webhook.test',
    summary: () => 'A test message, sent on request (POST /webhook-endpoints/{id}/test).',
    body: (types) =>
      Type.Object(
        { type: StringEnum(types), timestamp: Timestamp, data: Type.Object({ endpoint_id: Type.Integer({ minimum: 1, description: 'The endpoint the test was asked for' }) }) },
        { title: 'TestWebhookMessage', description: 'A test message.' },
      ),
  },
];

function familyOf(type: WebhookEventType): Family {
  const family = FAMILIES.find((candidate) => candidate.claims(type));
  if (!family) throw new Error(`Webhook event type ${type} belongs to no message family in http/webhook-schemas.ts: say which body it is sent with.`);
  return family;
}

/** Plain JSON (no TypeBox symbols), as the document carries it. */
const plain = (schema: TSchema): Record<string, unknown> => JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;

/** The message bodies by component name, each listing the types of its family the registry has. */
export function webhookMessageSchemas(): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const family of FAMILIES) {
    const types = WEBHOOK_EVENT_TYPES.filter((type) => familyOf(type) === family);
    if (types.length > 0) out[family.schemaName] = plain(family.body(types));
  }
  return out;
}

/** The Standard Webhooks headers every message carries. */
const SIGNATURE_HEADERS = [
  { name: 'webhook-id', description: 'The message id: the same on every attempt and for every endpoint; drop duplicates by it', example: 'msg_run7_3' },
  { name: 'webhook-timestamp', description: 'Seconds since the epoch when this attempt was signed; refuse messages too far from now', example: '1767225600' },
  {
    name: 'webhook-signature',
    description: 'Space-separated `v1,<base64 HMAC-SHA256>` signatures of `<webhook-id>.<webhook-timestamp>.<body>` with the endpoint\'s secret (two while a rotated secret overlaps)',
    example: 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
  },
];

/** A camelCase operationId from an event type: run.in_progress → runInProgressWebhook. */
function operationIdOf(type: string): string {
  const words = type.split(/[._]/);
  return `${words.map((word, i) => (i === 0 ? word : word.charAt(0).toUpperCase() + word.slice(1))).join('')}Webhook`;
}

/** The document's `webhooks`: what each event type's message is, as the endpoint receives it. */
export function webhooksSection(): Record<string, unknown> {
  return Object.fromEntries(
    WEBHOOK_EVENT_TYPES.map((type) => {
      const family = familyOf(type);
      return [
        type,
        {
          post: {
            operationId: operationIdOf(type),
            summary: type,
            description: `${family.summary(type)} Sent to every enabled endpoint of the organization subscribed to \`${type}\`${family.onlyNamed ? ' by name (not to those subscribed to every type)' : ' (or to every type)'}, signed to the Standard Webhooks specification, and retried on WEBHOOK_RETRY_SCHEDULE until it is answered 2xx or the schedule ends.`,
            tags: ['Webhooks'],
            security: [],
            parameters: SIGNATURE_HEADERS.map(({ name, description, example }) => ({ in: 'header', name, required: true, description, schema: { type: 'string' }, example })),
            requestBody: { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/${family.schemaName}` } } } },
            responses: {
              '2XX': { description: 'Received: the delivery succeeded and is not sent again.' },
              '410': { description: 'Gone: the endpoint is disabled (disabled_reason gone) and sent nothing more until it is enabled again.' },
              default: { description: 'Any other answer, or none within WEBHOOK_TIMEOUT_MS: the delivery is retried while the schedule lasts; an endpoint with no success for WEBHOOK_DISABLE_AFTER_MS is disabled (disabled_reason failing).' },
            },
          },
        },
      ];
    }),
  );
}
