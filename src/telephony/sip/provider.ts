// The SIP trunk provider. The `sip` package supplies the parser, digest and RFC 3261 transactions
// (retransmissions, timers); the sockets are transport.ts's, the routing route-set.ts's, and the
// dialog is ours: ACK for the 2xx, CANCEL before the answer, BYE after it, answering the far end's
// BYE, and one digest-authentication retry (to the trunk's 401 or a proxy's 407). Within an answered
// call: a blind transfer by REFER and its NOTIFYs (refer.ts), DTMF by INFO (dtmf-info.ts).
//
// Media: a route with `media_address` offers that fixed address (the operator's own media server).
// Any other route's call gets its own RTP port and, once answered, is relayed to the agent runtime
// in Twilio's Media Streams messages (media/call-media.ts); when the run asks who answered, the
// callee's first seconds of audio are also heard by machine detection (telephony/media/
// machine-detection/), whose verdict is reported as Twilio's AMD verdicts are.
//
// Calls live in this process (the dialog state is here), so only the node that placed a call can
// end it; cancel requests reach it through the store (dispatch/). One stack per provider, started
// on the first dial, so a node that never dials SIP never binds a SIP port.
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import type * as sip from 'sip';
import type * as digest from 'sip/digest.js';
import type { Clock } from '../../shared/clock.js';
import { maskPhoneNumbersIn } from '../../logging.js';
import type { AgentRuntimeHandOff } from '../definition.js';
import {
  CallControlRefusedError,
  DialRefusedError,
  type DialRequest,
  type InProcessProvider,
  type LiveCall,
  type MachineDetectionRequest,
  type MachineVerdictSink,
  type ProviderEventKind,
  type ProviderEventSink,
  type TransferOutcomeSink,
  type TransferRequest,
} from '../provider.js';
import type { SipRouteConfig } from './route.js';
import type { SipCredentials, SipTrunk } from './settings.js';
import { hopOf, preloadedRouteSet, routeRequest, routeSetOfResponse, type Hop } from './route-set.js';
import { DTMF_INFO_CONTENT_TYPE, dtmfRelayBody, playDigits } from './dtmf-info.js';
import { isReferNotify, referHeaders, referToUri, TransferWatch } from './refer.js';
import { outcomeOfFinalResponse } from './status.js';
import { SipEndpoint, type TlsPolicy } from './transport.js';
import { CallMedia, DEFAULT_CALL_MEDIA_OPTIONS, type CallMediaOptions } from './media/call-media.js';
import { answerDirection, parseSdpAnswer, sdpAnswer, sdpOffer } from './media/sdp.js';
import { RtpPortRange } from './media/rtp-session.js';
import { CallMachineListener } from '../media/machine-detection/call-listener.js';
import { SpeechError, synthesize, type SpeechSettings } from '../media/speech/speech-command.js';
import type { AudioVerdict, DetectorTuning } from '../media/machine-detection/machine-detector.js';

export interface SipStackSettings {
  bindAddress: string;
  port: number;
  /** Address written in Via, Contact and the SDP offer when the configuration names no media address. */
  publicAddress: string | undefined;
  /** How long an unused TCP or TLS connection stays open for reuse (default 30 s). */
  connectionIdleMs?: number;
  /** Largest message taken over TCP or TLS, headers and body each (default 65,535 bytes). */
  maxMessageBytes?: number;
  /** A socket error that concerns no call in particular (a datagram that could not be sent, a listener failing later). */
  onTransportError?: (error: Error) => void;
  /** How long, beyond the transfer's own ring time, a REFER the far end accepted may go without its final NOTIFY (default 15 s). */
  transferGraceMs?: number;
  /** The range each call's own RTP port comes from (SIP_RTP_PORT_MIN, SIP_RTP_PORT_MAX). */
  rtpPorts: { min: number; max: number };
  /** Where answered calls of routes without media_address are relayed; undefined: their audio is received and dropped. */
  agentRuntime: AgentRuntimeHandOff | undefined;
  /** The media stream's limits (SIP_MEDIA_STREAM_*). */
  mediaStream: { connectTimeoutMs: number; maxMessageBytes: number; maxQueuedMs: number; catchUpMs: number; idleTimeoutMs?: number; maxBufferedBytes?: number };
  /** The reorder buffer's depth and the media timeout (SIP_RTP_REORDER_MS, SIP_MEDIA_TIMEOUT_MS); default DEFAULT_CALL_MEDIA_OPTIONS. */
  callMedia?: CallMediaOptions;
  /** Something about a call's media worth a log line (an RTP socket error, audio dropped). */
  onMediaWarning?: (runId: number, message: string, error?: Error) => void;
  /** Machine detection's tuning (SIP_AMD_*); its timeout is used when the run gives none. */
  machineDetection?: DetectorTuning;
  /** A verdict of machine detection, with why (a log line). */
  onMachineVerdict?: (runId: number, verdict: AudioVerdict) => void;
  /** The speech command a message left on a voicemail is spoken with (SIP_SPEECH_*); undefined: no message can be left. */
  speech?: SpeechSettings;
  /** A message that could not be spoken, with why (a log line: the command's standard error may quote the message). */
  onSpeechFailure?: (runId: number, error: SpeechError) => void;
}

