// The Twilio provider: places calls through Twilio's REST API with the official SDK, ends them the
// same way, and asks Twilio about them (fetch a call, or list the calls placed for a run whose call
// id was never recorded). What happens to a call comes back as signed status callbacks, which any
// node may receive; their verification, parsing and answer (TwiML) are here (`callbacks`), the HTTP
// route (http/routes/provider-callbacks.ts) only carries them.
//
// Twilio enforces the ring timeout (`Timeout`) and the maximum duration (`TimeLimit`) itself, so a
// call ends at the carrier even if the node that placed it is gone; the callback reports it, and
// reconciliation asks when the callback is lost.
import type TwilioSdk from 'twilio';
import type { CallInstance } from 'twilio/lib/rest/api/v2010/account/call.js';
import type { FieldError } from '../../errors.js';
import {
  CallControlRefusedError,
  DialRefusedError,
  DialTimeoutError,
  type AnswerPlan,
  type CallbackRequest,
  type CallQuery,
  type CallReport,
  type DecodedRoute,
  type DialRequest,
  type LiveCall,
  type MachineDetectionRequest,
  type MachineVerdict,
  type ProviderCallbacks,
  type RemoteProvider,
  type RouteDecoding,
  type RouteInput,
  type ReadinessProblem,
  type ServiceSettings,
  type TransferOutcome,
  type TransferRequest,
  type TransferResult,
} from '../provider.js';
import { callbackUrl } from '../callback-urls.js';
import { parseTwilioCredentials, twilioCredentialProblems, type TwilioCredentials } from './credentials.js';
import { errorExcerptClient } from './error-excerpt-client.js';
import { twilio } from './sdk.js';
import { answeredByOf, eventKindOf } from './status.js';

type TwilioClient = ReturnType<typeof TwilioSdk>;

/** A Twilio route: its credentials (absent until set; readiness says so). */
export interface TwilioRouteConfig {
  credentials: TwilioCredentials | undefined;
}

type TwilioRoute = DecodedRoute<TwilioRouteConfig>;

/** Calls listed when looking for a run's call: a run dials one number once, so a few pages at most. */
const FIND_LIMIT = 50;
/** Calls per page of that list (the SDK follows `next_page_uri` up to FIND_LIMIT). */
const FIND_PAGE_SIZE = 20;
/** Twilio's clock and ours may differ a little: a call created this much before the claim still counts. */
const CLOCK_SKEW_MS = 5_000;

/** What the provider reads of the service's configuration (its TWILIO_* keys are declared in definition.ts). */
export interface TwilioConfig {
  TWILIO_API_BASE_URL: string;
  TWILIO_CALLBACK_RETRIES: number;
  TWILIO_CALLBACK_RETRY_POLICY: string;
  PUBLIC_BASE_URL?: string | undefined;
  MAX_CALL_DURATION_MS: number;
  DIAL_TIMEOUT_MS: number;
  /** Answering-machine detection's tuning (definition.ts). */
  TWILIO_AMD_TIMEOUT_MS: number;
  TWILIO_AMD_SPEECH_THRESHOLD_MS: number;
  TWILIO_AMD_SPEECH_END_THRESHOLD_MS: number;
  TWILIO_AMD_SILENCE_TIMEOUT_MS: number;
}

/** The tuning keys of answering-machine detection, as machineDetectionParameters reads them. */
export type AmdTuning = Pick<TwilioConfig, 'TWILIO_AMD_TIMEOUT_MS' | 'TWILIO_AMD_SPEECH_THRESHOLD_MS' | 'TWILIO_AMD_SPEECH_END_THRESHOLD_MS' | 'TWILIO_AMD_SILENCE_TIMEOUT_MS'>;

/**
 * Twilio's connection overrides for a callback URL (its "URL extensions", in the fragment, which is
 * never sent to us): Twilio retries a failed callback `rc` times on the failures `rp` names, so a
 * node restarting or a load balancer's hiccup does not lose the call's progress.
 */
