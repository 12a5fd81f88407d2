// Initiate Call, in all four forms: the checks of DESIGN.md section 2 in their contract order
// (after authentication and body parsing, which the HTTP layer does), then one durable insert.
import type { Deps } from '../deps.js';
import type { AuthenticatedKey } from '../auth/api-keys.js';
import { DialtoneError, validationFailed } from '../errors.js';
import { checkCallingPolicy, type PolicyDecision } from '../policy/calling-policy.js';
import { createRun } from '../runs/create-run.js';
import type { RunMode } from '../store/schema.js';
import { decodeJson } from '../store/store.js';
import { selectTelephonyConfiguration } from '../telephony/configurations.js';
import { readinessProblems } from '../telephony/readiness.js';
import { missingRequiredVariables, templateContext } from '../workflows/definition.js';
import { claimIdempotencyKey, completeClaim, parseIdempotencyKey, releaseClaim, storedResponse, type Claim } from './idempotency.js';
import { parseDestination } from './phone-number.js';
import { resolveTarget, type Target } from './resolve-target.js';

export interface InitiateCallBody {
  phone_number: string;
  initial_context?: Record<string, unknown> | null;
  telephony_configuration_id?: number | null;
}

export interface InitiateCallResult {
  status: string;
  workflow_run_id: number;
  workflow_run_name: string;
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

export async function initiateCall(
  deps: Deps,
  caller: Pick<AuthenticatedKey, 'orgId' | 'limits'>,
  target: Target,
  mode: RunMode,
  body: InitiateCallBody,
  options: InitiateCallOptions = {},
): Promise<InitiateCallOutcome> {
  const { orgId } = caller;
  const initialContext = body.initial_context ?? null;
  const initialContextJson = initialContext === null ? null : checkInitialContext(deps, initialContext);
  const parsed = parseDestination(body.phone_number);
  if (!parsed.ok) throw invalidPhoneNumber(parsed.detail);

  const resolved = await resolveTarget(deps.store, orgId, target, mode, deps.lookups);

  const telephony = await selectTelephonyConfiguration(deps.store, orgId, body.telephony_configuration_id, deps.lookups);
  if (parsed.destination.kind === 'sip_uri' && telephony.provider !== 'sip') {
    throw invalidPhoneNumber(`A SIP URI can only be dialed through a SIP telephony configuration; "${telephony.name}" is ${telephony.provider}.`);
  }
  const problems = readinessProblems(telephony, { publicBaseUrl: deps.config.PUBLIC_BASE_URL });
  if (problems.length > 0) {
    throw new DialtoneError('telephony_not_ready', `Telephony configuration ${telephony.id} cannot place calls: ${problems.join(' ')}`);
  }

  const missing = missingRequiredVariables(resolved.graph, templateContext(resolved.graph, initialContext));
  if (missing.length > 0) {
    throw new DialtoneError('missing_template_variables', `Required variables missing from initial_context: ${missing.join(', ')}.`, {
      errors: missing.map((name) => ({ pointer: `/initial_context/${name}`, detail: `"${name}" is required by the agent.` })),
      extra: { missing_variables: missing },
    });
  }

  const idempotencyKey = parseIdempotencyKey(options.idempotency?.header);

  // Calling policy (suppression, per-number cap; DESIGN.md section 7). It governs phone numbers; a
  // SIP URI is an address inside the caller's own network.
  let policy: PolicyDecision | undefined;
  if (parsed.destination.kind === 'e164') {
    try {
      // The cap is counted once, exactly, in the creating transaction (after the Idempotency-Key
      // claim, which a refusal there releases): counting it here too would cost a query per request.
      policy = await checkCallingPolicy(deps, orgId, { numberCap: caller.limits.numberCap }, parsed.destination.value, deps.clock.now(), { persisting: true });
    } catch (error) {
      // The retry of a request that created its run must get that answer again, not a refusal
      // caused by a suppression added since.
      if (idempotencyKey !== undefined && options.idempotency) {
        const stored = await storedResponse(deps, orgId, { key: idempotencyKey, fingerprint: options.idempotency.fingerprint() });
        if (stored) {
          deps.metrics.idempotency.inc({ outcome: 'replayed' });
          return { replayed: true, status: stored.status, json: stored.body };
        }
      }
      countPolicyRefusal(deps, error);
      throw error;
    }
  }

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

  const callerIds = decodeJson<string[]>(telephony.caller_ids);
  const maxQueued = caller.limits.maxQueuedRuns ?? deps.config.MAX_QUEUED_RUNS_PER_ORG;
  const nearCap = !(await deps.queuedRuns.farBelowCap(deps.store, orgId, maxQueued, deps.config.QUEUE_CAP_LOCK_MARGIN, deps.clock.now()));
  let json = '';
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
        phoneNumber: parsed.destination.value,
        callerId: callerIds[0] ?? null,
        telephonyConfigurationId: telephony.id,
        initialContextJson,
      },
      deps.clock.now(),
      {
        ...(nearCap ? { queueCap: { maxQueued, callsPerSecond: telephony.calls_per_second } } : {}),
        ...(policy?.enforceInTransaction ? { beforeInsert: policy.enforceInTransaction } : {}),
        onCreated: async (trx, created) => {
          json = JSON.stringify(responseOf(created));
          if (claim) await completeClaim(trx, claim, 200, json, created.id, deps.clock.now());
        },
      },
    );
    deps.metrics.runsCreated.inc({ mode });
    if (claim) deps.metrics.idempotency.inc({ outcome: 'created' });
    deps.signals.work();
    if (run.webhookDeliveries > 0) deps.signals.outbox();
    return { replayed: false, status: 200, result: responseOf(run), json };
  } catch (error) {
    if (error instanceof DialtoneError && error.code === 'queue_full') deps.metrics.queueFull.inc();
    countPolicyRefusal(deps, error);
    // Nothing was created: give the key back so the client's retry is not told "in use".
    if (claim) await releaseClaim(deps.store, claim).catch((releaseError: unknown) => deps.logger.warn({ err: releaseError }, 'could not release an Idempotency-Key claim; it frees itself after IDEMPOTENCY_LOCK_MS'));
    throw error;
  }
}

function responseOf(run: { id: number; name: string; state: string }): InitiateCallResult {
  return { status: run.state, workflow_run_id: run.id, workflow_run_name: run.name };
}

function countPolicyRefusal(deps: Deps, error: unknown): void {
  if (error instanceof DialtoneError && (error.code === 'number_suppressed' || error.code === 'number_frequency_capped')) deps.metrics.policyRefusals.inc({ code: error.code });
}

function invalidPhoneNumber(detail: string): DialtoneError {
  return new DialtoneError('invalid_phone_number', detail, { errors: [{ pointer: '/phone_number', detail }] });
}
