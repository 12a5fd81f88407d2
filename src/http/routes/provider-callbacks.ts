// Provider callbacks for a run (Twilio's today): the answer webhook (connect the call to the agent
// runtime, or speak the greeting and hang up), status callbacks (the call's progress), the
// machine-detection verdict and the agent runtime's transfer's outcome. The
// provider verifies, parses and answers them in its own terms (provider.ts `callbacks`); this
// route only carries them. An unverified request is refused with 403 and changes nothing. Any
// node may receive them: events are applied once, through the store (dispatch/provider-events.ts).
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Deps } from '../../deps.js';
import { applyMachineVerdict, remoteHandling } from '../../dispatch/machine-verdicts.js';
import { applyReportedEvent } from '../../dispatch/provider-events.js';
import { applyTransferOutcome } from '../../dispatch/call-control.js';
import { DialtoneError } from '../../errors.js';
import { loadRunDefinition, type RunDefinition } from '../../runs/run-definition.js';
import { issueRunToken } from '../../runtime/run-token.js';
import type { ProviderName } from '../../store/schema/schema.js';
import { callbackRoutePath } from '../../telephony/callback-urls.js';
import type { CallbackRoute } from '../../telephony/definition.js';
import type { AnswerPlan, CallbackRequest, DecodedRoute, ProviderCallbacks } from '../../telephony/provider.js';
import { renderTemplate } from '../../workflows/templates.js';
import { startNode } from '../../workflows/definition.js';

type Form = Record<string, string>;

/** Providers post application/x-www-form-urlencoded; only these routes accept it. */
function parseForm(text: string): Form {
  const form: Form = {};
  for (const [name, value] of new URLSearchParams(text)) if (!Object.hasOwn(form, name)) form[name] = value;
  return form;
}

interface Verified {
  run: RunDefinition;
  route: DecodedRoute;
  request: CallbackRequest;
}

export function providerCallbackRoutes(deps: Deps, name: ProviderName, routes: readonly CallbackRoute[], callbacks: ProviderCallbacks<unknown>): FastifyPluginAsync {
  const refused = () => new DialtoneError('invalid_signature', `The request is not signed by ${name} for this run.`);

  /** The run a callback names, once the provider has verified the request against that run's route. */
  async function verified(request: FastifyRequest): Promise<Verified> {
    const { id } = request.params as { id: string };
    const publicBaseUrl = deps.config.PUBLIC_BASE_URL;
    if (!publicBaseUrl || !/^[1-9][0-9]{0,14}$/.test(id)) throw refused();
    const run = await loadRunDefinition(deps.store, Number(id));
    // Unknown runs and runs of other providers look the same as a bad signature: nothing to verify against.
    if (!run || run.configuration.provider !== name) throw refused();
    const decoded = deps.routes.decode(run.configuration);
    if (!decoded.ok) throw refused();
    // The provider signs the URL it called: this service's public URL plus the path and query.
    const callback: CallbackRequest = { url: `${publicBaseUrl.replace(/\/+$/, '')}${request.url}`, headers: request.headers, form: (request.body ?? {}) as Form };
    if (!callbacks.verify(decoded.route, callback)) throw refused();
    return { run, route: decoded.route, request: callback };
  }

  function answerPlan(run: RunDefinition): AnswerPlan {
    if (deps.config.AGENT_RUNTIME_URL) {
      const token = issueRunToken(deps.cipher, run.run.id, deps.clock.now() + deps.config.RUNTIME_TOKEN_TTL_MS);
      return { kind: 'stream', url: deps.config.AGENT_RUNTIME_URL, parameters: { run_id: String(run.run.id), token } };
    }
    // No runtime: say the agent's greeting so a test call is audible end to end, then hang up.
    const greeting = startNode(run.graph)?.data?.greeting;
    return { kind: 'say', text: typeof greeting === 'string' ? renderTemplate(greeting, run.context).trim() : '' };
  }

  return async (app) => {
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => done(null, parseForm(body.toString())));
    const hidden = { hide: true } as const;

    if (routes.includes('answer')) {
      app.post(callbackRoutePath('answer'), { schema: hidden }, async (request, reply) => {
        const { run } = await verified(request);
        const answer = callbacks.answer(answerPlan(run));
        return reply.type(answer.contentType).send(answer.body);
      });
    }

    if (routes.includes('status')) {
      app.post(callbackRoutePath('status'), { schema: hidden }, async (request, reply) => {
        const { run, route, request: callback } = await verified(request);
        const report = callbacks.status(callback);
        if (report === undefined) request.log.warn({ runId: run.run.id, provider: name }, 'a status word the provider does not send: ignored');
        // A callback for another call of this run (it cannot have one) moves nothing.
        else if (report.kind !== null && (run.run.provider_call_id === null || run.run.provider_call_id === report.providerCallId)) {
          const at = deps.clock.now();
          // A verdict the status carries (its AsyncAmd callback lost) is recorded before the end it explains.
          if (report.verdict) await applyMachineVerdict(deps, { runId: run.run.id, providerCallId: report.providerCallId, ...report.verdict, at }, undefined);
          await applyReportedEvent(deps, { runId: run.run.id, providerCallId: report.providerCallId, kind: report.kind, rawStatus: report.rawStatus, at, ...(report.reason ? { reason: report.reason } : {}) }, route);
        }
        return reply.code(204).send();
      });
    }

    // Answering-machine detection's verdict (Twilio's AsyncAmdStatusCallback): recorded once, and
    // acted on (hang up, leave the message) by whichever node receives it.
    const machineVerdict = callbacks.machineVerdict?.bind(callbacks);
    if (routes.includes('amd') && machineVerdict) {
      app.post(callbackRoutePath('amd'), { schema: hidden }, async (request, reply) => {
        const { run, route, request: callback } = await verified(request);
        const verdict = machineVerdict(callback);
        if (verdict === undefined) request.log.warn({ runId: run.run.id, provider: name }, 'a machine-detection callback without a verdict: ignored');
        else if (run.run.provider_call_id === null || run.run.provider_call_id === verdict.providerCallId) {
          const call = { runId: run.run.id, providerCallId: verdict.providerCallId, route };
          await applyMachineVerdict(deps, { runId: run.run.id, ...verdict, at: deps.clock.now() }, remoteHandling(deps, call));
        }
        return reply.code(204).send();
      });
    }

    // The agent runtime's transfer (Twilio's <Dial> action and its target's `answered` status):
    // its outcome applied once, whichever node receives it and however often the provider retries
    // (runs/runtime-actions.ts, endTransfer); the action's answer says what the call does next.
    const transferOutcome = callbacks.transferOutcome?.bind(callbacks);
    const afterTransfer = callbacks.afterTransfer?.bind(callbacks);
    if (routes.includes('transfer') && transferOutcome) {
      app.post(callbackRoutePath('transfer'), { schema: hidden }, async (request, reply) => {
        const { run, request: callback } = await verified(request);
        const outcome = transferOutcome(callback);
        if (outcome === undefined) request.log.warn({ runId: run.run.id, provider: name }, 'a transfer callback without an outcome: ignored');
        else if (run.run.provider_call_id === null || run.run.provider_call_id === outcome.providerCallId) {
          await applyTransferOutcome(deps, { runId: run.run.id, ...outcome, at: deps.clock.now() });
        }
        const next = afterTransfer?.(callback, run.run.id, outcome?.result);
        return next ? reply.type(next.contentType).send(next.body) : reply.code(204).send();
      });
    }
  };
}
