// What the agent runtime does to its run through Dialtone (docs/design.md, "Agent runtime hand-off"):
// reports what the call concluded (the run's `result`), appends events of its own (`agent.*`),
// hangs up, and the run's side of a transfer (asked, then its outcome applied once) and of digits
// sent (the provider side is dispatch/call-control.ts). Each is one write through the run's compare-and-set, so a run that has ended refuses
// all three (run_already_ended, with its state) and none can undo an ending: a result stays as it
// was when the run ended, and the provider's `completed` after an agent's hang-up matches no
// predecessor of a terminal state.
import type { Deps } from '../deps.js';
import { DialtoneError } from '../errors.js';
import { writeTransition } from '../store/statements/run-writes.js';
import type { RunState } from '../store/schema/schema.js';
import { AGENT_EVENT_TYPE, DTMF_EVENT, DTMF_WEBHOOK_TYPE, TRANSFER_EVENT, TRANSFER_WEBHOOK_TYPE, webhookTypeForState } from '../webhooks/event-types.js';
import { resultProblems } from '../workflows/result-schema.js';
import { loadRunDefinition } from './run-definition.js';
import { getRun, type RunView } from './read-run.js';
import { isTerminal, RUN_STATES } from './states.js';

/** The most a result may hold, as JSON text (UTF-8 bytes). */
export const RESULT_MAX_BYTES = 64 * 1024;
/** The most an agent event's data may hold, as JSON text (UTF-8 bytes). */
export const AGENT_EVENT_MAX_BYTES = 16 * 1024;
/** An agent event's name: `agent.` and a lower-case snake_case word of up to 64 characters. */
export const AGENT_EVENT_NAME = /^agent\.[a-z][a-z0-9_]{0,63}$/;
/** The longest reason an agent may give for hanging up. */
export const HANGUP_REASON_MAX_LENGTH = 500;

/** States a runtime's report may still be written in: every state but the terminal ones. */
const NOT_ENDED: readonly RunState[] = RUN_STATES.filter((state) => !isTerminal(state));

async function ended(deps: Deps, runId: number): Promise<DialtoneError> {
  const run = await getRun(deps.store, undefined, runId);
  return new DialtoneError('run_already_ended', `Run ${run.name} already ended (${run.state}).`, { extra: { state: run.state, outcome_reason: run.outcome_reason } });
}

function tooLarge(what: string, bytes: number, max: number): DialtoneError {
  return new DialtoneError('payload_too_large', `The ${what} is ${bytes} bytes as JSON; the limit is ${max}.`);
}

/**
 * An event of the runtime's on a run that has not ended, with `columns` written in the same
 * statement; durable, since the runtime is told it was kept. Undefined when the run has ended.
 */
async function writeRuntimeEvent(deps: Deps, runId: number, type: 'result' | `agent.${string}`, webhookType: string, data: Record<string, unknown>, columns: { result?: string }) {
  const at = deps.clock.now();
  const written = await deps.store.transaction('durable', (trx) =>
    writeTransition(trx, runId, { ...columns, updated_at: at }, { from: NOT_ENDED }, { type, at, data, webhookType }),
  );
  if (written && written.webhookDeliveries > 0) deps.signals.outbox();
  return written;
}

/**
 * Stores what the call concluded (replacing an earlier report) after checking it against the
 * definition's result_schema, every problem listed; the `run.result` message carries it, and the
 * run (GET, the list, `run.ended`) shows it from then on.
 */
export async function reportResult(deps: Deps, runId: number, data: Record<string, unknown>): Promise<RunView> {
  const text = JSON.stringify(data);
  const bytes = Buffer.byteLength(text);
  if (bytes > RESULT_MAX_BYTES) throw tooLarge('result', bytes, RESULT_MAX_BYTES);
  const found = await loadRunDefinition(deps.store, runId);
  if (!found) throw new DialtoneError('workflow_run_not_found', `No workflow run ${runId}.`);
  if (isTerminal(found.run.state)) throw await ended(deps, runId);
  const schema = found.graph.result_schema;
  if (schema !== undefined) {
    const errors = resultProblems(schema, data);
    if (errors.length > 0) throw new DialtoneError('result_invalid', 'The result does not satisfy the result_schema of the run\'s definition.', { errors });
  }
  if (!(await writeRuntimeEvent(deps, runId, 'result', 'run.result', { result: data }, { result: text }))) throw await ended(deps, runId);
  return getRun(deps.store, undefined, runId);
}

/** Appends an event of the runtime's own (`agent.<name>`) to the run's log; its seq is returned. */
export async function appendAgentEvent(deps: Deps, runId: number, type: string, data: Record<string, unknown>): Promise<{ seq: number; type: string; at: number }> {
  const bytes = Buffer.byteLength(JSON.stringify(data));
  if (bytes > AGENT_EVENT_MAX_BYTES) throw tooLarge('event\'s data', bytes, AGENT_EVENT_MAX_BYTES);
  const at = deps.clock.now();
  const written = await writeRuntimeEvent(deps, runId, type as `agent.${string}`, AGENT_EVENT_TYPE, data, {});
  if (!written) throw await ended(deps, runId);
  return { seq: written.seq, type, at };
}

/**
 * Ends an answered call at the agent's word: the run ends `completed` (`agent_hangup`, the reason in
 * its event) before the line is put down, so the provider's own report of the hang-up changes
 * nothing. The node holding the call puts it down (at once when that is this node, else on its next
 * tick, dispatch/live-calls.ts). A call not answered yet is not the runtime's to end: 409.
 */
