// The body of a webhook message, built from what the outbox fixed when the event happened: the
// run's row at that moment (shown exactly as GET /workflow-runs/{id} showed it then) and the event.
import { iso, toRunView } from '../runs/read-run.js';
import type { RunDetailsRow } from '../store/statements/run-reads.js';
import type { ClaimedDelivery } from '../store/statements/webhook-statements.js';

interface RunEventPayload {
  run: Omit<RunDetailsRow, 'workflow_uuid' | 'definition_version'>;
  event: { seq: number; type: string; at: number; data: Record<string, unknown> };
}

/** A test message's payload is its body, written whole when it is sent. */
export function testMessageBody(endpointId: number, at: number): string {
  return JSON.stringify({ type: 'webhook.test', timestamp: iso(at), data: { endpoint_id: endpointId } });
}

/** A campaign's message is written whole when the campaign changes (no run, no event to render). */
export function campaignMessageBody(type: string, at: number, campaign: { id: number; name: string; state: string; paused_reason: string | null }): string {
  return JSON.stringify({ type, timestamp: iso(at), data: { campaign: { id: campaign.id, name: campaign.name, state: campaign.state, paused_reason: campaign.paused_reason } } });
}

/** An audit entry's message is written whole with the entry, as the audit log's listing shows it. */
export function auditMessageBody(at: number, auditEvent: unknown): string {
  return JSON.stringify({ type: 'audit.event', timestamp: iso(at), data: { audit_event: auditEvent } });
}

export function messageBody(delivery: Pick<ClaimedDelivery, 'event_type' | 'payload' | 'workflow_uuid' | 'definition_version'>): string {
  if (delivery.event_type === 'webhook.test' || delivery.event_type.startsWith('campaign.') || delivery.event_type.startsWith('audit.')) return delivery.payload;
  const { run, event } = JSON.parse(delivery.payload) as RunEventPayload;
  const view = toRunView({ ...run, workflow_uuid: delivery.workflow_uuid ?? '', definition_version: delivery.definition_version ?? 0 });
  return JSON.stringify({
    type: delivery.event_type,
    timestamp: iso(event.at),
    data: { run: view, event: { seq: event.seq, type: event.type, at: iso(event.at), data: event.data } },
  });
}