/** How a call ends once its BYE is answered, when it is not simply `completed` (the runtime unreachable). */
interface EndAs {
  kind: ProviderEventKind;
  reason: string;
  rawStatus: string;
}

/**
 * The `sip` package (and the WebSocket library it loads) is required when the stack starts, on the
 * first SIP dial: a node that never dials SIP never loads it. It is CommonJS, so require yields what
 * `import * as sip from 'sip'` would.
 */
const require = createRequire(import.meta.url);
const sipLibrary = () => require('sip') as typeof sip;
const sipDigest = () => require('sip/digest.js') as typeof digest;

const token = () => randomBytes(8).toString('hex');

/**
 * A dialog as the caller (UAC) keeps it (RFC 3261 section 12.1.2): the far end's To (with its tag),
 * its Contact (the remote target), and the route set, the 2xx's Record-Route in reverse order. Every
 * request within the dialog (the 2xx's ACK, BYE) goes to the remote target through the route set
 * (route-set.ts), so it passes the proxies that asked to stay on the path.
 */
interface Dialog {
  to: sip.NameAddr;
  remoteTarget: string;
  routeSet: sip.NameAddr[];
}

/** A fresh copy of a Route header for each request: the transaction layer keeps the message it sends. */
function copyRoute(route: unknown): sip.NameAddr[] | undefined {
  return Array.isArray(route) && route.length > 0 ? (route as sip.NameAddr[]).map((entry) => ({ ...entry, params: { ...entry.params } })) : undefined;
}

const tlsPolicy = (trunk: SipTrunk): TlsPolicy => ({
  ...(trunk.tlsServerName ? { serverName: trunk.tlsServerName } : {}),
  ...(trunk.tlsCaPem ? { ca: trunk.tlsCaPem } : {}),
});

/** One outgoing call and its dialog. */
class SipCall {
  provisional = false;
  answered = false;
  ended = false;
  /** Asked to end before any provisional response: CANCEL waits for one (RFC 3261 section 9.1). */
  cancelPending = false;
  authenticated = false;
  invite: sip.SipMessage;
  /** The far end's 2xx: its To tag and Contact make the dialog, its Record-Route the route set. */
  dialog: Dialog | undefined;
  cseq: number;
  /** Where the INVITE went: its CANCEL goes the same way (RFC 3261 section 9.1). */
  readonly inviteHop: Hop;
  /** Ends the hold on the TCP or TLS connection the far end may send its BYE over. */
  releaseConnection: (() => void) | undefined;
  /** The transfer under way (one at a time): its REFER's NOTIFYs go to it. */
  transfer: TransferWatch | undefined;
  /** The call's own RTP port and its bridge to the runtime; undefined for a route with media_address. */
  media: CallMedia | undefined;
  /** Set when Dialtone hangs up for a reason of its own: how the run ends once the BYE is answered. */
  endAs: EndAs | undefined;
  /** What the run asks of machine detection; heard from the answer on (routes without media_address). */
  detection: MachineDetectionRequest | undefined;
  /** Machine detection listening to the callee, and its time limit, until its verdict. */
  listener: { ears: CallMachineListener; timer: ReturnType<typeof setTimeout> } | undefined;
  /** The 2xx to a callee's re-INVITE, resent until its ACK (RFC 3261 section 13.3.1.4): its CSeq and timer. */
  unacknowledged: { cseq: number; timer: ReturnType<typeof setTimeout> } | undefined;
  /** A media_address route's SDP version (o=), for its answers to re-INVITEs. */
  sdpVersion = 0;
  sdpSession = 0;

  constructor(
    readonly runId: number,
    readonly orgId: number,
    readonly callId: string,
    invite: sip.SipMessage,
    readonly trunk: SipTrunk,
    inviteHop: Hop,
    readonly credentials: SipCredentials | undefined,
  ) {
    this.inviteHop = inviteHop;
    this.invite = invite;
    this.cseq = invite.headers.cseq?.seq ?? 1;
  }
}

export class SipProvider implements InProcessProvider<SipRouteConfig> {
  readonly name = 'sip';
  readonly callsOutliveNode = false;
  private endpoint: SipEndpoint | undefined;
  private readonly calls = new Map<string, SipCall>();
  private readonly rtpPorts: RtpPortRange;

  constructor(
    private readonly settings: SipStackSettings,
    private readonly clock: Clock,
    private readonly emit: ProviderEventSink,
    private readonly emitTransfer: TransferOutcomeSink = () => undefined,
    private readonly emitVerdict: MachineVerdictSink = () => undefined,
  ) {
    this.rtpPorts = new RtpPortRange(settings.rtpPorts.min, settings.rtpPorts.max);
  }

