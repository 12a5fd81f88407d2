// The agent runtime's API (docs/design.md, "Agent runtime hand-off"): the read of what to run, and
// the actions on its call (report a result, append its own events, hang up, transfer, send digits), each authorized by the
// per-run token it was handed with the answered call. A wrong, expired or missing token, another
// run's token, and an unknown run, all get the same 401: the token is the only thing that names a
// run here. The actions honour Idempotency-Key, scoped to the run.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from '@sinclair/typebox';
import { claimIdempotencyKey, completeClaim, parseIdempotencyKey, releaseClaim, requestFingerprint, type Claim } from '../../calls/idempotency.js';
import type { Deps } from '../../deps.js';
import { DialtoneError, type ErrorCode } from '../../errors.js';
import { loadRunDefinition, type RunDefinition } from '../../runs/run-definition.js';
import { AGENT_EVENT_MAX_BYTES, AGENT_EVENT_NAME, appendAgentEvent, hangUpByAgent, HANGUP_REASON_MAX_LENGTH, reportResult, RESULT_MAX_BYTES } from '../../runs/runtime-actions.js';
import { verifyRunToken } from '../../runtime/run-token.js';
import { sendDigits, transferCall } from '../../dispatch/call-control.js';
import { problemResponses } from '../problem-schemas.js';
import { IdempotencyHeaders, PathId, replayableResponse, WorkflowRunRef } from '../schemas.js';

export const RuntimeRun = Type.Object({
  run_id: Type.Integer(),
  run_name: Type.String(),
  state: Type.String(),
  mode: Type.String(),
  workflow_uuid: Type.String({ format: 'uuid' }),
  definition_version: Type.Integer(),
  definition: Type.Object({}, { additionalProperties: true, description: 'The pinned definition graph: nodes, edges, variables, and result_schema when it declares one' }),
  context: Type.Object({}, { additionalProperties: true, description: 'Variable defaults overlaid by the run\'s initial_context' }),
});

const ResultBody = Type.Object(
  { data: Type.Object({}, { additionalProperties: true, description: `What the call concluded; valid against the definition's result_schema when it declares one; at most ${RESULT_MAX_BYTES} bytes as JSON` }) },
  { additionalProperties: false },
);

const AgentEventBody = Type.Object(
  {
    type: Type.String({ pattern: AGENT_EVENT_NAME.source, description: 'The event\'s name, `agent.` and a lower-case snake_case word (for example agent.transcript_ready)' }),
    data: Type.Optional(Type.Object({}, { additionalProperties: true, description: `At most ${AGENT_EVENT_MAX_BYTES} bytes as JSON; {} when omitted` })),
  },
  { additionalProperties: false },
);

const AgentEventAnswer = Type.Object({
  seq: Type.Integer({ description: 'The event\'s place in the run\'s event log' }),
  type: Type.String(),
  at: Type.String({ format: 'date-time' }),
});

const HangupBody = Type.Object(
  { reason: Type.Optional(Type.String({ minLength: 1, maxLength: HANGUP_REASON_MAX_LENGTH, description: 'Why the agent ended the call; kept in the run\'s `completed` event as agent_reason' })) },
  { additionalProperties: false },
);

/** The longest announcement spoken to the callee before a transfer. */
const ANNOUNCE_MAX_LENGTH = 500;
/** The most digits one request sends. */
const DTMF_MAX_DIGITS = 64;

const TransferBody = Type.Object(
  {
    to: Type.String({ minLength: 1, maxLength: 256, description: 'The target: an E.164 number, or a sip:/sips: URI where the route\'s provider dials SIP URIs. It passes the organization\'s calling policy as a direct call to it would.' }),
    caller_id: Type.Optional(Type.String({ minLength: 1, maxLength: 32, description: 'The caller ID the target sees: one of the route\'s caller IDs; the route\'s first when omitted' })),
    announce: Type.Optional(Type.String({ minLength: 1, maxLength: ANNOUNCE_MAX_LENGTH, description: 'Spoken to the callee before the transfer (where the provider speaks: Twilio)' })),
  },
  { additionalProperties: false },
);

