// Initiate Call, in all four forms: the request's own checks (initial_context's bounds, the phone
// number), then admission's stages in the contract's order (admission/admission.ts; docs/design.md,
// "Check order"; authentication and body parsing come before, in the HTTP layer), idempotency, and
// one durable insert that makes admission's last checks exactly.
import type { Deps } from '../deps.js';
import type { AuthenticatedKey } from '../auth/api-keys.js';
import { DialtoneError, validationFailed } from '../errors.js';
import { admitAgentAndRoute, variablesRefusal, type AdmittedAgentRoute, type Target } from '../admission/admission.js';
import { askCallingPolicy, type InsertQuestion, type PolicyVerdict } from '../admission/policy.js';
import { createRun, type CreatedRun } from '../runs/create-run.js';
import type { RunMode } from '../store/schema/schema.js';
import type { StoreTransaction } from '../store/engine/store.js';
import { claimIdempotencyKey, completeClaim, parseIdempotencyKey, releaseClaim, storedResponse, type Claim } from './idempotency.js';
import { parseDestination, type Destination } from '../shared/phone-number.js';

export interface InitiateCallBody {
  phone_number: string;
  initial_context?: Record<string, unknown> | null;
  telephony_configuration_id?: number | null;
}

export interface InitiateCallResult {
  status: string;
  workflow_run_id: number;
  workflow_run_name: string;
  /** With status "scheduled": when the deferred run becomes due. */
  scheduled_for?: string;
}

/** What the operation answers: a new run, or (same Idempotency-Key and payload) the first answer again. */
export type InitiateCallOutcome =
  | { replayed: false; status: 200; result: InitiateCallResult; json: string }
  | { replayed: true; status: number; json: string };

export interface InitiateCallOptions {
  /** The raw Idempotency-Key header, checked in its turn (after the target and body checks), and the request's fingerprint. */
  idempotency?: { header: string | string[] | undefined; fingerprint: () => string };
}

/** Nesting depth of a JSON value: a scalar is 0, `{}` or `{"a":1}` is 1. */
export function jsonDepth(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  let deepest = 0;
  for (const child of children) deepest = Math.max(deepest, jsonDepth(child));
  return 1 + deepest;
}

function checkInitialContext(deps: Deps, context: Record<string, unknown>): string {
  const serialized = JSON.stringify(context);
  const bytes = Buffer.byteLength(serialized, 'utf8');
  const { INITIAL_CONTEXT_MAX_BYTES: maxBytes, INITIAL_CONTEXT_MAX_DEPTH: maxDepth } = deps.config;
  if (bytes > maxBytes) {
    throw validationFailed([{ pointer: '/initial_context', detail: `Is ${bytes} bytes of JSON; the limit is ${maxBytes}.` }]);
  }
  const depth = jsonDepth(context);
  if (depth > maxDepth) {
    throw validationFailed([{ pointer: '/initial_context', detail: `Is nested ${depth} levels deep; the limit is ${maxDepth}.` }]);
  }
  return serialized;
}

/** What a request names and passed every check with, before idempotency and the policy. */
interface CheckedRequest extends AdmittedAgentRoute {
  destination: Destination;
  initialContextJson: string | null;
}

/** The organization settings a request is checked against (they travel with its API key). */
export type InitiateCaller = Pick<AuthenticatedKey, 'orgId' | 'limits'> & Partial<Pick<AuthenticatedKey, 'callingHours'>>;

/** The request's own checks, then admission's stages 1 to 4 (target, route, readiness, variables); throws the refusal the request gets. */
async function checkRequest(deps: Deps, caller: InitiateCaller, target: Target, mode: RunMode, body: InitiateCallBody): Promise<CheckedRequest> {
  const initialContext = body.initial_context ?? null;
  const initialContextJson = initialContext === null ? null : checkInitialContext(deps, initialContext);
  const parsed = parseDestination(body.phone_number);
  if (!parsed.ok) throw invalidPhoneNumber(parsed.detail);
  const admitted = await admitAgentAndRoute(deps, { orgId: caller.orgId, target, mode, routeId: body.telephony_configuration_id, destination: parsed.destination.kind });
  const missing = variablesRefusal(admitted.target.graph, initialContext);
  if (missing) throw missing;
  return { ...admitted, destination: parsed.destination, initialContextJson };
}

