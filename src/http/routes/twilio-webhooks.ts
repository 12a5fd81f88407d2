// Twilio's callbacks for a run: the answer webhook (TwiML: connect the call to the agent runtime,
// or speak the greeting and hang up) and status callbacks (the call's progress). Both are signed
// with the account's auth token; an unverified request is refused with 403 and changes nothing.
// Any node may receive them: events are applied through the store like every provider event.
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Deps } from '../../deps.js';
import { applyProviderEvent, ringTimeoutOf } from '../../dispatch/provider-events.js';
import { DialtoneError } from '../../errors.js';
import { loadRunDefinition, type RunDefinition } from '../../runs/run-definition.js';
import { issueRunToken } from '../../runtime/run-token.js';
import { parseTwilioCredentials } from '../../telephony/twilio/credentials.js';
import { twilio } from '../../telephony/twilio/sdk.js';
import { eventKindOf } from '../../telephony/twilio/status.js';
import { renderTemplate } from '../../workflows/templates.js';
import { startNode } from '../../workflows/definition.js';

type Form = Record<string, string>;

/** Twilio posts application/x-www-form-urlencoded; only these routes accept it. */
function parseForm(text: string): Form {
  const form: Form = {};
  for (const [name, value] of new URLSearchParams(text)) if (!Object.hasOwn(form, name)) form[name] = value;
  return form;
}

const refused = () => new DialtoneError('invalid_signature', 'The request is not signed by Twilio for this run.');

/** The run a callback names, once its X-Twilio-Signature checks out against that run's account. */
async function verifiedRun(deps: Deps, request: FastifyRequest): Promise<{ run: RunDefinition; form: Form }> {
  const { id } = request.params as { id: string };
  const form = (request.body ?? {}) as Form;
  const signature = request.headers['x-twilio-signature'];
  const publicBaseUrl = deps.config.PUBLIC_BASE_URL;
  if (typeof signature !== 'string' || !publicBaseUrl || !/^[1-9][0-9]{0,14}$/.test(id)) throw refused();
  const run = await loadRunDefinition(deps.store, Number(id));
  // Unknown runs and runs of other providers look the same as a bad signature: nothing to verify against.
  if (!run || run.configuration.provider !== 'twilio' || run.configuration.credentials_encrypted === null) throw refused();
  const credentials = parseTwilioCredentials(deps.cipher.decrypt(run.configuration.org_id, run.configuration.credentials_encrypted));
  // Twilio signs the URL it called: this service's public URL plus the path and query.
  const url = `${publicBaseUrl.replace(/\/+$/, '')}${request.url}`;
  if (!twilio().validateRequest(credentials.authToken, signature, url, form)) throw refused();
  if (form.AccountSid !== undefined && form.AccountSid !== credentials.accountSid) throw refused();
  return { run, form };
}

export function twilioWebhookRoutes(deps: Deps): FastifyPluginAsync {
  return async (app) => {
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => done(null, parseForm(body.toString())));
    const hidden = { hide: true } as const;

    app.post('/runs/:id/answer', { schema: hidden }, async (request, reply) => {
      const { run } = await verifiedRun(deps, request);
      const response = new (twilio().twiml.VoiceResponse)();
      if (deps.config.AGENT_RUNTIME_URL) {
        const stream = response.connect().stream({ url: deps.config.AGENT_RUNTIME_URL });
        stream.parameter({ name: 'run_id', value: String(run.run.id) });
        stream.parameter({ name: 'token', value: issueRunToken(deps.cipher, run.run.id, deps.clock.now() + deps.config.RUNTIME_TOKEN_TTL_MS) });
      } else {
        // No runtime: say the agent's greeting so a test call is audible end to end, then hang up.
        const greeting = startNode(run.graph)?.data?.greeting;
        const spoken = typeof greeting === 'string' ? renderTemplate(greeting, run.context).trim() : '';
        if (spoken) response.say(spoken);
        response.hangup();
      }
      return reply.type('text/xml; charset=utf-8').send(response.toString());
    });

    app.post('/runs/:id/status', { schema: hidden }, async (request, reply) => {
      const { run, form } = await verifiedRun(deps, request);
      const callStatus = form.CallStatus ?? '';
      const kind = eventKindOf(callStatus);
      const callSid = form.CallSid ?? '';
      if (kind === undefined) request.log.warn({ runId: run.run.id, callStatus }, 'unknown Twilio CallStatus ignored');
      // A callback for another call of this run (it cannot have one) moves nothing.
      else if (kind !== null && (run.run.provider_call_id === null || run.run.provider_call_id === callSid)) {
        const sip = form.SipResponseCode ? ` (SIP ${form.SipResponseCode})` : '';
        const event = { runId: run.run.id, providerCallId: callSid, kind, rawStatus: `${callStatus}${sip}`, at: deps.clock.now() };
        await applyProviderEvent(deps, 'twilio', event, ringTimeoutOf(deps, run.configuration));
        // The node holding the call (when it is this one) keeps its timers in step.
        deps.signals.providerEvent(event);
      }
      return reply.code(204).send();
    });
  };
}