  private get localHost(): string {
    return this.settings.publicAddress ?? (this.settings.bindAddress === '0.0.0.0' ? hostname() : this.settings.bindAddress);
  }

  /**
   * The endpoint, made on first use; each dial binds what its transport needs (transport.ts: the UDP
   * socket, or the TCP listener). A port already taken fails that dial with the reason; the next
   * dial tries again.
   */
  private endpointFor(): SipEndpoint {
    this.endpoint ??= new SipEndpoint(
      sipLibrary(),
      {
        bindAddress: this.settings.bindAddress,
        port: this.settings.port,
        publicHost: this.localHost,
        ...(this.settings.connectionIdleMs ? { idleMs: this.settings.connectionIdleMs } : {}),
        ...(this.settings.maxMessageBytes ? { maxMessageBytes: this.settings.maxMessageBytes } : {}),
      },
      (request) => this.onRequest(request),
      this.settings.onTransportError,
    );
    return this.endpoint;
  }

  readiness(): string[] {
    return [];
  }

  async dial(request: DialRequest<SipRouteConfig>): Promise<{ providerCallId: string }> {
    const { trunk } = request.route.config;
    const callId = `${token()}@${this.localHost}`;
    let media: CallMedia | undefined;
    if (!trunk.mediaAddress) {
      try {
        media = await CallMedia.open(this.rtpPorts, this.settings.bindAddress, this.localHost, this.clock, this.mediaEvents(request.runId, callId), this.settings.callMedia ?? DEFAULT_CALL_MEDIA_OPTIONS);
      } catch (error) {
        throw new DialRefusedError('failed', 'sip_media_unavailable', `No RTP port for the call: ${(error as Error).message}`);
      }
    }
    try {
      return await this.dialWith(request, callId, media);
    } catch (error) {
      media?.close();
      throw error;
    }
  }

  private async dialWith(request: DialRequest<SipRouteConfig>, callId: string, media: CallMedia | undefined): Promise<{ providerCallId: string }> {
    const { trunk, credentials } = request.route.config;
    const session = Date.now();
    const sdp = media ? media.offer(session) : sdpOffer({ address: trunk.mediaAddress ?? this.localHost, port: trunk.mediaPort, sessionId: session });
    const invite = this.buildInvite(request, trunk, callId, sdp);
    // An outbound proxy is a pre-existing route set: the INVITE is routed like an in-dialog request.
    const routed = routeRequest(invite.uri ?? '', preloadedRouteSet(trunk.outboundProxy));
    let hop: Hop;
    try {
      hop = hopOf(routed.nextHop, trunk.transport, sipLibrary().parseUri);
    } catch (error) {
      // The message quotes the next hop, often the remote target `sip:+1…@trunk`: the detail is
      // stored with the run and sent in webhooks, so its number is masked as in the logs.
      throw new DialRefusedError('failed', 'sip_route_unusable', maskPhoneNumbersIn((error as Error).message));
    }
    invite.uri = routed.requestUri;
    if (routed.route.length > 0) invite.headers.route = routed.route;
    const endpoint = this.endpointFor();
    try {
      await endpoint.listen(hop.transport);
    } catch (error) {
      throw new DialRefusedError('failed', 'sip_stack_unavailable', `The SIP stack cannot start: ${(error as Error).message}`);
    }
    const call = new SipCall(request.runId, request.route.orgId, callId, invite, trunk, hop, credentials);
    call.media = media;
    call.detection = media ? request.machineDetection : undefined;
    call.sdpSession = session;
    call.sdpVersion = session;
    this.calls.set(callId, call);
    if (hop.transport !== 'udp') {
      endpoint.hold(hop, tlsPolicy(trunk)).then(
        (release) => (call.ended ? release() : (call.releaseConnection = release)),
        () => undefined, // the INVITE's own transaction reports the failure (a 503)
      );
    }
    this.sendInvite(endpoint, call, credentials);
    return { providerCallId: callId };
  }

  async hangUp(live: LiveCall<SipRouteConfig>): Promise<void> {
    const call = this.calls.get(live.providerCallId);
    if (call) this.endCall(call);
  }

