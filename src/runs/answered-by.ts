// Who answered a run's call, recorded once: the normalized verdict and the provider's own words
// in the run's row, and an `answered_by` event (reported as `run.answered_by`) with what Dialtone
// did about it. The run's state does not change; a later verdict (a duplicate callback, the one
// reconciliation found after the callback's) matches nothing, so the first one stands.
import type { RunColumns, TransitionWrite } from '../store/statements/run-writes.js';
import type { AnsweredBy } from '../store/schema/schema.js';
import { ANSWERED_BY_EVENT, ANSWERED_BY_WEBHOOK_TYPE } from '../webhooks/event-types.js';
import { LIVE_STATES, TERMINAL_STATES } from './states.js';

export interface AnsweredByDetails {
  at: number;
  answeredBy: AnsweredBy;
  /** The provider's own words (Twilio's AnsweredBy). */
  raw: string;
  /**
   * The outcome the verdict already decides (`voicemail_left`: the message is being left and the
   * call ends after it), written now so the call's end keeps it.
   */
  outcomeReason?: string;
  /** What the event says besides the verdict: the action taken, the message left. */
  data?: Record<string, unknown>;
}

/** A verdict may come in any state after the dial, even once the call has ended (a late callback). */
const AFTER_THE_DIAL = [...LIVE_STATES, ...TERMINAL_STATES];

export function answeredByWrite(runId: number, details: AnsweredByDetails): TransitionWrite {
  const columns: RunColumns = {
    answered_by: details.answeredBy,
    raw_answered_by: details.raw,
    updated_at: details.at,
    ...(details.outcomeReason !== undefined ? { outcome_reason: details.outcomeReason } : {}),
  };
  return {
    runId,
    columns,
    guard: { from: AFTER_THE_DIAL, answeredByUnset: true },
    event: {
      type: ANSWERED_BY_EVENT,
      at: details.at,
      webhookType: ANSWERED_BY_WEBHOOK_TYPE,
      data: { answered_by: details.answeredBy, provider_verdict: details.raw, ...details.data },
    },
  };
}
