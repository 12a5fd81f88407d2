// The agent runtime's control of its answered call through the call's provider (docs/agent-runtime.md):
// a blind transfer of the callee to another destination, and DTMF digits sent to the far end. The
// run's side (what is recorded, applied once) is runs/runtime-actions.ts; this module finds the
// call, checks what the route's provider can do and what the calling policy allows, and asks the
// provider.
//
// A provider whose calls outlive the node (Twilio) is asked by whichever node takes the request,
// with the call's route decoded from the store; a call that lives in a node's process (simulator,
// SIP) is acted on only by the node holding it (signals.heldCall), so another node refuses with
// call_not_held_here and the runtime retries (a load balancer may send it elsewhere).
import type { Deps } from '../deps.js';
import { askCallingPolicy } from '../admission/policy.js';
import { DialtoneError, validationFailed } from '../errors.js';
import { decodeCallingHours, showOrganization } from '../orgs/organizations.js';
import type { RunDefinition } from '../runs/run-definition.js';
import { beginTransfer, endTransfer, recordDigits } from '../runs/runtime-actions.js';
import { getRun, type RunView } from '../runs/read-run.js';
import { isTerminal } from '../runs/states.js';
import { parseDestination } from '../shared/phone-number.js';
import { CallControlRefusedError, type LiveCall, type TelephonyProvider, type TransferOutcome } from '../telephony/provider.js';

/** What the runtime asks of a transfer (the HTTP body, named as the run records it). */
export interface TransferAsk {
  to: string;
  callerId?: string | undefined;
  announce?: string | undefined;
}

/** A target as logs may show it: its kind and its last two characters, never the whole number or address. */
export function maskTarget(target: string): string {
  return `${target.startsWith('+') ? '+' : target.slice(0, target.indexOf(':') + 1)}…${target.slice(-2)}`;
}

type Operation = 'transfer' | 'digits';

/** The live call of an answered run, and its provider, checked able to do `operation`. */
function callFor(deps: Deps, run: RunDefinition, operation: Operation): { call: LiveCall; provider: TelephonyProvider } {
  const decoded = deps.routes.decode(run.configuration);
  if (!decoded.ok) throw new DialtoneError('telephony_not_ready', `The run's telephony configuration ${run.configuration.id} is no longer valid.`);
  const { route } = decoded;
  const provider = deps.providers[route.provider];
  const able = operation === 'transfer' ? route.capabilities.supportsTransfer && provider.transfer !== undefined : route.capabilities.sendsDtmf && provider.sendDigits !== undefined;
  if (!able) {
    const what = operation === 'transfer' ? 'transfer calls (supportsTransfer)' : 'send DTMF digits (sendsDtmf)';
    const able = deps.registry.definitions.filter((d) => (operation === 'transfer' ? d.capabilities.supportsTransfer : d.capabilities.sendsDtmf)).map((d) => d.name);
    throw new DialtoneError('call_control_unsupported', `The run's provider, ${route.provider}, cannot ${what}; providers that can: ${able.join(', ') || 'none'}.`, { extra: { provider: route.provider, operation } });
  }
  if (isTerminal(run.run.state)) {
    throw new DialtoneError('run_already_ended', `Run ${run.run.name} already ended (${run.run.state}).`, { extra: { state: run.run.state } });
  }
  if (run.run.state !== 'in_progress') {
    throw new DialtoneError('run_not_answered', `Run ${run.run.name} is ${run.run.state}: only an answered call can be transferred or sent digits.`, { extra: { state: run.run.state } });
  }
  if (route.capabilities.callsOutliveNode) {
    if (!run.run.provider_call_id) throw new DialtoneError('run_not_answered', `Run ${run.run.name} has no call recorded yet.`, { extra: { state: run.run.state } });
    return { call: { runId: run.run.id, providerCallId: run.run.provider_call_id, route }, provider };
  }
  const held = deps.signals.heldCall(run.run.id);
  if (!held) throw new DialtoneError('call_not_held_here', `Run ${run.run.name}'s call is held by another node; send the request again.`);
  return { call: held, provider };
}

/**
 * The target a transfer may reach: a valid E.164 number, or a SIP URI where the route's provider
 * dials them, that passes the organization's calling policy as a direct call to it would
 * (suppression list, per-number cap, calling hours; admission/policy.ts), else 422.
 */