export function connectionOverrides(config: Pick<TwilioConfig, 'TWILIO_CALLBACK_RETRIES' | 'TWILIO_CALLBACK_RETRY_POLICY'>): string {
  return config.TWILIO_CALLBACK_RETRIES === 0 ? '' : `rc=${config.TWILIO_CALLBACK_RETRIES}&rp=${config.TWILIO_CALLBACK_RETRY_POLICY}`;
}

/**
 * Where Twilio calls back for a run, without the fragment: its answer (TwiML), its status
 * callbacks, and its answering-machine detection's verdict (AsyncAmdStatusCallback).
 */
export function twilioCallbackUrls(publicBaseUrl: string, runId: number): { answer: string; status: string; amd: string; transfer: string } {
  return {
    answer: callbackUrl(publicBaseUrl, 'twilio', runId, 'answer'),
    status: callbackUrl(publicBaseUrl, 'twilio', runId, 'status'),
    amd: callbackUrl(publicBaseUrl, 'twilio', runId, 'amd'),
    transfer: callbackUrl(publicBaseUrl, 'twilio', runId, 'transfer'),
  };
}

/**
 * The status callback of a call a message was left on: Twilio reports its end here, and the query
 * says why it ended (the call's own status word is only `completed`). The query is signed with the URL.
 */
const VOICEMAIL_LEFT = 'voicemail_left';

/**
 * The Calls API's answering-machine detection parameters for a dial that asks for it: asynchronous,
 * so the answer's TwiML (the agent) runs while Twilio listens, and the verdict comes to its own
 * callback. `DetectMessageEnd` waits for a machine's greeting to end, so a message can follow it.
 * The timeout is the agent's (or campaign's) `detection_timeout_ms`, else TWILIO_AMD_TIMEOUT_MS; the
 * three thresholds come from the configuration (whose defaults are Twilio's).
 */
export function machineDetectionParameters(detection: MachineDetectionRequest, amdCallbackUrl: string, tuning: AmdTuning) {
  return {
    machineDetection: detection.detect === 'message_end' ? 'DetectMessageEnd' : 'Enable',
    machineDetectionTimeout: Math.round((detection.timeoutMs ?? tuning.TWILIO_AMD_TIMEOUT_MS) / 1000),
    machineDetectionSpeechThreshold: tuning.TWILIO_AMD_SPEECH_THRESHOLD_MS,
    machineDetectionSpeechEndThreshold: tuning.TWILIO_AMD_SPEECH_END_THRESHOLD_MS,
    machineDetectionSilenceTimeout: tuning.TWILIO_AMD_SILENCE_TIMEOUT_MS,
    asyncAmd: 'true',
    asyncAmdStatusCallback: amdCallbackUrl,
    asyncAmdStatusCallbackMethod: 'POST',
  };
}

/** A Twilio route's schema: no settings of its own; credentials optional until the first dial (readiness says so). */
export function decodeTwilioRoute(input: RouteInput): RouteDecoding<TwilioRouteConfig> {
  if (input.credentials === null) return { ok: true, config: { credentials: undefined } };
  const problems: FieldError[] = twilioCredentialProblems(input.credentials);
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, config: { credentials: parseTwilioCredentials(input.credentials) } };
}

const withFragment = (url: string, fragment: string) => (fragment === '' ? url : `${url}#${fragment}`);

function reportOf(call: Pick<CallInstance, 'sid' | 'status' | 'dateCreated' | 'answeredBy'>): CallReport | undefined {
  const kind = eventKindOf(call.status);
  if (kind === undefined) return undefined;
  const created = call.dateCreated instanceof Date ? call.dateCreated.getTime() : Number.NaN;
  // A call detected for carries Twilio's verdict (a lost AsyncAmd callback is recovered from it).
  const verdict = typeof call.answeredBy === 'string' && call.answeredBy !== '' ? { verdict: { answeredBy: answeredByOf(call.answeredBy), raw: call.answeredBy } } : {};
  return { providerCallId: call.sid, kind, rawStatus: call.status, createdAt: Number.isFinite(created) ? created : undefined, ...verdict };
}

