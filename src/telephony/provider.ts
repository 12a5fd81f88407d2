// The one interface every telephony provider implements: everything that differs between providers
// lives behind it (dialing, hanging up, asking about a call, the route's settings and credentials
// schema, readiness, and the provider's callbacks). A provider places calls and reports what happens
// to them as ProviderEvents; it never changes a run itself. Dialtone's lifecycle code (dispatch/,
// runs/) turns events into transitions, so the rules about states live in one place.
//
// Providers never see a database row: they receive a DecodedRoute (routes.ts), whose settings were
// parsed and credentials decrypted once and checked against the provider's own schema (its
// definition's decoder, definition.ts). What a provider is called, what it can do and how it is
// built are said by its definition; this is what a built provider does.
import type { FieldError } from '../errors.js';
import type { AnsweredBy, ProviderName } from '../store/schema/schema.js';

export type ProviderEventKind = 'ringing' | 'answered' | 'completed' | 'busy' | 'no_answer' | 'rejected' | 'failed' | 'canceled';

export interface ProviderEvent {
  runId: number;
  providerCallId: string;
  kind: ProviderEventKind;
  /** The provider's own status words (a SIP status line, a Twilio CallStatus). */
  rawStatus: string;
  at: number;
  /** Why the call ended, when the provider knows better than its status word (`voicemail_left`). */
  reason?: string;
}

export type ProviderEventSink = (event: ProviderEvent) => void;

/** Who answered a call, as the provider decided it (answering-machine detection). */
export interface MachineVerdict {
  runId: number;
  providerCallId: string;
  answeredBy: AnsweredBy;
  /** The provider's own words (Twilio's AnsweredBy, e.g. `machine_end_beep`). */
  raw: string;
  at: number;
}

export type MachineVerdictSink = (verdict: MachineVerdict) => void;

/**
 * A blind (cold) transfer of an answered call's callee to another destination, asked by the agent
 * runtime (issue 32). The provider hands the callee over and reports how the transfer ended as a
 * TransferOutcome, asynchronously (Twilio's <Dial> action callback, SIP's NOTIFY sipfrag).
 */
export interface TransferRequest {
  /** An E.164 number, or a `sip:`/`sips:` URI where the route's provider `dialsSipUris`. */
  to: string;
  /** The caller ID the target sees; null for the route's own. */
  callerId: string | null;
  /** Spoken to the callee before the transfer, when given. */
  announce?: string;
  /** How long the target may ring before the transfer counts as not answered. */
  timeoutSeconds: number;
}

/** How a transfer ended: `answered` means the target took the callee, and the run ends `transferred`. */
export type TransferResult = 'answered' | 'busy' | 'no_answer' | 'failed' | 'refused';

export interface TransferOutcome {
  runId: number;
  providerCallId: string;
  result: TransferResult;
  /** The provider's own words (Twilio's DialCallStatus, a SIP status line from the NOTIFY's sipfrag). */
  raw: string;
  at: number;
}

export type TransferOutcomeSink = (outcome: TransferOutcome) => void;

/** The provider refused to try a transfer or to send digits (SIP 405/501 to REFER or INFO): reported, never hidden. */
export class CallControlRefusedError extends Error {
  constructor(
    readonly rawStatus: string,
    message: string,
  ) {
    super(message);
    this.name = 'CallControlRefusedError';
  }
}

/** What a dial asks of a provider that detects machines (its definition's `supportsMachineDetection` says it can). */
export interface MachineDetectionRequest {
  /** `message_end`: the verdict on a machine waits for the end of its greeting, so a message can follow. */
  detect: 'on' | 'message_end';
  /** How long the provider may listen before it says `unknown`. */
  timeoutMs: number | undefined;
}

/** What an agent's answering_machine asks of a route (workflows/answering-machine.ts says it for agents). */
export interface AnsweringMachineAsk {
  detect: 'on' | 'message_end';
  onMachine: 'hangup' | 'leave_message' | 'connect_agent';
}

/**
 * What a provider can do, said as plain booleans so code that depends on one (a SIP URI dialed,
 * answering-machine detection asked for, a run given up with its node) asks the route's provider
 * rather than its name. Transfer and DTMF say what Dialtone does through the provider (the agent
 * runtime's transfer and digits, dispatch/call-control.ts); machine detection says whether the
 * provider can report it, which answering-machine detection (issue 31) builds on.
 */
