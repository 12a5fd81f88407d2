// The SIP trunk provider. The `sip` package supplies the parser, transports and RFC 3261
// transactions (retransmissions, timers); the dialog is ours: ACK for the 2xx, CANCEL before the
// answer, BYE after it, answering the far end's BYE, and one digest-authentication retry.
//
// Calls live in this process (the dialog state is here), so only the node that placed a call can
// end it; cancel requests reach it through the store (dispatch/). One stack per provider, started
// on the first dial, so a node that never dials SIP never binds a SIP port.
import { randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import type * as sip from 'sip';
import type * as digest from 'sip/digest.js';
import type { Clock } from '../../deps.js';
import { DialRefusedError, type DialRequest, type InProcessProvider, type LiveCall, type ProviderEventKind, type ProviderEventSink, type RouteDecoding, type RouteInput } from '../provider.js';
import { decodeSipRoute, type SipRouteConfig } from './route.js';
import type { SipCredentials, SipTrunk } from './settings.js';
import { outcomeOfFinalResponse } from './status.js';

export interface SipStackSettings {
  bindAddress: string;
  port: number;
  /** Address written in Via, Contact and the SDP offer when the configuration names no media address. */
  publicAddress: string | undefined;
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

/** Binds and releases the UDP port: rejects (instead of throwing later) when it is taken. */
function tryUdpPort(address: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = createSocket(address.includes(':') ? 'udp6' : 'udp4');
    socket.once('error', (error) => {
      socket.close();
      reject(error);
    });
    socket.bind(port, address, () => socket.close(() => resolve()));
  });
}

/**
 * A dialog as the caller (UAC) keeps it (RFC 3261 section 12.1.2): the far end's To (with its tag),
 * its Contact (the remote target), and the route set, the 2xx's Record-Route in reverse order. Every
 * request within the dialog (the 2xx's ACK, BYE) goes to the remote target through the route set,
 * so it passes the proxies that asked to stay on the path (section 12.2.1.1).
 */
interface Dialog {
  to: sip.NameAddr;
  remoteTarget: string;
  routeSet: sip.NameAddr[];
}

/** The route set of a 2xx: its Record-Route entries, last first. */
function routeSetOf(response: sip.SipMessage): sip.NameAddr[] {
  const recordRoute = response.headers['record-route'];
  return Array.isArray(recordRoute) ? ([...recordRoute] as sip.NameAddr[]).reverse() : [];
}

/**
 * The Route header of a request within the dialog: a fresh copy each time, because the `sip`
 * package rewrites the array it is given (it pops a strict router into the Request-URI).
 */
function routeHeader(dialog: Dialog): sip.NameAddr[] | undefined {
  return dialog.routeSet.length > 0 ? dialog.routeSet.map((r) => ({ ...r, params: { ...r.params } })) : undefined;
}

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

  constructor(
    readonly runId: number,
    readonly callId: string,
    invite: sip.SipMessage,
  ) {
    this.invite = invite;
    this.cseq = invite.headers.cseq?.seq ?? 1;
  }
}

export class SipProvider implements InProcessProvider<SipRouteConfig> {
  readonly name = 'sip' as const;
  readonly callsOutliveNode = false;
  private stack: sip.SipStack | undefined;
  private readonly calls = new Map<string, SipCall>();

  constructor(
    private readonly settings: SipStackSettings,
    private readonly clock: Clock,
    private readonly emit: ProviderEventSink,
  ) {}

  private get localHost(): string {
    return this.settings.publicAddress ?? (this.settings.bindAddress === '0.0.0.0' ? hostname() : this.settings.bindAddress);
  }

  private starting: Promise<sip.SipStack> | undefined;