export class TwilioProvider implements RemoteProvider<TwilioRouteConfig> {
  readonly name = 'twilio';
  readonly callsOutliveNode = true;
  /** One SDK client per credentials, so connections are reused across calls. */
  private readonly clients = new Map<string, TwilioClient>();
  readonly callbacks: ProviderCallbacks<TwilioRouteConfig>;
  /** The connection overrides every callback URL carries (fixed by the configuration). */
  private readonly fragment: string;

  constructor(private readonly config: TwilioConfig) {
    const fragment = connectionOverrides(config);
    this.fragment = fragment;
    this.callbacks = {
      verify: (route, request) => verifySignature(route, request, fragment),
      status: (request) => statusOf(request),
      answer: (plan) => ({ contentType: 'text/xml; charset=utf-8', body: twiml(plan) }),
      machineVerdict: (request) => verdictOf(request),
      transferOutcome: (request) => transferOutcomeOf(request),
      afterTransfer: (request, runId, result) => {
        // Only the <Dial> action waits for instructions; the target's status callback takes none.
        if (request.form.DialCallStatus === undefined || !config.PUBLIC_BASE_URL) return undefined;
        const body = afterTransferTwiml(result, twilioCallbackUrls(config.PUBLIC_BASE_URL, runId).answer);
        return { contentType: 'text/xml; charset=utf-8', body };
      },
    };
  }

  readiness(route: TwilioRoute, service: ServiceSettings): ReadinessProblem[] {
    const problems: ReadinessProblem[] = [];
    if (!route.config.credentials) problems.push({ pointer: '/credentials', detail: 'Twilio credentials are not set.' });
    if (route.callerIds.length === 0) problems.push({ pointer: '/caller_ids', detail: 'No caller ID is configured.' });
    if (!service.publicBaseUrl) problems.push('PUBLIC_BASE_URL is not set, so Twilio would have nowhere to send the call\'s progress.');
    return problems;
  }

  async dial(request: DialRequest<TwilioRouteConfig>): Promise<{ providerCallId: string }> {
    const publicBaseUrl = this.config.PUBLIC_BASE_URL;
    if (!publicBaseUrl) throw new DialRefusedError('failed', 'public_base_url_unset', 'PUBLIC_BASE_URL is not set: Twilio would have nowhere to call back.');
    if (!request.from) throw new DialRefusedError('failed', 'caller_id_unset', 'The telephony configuration has no caller ID.');
    const urls = twilioCallbackUrls(publicBaseUrl, request.runId);
    const { fragment } = this;
    try {
      const call = await this.client(request.route).calls.create({
        to: request.to,
        from: request.from,
        url: withFragment(urls.answer, fragment),
        method: 'POST',
        statusCallback: withFragment(urls.status, fragment),
        statusCallbackMethod: 'POST',
        statusCallbackEvent: ['initiated', 'ringing', 'answered', 'completed'],
        timeout: Math.max(1, Math.ceil(request.ringTimeoutMs / 1000)),
        timeLimit: Math.max(1, Math.ceil(this.config.MAX_CALL_DURATION_MS / 1000)),
        ...(request.machineDetection ? machineDetectionParameters(request.machineDetection, withFragment(urls.amd, fragment), this.config) : {}),
      });
      return { providerCallId: call.sid };
    } catch (error) {
      // A REST error is Twilio refusing this call (bad number, bad credentials, …): the run ends
      // failed with Twilio's code and message. The SDK giving up on a slow answer (its timeout is
      // DIAL_TIMEOUT_MS too) is a dial timeout: Twilio may have placed the call. Anything else
      // (network) is the dispatcher's to judge.
      if (error instanceof twilio().RestException) {
        const { raw, detail } = describeRestError(error);
        throw new DialRefusedError('failed', raw, detail);
      }
      if (isRequestTimeout(error)) throw new DialTimeoutError(`no answer from Twilio within ${this.config.DIAL_TIMEOUT_MS} ms`);
      throw error;
    }
  }

