import type { AnsweredBy } from '../../store/schema/schema.js';
// Twilio's CallStatus words, as its status callbacks send them, in Dialtone's terms. `queued` and
// `initiated` say nothing a run does not already know (it is `dialing`), so they move nothing.
import type { ProviderEventKind } from '../provider.js';

const KINDS: Record<string, ProviderEventKind | null> = {
  queued: null,
  initiated: null,
  ringing: 'ringing',
  'in-progress': 'answered',
  answered: 'answered',
  completed: 'completed',
  busy: 'busy',
  'no-answer': 'no_answer',
  failed: 'failed',
  canceled: 'canceled',
};

/** The event a CallStatus means; null for statuses that move nothing; undefined for a word Twilio does not send. */
export function eventKindOf(callStatus: string): ProviderEventKind | null | undefined {
  return Object.hasOwn(KINDS, callStatus) ? KINDS[callStatus] : undefined;
}

/**
 * Twilio's AnsweredBy, normalized: `human`, `fax`, `unknown`, and every `machine_*` word
 * (`machine_start`, `machine_end_beep`, `machine_end_silence`, `machine_end_other`) a machine.
 */
export function answeredByOf(raw: string): AnsweredBy {
  if (raw === 'human') return 'human';
  if (raw === 'fax') return 'fax';
  if (raw.startsWith('machine_')) return 'machine';
  return 'unknown';
}