  /**
   * The stack, started on first use. The `sip` package binds its UDP socket without an error
   * handler, so a port already taken would crash the process: the port is tried here first, and a
   * failure ends the dial instead. (UDP only: its TCP transport has the same flaw, with no way to try it first.)
   */
  private started(): Promise<sip.SipStack> {
    this.starting ??= (async () => {
      await tryUdpPort(this.settings.bindAddress, this.settings.port);
      this.stack = sipLibrary().create(
        { address: this.settings.bindAddress, port: this.settings.port, publicAddress: this.localHost, udp: true, tcp: false, logger: { error: () => undefined } },
        (request) => this.onRequest(request),
      );
      return this.stack;
    })();
    this.starting.catch(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  decodeRoute(input: RouteInput): RouteDecoding<SipRouteConfig> {
    return decodeSipRoute(input);
  }

  readiness(): string[] {
    return [];
  }

  async dial(request: DialRequest<SipRouteConfig>): Promise<{ providerCallId: string }> {
    const { trunk, credentials } = request.route.config;
    let stack: sip.SipStack;
    try {
      stack = await this.started();
    } catch (error) {
      throw new DialRefusedError('failed', 'sip_stack_unavailable', `The SIP stack cannot start: ${(error as Error).message}`);
    }
    const callId = `${token()}@${this.localHost}`;
    const invite = this.buildInvite(request, trunk, callId);
    const call = new SipCall(request.runId, callId, invite);
    this.calls.set(callId, call);
    this.sendInvite(stack, call, credentials);
    return { providerCallId: callId };
  }

  async hangUp(live: LiveCall<SipRouteConfig>): Promise<void> {
    const call = this.calls.get(live.providerCallId);
    if (call) this.endCall(call);
  }

  /** Ends calls still up (their dialogs die with this process), then stops the stack. */
  async close(): Promise<void> {
    const live = [...this.calls.values()].filter((call) => !call.ended);
    for (const call of live) this.endCall(call);
    // A moment for the BYEs and CANCELs to leave before the transports close.
    if (live.length > 0) await new Promise((resolve) => setTimeout(resolve, 200));
    this.calls.clear();
    this.stack?.destroy();
    this.stack = undefined;
    this.starting = undefined;
  }

  private endCall(call: SipCall): void {
    if (call.ended) return;
    if (call.answered) this.sendBye(call);
    else if (call.provisional) this.sendCancel(call);
    else call.cancelPending = true;
  }

  private buildInvite(request: DialRequest, trunk: SipTrunk, callId: string): sip.SipMessage {
    const target = request.to.startsWith('sip:') || request.to.startsWith('sips:') ? request.to : `sip:${request.to}@${trunk.host}:${trunk.port}`;
    const local = `${this.localHost}:${this.settings.port}`;
    const mediaAddress = trunk.mediaAddress ?? this.localHost;
    const session = Date.now();
    const sdp = [
      'v=0',
      `o=dialtone ${session} ${session} IN IP4 ${mediaAddress}`,
      's=Dialtone',
      `c=IN IP4 ${mediaAddress}`,
      't=0 0',
      `m=audio ${trunk.mediaPort} RTP/AVP 0 8 101`,
      'a=rtpmap:0 PCMU/8000',
      'a=rtpmap:8 PCMA/8000',
      'a=rtpmap:101 telephone-event/8000',
      'a=fmtp:101 0-15',
      'a=sendrecv',
      '',
    ].join('\r\n');
    return {
      method: 'INVITE',
      uri: target,
      headers: {
        to: { uri: target, params: {} },
        from: { uri: `sip:${request.from ?? 'anonymous'}@${local}`, params: { tag: token() } },
        'call-id': callId,
        cseq: { method: 'INVITE', seq: 1 },
        contact: [{ uri: `sip:dialtone@${local}`, params: {} }],
        'max-forwards': 70,
        'content-type': 'application/sdp',
        'x-dialtone-run-id': String(request.runId),
      },
      content: sdp,
    };
  }

  private sendInvite(stack: sip.SipStack, call: SipCall, credentials: SipCredentials | undefined): void {
    // The stack adds its Via to the message it sends; keep our own copy to build ACK and CANCEL.
    const invite: sip.SipMessage = { ...call.invite, headers: { ...call.invite.headers, via: [] } };
    call.invite = invite;
    stack.send(invite, (response) => this.onInviteResponse(stack, call, response, credentials));
  }

  private onInviteResponse(stack: sip.SipStack, call: SipCall, response: sip.SipMessage, credentials: SipCredentials | undefined): void {
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
      this.onAnswered(stack, call, response);
      return;
    }
    if ((status === 401 || status === 407) && credentials && !call.authenticated && !call.ended) {
      // One retry with digest credentials: a new transaction with the next CSeq.
      call.authenticated = true;
      call.cseq += 1;
      const retry: sip.SipMessage = { ...call.invite, headers: { ...call.invite.headers, via: [], cseq: { method: 'INVITE', seq: call.cseq } } };
      sipDigest().signRequest({}, retry, response, { user: credentials.username, password: credentials.password });
      call.invite = retry;
      call.provisional = false;
      stack.send(retry, (next) => this.onInviteResponse(stack, call, next, credentials));
      return;
    }
    this.end(call, outcomeOfFinalResponse(status), `${status} ${response.reason ?? ''}`.trim());
  }

  private onAnswered(stack: sip.SipStack, call: SipCall, response: sip.SipMessage): void {
    const to = response.headers.to;
    const dialog: Dialog = { to: to ?? call.invite.headers.to ?? { uri: call.invite.uri ?? '', params: {} }, remoteTarget: response.headers.contact?.[0]?.uri ?? call.invite.uri ?? '', routeSet: routeSetOf(response) };
    const route = routeHeader(dialog);
    // ACK every 2xx (retransmissions included): the far end keeps resending it until it is acknowledged.
    stack.send({
      method: 'ACK',
      uri: dialog.remoteTarget,
      headers: {
        to: dialog.to,
        from: call.invite.headers.from,
        'call-id': call.callId,
        cseq: { method: 'ACK', seq: response.headers.cseq?.seq ?? call.cseq },
        via: [],
        ...(route ? { route } : {}),
      },
    });
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
    }
  }