export async function hangUpByAgent(deps: Deps, runId: number, reason: string | undefined): Promise<RunView> {
  const applied = await deps.lifecycle.transition(runId, 'completed', {
    at: deps.clock.now(),
    reason: 'agent_hangup',
    onlyFrom: 'in_progress',
    durable: true,
    ...(reason !== undefined ? { data: { agent_reason: reason } } : {}),
  });
  if (!applied) {
    const run = await getRun(deps.store, undefined, runId);
    if (isTerminal(run.state)) throw await ended(deps, runId);
    throw new DialtoneError('run_not_answered', `Run ${run.name} is ${run.state}: only an answered call can be hung up by its agent.`, { extra: { state: run.state } });
  }
  await deps.signals.hangUp(runId);
  return getRun(deps.store, undefined, runId);
}

/** The outcome_reason of a run whose callee was transferred to a target who answered. */
export const TRANSFERRED = 'transferred';

/** Why a transfer is not the runtime's to ask now: the run's state or a transfer under way. */
async function notTransferable(deps: Deps, runId: number): Promise<DialtoneError> {
  const run = await getRun(deps.store, undefined, runId);
  if (isTerminal(run.state)) return ended(deps, runId);
  if (run.state !== 'in_progress') return new DialtoneError('run_not_answered', `Run ${run.name} is ${run.state}: only an answered call can be transferred or sent digits.`, { extra: { state: run.state } });
  return new DialtoneError('transfer_in_progress', `Run ${run.name} has a transfer under way; its outcome comes first.`);
}

/** What a transfer request records: the target, the caller ID the target sees (null: the route's own). */
export interface TransferRecord {
  to: string;
  callerId: string | null;
  announce?: string;
}

/**
 * Records that the runtime asked for a transfer (a `transfer` event, status `requested`, with the
 * target) and marks it under way, on an answered run with no transfer under way; otherwise the
 * problem says why (409). Durable: the provider is asked only once it is recorded.
 */
export async function beginTransfer(deps: Deps, runId: number, transfer: TransferRecord): Promise<void> {
  const at = deps.clock.now();
  const data = { status: 'requested', to: transfer.to, caller_id: transfer.callerId, ...(transfer.announce !== undefined ? { announce: transfer.announce } : {}) };
  const written = await deps.store.transaction('durable', (trx) =>
    writeTransition(trx, runId, { transfer_status: 'pending', updated_at: at }, { from: ['in_progress'], transfer: 'not_pending' }, { type: TRANSFER_EVENT, at, data, webhookType: TRANSFER_WEBHOOK_TYPE }),
  );
  if (!written) throw await notTransferable(deps, runId);
  if (written.webhookDeliveries > 0) deps.signals.outbox();
}

/** The outcome of a transfer, as the run records it (TransferOutcome without its call and run). */
export interface TransferEnding {
  result: 'answered' | 'busy' | 'no_answer' | 'failed' | 'refused';
  raw: string;
  at: number;
}

/**
 * Applies a transfer's outcome once (the first of any duplicates, on any node): a target who
 * answered ends the run `completed` (`transferred`); any other outcome is a `transfer` event with
 * the result and the provider's words, and the call stays the agent's (in_progress). True when
 * this call ended the run; false when it changed nothing or the run goes on.
 */
export async function endTransfer(deps: Deps, runId: number, ending: TransferEnding): Promise<{ applied: boolean; endedRun: boolean }> {
  if (ending.result === 'answered') {
    const written = await deps.store.transaction('durable', (trx) =>
      writeTransition(
        trx,
        runId,
        { state: 'completed', outcome_reason: TRANSFERRED, raw_provider_status: ending.raw, transfer_status: 'answered', updated_at: ending.at, ended_at: ending.at, deadline_at: null, lease_owner: null, lease_expires_at: null },
        { from: ['in_progress'], transfer: 'pending' },
        { type: 'completed', at: ending.at, data: { reason: TRANSFERRED, provider_status: ending.raw, transfer_result: 'answered' }, webhookType: webhookTypeForState('completed') },
      ),
    );
    if (!written) return { applied: false, endedRun: false };
    deps.lifecycle.applied({ runId, to: 'completed', seq: written.seq, webhookDeliveries: written.webhookDeliveries });
    return { applied: true, endedRun: true };
  }
  // A run that ended meanwhile (the callee hung up while the target rang) keeps its ending; the
  // transfer's outcome is still recorded for the record, once.
  const written = await deps.store.transaction('durable', (trx) =>
    writeTransition(
      trx,
      runId,
      { transfer_status: ending.result, updated_at: ending.at },
      { from: RUN_STATES, transfer: 'pending' },
      { type: TRANSFER_EVENT, at: ending.at, data: { status: ending.result, provider_status: ending.raw }, webhookType: TRANSFER_WEBHOOK_TYPE },
    ),
  );
  if (written && written.webhookDeliveries > 0) deps.signals.outbox();
  return { applied: written !== undefined, endedRun: false };
}

/** Records digits sent on an answered call (a `dtmf` event), once the provider took them. */
export async function recordDigits(deps: Deps, runId: number, digits: string): Promise<{ seq: number; at: number }> {
  const at = deps.clock.now();
  const written = await deps.store.transaction('durable', (trx) =>
    writeTransition(trx, runId, { updated_at: at }, { from: ['in_progress'] }, { type: DTMF_EVENT, at, data: { digits }, webhookType: DTMF_WEBHOOK_TYPE }),
  );
  if (!written) throw await notTransferable(deps, runId);
  if (written.webhookDeliveries > 0) deps.signals.outbox();
  return { seq: written.seq, at };
}