const DtmfBody = Type.Object(
  { digits: Type.String({ pattern: `^[0-9*#A-Dw]{1,${DTMF_MAX_DIGITS}}$`, description: `The digits to send: 0-9, *, #, A-D, and w for a half-second pause; 1 to ${DTMF_MAX_DIGITS}` }) },
  { additionalProperties: false },
);

const DtmfAnswer = Type.Object({
  seq: Type.Integer({ description: 'The `dtmf` event\'s place in the run\'s event log' }),
  digits: Type.String(),
  at: Type.String({ format: 'date-time' }),
});

const IdParams = Type.Object({ id: PathId('Workflow run id') });
/** Every action's refusals, besides its own. */
const ACTION_REFUSALS: ErrorCode[] = ['invalid_run_token', 'not_found', 'malformed_json', 'unsupported_media_type', 'payload_too_large', 'validation_failed', 'idempotency_key_in_use', 'idempotency_key_reused'];

const refuse = () => new DialtoneError('invalid_run_token', 'Send the run token handed over with the call as "Authorization: Bearer <token>".');

/**
 * Checks the token before anything of the request is read (an onRequest hook: the body is parsed
 * and validated after it), so nothing about the request is revealed to a caller without one.
 */
function checkToken(deps: Deps) {
  return async (request: FastifyRequest): Promise<void> => {
    const { id } = request.params as { id: string };
    const header = request.headers.authorization ?? '';
    const token = /^Bearer\s+(\S+)$/i.exec(header)?.[1];
    // The key the node holds, given or generated at first start (secret-key.ts): on the embedded
    // default DIALTONE_SECRET_KEY is unset and the key comes from its file, and tokens work there too.
    if (!token || !/^[1-9][0-9]{0,14}$/.test(id) || !deps.cipher.hasKey) throw refuse();
    if (!verifyRunToken(deps.cipher, Number(id), token, deps.clock.now())) throw refuse();
  };
}

/** The run the request's token opened (checkToken ran first), or the same 401 when it does not exist. */
async function authorizedRun(deps: Deps, request: FastifyRequest): Promise<RunDefinition> {
  const found = await loadRunDefinition(deps.store, Number((request.params as { id: string }).id));
  if (!found) throw refuse();
  return found;
}

/**
 * Runs an action once per Idempotency-Key: the key is the run's (scoped to its organization and
 * run id, so two runs' runtimes never share one), a retry with the same body gets the first answer
 * again (`Idempotent-Replayed: true`), a refusal gives the key back. The answer is stored after the
 * action's own durable write, in a transaction of its own: a node that dies between the two leaves
 * the key to be taken over after IDEMPOTENCY_LOCK_MS, and the retry acts again (a result is
 * replaced by the same, a hang-up finds the run ended, an event is appended twice).
 */
async function once(deps: Deps, request: FastifyRequest, reply: FastifyReply, run: RunDefinition, action: () => Promise<unknown>): Promise<FastifyReply> {
  const key = parseIdempotencyKey(request.headers['idempotency-key']);
  let claim: Claim | undefined;
  if (key !== undefined) {
    const fingerprint = requestFingerprint(request.method, request.url.split('?')[0] ?? '', request.body ?? null);
    const claimed = await claimIdempotencyKey(deps, run.run.org_id, { key: `runtime/${run.run.id}/${key}`, fingerprint });
    if (claimed.kind === 'replay') return reply.code(claimed.status).header('idempotent-replayed', 'true').type('application/json; charset=utf-8').send(claimed.body);
    claim = claimed.claim;
  }
  let json: string;
  try {
    json = JSON.stringify(await action());
    const done = claim;
    if (done) await deps.store.transaction('durable', (trx) => completeClaim(trx, done, 200, json, run.run.id, deps.clock.now()));
  } catch (error) {
    if (claim) await releaseClaim(deps.store, claim).catch((releaseError: unknown) => deps.logger.warn({ err: releaseError }, 'could not release an Idempotency-Key claim; it frees itself after IDEMPOTENCY_LOCK_MS'));
    throw error;
  }
  return reply.code(200).type('application/json; charset=utf-8').send(json);
}