  /**
   * A message left on the voicemail that answered (dispatch calls this on a machine's verdict with
   * `leave_message`; detect `message_end` makes that verdict wait for the greeting's end and its
   * beep). The agent runtime's stream ends at once (`stop`, as Twilio's does when the call's TwiML
   * is replaced), the message is synthesized (speech-command.ts), played at real time, and the call
   * hung up: it completes `voicemail_left`. Speech that cannot be had (no command, the command
   * failing, too slow, too large, not a WAV) hangs up at once and the run ends `failed`
   * (`voicemail_failed`, its raw status saying why): no message was left, and saying
   * `voicemail_left` would be false. Resolves at once: the run's other events (the callee hanging
   * up meanwhile) are not held up by the synthesis or the playing.
   */
  async leaveMessage(live: LiveCall<SipRouteConfig>, text: string): Promise<void> {
    const call = this.calls.get(live.providerCallId);
    const media = call?.media;
    if (!call || !media || !call.answered || call.ended) return;
    media.detachRuntime();
    const speech = this.settings.speech;
    const failed = (error: SpeechError) => {
      this.settings.onSpeechFailure?.(call.runId, error);
      call.endAs ??= { kind: 'failed', reason: 'voicemail_failed', rawStatus: `${error.failure}: ${error.message}` };
      this.endCall(call);
    };
    if (!speech) return failed(new SpeechError('speech_command_unavailable', 'SIP_SPEECH_COMMAND is not set'));
    void synthesize(text, speech).then(
      (mulaw) => {
        if (call.ended) return;
        const seconds = (mulaw.length / 8000).toFixed(1);
        media.play(mulaw, this.settings.mediaStream.catchUpMs, () => {
          call.endAs ??= { kind: 'completed', reason: 'voicemail_left', rawStatus: `message played (${seconds} s), BYE` };
          this.endCall(call);
        });
      },
      (error: unknown) => {
        if (!call.ended) failed(error instanceof SpeechError ? error : new SpeechError('speech_command_failed', (error as Error).message));
      },
    );
  }

  /**
   * A blind transfer (RFC 3515): REFER within the dialog, resolved once the far end accepts it
   * (2xx, normally 202); its refusal (405, 501, 403, 481…) throws CallControlRefusedError with the
   * status line. The outcome follows from the NOTIFYs (refer.ts) through `emitTransfer`; when the
   * target answered, Dialtone leaves the call with BYE (RFC 5589 section 6: the transferor hangs up).
   * The caller ID and the announcement are not carried: the transferee's side places the call to the
   * target, and Dialtone has no media to speak with.
   */
  async transfer(live: LiveCall<SipRouteConfig>, request: TransferRequest): Promise<void> {
    const call = this.answeredCall(live);
    if (call.transfer && !call.transfer.done) throw new CallControlRefusedError('transfer_pending', 'A transfer of this call is already under way');
    const referTo = referToUri(request.to, call.trunk);
    const watch = new TransferWatch(request.timeoutSeconds * 1000 + (this.settings.transferGraceMs ?? 15_000), (result, raw) => {
      this.emitTransfer({ runId: call.runId, providerCallId: call.callId, result, raw, at: this.clock.now() });
      if (result === 'answered') this.endCall(call);
    });
    call.transfer = watch;
    const contact = call.invite.headers.contact?.map((entry) => ({ ...entry, params: { ...entry.params } }));
    const response = await this.requestInDialog(call, 'REFER', { ...referHeaders(referTo, call.invite.headers.from?.uri ?? ''), ...(contact ? { contact } : {}) });
    const status = response.status ?? 0;
    if (status >= 300) {
      watch.abandon();
      const line = `${status} ${response.reason ?? ''}`.trim();
      throw new CallControlRefusedError(line, `The far end refused the transfer (REFER): ${line}`);
    }
    watch.accept();
  }

