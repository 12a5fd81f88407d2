// Final SIP responses to an INVITE, in Dialtone's terms (RFC 3261 section 21).
import type { ProviderEventKind } from '../provider.js';

export function outcomeOfFinalResponse(status: number): Exclude<ProviderEventKind, 'ringing' | 'answered' | 'completed'> {
  if (status === 486 || status === 600) return 'busy';
  if (status === 480 || status === 408) return 'no_answer';
  if (status === 603) return 'rejected';
  if (status === 487) return 'canceled';
  return 'failed';
}