export interface ProviderCapabilities {
  /** The provider holds its calls: they go on when the node that placed them stops, and it can be asked about them. */
  readonly callsOutliveNode: boolean;
  /** A `sip:` or `sips:` URI can be dialed, besides E.164 numbers. */
  readonly dialsSipUris: boolean;
  /** The provider can tell a person from an answering machine when a call is answered. */
  readonly supportsMachineDetection: boolean;
  /** An answered call can be handed to another destination. */
  readonly supportsTransfer: boolean;
  /** Dialtone can send DTMF digits on an answered call through the provider. */
  readonly sendsDtmf: boolean;
}

/** A telephony configuration as providers see it: checked, parsed, its credentials decrypted. */
export interface DecodedRoute<C = unknown> {
  id: number;
  orgId: number;
  provider: ProviderName;
  /**
   * What the route can do: its provider's capabilities (its definition's, definition.ts), less what
   * this route's settings rule out (a SIP route with media_address cannot detect machines).
   */
  capabilities: ProviderCapabilities;
  callerIds: string[];
  /** The route's own ring timeout (settings.ring_timeout_ms), when it sets one. */
  ringTimeoutMs: number | undefined;
  /** The provider's typed settings and credentials (its schema's output). */
  config: C;
}

/** What a route's provider is given to check: the stored settings and the decrypted credentials. */
export interface RouteInput {
  settings: Record<string, unknown>;
  /** Null when none are stored. */
  credentials: Record<string, unknown> | null;
}

export type RouteDecoding<C> = { ok: true; config: C } | { ok: false; problems: FieldError[] };

/**
 * One reason a route cannot place a call now: a FieldError points at the member of the route at
 * fault (`/caller_ids`, `/credentials`); a string is about the route as a whole or the service
 * around it (its JSON Pointer is empty).
 */
export type ReadinessProblem = string | FieldError;

/** Service-wide facts readiness depends on. */
export interface ServiceSettings {
  /** Where providers call back (PUBLIC_BASE_URL). */
  publicBaseUrl: string | undefined;
}

export interface DialRequest<C = unknown> {
  runId: number;
  to: string;
  from: string | null;
  ringTimeoutMs: number;
  route: DecodedRoute<C>;
  /** Present when the run's agent asks who answered; only given to providers that detect machines. */
  machineDetection?: MachineDetectionRequest;
}

export interface LiveCall<C = unknown> {
  runId: number;
  providerCallId: string;
  route: DecodedRoute<C>;
}

/** A dial the provider refused outright: the run ends in `outcome` with the provider's words kept. */
export class DialRefusedError extends Error {
  constructor(
    readonly outcome: 'failed' | 'busy' | 'rejected' | 'no_answer',
    readonly rawStatus: string,
    message: string,
  ) {
    super(message);
    this.name = 'DialRefusedError';
  }
}

/**
 * The provider did not answer a dial in time (DIAL_TIMEOUT_MS): it may have placed the call all the
 * same. A provider whose calls outlive the node (Twilio) can be asked later whether it did, so its
 * run is not ended for it (dispatch/dispatcher.ts); a call in the node's process is given up.
 */
export class DialTimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DialTimeoutError';
  }
}

/** What the provider says of a call now. */
export interface CallReport {
  providerCallId: string;
  /** The event this status means; null while the call is still being set up (queued, initiated). */
  kind: ProviderEventKind | null;
  /** The provider's own words. */
  rawStatus: string;
  /** When the provider created the call (ms since the epoch), when it says. */
  createdAt: number | undefined;
  /** Who answered, when the provider says (Twilio's AnsweredBy on a call detected for). */
  verdict?: { answeredBy: AnsweredBy; raw: string };
  /** Why the call ended, when the provider knows better than its status word (`voicemail_left`). */
  reason?: string;
}

/** The call a run may have placed before its call id was recorded (the node stopped mid-dial). */
export interface CallQuery {
  to: string;
  from: string | null;
  /** The call was created at or after this time (the run's claim). */
  placedAfter: number;
  /** Calls already recorded for other runs: never this run's. */
  excluding: ReadonlySet<string>;
}

/** A callback as the HTTP layer received it: the URL the provider called, its headers and form. */
export interface CallbackRequest {
  /** The URL as the provider was told it (PUBLIC_BASE_URL plus path and query). */
  url: string;
  headers: Record<string, string | string[] | undefined>;
  form: Record<string, string>;
}

