// Types for the parts of the `sip` package (pure-JS RFC 3261 transactions and transports) Dialtone
// uses; the package ships none.
declare module 'sip' {
  export interface SipUri {
    schema?: string;
    user?: string;
    host: string;
    port?: number;
    params: Record<string, string | null | undefined>;
  }
  export interface NameAddr {
    name?: string;
    uri: string;
    params: Record<string, string | null | undefined>;
  }
  export interface Via {
    version?: string;
    protocol?: string;
    host?: string;
    port?: number;
    params: Record<string, string | null | undefined>;
  }
  export interface SipHeaders {
    via?: Via[];
    from?: NameAddr;
    to?: NameAddr;
    'call-id'?: string;
    cseq?: { seq: number; method: string };
    contact?: NameAddr[];
    'content-type'?: string;
    'max-forwards'?: number | string;
    'www-authenticate'?: unknown;
    'proxy-authenticate'?: unknown;
    [name: string]: unknown;
  }
  export interface SipMessage {
    method?: string;
    uri?: string;
    status?: number;
    reason?: string;
    version?: string;
    headers: SipHeaders;
    content?: string;
  }
  export interface SipStackOptions {
    port?: number;
    address?: string;
    publicAddress?: string;
    hostname?: string;
    udp?: boolean;
    tcp?: boolean;
    logger?: { error?(error: unknown): void; send?(message: SipMessage): void; recv?(message: SipMessage): void };
  }
  export interface SipStack {
    send(message: SipMessage, onResponse?: (response: SipMessage) => void): void;
    destroy(): void;
    hostname(): string;
  }
  export function create(options: SipStackOptions, onRequest: (request: SipMessage, remote: { protocol: string; address: string; port: number }) => void): SipStack;
  export function makeResponse(request: SipMessage, status: number, reason?: string): SipMessage;
  /** undefined when the text is not a URI it can read (IPv6 references among them). */
  export function parseUri(uri: string): SipUri | undefined;
  export function stringifyUri(uri: SipUri | string): string;
  export function stringify(message: SipMessage): string;
  /** A message from one datagram; undefined when it is not one. */
  export function parse(data: string | Buffer): SipMessage | undefined;
  /** Splits a byte stream into messages (by Content-Length); onFlood when headers or body exceed the limits. */
  export function makeStreamParser(onMessage: (message: SipMessage) => void, onFlood?: () => void, maxBytesHeaders?: number, maxContentLength?: number): (data: string) => void;
  /** What a transaction sends through: one connection (or the UDP socket towards one peer). */
  export interface TransactionConnection {
    send(message: SipMessage): void;
    protocol: string;
    release(): void;
  }
  export interface ClientTransaction {
    message(message: SipMessage, remote?: unknown): void;
    shutdown(): void;
  }
  export interface ServerTransaction {
    send(message: SipMessage): void;
    message(message: SipMessage, remote?: unknown): void;
    shutdown(): void;
  }
  /** RFC 3261 section 17 transactions (timers, retransmissions over UDP), over connections the caller supplies. */
  export interface TransactionLayer {
    createServerTransaction(request: SipMessage, connection: TransactionConnection): ServerTransaction;
    createClientTransaction(connection: TransactionConnection, request: SipMessage, onResponse: (response: SipMessage) => void): ClientTransaction;
    getServer(message: SipMessage): ServerTransaction | undefined;
    getClient(message: SipMessage): ClientTransaction | undefined;
    destroy(): void;
  }
  export function makeTransactionLayer(options: { 'max-forwards'?: number }, transport?: unknown): TransactionLayer;
  export function generateBranch(): string;
}

declare module 'sip/digest.js' {
  import type { SipMessage } from 'sip';
  export interface DigestSession {
    [key: string]: unknown;
  }
  export function signRequest(session: DigestSession, request: SipMessage, response?: SipMessage, credentials?: { user: string; password: string }): SipMessage;
}