export function runtimeRoutes(deps: Deps): FastifyPluginAsync {
  return async (app) => {
    app.get(
      '/runs/:id',
      {
        onRequest: checkToken(deps),
        schema: {
          operationId: 'getRuntimeRun',
          summary: 'Get Run For The Agent Runtime',
          description: 'The pinned definition and template context of a run, for the agent runtime the answered call was handed to.',
          tags: ['Agent runtime'],
          security: [{ RunToken: [] }],
          params: IdParams,
          response: { 200: RuntimeRun, ...problemResponses(['not_found', 'invalid_run_token']) },
        },
      },
      async (request) => {
        const found = await authorizedRun(deps, request);
        return {
          run_id: found.run.id,
          run_name: found.run.name ?? '',
          state: found.run.state,
          mode: found.run.mode,
          workflow_uuid: found.workflowUuid,
          definition_version: found.version,
          definition: found.graph,
          context: found.context,
        };
      },
    );

    app.post(
      '/runs/:id/result',
      {
        onRequest: checkToken(deps),
        schema: {
          operationId: 'reportRuntimeResult',
          summary: 'Report The Call\'s Result',
          description: `Stores what the call concluded with the run, replacing an earlier report, until the run ends (then 409). \`data\` is checked against the definition's result_schema when it declares one (422 result_invalid, every problem with a JSON Pointer). At most ${RESULT_MAX_BYTES} bytes. The run's GET, the run list and run.ended carry it from then on, and a run.result webhook message reports it. Honours Idempotency-Key.`,
          tags: ['Agent runtime'],
          security: [{ RunToken: [] }],
          params: IdParams,
          headers: IdempotencyHeaders,
          body: ResultBody,
          response: { 200: replayableResponse(WorkflowRunRef()), ...problemResponses([...ACTION_REFUSALS, 'result_invalid', 'run_already_ended']) },
        },
      },
      async (request, reply) => {
        const run = await authorizedRun(deps, request);
        const { data } = request.body as { data: Record<string, unknown> };
        return once(deps, request, reply, run, () => reportResult(deps, run.run.id, data));
      },
    );

    app.post(
      '/runs/:id/events',
      {
        onRequest: checkToken(deps),
        schema: {
          operationId: 'appendRuntimeEvent',
          summary: 'Append An Agent Event',
          description: `Appends an event of the runtime's own (\`agent.<name>\`, for example agent.transcript_ready with a URL) to the run's event log, until the run ends (then 409). It shows in the event log and the event stream, and is sent to webhook endpoints subscribed to run.agent_event. Data at most ${AGENT_EVENT_MAX_BYTES} bytes. Honours Idempotency-Key.`,
          tags: ['Agent runtime'],
          security: [{ RunToken: [] }],
          params: IdParams,
          headers: IdempotencyHeaders,
          body: AgentEventBody,
          response: { 200: replayableResponse(AgentEventAnswer), ...problemResponses([...ACTION_REFUSALS, 'run_already_ended']) },
        },
      },
      async (request, reply) => {
        const run = await authorizedRun(deps, request);
        const { type, data } = request.body as { type: string; data?: Record<string, unknown> };
        return once(deps, request, reply, run, async () => {
          const event = await appendAgentEvent(deps, run.run.id, type, data ?? {});
          return { seq: event.seq, type: event.type, at: new Date(event.at).toISOString() };
        });
      },
    );

    app.post(
      '/runs/:id/hangup',
      {
        onRequest: checkToken(deps),
        schema: {
          operationId: 'hangUpRuntimeCall',
          summary: 'Hang Up The Call',
          description: 'Ends the answered call through its provider (Twilio, SIP BYE, the simulator). The run ends completed with outcome_reason agent_hangup before the line is put down, so the provider\'s own report of the hang-up does not change it; the reason, when given, is in the run\'s completed event. A run that already ended: 409 run_already_ended with its state; a call not answered yet: 409 run_not_answered. Honours Idempotency-Key.',
          tags: ['Agent runtime'],
          security: [{ RunToken: [] }],
          params: IdParams,
          headers: IdempotencyHeaders,
          body: Type.Optional(HangupBody),
          response: { 200: replayableResponse(WorkflowRunRef()), ...problemResponses([...ACTION_REFUSALS, 'run_already_ended', 'run_not_answered']) },
        },
      },
      async (request, reply) => {
        const run = await authorizedRun(deps, request);
        const reason = (request.body as { reason?: string } | undefined)?.reason;
        return once(deps, request, reply, run, () => hangUpByAgent(deps, run.run.id, reason));
      },
    );

    app.post(
      '/runs/:id/transfer',
      {
        onRequest: checkToken(deps),
        schema: {
          operationId: 'transferRuntimeCall',
          summary: 'Transfer The Call',
          description: `A blind (cold) transfer of the callee to an E.164 number, or a SIP URI where the route's provider dials them (Twilio: a call update whose TwiML <Dial>s the target; SIP: REFER; the simulator: its reserved targets). The target passes the organization's calling policy as a direct call would (422 transfer_target_refused with the reason). The run records the request (a transfer event) at once; the outcome comes later: a target who answers ends the run completed with outcome_reason transferred; busy, no answer or a failure is a transfer event with the result, and the call returns to the agent. The target rings at most TRANSFER_RING_TIMEOUT_MS. Only an answered call (409 run_not_answered), one transfer at a time (409 transfer_in_progress). Honours Idempotency-Key.`,
          tags: ['Agent runtime'],
          security: [{ RunToken: [] }],
          params: IdParams,
          headers: IdempotencyHeaders,
          body: TransferBody,
          response: {
            200: replayableResponse(WorkflowRunRef()),
            ...problemResponses([...ACTION_REFUSALS, 'run_already_ended', 'run_not_answered', 'transfer_in_progress', 'transfer_target_refused', 'call_control_unsupported', 'call_control_refused', 'call_not_held_here', 'telephony_not_ready']),
          },
        },
      },
      async (request, reply) => {
        const run = await authorizedRun(deps, request);
        const body = request.body as { to: string; caller_id?: string; announce?: string };
        return once(deps, request, reply, run, () => transferCall(deps, run, { to: body.to, callerId: body.caller_id, announce: body.announce }));
      },
    );

    app.post(
      '/runs/:id/dtmf',
      {
        onRequest: checkToken(deps),
        schema: {
          operationId: 'sendRuntimeDigits',
          summary: 'Send DTMF Digits',
          description: 'Sends DTMF digits to the far end of the answered call through its provider (Twilio: a call update playing <Play digits>, after which the call returns to its answer and the runtime gets a new stream; SIP: INFO; the simulator records them), then records them as a dtmf event. Only an answered call (409 run_not_answered); a provider that cannot send digits: 422 call_control_unsupported. Honours Idempotency-Key.',
          tags: ['Agent runtime'],
          security: [{ RunToken: [] }],
          params: IdParams,
          headers: IdempotencyHeaders,
          body: DtmfBody,
          response: {
            200: replayableResponse(DtmfAnswer),
            ...problemResponses([...ACTION_REFUSALS, 'run_already_ended', 'run_not_answered', 'call_control_unsupported', 'call_control_refused', 'call_not_held_here', 'telephony_not_ready']),
          },
        },
      },
      async (request, reply) => {
        const run = await authorizedRun(deps, request);
        const { digits } = request.body as { digits: string };
        return once(deps, request, reply, run, () => sendDigits(deps, run, digits));
      },
    );
  };
}