  async hangUp(call: LiveCall<TwilioRouteConfig>): Promise<void> {
    // `completed` ends a call in any phase (`canceled` would leave an answered call up).
    await this.client(call.route).calls(call.providerCallId).update({ status: 'completed' });
  }

  /**
   * Replaces what the call does with a message and a hang-up (its greeting over, the machine
   * records), and moves its status callback to one whose query says a message was left.
   */
  async leaveMessage(call: LiveCall<TwilioRouteConfig>, text: string): Promise<void> {
    const publicBaseUrl = this.config.PUBLIC_BASE_URL;
    if (!publicBaseUrl) return;
    const status = `${twilioCallbackUrls(publicBaseUrl, call.runId).status}?outcome=${VOICEMAIL_LEFT}`;
    await this.client(call.route).calls(call.providerCallId).update({
      twiml: twiml({ kind: 'say', text }),
      statusCallback: withFragment(status, this.fragment),
      statusCallbackMethod: 'POST',
    });
  }

  /**
   * A blind transfer: the call's TwiML is replaced by a <Dial> of the target (after the
   * announcement, when there is one). The target's `answered` status and the <Dial>'s action both
   * come back signed to the run's `transfer` callback; the action's answer says what the call does
   * next (http/routes/provider-callbacks.ts, `afterTransfer`).
   */
  async transfer(call: LiveCall<TwilioRouteConfig>, request: TransferRequest): Promise<void> {
    const publicBaseUrl = this.config.PUBLIC_BASE_URL;
    if (!publicBaseUrl) throw new Error('PUBLIC_BASE_URL is not set: Twilio would have nowhere to report the transfer.');
    const url = withFragment(twilioCallbackUrls(publicBaseUrl, call.runId).transfer, this.fragment);
    const callerId = request.callerId ?? call.route.callerIds[0];
    await this.updateTwiml(call, transferTwiml(request, url, callerId));
  }

  /**
   * Digits played into the call (<Play digits>), then the call goes back to its answer: an update
   * replaces the call's TwiML, which ends the agent's stream, so a <Redirect> to the answer
   * callback connects the runtime again (a new stream, a new token) once the digits are played.
   */
  async sendDigits(call: LiveCall<TwilioRouteConfig>, digits: string): Promise<void> {
    const publicBaseUrl = this.config.PUBLIC_BASE_URL;
    if (!publicBaseUrl) throw new Error('PUBLIC_BASE_URL is not set: the call could not return to its answer after the digits.');
    await this.updateTwiml(call, digitsTwiml(digits, twilioCallbackUrls(publicBaseUrl, call.runId).answer));
  }

  /** Replaces the live call's TwiML (the Call resource's update, `Twiml`); a REST error is reported with Twilio's words. */
  private async updateTwiml(call: LiveCall<TwilioRouteConfig>, twimlText: string): Promise<void> {
    try {
      await this.client(call.route).calls(call.providerCallId).update({ twiml: twimlText });
    } catch (error) {
      if (error instanceof twilio().RestException) throw new CallControlRefusedError(describeRestError(error).raw, 'Twilio refused the call update.');
      throw error;
    }
  }

  async fetchCall(route: TwilioRoute, providerCallId: string): Promise<CallReport | undefined> {
    try {
      return reportOf(await this.client(route).calls(providerCallId).fetch());
    } catch (error) {
      if (error instanceof twilio().RestException && error.status === 404) return undefined;
      throw error;
    }
  }

  async findCall(route: TwilioRoute, query: CallQuery): Promise<CallReport | undefined> {
    if (!query.from) return undefined;
    // Twilio filters on the start time; the creation time is checked here too, so a call placed for
    // an earlier run to the same number is never taken for this one.
    const calls = await this.client(route).calls.list({ to: query.to, from: query.from, startTimeAfter: new Date(query.placedAfter - CLOCK_SKEW_MS), limit: FIND_LIMIT, pageSize: FIND_PAGE_SIZE });
    const candidates = calls
      .map(reportOf)
      .filter((report): report is CallReport => report !== undefined && !query.excluding.has(report.providerCallId))
      .filter((report) => report.createdAt === undefined || report.createdAt >= query.placedAfter - CLOCK_SKEW_MS)
      .sort((a, b) => (a.createdAt ?? 0) - (b.createdAt ?? 0));
    return candidates[0];
  }

