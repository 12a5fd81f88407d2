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
  export function parseUri(uri: string): SipUri;
  export function stringifyUri(uri: SipUri): string;
}

declare module 'sip/digest.js' {
  import type { SipMessage } from 'sip';
  export interface DigestSession {
    [key: string]: unknown;
  }
  export function signRequest(session: DigestSession, request: SipMessage, response?: SipMessage, credentials?: { user: string; password: string }): SipMessage;
}