  /**
   * DTMF: in the call's media as RFC 4733 events when Dialtone relays it and the answer negotiated
   * telephone-event (media/call-media.ts), else by INFO (dtmf-info.ts), one digit at a time; a
   * refusal of an INFO (501, 415, 405…) throws CallControlRefusedError and sends no more.
   */
  async sendDigits(live: LiveCall<SipRouteConfig>, digits: string): Promise<void> {
    const call = this.answeredCall(live);
    const wait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
    const media = call.media;
    if (media?.sendsTelephoneEvents) {
      await media.withPlayoutHeld(() => playDigits(digits, (digit) => media.sendDigitEvent(digit, wait), wait));
      return;
    }
    await playDigits(
      digits,
      async (digit) => {
        const response = await this.requestInDialog(call, 'INFO', { 'content-type': DTMF_INFO_CONTENT_TYPE }, dtmfRelayBody(digit));
        const status = response.status ?? 0;
        if (status >= 300) {
          const line = `${status} ${response.reason ?? ''}`.trim();
          throw new CallControlRefusedError(line, `The far end refused DTMF by INFO: ${line}`);
        }
      },
      (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    );
  }

  /** The call behind `live`, answered and not ended: transfer and digits need its dialog. */
  private answeredCall(live: LiveCall<SipRouteConfig>): SipCall & { dialog: Dialog } {
    const call = this.calls.get(live.providerCallId);
    if (!call?.dialog || !call.answered || call.ended) throw new CallControlRefusedError('no_dialog', 'The call is not up in this node (not answered, or already ended)');
    return call as SipCall & { dialog: Dialog };
  }

  /**
   * Sends a request within the dialog (REFER, INFO) through its route set and resolves with its
   * final response; a 401/407 is answered once with the route's digest credentials, as the INVITE's
   * is. A next hop Dialtone cannot send to answers 503, as an unreachable one does (transport.ts).
   */
  private requestInDialog(call: SipCall & { dialog: Dialog }, method: string, headers: sip.SipHeaders, content?: string): Promise<sip.SipMessage> {
    const endpoint = this.endpointFor();
    /** The next request of the dialog, routed (its Request-URI set, which the digest signs), with its next hop. */
    const build = (): { message: sip.SipMessage; hop: Hop | undefined } => {
      call.cseq += 1;
      const message: sip.SipMessage = {
        method,
        headers: { to: call.dialog.to, from: call.invite.headers.from, 'call-id': call.callId, cseq: { method, seq: call.cseq }, 'max-forwards': 70, ...headers },
        ...(content !== undefined ? { content } : {}),
      };
      return { message, hop: this.inDialog(call, call.dialog, message) };
    };
    return new Promise((resolve, reject) => {
      const send = ({ message, hop }: { message: sip.SipMessage; hop: Hop | undefined }, authenticated: boolean) => {
        if (!hop) return resolve(sipLibrary().makeResponse(message, 503, 'Service Unavailable (the remote target is not a SIP URI Dialtone can send to)'));
        endpoint.request(message, hop, tlsPolicy(call.trunk), (response) => {
          const status = response.status ?? 0;
          if (status < 200) return;
          if ((status === 401 || status === 407) && call.credentials && !authenticated) {
            // Inside the transaction layer's callback: a throw here would be lost and leave the caller waiting.
            try {
              const retry = build();
              sipDigest().signRequest({}, retry.message, response, { user: call.credentials.username, password: call.credentials.password });
              return send(retry, true);
            } catch (error) {
              return reject(error as Error);
            }
          }
          resolve(response);
        });
      };
      send(build(), false);
    });
  }

  /** Ends calls still up (their dialogs die with this process), then stops the stack. */
  async close(): Promise<void> {
    for (const call of this.calls.values()) call.transfer?.abandon();
    const live = [...this.calls.values()].filter((call) => !call.ended);
    for (const call of live) this.endCall(call);
    // A moment for the BYEs and CANCELs to leave before the transports close.
    if (live.length > 0) await new Promise((resolve) => setTimeout(resolve, 200));
    for (const call of this.calls.values()) {
      call.media?.close();
      call.releaseConnection?.();
    }
    this.calls.clear();
    this.endpoint?.close();
    this.endpoint = undefined;
  }

  /** What the call's media reports: the runtime gone, unreachable or stalled, or the callee's RTP stopped, ends the call. */
  private mediaEvents(runId: number, callId: string): Parameters<typeof CallMedia.open>[4] {
    const hangUp = (endAs: EndAs) => {
      const call = this.calls.get(callId);
      if (!call || call.ended) return;
      call.endAs ??= endAs;
      this.endCall(call);
    };
    return {
      runtimeClosed: (detail) => hangUp({ kind: 'completed', reason: 'stream_closed', rawStatus: detail }),
      runtimeUnreachable: (detail) => hangUp({ kind: 'failed', reason: 'agent_runtime_unreachable', rawStatus: `agent runtime unreachable: ${detail}` }),
      runtimeStalled: (detail) => hangUp({ kind: 'failed', reason: 'agent_runtime_stalled', rawStatus: `agent runtime stalled: ${detail}` }),
      mediaTimeout: (detail) => hangUp({ kind: 'failed', reason: 'media_timeout', rawStatus: `media timeout: ${detail}` }),
      warn: (message, error) => this.settings.onMediaWarning?.(runId, message, error),
    };
  }

  private endCall(call: SipCall): void {
    if (call.ended) return;
    if (call.answered) this.sendBye(call);
    else if (call.provisional) this.sendCancel(call);
    else call.cancelPending = true;
  }

  private buildInvite(request: DialRequest, trunk: SipTrunk, callId: string, sdp: string): sip.SipMessage {
    const target = request.to.startsWith('sip:') || request.to.startsWith('sips:') ? request.to : `sip:${request.to}@${trunk.host}:${trunk.port}`;
    const local = `${this.localHost}:${this.settings.port}`;
    // The far end sends its requests (BYE) to the Contact: over the transport the route uses.
    const contactTransport = trunk.transport === 'udp' ? '' : `;transport=${trunk.transport}`;
    return {
      method: 'INVITE',
      uri: target,
      headers: {
        to: { uri: target, params: {} },
        from: { uri: `sip:${request.from ?? 'anonymous'}@${local}`, params: { tag: token() } },
        'call-id': callId,
        cseq: { method: 'INVITE', seq: 1 },
        contact: [{ uri: `sip:dialtone@${local}${contactTransport}`, params: {} }],
        'max-forwards': 70,
        'content-type': 'application/sdp',
        'x-dialtone-run-id': String(request.runId),
      },
      content: sdp,
    };
  }

  private sendInvite(endpoint: SipEndpoint, call: SipCall, credentials: SipCredentials | undefined): void {
    // The endpoint adds its Via to the message it sends; keep our own copy to build ACK and CANCEL.
    const invite: sip.SipMessage = { ...call.invite, headers: { ...call.invite.headers, via: [], route: copyRoute(call.invite.headers.route) } };
    call.invite = invite;
    endpoint.request(invite, call.inviteHop, tlsPolicy(call.trunk), (response) => this.onInviteResponse(endpoint, call, response, credentials));
  }

  private onInviteResponse(endpoint: SipEndpoint, call: SipCall, response: sip.SipMessage, credentials: SipCredentials | undefined): void {
    const status = response.status ?? 0;
    if (status < 200) {
      if (status > 100 && !call.provisional) {
        call.provisional = true;
        if (status === 180 || status === 183) this.event(call, 'ringing', `${status} ${response.reason ?? ''}`.trim());
      } else if (status > 100) {
        call.provisional = true;
      }
      if (call.cancelPending && status > 100) {
        call.cancelPending = false;
        this.sendCancel(call);
      }
      return;
    }
    if (status < 300) {
      this.onAnswered(endpoint, call, response);
      return;
    }
    if ((status === 401 || status === 407) && credentials && !call.authenticated && !call.ended) {
      // One retry with digest credentials (a proxy's 407 or the trunk's 401): a new transaction with
      // the next CSeq, on the same route as the first.
      call.authenticated = true;
      call.cseq += 1;
      const retry: sip.SipMessage = { ...call.invite, headers: { ...call.invite.headers, via: [], route: copyRoute(call.invite.headers.route), cseq: { method: 'INVITE', seq: call.cseq } } };
      sipDigest().signRequest({}, retry, response, { user: credentials.username, password: credentials.password });
      call.invite = retry;
      call.provisional = false;
      endpoint.request(retry, call.inviteHop, tlsPolicy(call.trunk), (next) => this.onInviteResponse(endpoint, call, next, credentials));
      return;
    }
    this.end(call, outcomeOfFinalResponse(status), `${status} ${response.reason ?? ''}`.trim());
  }

  /** Routes a request within the dialog (route-set.ts) and sends it; undefined when its next hop is unusable. */
  private inDialog(call: SipCall, dialog: Dialog, message: sip.SipMessage): Hop | undefined {
    const routed = routeRequest(dialog.remoteTarget, dialog.routeSet);
    message.uri = routed.requestUri;
    if (routed.route.length > 0) message.headers.route = routed.route;
    try {
      return hopOf(routed.nextHop, call.trunk.transport, sipLibrary().parseUri);
    } catch {
      return undefined;
    }
  }

  private onAnswered(endpoint: SipEndpoint, call: SipCall, response: sip.SipMessage): void {
    const to = response.headers.to;
    const dialog: Dialog = {
      to: to ?? call.invite.headers.to ?? { uri: call.invite.uri ?? '', params: {} },
      remoteTarget: response.headers.contact?.[0]?.uri ?? call.invite.uri ?? '',
      routeSet: routeSetOfResponse(response, sipLibrary().stringifyUri),
    };
    // ACK every 2xx (retransmissions included): the far end keeps resending it until it is acknowledged.
    const ack: sip.SipMessage = {
      method: 'ACK',
      headers: {
        to: dialog.to,
        from: call.invite.headers.from,
        'call-id': call.callId,
        cseq: { method: 'ACK', seq: response.headers.cseq?.seq ?? call.cseq },
        'max-forwards': 70,
        // The credentials the INVITE carried go on its ACK (RFC 3261 section 22.1).
        ...(call.invite.headers['proxy-authorization'] ? { 'proxy-authorization': call.invite.headers['proxy-authorization'] } : {}),
        ...(call.invite.headers.authorization ? { authorization: call.invite.headers.authorization } : {}),
      },
    };
    const ackHop = this.inDialog(call, dialog, ack);
    if (ackHop) endpoint.sendStateless(ack, ackHop, tlsPolicy(call.trunk));
    if (call.answered || call.ended) {
      // A 2xx after we gave up (crossed with our CANCEL): the call exists, so end it properly.
      if (call.ended && !call.dialog && to) {
        call.dialog = dialog;
        this.sendBye(call);
      }
      return;
    }
    call.answered = true;
    if (to) call.dialog = dialog;
    this.event(call, 'answered', `${response.status} ${response.reason ?? ''}`.trim());
    if (call.cancelPending) {
      call.cancelPending = false;
      this.sendBye(call);
      return;
    }
    if (call.media) this.startMedia(call, call.media, response);
  }

  /** The answer's SDP sets where the call's RTP goes; with a runtime configured, the call is relayed to it. */
  private startMedia(call: SipCall, media: CallMedia, response: sip.SipMessage): void {
    const problem = media.answered(typeof response.content === 'string' ? response.content : undefined);
    if (problem) {
      call.endAs = { kind: 'failed', reason: 'sip_media_unusable', rawStatus: `unusable SDP answer: ${problem}` };
      this.sendBye(call);
      return;
    }
    if (call.detection) this.listen(call, media, call.detection);
    const runtime = this.settings.agentRuntime;
    if (!runtime) return;
    media.connect(
      { url: runtime.url, customParameters: runtime.parameters(call.runId), ...this.settings.mediaStream },
      { callSid: call.callId, accountSid: String(call.orgId) },
    );
  }

  /**
   * Machine detection on the answered call: the callee's audio goes to the detector until it
   * decides, or the time allowed (the run's detection_timeout_ms, else SIP_AMD_TIMEOUT_MS) is over;
   * the verdict is reported like Twilio's (emitVerdict), and dispatch acts on it (a hang-up).
   */
  private listen(call: SipCall, media: CallMedia, detection: MachineDetectionRequest): void {
    const tuning = this.settings.machineDetection;
    if (!tuning || call.listener) return;
    const timeoutMs = detection.timeoutMs ?? tuning.timeoutMs;
    const ears = new CallMachineListener({ ...tuning, timeoutMs }, detection.detect, (verdict) => {
      this.stopListening(call);
      if (call.ended) return;
      this.settings.onMachineVerdict?.(call.runId, verdict);
      this.emitVerdict({ runId: call.runId, providerCallId: call.callId, answeredBy: verdict.answeredBy, raw: verdict.raw, at: this.clock.now() });
    });
    // The detector counts the audio it hears; this ends a wait for audio that never comes.
    const timer = setTimeout(() => ears.timeUp(), timeoutMs);
    timer.unref();
    call.listener = { ears, timer };
    media.onCalleeAudio = (mulaw, timestamp) => ears.audio(mulaw, timestamp);
  }

  private stopListening(call: SipCall): void {
    if (!call.listener) return;
    clearTimeout(call.listener.timer);
    call.listener.ears.stop();
    call.listener = undefined;
    if (call.media) call.media.onCalleeAudio = undefined;
  }

  /** CANCEL: the INVITE's Request-URI, Call-ID, From, To, CSeq number, Via and Route, to the same hop (RFC 3261 section 9.1). */
  private sendCancel(call: SipCall): void {
    const via = call.invite.headers.via;
    if (!this.endpoint || !via?.length) return;
    const route = copyRoute(call.invite.headers.route);
    this.endpoint.request(
      {
        method: 'CANCEL',
        uri: call.invite.uri,
        headers: {
          to: call.invite.headers.to,
          from: call.invite.headers.from,
          'call-id': call.callId,
          cseq: { method: 'CANCEL', seq: call.cseq },
          via: [via[0] ?? { params: {} }],
          'max-forwards': 70,
          ...(route ? { route } : {}),
        },
      },
      call.inviteHop,
      tlsPolicy(call.trunk),
      () => undefined,
    );
  }

  private sendBye(call: SipCall): void {
    if (!this.endpoint || !call.dialog) return;
    call.cseq += 1;
    const bye: sip.SipMessage = {
      method: 'BYE',
      headers: {
        to: call.dialog.to,
        from: call.invite.headers.from,
        'call-id': call.callId,
        cseq: { method: 'BYE', seq: call.cseq },
        'max-forwards': 70,
      },
    };
    const hop = this.inDialog(call, call.dialog, bye);
    if (!hop) {
      this.end(call, 'completed', 'BYE not sent: the remote target is not a SIP URI Dialtone can send to');
      return;
    }
    // The bridge stops when the line goes down, not when the callee's answer to it comes back.
    call.media?.close();
    this.endpoint.request(bye, hop, tlsPolicy(call.trunk), (response) => {
      if ((response.status ?? 0) >= 200) this.end(call, 'completed', `BYE ${response.status} ${response.reason ?? ''}`.trim());
    });
  }

  private onRequest(request: sip.SipMessage): void {
    const endpoint = this.endpoint;
    if (!endpoint) return;
    const call = this.calls.get(request.headers['call-id'] ?? '');
    if (request.method === 'ACK') {
      // The ACK of our 2xx to a re-INVITE ends its retransmissions; any other ACK needs nothing.
      if (call?.unacknowledged && request.headers.cseq?.seq === call.unacknowledged.cseq) this.acknowledged(call);
      return;
    }
    // A dialog is its Call-ID and both tags (RFC 3261 section 12): a request that knows the Call-ID
    // but not the tags is not from the far end of this call.
    const inDialog =
      call?.dialog !== undefined &&
      request.headers.to?.params.tag === call.invite.headers.from?.params.tag &&
      request.headers.from?.params.tag === call.dialog.to.params.tag;
    if (!call || !inDialog) {
      endpoint.respond(sipLibrary().makeResponse(request, 481, 'Call/Transaction Does Not Exist'));
      return;
    }
    if (request.method === 'BYE') {
      endpoint.respond(sipLibrary().makeResponse(request, 200, 'OK'));
      this.end(call, 'completed', 'BYE');
      return;
    }
    if (request.method === 'INVITE') {
      this.onReinvite(endpoint, call, request);
      return;
    }
    if (request.method === 'NOTIFY') {
      // A REFER's subscription outlives the call's BYE (RFC 5057): its NOTIFYs are taken until it ends.
      if (!isReferNotify(request)) endpoint.respond(sipLibrary().makeResponse(request, 489, 'Bad Event'));
      else if (!call.transfer) endpoint.respond(sipLibrary().makeResponse(request, 481, 'Subscription Does Not Exist'));
      else {
        endpoint.respond(sipLibrary().makeResponse(request, 200, 'OK'));
        call.transfer.notify(request);
      }
      return;
    }
    endpoint.respond(sipLibrary().makeResponse(request, 405, 'Method Not Allowed'));
  }

  /**
   * A re-INVITE from the callee (RFC 3261 section 14.2, RFC 3264 section 8): a new media address,
   * hold or resume. Answered 200 with our SDP (call-media.ts: the same port and codec, the direction
   * mirrored; a media_address route answers for its media server's address the same way), resent
   * until its ACK; an offer Dialtone cannot take is refused 488 and the call goes on as it was.
   */
  private onReinvite(endpoint: SipEndpoint, call: SipCall, request: sip.SipMessage): void {
    const offer = typeof request.content === 'string' ? request.content : undefined;
    const answer = call.media ? call.media.reoffer(offer) : this.staticAnswer(call, offer);
    if ('problem' in answer) {
      endpoint.respond(sipLibrary().makeResponse(request, 488, 'Not Acceptable Here'));
      return;
    }
    const response = sipLibrary().makeResponse(request, 200, 'OK');
    const contact = call.invite.headers.contact?.map((entry) => ({ ...entry, params: { ...entry.params } }));
    if (contact) response.headers.contact = contact;
    response.headers['content-type'] = 'application/sdp';
    response.content = answer.sdp;
    endpoint.respond(response);
    if (call.unacknowledged) clearTimeout(call.unacknowledged.timer);
    const cseq = request.headers.cseq?.seq ?? 0;
    const started = this.clock.now();
    // T1 doubling up to T2 (500 ms, 4 s), for 64 T1: the server transaction resends the 2xx only when the re-INVITE comes again.
    const resend = (interval: number) => {
      call.unacknowledged = {
        cseq,
        timer: setTimeout(() => {
          if (call.ended || this.clock.now() - started >= 32_000) return this.acknowledged(call);
          endpoint.respond(response);
          resend(Math.min(interval * 2, 4_000));
        }, interval),
      };
    };
    resend(500);
  }

  private acknowledged(call: SipCall): void {
    if (call.unacknowledged) clearTimeout(call.unacknowledged.timer);
    call.unacknowledged = undefined;
  }

  /** A media_address route's answer to a re-INVITE: its media server's address, the offer's codec, the direction mirrored. */
  private staticAnswer(call: SipCall, offer: string | undefined): { sdp: string } | { problem: string } {
    const parsed = parseSdpAnswer(offer ?? '');
    if ('problem' in parsed) return parsed;
    call.sdpVersion += 1;
    const { codec, payloadType, telephoneEvent } = parsed;
    return {
      sdp: sdpAnswer({
        address: call.trunk.mediaAddress ?? this.localHost,
        port: call.trunk.mediaPort,
        sessionId: call.sdpSession,
        version: call.sdpVersion,
        codec,
        payloadType,
        telephoneEvent,
        direction: answerDirection(parsed.direction),
      }),
    };
  }

  private end(call: SipCall, kind: ProviderEventKind, rawStatus: string): void {
    if (call.ended) return;
    call.ended = true;
    this.stopListening(call);
    this.acknowledged(call);
    call.media?.close();
    // A hang-up of Dialtone's own making (the runtime gone) ends the run as it says.
    if (call.endAs) this.emit({ runId: call.runId, providerCallId: call.callId, kind: call.endAs.kind, rawStatus: call.endAs.rawStatus, reason: call.endAs.reason, at: this.clock.now() });
    else this.event(call, kind, rawStatus);
    // Kept a little longer: a 2xx crossing our CANCEL still needs its ACK and BYE.
    setTimeout(() => {
      call.releaseConnection?.();
      call.releaseConnection = undefined;
      this.calls.delete(call.callId);
    }, 32_000).unref();
  }

  private event(call: SipCall, kind: ProviderEventKind, rawStatus: string): void {
    this.emit({ runId: call.runId, providerCallId: call.callId, kind, rawStatus, at: this.clock.now() });
  }
}
