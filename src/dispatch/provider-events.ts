// Provider events become run transitions here, whichever node receives them: the node that dialed
// (simulator, SIP) or any node that takes a provider callback (Twilio). Duplicates and late events
// are harmless: the transition's compare-and-set simply does not match.
import type { Deps } from '../deps.js';
import type { RunState, TelephonyConfigurationRow } from '../store/schema.js';
import { decodeJson } from '../store/store.js';
import type { AppliedTransition } from '../runs/transition-run.js';
import type { ProviderEvent, ProviderEventKind } from '../telephony/provider.js';

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

export function ringTimeoutOf(deps: Deps, configuration: Pick<TelephonyConfigurationRow, 'settings'>): number {
  const settings = decodeJson<Record<string, unknown>>(configuration.settings);
  const value = settings.ring_timeout_ms;
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : deps.config.RING_TIMEOUT_MS;
}

export async function applyProviderEvent(deps: Deps, provider: string, event: ProviderEvent, ringTimeoutMs: number): Promise<AppliedTransition | undefined> {
  const to = EVENT_STATE[event.kind];
  const grace = deps.config.REAPER_GRACE_MS;
  const deadlineAt =
    to === 'ringing' ? event.at + ringTimeoutMs + grace : to === 'in_progress' ? event.at + deps.config.MAX_CALL_DURATION_MS + grace : undefined;
  const applied = await deps.lifecycle.transition(event.runId, to, {
    at: event.at,
    reason: EVENT_REASON[event.kind] ?? undefined,
    rawProviderStatus: event.rawStatus,
    providerCallId: event.providerCallId,
    ...(deadlineAt !== undefined ? { deadlineAt } : {}),
  });
  deps.metrics.providerEvents.inc({ provider, kind: event.kind, applied: applied ? 'yes' : 'no' });
  if (!applied) deps.logger.debug({ runId: event.runId, kind: event.kind }, 'provider event did not move the run (duplicate, late or out of order)');
  return applied;
}
