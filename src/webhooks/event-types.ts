// The messages a webhook endpoint can subscribe to, and which run state each run event becomes.
import { randomBytes } from 'node:crypto';
import { isTerminal, type RunState } from '../runs/states.js';

// run.deferred: a queued run put off to its next calling-hours window at claim time (it stays queued).
// run.answered_by: answering-machine detection decided who answered (the run's state is unchanged).
// run.result: the agent runtime reported (or replaced) what the call concluded; run.agent_event: it
// appended an event of its own (`agent.*`, docs/design.md, "Agent runtime hand-off"); run.transfer:
// the runtime asked for a transfer, or one ended without the target answering (an answered one
// ends the run: run.ended, `transferred`); run.dtmf: digits were sent on the call at its word.
// audit.event: an entry of the organization's audit log (docs/design.md, "Audit log"), sent only to
// endpoints that name it (never to those subscribed to every type), and named only by a key with
// the admin scope, since the audit log is the admin scope's to read.
// campaign.*: every change of a campaign's state the event stream reports: created (a draft),
// started, paused (by request, its circuit breaker or its ends_at), resumed, completed, canceled.
export const WEBHOOK_EVENT_TYPES = [
  'run.queued',
  'run.deferred',
  'run.dialing',
  'run.ringing',
  'run.in_progress',
  'run.answered_by',
  'run.ended',
  'run.result',
  'run.agent_event',
  'run.transfer',
  'run.dtmf',
  'campaign.created',
  'campaign.started',
  'campaign.paused',
  'campaign.resumed',
  'campaign.completed',
  'campaign.canceled',
  'audit.event',
  'webhook.test',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** The type of an event the agent runtime appends itself (its name is `agent.<name>`). */
export const AGENT_EVENT_TYPE = 'run.agent_event';

/** Every terminal state is reported as `run.ended` (the run in the message says which). */
export function webhookTypeForState(state: RunState): WebhookEventType {
  if (isTerminal(state)) return 'run.ended';
  return `run.${state}` as WebhookEventType;
}

/**
 * The run event that records who answered (answering-machine detection), and its message type:
 * `run.` and the event's type, as PostgreSQL's outbox trigger (migration 015) names every event
 * that is not a terminal state.
 */
export const ANSWERED_BY_EVENT = 'answered_by';
export const ANSWERED_BY_WEBHOOK_TYPE: WebhookEventType = 'run.answered_by';

/** The runtime's transfer (asked, or ended without an answer) and digits sent, as `run.` and the event's type (PostgreSQL's outbox trigger names them so too). */
export const TRANSFER_EVENT = 'transfer';
export const TRANSFER_WEBHOOK_TYPE: WebhookEventType = 'run.transfer';
export const DTMF_EVENT = 'dtmf';
export const DTMF_WEBHOOK_TYPE: WebhookEventType = 'run.dtmf';

export function isWebhookEventType(value: string): value is WebhookEventType {
  return (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value);
}

export type CampaignEventType = Extract<WebhookEventType, `campaign.${string}`>;

/**
 * The message id of a campaign's change: its campaign, type and time, read by people, and a random
 * part, because two changes of one type can share a millisecond (pause, resume, pause) and a
 * receiver drops a message whose id it has seen. Drawn once when the change is written, so every
 * endpoint and every retry of one message carry the same id.
 */
export function campaignMessageId(campaignId: number, type: CampaignEventType, at: number): string {
  return `msg_campaign${campaignId}_${type.slice('campaign.'.length)}_${at}_${randomBytes(6).toString('base64url')}`;
}

/** The audit log's message type, sent only to endpoints that name it. */
export const AUDIT_WEBHOOK_TYPE: WebhookEventType = 'audit.event';

/** The message id of an audit entry: its id is unique, so the message's is, on every endpoint and retry. */
export function auditMessageId(auditEventId: number): string {
  return `msg_audit${auditEventId}`;
}

/**
 * The message id of a run event (`webhook-id`): the same for every endpoint and every retry, so a
 * receiver can drop duplicates by it; derived from the run and its event sequence, so it is unique.
 */
export function runMessageId(runId: number, seq: number): string {
  return `msg_run${runId}_${seq}`;
}