/**
 * Admission's stage 5, the calling policy (docs/design.md, "Calling policy"), with the questions
 * the caller's insert answers (none for a dry run); a real request's refusals are counted (a dry
 * run's are not refusals).
 */
async function checkPolicy(deps: Deps, caller: InitiateCaller, destination: Destination, answeredAtInsert: readonly InsertQuestion[]): Promise<Extract<PolicyVerdict, { admitted: true }>> {
  const settings = { numberCap: caller.limits.numberCap, callingHours: caller.callingHours };
  const verdict = await askCallingPolicy(deps.store, settings, { orgId: caller.orgId, destination }, deps.clock.now(), { answeredAtInsert });
  if (verdict.admitted) return verdict;
  // A dry run inserts nothing, so it answers every question now: its refusals are not counted.
  if (answeredAtInsert.length > 0) countPolicyRefusal(deps, verdict.refusal);
  throw verdict.refusal;
}

/** `?dry_run=true`: the answer when every check passes; nothing is created, dialed or claimed. */
export interface DryRunResult {
  status: 'valid';
  workflow_run_id: null;
  workflow_run_name: null;
  definition_version: number;
  telephony_configuration_id: number;
  scheduled_for: string | null;
}

/**
 * Runs every check a real request runs, in the same order, and persists nothing: the
 * Idempotency-Key is checked as the real request checks it (a malformed one is the same 422) but
 * never claimed or looked up, so no key is consumed.
 */
export async function dryRunInitiateCall(
  deps: Deps,
  caller: InitiateCaller,
  target: Target,
  mode: RunMode,
  body: InitiateCallBody,
  options: { idempotencyHeader?: string | string[] | undefined } = {},
): Promise<DryRunResult> {
  const checked = await checkRequest(deps, caller, target, mode, body);
  parseIdempotencyKey(options.idempotencyHeader);
  // Nothing is inserted, so every question of the policy is answered now.
  const policy = await checkPolicy(deps, caller, checked.destination, []);
  return {
    status: 'valid',
    workflow_run_id: null,
    workflow_run_name: null,
    definition_version: checked.target.definition.version,
    telephony_configuration_id: checked.route.row.id,
    scheduled_for: policy.scheduledFor === null ? null : new Date(policy.scheduledFor).toISOString(),
  };
}