async function checkTarget(deps: Deps, run: RunDefinition, call: LiveCall, to: string): Promise<string> {
  const parsed = parseDestination(to);
  if (!parsed.ok) throw validationFailed([{ pointer: '/to', detail: parsed.detail }]);
  const { destination } = parsed;
  if (destination.kind === 'sip_uri' && !call.route.capabilities.dialsSipUris) {
    throw validationFailed([{ pointer: '/to', detail: `The run's provider, ${call.route.provider}, does not dial SIP URIs: give an E.164 number.` }]);
  }
  const org = await showOrganization(deps.store, run.run.org_id);
  const settings = {
    numberCap: org?.number_max_calls != null && org.number_window_seconds != null ? { maxCalls: org.number_max_calls, windowSeconds: org.number_window_seconds } : null,
    callingHours: org ? decodeCallingHours(org.calling_hours) : null,
  };
  const verdict = await askCallingPolicy(deps.store, settings, { orgId: run.run.org_id, destination }, deps.clock.now(), { answeredAtInsert: [] });
  // A target the policy would defer (outside calling hours) cannot wait: the callee is on the line.
  if (!verdict.admitted || verdict.scheduledFor !== null) {
    const refusal = verdict.admitted ? undefined : verdict.refusal;
    const reason = refusal?.code ?? 'outside_calling_hours';
    const detail = refusal?.message ?? 'The target is outside the organization\'s calling hours now.';
    throw new DialtoneError('transfer_target_refused', `The calling policy refuses the transfer's target: ${detail}`, { extra: { reason } });
  }
  return destination.value;
}

/**
 * Transfers the answered call's callee (cold): records the request, then asks the provider; its
 * outcome comes later (applyTransferOutcome). A provider that refuses at once (SIP 405/501 to
 * REFER) is reported (502, with its words) and recorded as the transfer's outcome, `refused`.
 */
export async function transferCall(deps: Deps, run: RunDefinition, ask: TransferAsk): Promise<RunView> {
  const { call, provider } = callFor(deps, run, 'transfer');
  const to = await checkTarget(deps, run, call, ask.to);
  const callerId = ask.callerId ?? null;
  if (callerId !== null) {
    const parsed = parseDestination(callerId);
    if (!parsed.ok || parsed.destination.kind !== 'e164') throw validationFailed([{ pointer: '/caller_id', detail: `"${callerId}" is not an E.164 number.` }]);
    if (!call.route.callerIds.includes(parsed.destination.value)) {
      throw validationFailed([{ pointer: '/caller_id', detail: 'Not one of the caller IDs of the run\'s telephony configuration.' }]);
    }
  }
  await beginTransfer(deps, run.run.id, { to, callerId, ...(ask.announce !== undefined ? { announce: ask.announce } : {}) });
  deps.logger.info({ runId: run.run.id, target: maskTarget(to) }, 'transfer asked by the agent runtime');
  try {
    await provider.transfer?.(call, { to, callerId, timeoutSeconds: Math.round(deps.config.TRANSFER_RING_TIMEOUT_MS / 1000), ...(ask.announce !== undefined ? { announce: ask.announce } : {}) });
  } catch (error) {
    // The provider did not take it: the transfer is over (refused, or failed) and the call stays the agent's.
    const refused = error instanceof CallControlRefusedError;
    const raw = refused ? error.rawStatus : error instanceof Error ? error.message : String(error);
    await endTransfer(deps, run.run.id, { result: refused ? 'refused' : 'failed', raw, at: deps.clock.now() });
    deps.logger.warn({ runId: run.run.id, target: maskTarget(to), err: error }, 'the provider did not take the transfer');
    throw new DialtoneError('call_control_refused', `The provider did not take the transfer: ${raw}`, { extra: { provider_status: raw } });
  }
  return getRun(deps.store, undefined, run.run.id);
}

/** Sends digits on the answered call through its provider, then records them (a `dtmf` event). */
export async function sendDigits(deps: Deps, run: RunDefinition, digits: string): Promise<{ seq: number; digits: string; at: string }> {
  const { call, provider } = callFor(deps, run, 'digits');
  try {
    await provider.sendDigits?.(call, digits);
  } catch (error) {
    const raw = error instanceof CallControlRefusedError ? error.rawStatus : error instanceof Error ? error.message : String(error);
    throw new DialtoneError('call_control_refused', `The provider did not send the digits: ${raw}`, { extra: { provider_status: raw } });
  }
  const recorded = await recordDigits(deps, run.run.id, digits);
  return { seq: recorded.seq, digits, at: new Date(recorded.at).toISOString() };
}

/**
 * A transfer's outcome as its provider reported it (Twilio's signed callback on any node, an
 * in-process provider's emitTransfer on the node holding the call): applied once. True when it
 * ended the run (the target answered): the call is the target's now, never to be put down.
 */
export async function applyTransferOutcome(deps: Deps, outcome: TransferOutcome): Promise<boolean> {
  const { applied, endedRun } = await endTransfer(deps, outcome.runId, { result: outcome.result, raw: outcome.raw, at: outcome.at });
  if (applied) deps.logger.info({ runId: outcome.runId, result: outcome.result }, 'transfer ended');
  return endedRun;
}
