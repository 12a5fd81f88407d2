// Provider events become run transitions here, whichever node receives them: the node that dialed
// (simulator, SIP) or any node that takes a provider callback (Twilio). Duplicates and late events
// are harmless: the transition's compare-and-set simply does not match.
import type { Deps } from '../deps.js';
import type { RunState } from '../store/schema/schema.js';
import type { AppliedTransition } from '../runs/transition-run.js';
import type { DecodedRoute, ProviderEvent, ProviderEventKind } from '../telephony/provider.js';

const EVENT_STATE: Record<ProviderEventKind, RunState> = {
  ringing: 'ringing',
  answered: 'in_progress',
  completed: 'completed',
  busy: 'busy',
  no_answer: 'no_answer',
  rejected: 'rejected',
  failed: 'failed',
  canceled: 'canceled',
};

const EVENT_REASON: Partial<Record<ProviderEventKind, string>> = {
  completed: 'hangup',
  busy: 'busy',
  no_answer: 'no_answer',
  rejected: 'rejected',
  failed: 'provider_failed',
  canceled: 'provider_canceled',
};

export function ringTimeoutOf(deps: Deps, route: Pick<DecodedRoute, 'ringTimeoutMs'>): number {
  return route.ringTimeoutMs ?? deps.config.RING_TIMEOUT_MS;
}

export async function applyProviderEvent(deps: Deps, provider: string, event: ProviderEvent, ringTimeoutMs: number, data?: Record<string, unknown>): Promise<AppliedTransition | undefined> {
  const to = EVENT_STATE[event.kind];
  const grace = deps.config.REAPER_GRACE_MS;
  const deadlineAt =
    to === 'ringing' ? event.at + ringTimeoutMs + grace : to === 'in_progress' ? event.at + deps.config.MAX_CALL_DURATION_MS + grace : undefined;
  const applied = await deps.lifecycle.transition(event.runId, to, {
    at: event.at,
    // A provider that knows why the call ended (a message left on a machine) says so over its status word.
    reason: event.reason ?? EVENT_REASON[event.kind] ?? undefined,
    rawProviderStatus: event.rawStatus,
    providerCallId: event.providerCallId,
    ...(deadlineAt !== undefined ? { deadlineAt } : {}),
    ...(data ? { data } : {}),
  });
  deps.metrics.providerEvents.inc({ provider, kind: event.kind, applied: applied ? 'yes' : 'no' });
  if (!applied) deps.logger.debug({ runId: event.runId, kind: event.kind }, 'provider event did not move the run (duplicate, late or out of order)');
  return applied;
}

/**
 * Applies an event learned outside the node holding the call (a provider callback on any node, or
 * reconciliation asking the provider), once, then tells this node's dispatcher, which only brings
 * its timers in step if it holds the call: the event is never applied a second time.
 */
export async function applyReportedEvent(
  deps: Deps,
  event: ProviderEvent,
  route: Pick<DecodedRoute, 'provider' | 'ringTimeoutMs'>,
  data?: Record<string, unknown>,
): Promise<AppliedTransition | undefined> {
  const applied = await applyProviderEvent(deps, route.provider, event, ringTimeoutOf(deps, route), data);
  deps.signals.providerEvent(event, { moved: applied !== undefined });
  return applied;
}
