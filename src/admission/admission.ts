// Admission: whether a number may be called through a route, decided once for every path that
// creates a run or dials one (docs/design.md, "Check order"): a direct call and its dry run
// (calls/initiate-call.ts), a campaign's creation (campaigns/campaigns.ts) and each of its attempts
// (campaigns/scheduler.ts), and the dispatcher's claim (claim.ts here). The stages, in their one
// written order:
//
//   1. target     the agent or workflow, and the definition to run (target.ts)
//   2. route      the telephony configuration: the one named, else the organization's default
//   3. readiness  whether that route can place a call now (its provider says: telephony_not_ready),
//                 and can do what the agent asks of it (machine_detection_unsupported)
//   4. variables  the definition's required template variables, given or defaulted
//   5. policy     suppression list, per-number cap, calling hours (policy.ts)
//
// Stages 1 to 3 depend on the target and the route only, so a campaign asks them once per tick for
// all its contacts (and once at creation); 4 and 5 depend on the callee. Each stage answers the
// refusal a direct call gets (a DialtoneError with its problem code); what a campaign's attempt
// makes of the same refusal is campaigns/scheduler.ts's to say, from the same code. What stays for
// later is returned, not re-derived: the checks the creating insert makes exactly (policy.ts's
// `atInsert`) and, at claim time, the screen and hold of claim.ts.
import type { Deps } from '../deps.js';
import { DialtoneError } from '../errors.js';
import type { Destination } from '../shared/phone-number.js';
import type { RunMode, TelephonyConfigurationRow } from '../store/schema/schema.js';
import { decodeJson } from '../store/engine/store.js';
import { selectTelephonyConfiguration } from '../telephony/configurations.js';
import type { AnsweringMachine } from '../workflows/answering-machine.js';
import { missingRequiredVariables, templateContext, type DefinitionGraph } from '../workflows/definition.js';
import { selectSuppressedAmong } from '../store/statements/suppression-statements.js';
import { refuseUndetectableRoute } from './machine-detection.js';
import { askCallingPolicy, type PolicySettings, type PolicyVerdict } from './policy.js';
import { resolveTarget, type ResolvedTarget, type Target } from './target.js';

export type { ResolvedTarget, Target };

/** What the stages need of the dependencies. */
export type AdmissionDeps = Pick<Deps, 'store' | 'lookups' | 'routes' | 'config' | 'registry'>;

/** The route a run dials through, admitted: found, active and ready. */
export interface AdmittedRoute {
  row: TelephonyConfigurationRow;
  /** The caller ID the run presents (the route's first), or null. */
  callerId: string | null;
}

/** Stage 1: the target and the definition it runs (refusals: agent_not_found, workflow_not_found, workflow_not_published). */
export function admitTarget(deps: AdmissionDeps, orgId: number, target: Target, mode: RunMode): Promise<ResolvedTarget> {
  return resolveTarget(deps.store, orgId, target, mode, deps.lookups);
}

/**
 * Stages 2 and 3: the route named (`routeId`), else the organization's default, and whether it can
 * place a call now (refusals: telephony_configuration_not_found, telephony_not_configured,
 * telephony_not_ready; and invalid_phone_number for a SIP URI through a route that cannot dial one).
 * Both are read from this node's lookup cache and the decoded route's cache: no query when warm.
 */
export async function admitRoute(deps: AdmissionDeps, orgId: number, routeId: number | null | undefined, destination?: Destination['kind']): Promise<AdmittedRoute> {
  const row = await selectTelephonyConfiguration(deps.store, orgId, routeId, deps.lookups);
  if (destination === 'sip_uri' && !deps.registry.capabilities(row.provider).dialsSipUris) {
    const dialers = deps.registry.definitions.filter((d) => d.capabilities.dialsSipUris).map((d) => d.name).join(', ') || 'none here';
    const detail = `A SIP URI can only be dialed through a telephony configuration whose provider dials SIP URIs (${dialers}); "${row.name}" is ${row.provider}.`;
    throw new DialtoneError('invalid_phone_number', detail, { errors: [{ pointer: '/phone_number', detail }] });
  }
  const problems = deps.routes.readiness(row, { publicBaseUrl: deps.config.PUBLIC_BASE_URL });
  if (problems.length > 0) {
    throw new DialtoneError('telephony_not_ready', `Telephony configuration ${row.id} cannot place calls: ${problems.join(' ')}`);
  }
  return { row, callerId: decodeJson<string[]>(row.caller_ids)[0] ?? null };
}