  async close(): Promise<void> {
    this.clients.clear();
  }

  private client(route: TwilioRoute): TwilioClient {
    const credentials = route.config.credentials;
    if (!credentials) throw new DialRefusedError('failed', 'credentials_unset', 'The Twilio configuration has no credentials.');
    const [username, password] = credentials.apiKey ? [credentials.apiKey.sid, credentials.apiKey.secret] : [credentials.accountSid, credentials.authToken];
    const key = `${credentials.accountSid}:${username}:${password}`;
    let client = this.clients.get(key);
    if (!client) {
      client = twilio()(username, password, { accountSid: credentials.accountSid, httpClient: errorExcerptClient({ timeout: this.config.DIAL_TIMEOUT_MS }) });
      // The SDK builds every REST URL from its domain's base URL; pointing it elsewhere (a regional
      // endpoint, a test server speaking Twilio's wire format) changes nothing else in the path.
      client.api.baseUrl = this.config.TWILIO_API_BASE_URL;
      this.clients.set(key, client);
    }
    return client;
  }
}

/**
 * X-Twilio-Signature over the URL Twilio was given and the form, with the account's auth token.
 * Twilio's documentation does not say whether the connection-overrides fragment is part of the
 * signed URL, and the fragment never reaches us: both forms are accepted.
 */
function verifySignature(route: TwilioRoute, request: CallbackRequest, fragment: string): boolean {
  const credentials = route.config.credentials;
  const signature = request.headers['x-twilio-signature'];
  if (!credentials || typeof signature !== 'string') return false;
  const urls = fragment === '' ? [request.url] : [request.url, withFragment(request.url, fragment)];
  if (!urls.some((url) => twilio().validateRequest(credentials.authToken, signature, url, request.form))) return false;
  return request.form.AccountSid === undefined || request.form.AccountSid === credentials.accountSid;
}

function statusOf(request: CallbackRequest): CallReport | undefined {
  const callStatus = request.form.CallStatus ?? '';
  const kind = eventKindOf(callStatus);
  if (kind === undefined) return undefined;
  const sip = request.form.SipResponseCode ? ` (SIP ${request.form.SipResponseCode})` : '';
  const voicemailLeft = kind === 'completed' && new URL(request.url).searchParams.get('outcome') === VOICEMAIL_LEFT;
  return {
    providerCallId: request.form.CallSid ?? '',
    kind,
    rawStatus: `${callStatus}${sip}`,
    createdAt: undefined,
    ...(request.form.AnsweredBy ? { verdict: { answeredBy: answeredByOf(request.form.AnsweredBy), raw: request.form.AnsweredBy } } : {}),
    ...(voicemailLeft ? { reason: VOICEMAIL_LEFT } : {}),
  };
}

/** The verdict of an AsyncAmd callback: Twilio's AnsweredBy, normalized and as said. */
function verdictOf(request: CallbackRequest): Omit<MachineVerdict, 'runId' | 'at'> | undefined {
  const answeredBy = request.form.AnsweredBy;
  const callSid = request.form.CallSid;
  if (!answeredBy || !callSid) return undefined;
  return { providerCallId: callSid, answeredBy: answeredByOf(answeredBy), raw: answeredBy };
}

/**
 * <Dial>'s DialCallStatus as a transfer's result: `completed` (the target answered and the call
 * ended) and `answered` both mean the target had the callee; `canceled` (the dial was cut short) is
 * a failed transfer.
 */
const DIAL_RESULTS: Record<string, TransferResult> = { completed: 'answered', answered: 'answered', busy: 'busy', 'no-answer': 'no_answer', failed: 'failed', canceled: 'failed' };

