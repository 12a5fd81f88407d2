// How a run looks to the organization that owns it.
import { DialtoneError } from '../errors.js';
import type { AnsweredBy, RunMode, RunState } from '../store/schema/schema.js';
import { selectRecentRuns, selectRunDetails, selectRunEvents, type RunDetailsRow } from '../store/statements/run-reads.js';
import type { Store } from '../store/engine/store.js';
import { isTerminal } from './states.js';

export interface RunView {
  id: number;
  name: string;
  state: RunState;
  mode: RunMode;
  workflow_uuid: string;
  agent_uuid: string | null;
  definition_id: number;
  definition_version: number;
  phone_number: string;
  caller_id: string | null;
  telephony_configuration_id: number;
  initial_context: Record<string, unknown> | null;
  outcome_reason: string | null;
  raw_provider_status: string | null;
  provider_call_id: string | null;
  created_at: string;
  updated_at: string;
  /** When a run queued outside calling hours becomes due (null: due when queued). */
  scheduled_for: string | null;
  /** When a dispatcher took the run from the queue. */
  claimed_at: string | null;
  /** When the dial request went to the provider. */
  dial_sent_at: string | null;
  ringing_at: string | null;
  answered_at: string | null;
  ended_at: string | null;
  cancel_requested_at: string | null;
  /** A campaign's attempt: its campaign, contact and attempt number; null for a direct run. */
  campaign_id: number | null;
  contact_id: number | null;
  attempt: number | null;
  /** Who answered (answering-machine detection): null until decided, and on runs that never asked. */
  answered_by: AnsweredBy | null;
  /** The provider's own words for that verdict (Twilio's `machine_end_beep`). */
  raw_answered_by: string | null;
  /** What the agent runtime reported the call concluded (POST /runtime/runs/{id}/result); null until it does. */
  result: Record<string, unknown> | null;
}

export const iso = (ms: number): string => new Date(ms).toISOString();
const isoOrNull = (ms: number | null): string | null => (ms === null ? null : iso(ms));

/** The run as the API shows it, from its row with its workflow's UUID and definition's version. */
export function toRunView(row: RunDetailsRow): RunView {
  return {
    id: row.id,
    name: row.name ?? '',
    state: row.state,
    mode: row.mode,
    workflow_uuid: row.workflow_uuid,
    agent_uuid: row.trigger_uuid,
    definition_id: row.definition_id,
    definition_version: row.definition_version,
    phone_number: row.phone_number,
    caller_id: row.caller_id,
    telephony_configuration_id: row.telephony_configuration_id,
    initial_context: row.initial_context === null ? null : (JSON.parse(row.initial_context) as Record<string, unknown>),
    outcome_reason: row.outcome_reason,
    raw_provider_status: row.raw_provider_status,
    provider_call_id: row.provider_call_id,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
    scheduled_for: isoOrNull(row.scheduled_for),
    claimed_at: isoOrNull(row.claimed_at),
    dial_sent_at: isoOrNull(row.dial_sent_at),
    ringing_at: isoOrNull(row.ringing_at),
    answered_at: isoOrNull(row.answered_at),
    ended_at: isoOrNull(row.ended_at),
    cancel_requested_at: isoOrNull(row.cancel_requested_at),
    // A webhook payload fixed before migration 010 has none of the three.
    campaign_id: row.campaign_id ?? null,
    contact_id: row.contact_id ?? null,
    attempt: row.attempt ?? null,
    // Nor has one fixed before migration 018 these two.
    answered_by: row.answered_by ?? null,
    raw_answered_by: row.raw_answered_by ?? null,
    // A webhook payload fixed before migration 019 has none.
    result: row.result === null || row.result === undefined ? null : (JSON.parse(row.result) as RunView['result']),
  };
}

/** A run of the given organization; another organization's run is "not found", never "forbidden". */
export async function getRun(store: Store, orgId: number | undefined, runId: number): Promise<RunView> {
  const row = await selectRunDetails(store, runId, orgId);
  if (!row) throw new DialtoneError('workflow_run_not_found', `No workflow run ${runId}.`);
  return toRunView(row);
}

export async function listRuns(store: Store, orgId: number, limit: number): Promise<RunView[]> {
  return (await selectRecentRuns(store, orgId, limit)).map(toRunView);
}

export interface RunEventView {
  seq: number;
  type: string;
  at: string;
  data: Record<string, unknown>;
}

export interface RunEventsPage {
  data: RunEventView[];
  /**
   * Pass as `after` for the next page. Null only once nothing can follow: the run has ended and
   * this page holds its last event. A live run's last page gives the cursor to poll from.
   */
  next_after: number | null;
}

/** A run's events in order, after a cursor (`seq`). The run must be the organization's. */
export async function listRunEvents(store: Store, orgId: number | undefined, runId: number, after: number, limit: number): Promise<RunEventsPage> {
  const run = await getRun(store, orgId, runId);
  // One more than the page: whether anything follows it.
  const rows = await selectRunEvents(store, runId, after, limit + 1);
  const page = rows.slice(0, limit).map((r) => ({ seq: r.seq, type: r.type, at: iso(r.at), data: r.data }));
  const last = page[page.length - 1]?.seq ?? after;
  const complete = rows.length <= limit && isTerminal(run.state);
  return { data: page, next_after: complete ? null : last };
}
