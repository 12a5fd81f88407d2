// The one interface every telephony provider implements. A provider places calls and reports what
// happens to them as ProviderEvents; it never changes a run itself. Dialtone's lifecycle code
// (dispatch/) turns events into transitions, so the rules about states live in one place.
import type { ProviderName, TelephonyConfigurationRow } from '../store/schema.js';

export type ProviderEventKind = 'ringing' | 'answered' | 'completed' | 'busy' | 'no_answer' | 'rejected' | 'failed' | 'canceled';

export interface ProviderEvent {
  runId: number;
  providerCallId: string;
  kind: ProviderEventKind;
  /** The provider's own status words (a SIP status line, a Twilio CallStatus). */
  rawStatus: string;
  at: number;
}

export type ProviderEventSink = (event: ProviderEvent) => void;

export interface DialRequest {
  runId: number;
  to: string;
  from: string | null;
  ringTimeoutMs: number;
  configuration: TelephonyConfigurationRow;
}

export interface LiveCall {
  runId: number;
  providerCallId: string;
  configuration: TelephonyConfigurationRow;
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

export interface TelephonyProvider {
  readonly name: ProviderName;
  /**
   * Whether a call outlives the node that placed it. A Twilio call does (Twilio holds it and calls
   * back any node); a SIP dialog or a simulated call lives in the node's process and dies with it.
   */
  readonly callsOutliveNode: boolean;
  /** Places a call; resolves once the provider has accepted it and named it. */
  dial(request: DialRequest): Promise<{ providerCallId: string }>;
  /** Ends a call in any live phase: cancels it while ringing, hangs it up once answered. */
  hangUp(call: LiveCall): Promise<void>;
  /** Releases sockets and timers. */
  close(): Promise<void>;
}

export type Providers = Record<ProviderName, TelephonyProvider>;