/**
 * A transfer callback's outcome: the <Dial> action (DialCallStatus) or the target leg's `answered`
 * status (CallStatus in-progress, its ParentCallSid the run's call). Undefined for anything else.
 */
export function transferOutcomeOf(request: CallbackRequest): Omit<TransferOutcome, 'runId' | 'at'> | undefined {
  const { form } = request;
  const dialStatus = form.DialCallStatus;
  if (dialStatus !== undefined) {
    const result = DIAL_RESULTS[dialStatus];
    const callSid = form.CallSid;
    if (!result || !callSid) return undefined;
    const sip = form.DialSipResponseCode ? ` (SIP ${form.DialSipResponseCode})` : '';
    return { providerCallId: callSid, result, raw: `DialCallStatus ${dialStatus}${sip}` };
  }
  if (form.CallStatus === 'in-progress' && form.ParentCallSid) return { providerCallId: form.ParentCallSid, result: 'answered', raw: 'target in-progress' };
  return undefined;
}

/** The transfer's TwiML: the announcement, then a <Dial> of the target whose answer and end come back to `callback`. */
export function transferTwiml(request: TransferRequest, callback: string, callerId: string | undefined): string {
  const response = new (twilio().twiml.VoiceResponse)();
  if (request.announce) response.say(request.announce);
  const dial = response.dial({ timeout: request.timeoutSeconds, action: callback, method: 'POST', ...(callerId ? { callerId } : {}) });
  dial.number({ statusCallbackEvent: ['answered'], statusCallback: callback, statusCallbackMethod: 'POST' }, request.to);
  return response.toString();
}

/** Digits played into the call, then back to its answer (the runtime's stream again). */
export function digitsTwiml(digits: string, answerUrl: string): string {
  const response = new (twilio().twiml.VoiceResponse)();
  response.play({ digits });
  response.redirect({ method: 'POST' }, answerUrl);
  return response.toString();
}

/** After a transfer: the call is the target's (or over), so hang up this leg; else back to the answer. */
function afterTransferTwiml(result: TransferResult | undefined, answerUrl: string): string {
  const response = new (twilio().twiml.VoiceResponse)();
  if (result === 'answered' || result === undefined) response.hangup();
  else response.redirect({ method: 'POST' }, answerUrl);
  return response.toString();
}

function twiml(plan: AnswerPlan): string {
  const response = new (twilio().twiml.VoiceResponse)();
  if (plan.kind === 'stream') {
    const stream = response.connect().stream({ url: plan.url });
    for (const [name, value] of Object.entries(plan.parameters)) stream.parameter({ name, value });
  } else {
    if (plan.text) response.say(plan.text);
    response.hangup();
  }
  return response.toString();
}

/**
 * Twilio's words for a refused request, or what came instead: a gateway or proxy in front of the
 * API answers with a body that is not Twilio's error shape (error-excerpt-client.ts passes on an
 * excerpt of it as the message, without a code). Said as such, never as "undefined".
 */
export function describeRestError(error: { status: number; code?: unknown; message?: unknown }): { raw: string; detail: string } {
  const code = typeof error.code === 'number' ? error.code : undefined;
  const message = typeof error.message === 'string' && error.message.trim() !== '' && !error.message.startsWith('[HTTP ') ? error.message : undefined;
  if (code !== undefined && message !== undefined) return { raw: `${code} ${message}`, detail: `Twilio refused the call: ${message}` };
  const raw = `HTTP ${error.status}${code !== undefined ? ` ${code}` : ''}${message !== undefined ? ` ${message}` : ''}`;
  return { raw, detail: `The Twilio API answered HTTP ${error.status} without a Twilio error${message !== undefined ? `: ${message}` : ''}; the call was not placed.` };
}

/** The SDK's HTTP client (axios) gave up waiting for the answer: `ECONNABORTED`, or `ETIMEDOUT` with clarified timeouts. */
function isRequestTimeout(error: unknown): boolean {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return code === 'ECONNABORTED' || code === 'ETIMEDOUT';
}