/** What to do with an answered call; the provider says it in its own language (TwiML for Twilio). */
export type AnswerPlan =
  | { kind: 'stream'; url: string; parameters: Record<string, string> }
  | { kind: 'say'; text: string };

/** Providers that report progress by calling back over HTTP (Twilio). */
export interface ProviderCallbacks<C> {
  /** True when the request was signed by the provider for this route. */
  verify(route: DecodedRoute<C>, request: CallbackRequest): boolean;
  /** The status a callback reports for a call; undefined for a status word the provider does not send. */
  status(request: CallbackRequest): CallReport | undefined;
  /** The body and content type answering an answered call. */
  answer(plan: AnswerPlan): { contentType: string; body: string };
  /** Who answered, from a machine-detection callback; undefined when the request carries no verdict. */
  machineVerdict?(request: CallbackRequest): Omit<MachineVerdict, 'runId' | 'at'> | undefined;
  /**
   * How a transfer ended, from a transfer callback (Twilio's <Dial> action, or its target's
   * `answered` status); undefined when the request reports no outcome.
   */
  transferOutcome?(request: CallbackRequest): Omit<TransferOutcome, 'runId' | 'at'> | undefined;
  /**
   * The body and content type answering a transfer callback that waits for what the call does next
   * (Twilio's <Dial> action): hang up once the target had the callee, else return the call to its
   * answer (the agent). Undefined for a callback that takes no instructions (a status callback).
   */
  afterTransfer?(request: CallbackRequest, runId: number, result: TransferResult | undefined): { contentType: string; body: string } | undefined;
}

interface ProviderBase<C> {
  readonly name: ProviderName;
  /** Why a well-formed route still cannot place a call now (no caller ID, nowhere to call back). */
  readiness(route: DecodedRoute<C>, service: ServiceSettings): ReadinessProblem[];
  /** Places a call; resolves once the provider has accepted it and named it. */
  dial(request: DialRequest<C>): Promise<{ providerCallId: string }>;
  /** Ends a call in any live phase: cancels it while ringing, hangs it up once answered. */
  hangUp(call: LiveCall<C>): Promise<void>;
  /** Releases sockets and timers. */
  close(): Promise<void>;
  /** Speaks a message on an answered call (a machine's, after its beep), then hangs up. */
  leaveMessage?(call: LiveCall<C>, text: string): Promise<void>;
  /**
   * Hands an answered call's callee to another destination (its definition's `supportsTransfer`):
   * resolves once the provider has taken the request (SIP: REFER answered 202), throws
   * CallControlRefusedError when it refuses; the outcome comes later through the context's
   * `emitTransfer`.
   */
  transfer?(call: LiveCall<C>, request: TransferRequest): Promise<void>;
  /** Sends DTMF digits (0-9, *, #, A-D, `w` for a half-second pause) to the far end (its definition's `sendsDtmf`). */
  sendDigits?(call: LiveCall<C>, digits: string): Promise<void>;
  /** Present when the provider reports progress through HTTP callbacks. */
  readonly callbacks?: ProviderCallbacks<C>;
}

/**
 * A provider whose calls live in the node's process (a SIP dialog, a simulated call): they die
 * with it, and only that node knows them, so there is nobody to ask about one afterwards.
 */
export interface InProcessProvider<C = unknown> extends ProviderBase<C> {
  readonly callsOutliveNode: false;
}

/**
 * A provider that holds its calls itself (Twilio): a call outlives the node that placed it, and the
 * provider can be asked what became of it (reconciliation, dispatch/reconcile.ts).
 */
export interface RemoteProvider<C = unknown> extends ProviderBase<C> {
  readonly callsOutliveNode: true;
  /** The call's current status; undefined when the provider does not know the call. */
  fetchCall(route: DecodedRoute<C>, providerCallId: string): Promise<CallReport | undefined>;
  /** The call placed for a run whose call id was never recorded; undefined when there is none. */
  findCall(route: DecodedRoute<C>, query: CallQuery): Promise<CallReport | undefined>;
}

export type TelephonyProvider<C = unknown> = InProcessProvider<C> | RemoteProvider<C>;

/** The providers this process built, by name (deps.ts, from the registry). */
export type Providers = Readonly<Record<ProviderName, TelephonyProvider>>;