/** The agent and the route of a call or a campaign: stages 1 to 3, in order. */
export interface AdmittedAgentRoute {
  target: ResolvedTarget;
  route: AdmittedRoute;
}

export async function admitAgentAndRoute(
  deps: AdmissionDeps,
  request: {
    orgId: number;
    target: Target;
    mode: RunMode;
    routeId: number | null | undefined;
    destination?: Destination['kind'];
    /** A campaign's own answering-machine settings, which replace its agent's (null or absent: the agent's). */
    answeringMachine?: AnsweringMachine | null;
  },
): Promise<AdmittedAgentRoute> {
  const target = await admitTarget(deps, request.orgId, request.target, request.mode);
  const route = await admitRoute(deps, request.orgId, request.routeId, request.destination);
  // Readiness includes what the agent (or the campaign in its place) asks of the route: who answered, on a provider that can tell.
  refuseUndetectableRoute(deps, route.row, request.answeringMachine ?? target.graph.answering_machine);
  return { target, route };
}

/**
 * Stage 4: the definition's required variables, from its defaults overlaid by `initialContext`.
 * Undefined when every one is there; else the refusal (422 missing_template_variables).
 */
export function variablesRefusal(graph: DefinitionGraph, initialContext: Record<string, unknown> | null): DialtoneError | undefined {
  const missing = missingRequiredVariables(graph, templateContext(graph, initialContext));
  if (missing.length === 0) return undefined;
  return new DialtoneError('missing_template_variables', `Required variables missing from initial_context: ${missing.join(', ')}.`, {
    errors: missing.map((name) => ({ pointer: `/initial_context/${name}`, detail: `"${name}" is required by the agent.` })),
    extra: { missing_variables: missing },
  });
}

/** A callee of a batch (a campaign's due contact): its number (E.164), initial_context as stored, and its own time zone. */
export interface BatchCallee {
  phoneNumber: string;
  initialContextJson: string | null;
  timezone: string | null;
}

/**
 * Stages 4 and 5 for a batch of callees of one organization and one admitted target, at `now`, in
 * the written order for each: the variables, then the policy. The batch's suppression list is read
 * in one statement; the cap is left to each creating insert (asked now only for a callee that
 * calling hours refuse, to keep the order); calling hours are pure. Verdicts in the batch's order.
 */
export async function admitBatch(deps: Pick<AdmissionDeps, 'store'>, orgId: number, graph: DefinitionGraph, settings: PolicySettings, callees: readonly BatchCallee[], now: number): Promise<PolicyVerdict[]> {
  const variables = callees.map((c) => variablesRefusal(graph, c.initialContextJson === null ? null : (JSON.parse(c.initialContextJson) as Record<string, unknown>)));
  const asked = callees.filter((_, i) => variables[i] === undefined).map((c) => c.phoneNumber);
  const suppressedAmong = await selectSuppressedAmong(deps.store, orgId, asked, now);
  return Promise.all(
    callees.map((callee, i): Promise<PolicyVerdict> | PolicyVerdict => {
      const refusal = variables[i];
      if (refusal) return { admitted: false, refusal, retryAt: null };
      return askCallingPolicy(deps.store, settings, { orgId, destination: { kind: 'e164', value: callee.phoneNumber }, timezone: callee.timezone }, now, { answeredAtInsert: ['cap'], suppressedAmong });
    }),
  );
}