export async function initiateCall(
  deps: Deps,
  caller: InitiateCaller,
  target: Target,
  mode: RunMode,
  body: InitiateCallBody,
  options: InitiateCallOptions = {},
): Promise<InitiateCallOutcome> {
  const { orgId } = caller;
  const { target: resolved, route, destination, initialContextJson } = await checkRequest(deps, caller, target, mode, body);
  const idempotencyKey = parseIdempotencyKey(options.idempotency?.header);

  let policy: Extract<PolicyVerdict, { admitted: true }>;
  try {
    // The suppression list is read and the cap counted once, exactly, by the creating insert
    // (after the Idempotency-Key claim, which a refusal there releases): reading them here too
    // would cost a query per request. With an Idempotency-Key the list is answered now, so that
    // a suppressed number is refused before the key is looked at (docs/design.md, "Check order");
    // without one nothing stands between, and the insert's own check is the only read.
    policy = await checkPolicy(deps, caller, destination, idempotencyKey === undefined ? ['suppression', 'cap'] : ['cap']);
  } catch (error) {
    // The retry of a request that created its run must get that answer again, not a refusal
    // caused by a suppression added (or calling hours closed) since.
    if (idempotencyKey !== undefined && options.idempotency) {
      const stored = await storedResponse(deps, orgId, { key: idempotencyKey, fingerprint: options.idempotency.fingerprint() });
      if (stored) {
        deps.metrics.idempotency.inc({ outcome: 'replayed' });
        return { replayed: true, status: stored.status, json: stored.body };
      }
    }
    throw error;
  }
  const { scheduledFor } = policy;

  // Idempotency comes last among the checks: a request refused above stored nothing, so the
  // client may fix it and retry with the same key.
  let claim: Claim | undefined;
  if (idempotencyKey !== undefined && options.idempotency) {
    const claimed = await claimIdempotencyKey(deps, orgId, { key: idempotencyKey, fingerprint: options.idempotency.fingerprint() }).catch((error: unknown) => {
      if (error instanceof DialtoneError && (error.code === 'idempotency_key_in_use' || error.code === 'idempotency_key_reused')) {
        deps.metrics.idempotency.inc({ outcome: error.code === 'idempotency_key_in_use' ? 'in_use' : 'reused' });
      }
      throw error;
    });
    if (claimed.kind === 'replay') {
      deps.metrics.idempotency.inc({ outcome: 'replayed' });
      return { replayed: true, status: claimed.status, json: claimed.body };
    }
    claim = claimed.claim;
  }

  const maxQueued = caller.limits.maxQueuedRuns ?? deps.config.MAX_QUEUED_RUNS_PER_ORG;
  // A deferred run is counted, exactly, with the organization's other deferred runs (runs/queue-cap.ts).
  const deferred = scheduledFor !== null;
  const nearCap = deferred || !(await deps.queuedRuns.farBelowCap(deps.store, orgId, maxQueued, deps.config.QUEUE_CAP_LOCK_MARGIN, deps.clock.now()));
  try {
    const run = await createRun(
      deps.store,
      {
        orgId,
        workflowId: resolved.workflow.id,
        definitionId: resolved.definition.id,
        definitionVersion: resolved.definition.version,
        mode,
        triggerUuid: resolved.triggerUuid,
        phoneNumber: destination.value,
        callerId: route.callerId,
        telephonyConfigurationId: route.row.id,
        initialContextJson,
        scheduledFor,
      },
      deps.clock.now(),
      {
        ...(nearCap ? { queueCap: { maxQueued, callsPerSecond: route.row.calls_per_second, scheduled: deferred } } : {}),
        ...(policy.atInsert ? { checks: policy.atInsert } : {}),
        // The Idempotency-Key's answer commits with the run; without a key there is nothing else
        // to write, and on PostgreSQL the run is then one statement.
        ...(claim ? { onCreated: (trx: StoreTransaction, created: CreatedRun) => completeClaim(trx, claim, 200, JSON.stringify(responseOf(created, scheduledFor)), created.id, deps.clock.now()) } : {}),
      },
    );
    deps.metrics.runsCreated.inc({ mode });
    if (claim) deps.metrics.idempotency.inc({ outcome: 'created' });
    // A deferred run is not due: the dispatcher's poll finds it when it is.
    if (!deferred) deps.signals.work();
    if (run.webhookDeliveries > 0) deps.signals.outbox();
    const result = responseOf(run, scheduledFor);
    return { replayed: false, status: 200, result, json: JSON.stringify(result) };
  } catch (error) {
    if (error instanceof DialtoneError && error.code === 'queue_full') deps.metrics.queueFull.inc();
    countPolicyRefusal(deps, error);
    // Nothing was created: give the key back so the client's retry is not told "in use".
    if (claim) await releaseClaim(deps.store, claim).catch((releaseError: unknown) => deps.logger.warn({ err: releaseError }, 'could not release an Idempotency-Key claim; it frees itself after IDEMPOTENCY_LOCK_MS'));
    throw error;
  }
}

function responseOf(run: { id: number; name: string; state: string }, scheduledFor: number | null): InitiateCallResult {
  // A deferred run's state is `queued`; the answer says it is waiting for its calling hours.
  if (scheduledFor !== null) return { status: 'scheduled', workflow_run_id: run.id, workflow_run_name: run.name, scheduled_for: new Date(scheduledFor).toISOString() };
  return { status: run.state, workflow_run_id: run.id, workflow_run_name: run.name };
}

function countPolicyRefusal(deps: Deps, error: unknown): void {
  if (error instanceof DialtoneError && (error.code === 'number_suppressed' || error.code === 'number_frequency_capped' || error.code === 'outside_calling_hours')) deps.metrics.policyRefusals.inc({ code: error.code });
}

function invalidPhoneNumber(detail: string): DialtoneError {
  return new DialtoneError('invalid_phone_number', detail, { errors: [{ pointer: '/phone_number', detail }] });
}