  private sendCancel(call: SipCall): void {
    const via = call.invite.headers.via;
    if (!this.stack || !via?.length) return;
    this.stack.send(
      {
        method: 'CANCEL',
        uri: call.invite.uri,
        headers: {
          to: call.invite.headers.to,
          from: call.invite.headers.from,
          'call-id': call.callId,
          cseq: { method: 'CANCEL', seq: call.cseq },
          via,
        },
      },
      () => undefined,
    );
  }

  private sendBye(call: SipCall): void {
    if (!this.stack || !call.dialog) return;
    call.cseq += 1;
    const route = routeHeader(call.dialog);
    this.stack.send(
      {
        method: 'BYE',
        uri: call.dialog.remoteTarget,
        headers: {
          to: call.dialog.to,
          from: call.invite.headers.from,
          'call-id': call.callId,
          cseq: { method: 'BYE', seq: call.cseq },
          'max-forwards': 70,
          ...(route ? { route } : {}),
        },
      },
      (response) => {
        if ((response.status ?? 0) >= 200) this.end(call, 'completed', `BYE ${response.status} ${response.reason ?? ''}`.trim());
      },
    );
  }

  private onRequest(request: sip.SipMessage): void {
    const stack = this.stack;
    if (!stack || request.method === 'ACK') return;
    const call = this.calls.get(request.headers['call-id'] ?? '');
    // A dialog is its Call-ID and both tags (RFC 3261 section 12): a request that knows the Call-ID
    // but not the tags is not from the far end of this call.
    const inDialog =
      call?.dialog !== undefined &&
      request.headers.to?.params.tag === call.invite.headers.from?.params.tag &&
      request.headers.from?.params.tag === call.dialog.to.params.tag;
    if (!call || !inDialog) {
      stack.send(sipLibrary().makeResponse(request, 481, 'Call/Transaction Does Not Exist'));
      return;
    }
    if (request.method === 'BYE') {
      stack.send(sipLibrary().makeResponse(request, 200, 'OK'));
      this.end(call, 'completed', 'BYE');
      return;
    }
    stack.send(sipLibrary().makeResponse(request, 405, 'Method Not Allowed'));
  }

  private end(call: SipCall, kind: ProviderEventKind, rawStatus: string): void {
    if (call.ended) return;
    call.ended = true;
    this.event(call, kind, rawStatus);
    // Kept a little longer: a 2xx crossing our CANCEL still needs its ACK and BYE.
    setTimeout(() => this.calls.delete(call.callId), 32_000).unref();
  }

  private event(call: SipCall, kind: ProviderEventKind, rawStatus: string): void {
    this.emit({ runId: call.runId, providerCallId: call.callId, kind, rawStatus, at: this.clock.now() });
  }
}
