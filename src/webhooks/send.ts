// One attempt of one webhook delivery: a POST of an already-signed body to the endpoint, reported
// as what happened (a status, or why there was none) rather than thrown, because every outcome is
// recorded on the delivery and decides its retry.
//
// What this attempt will not do, each for a reason:
// - connect anywhere `url-policy.ts` refuses. An IP-literal host is checked here (Node does not
//   call `lookup` for one); a host name is checked by `safeLookup` on the addresses the socket
//   actually dials, so a DNS answer that changed since registration cannot reach the inside;
// - follow redirects: a 3xx is a non-2xx status like any other (a redirect to an internal address
//   would otherwise walk around the policy, and Standard Webhooks receivers answer 2xx directly);
// - wait longer than `timeoutMs` in all: one timer covers the socket from the pool, DNS, connect,
//   TLS, the response and its body;
// - read more than `maxResponseBytes` of the response: it is kept for the customer's delivery log
//   only, and a receiver must not be able to make us buffer a large body.
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { ADDRESS_NOT_ALLOWED, addressClass, isAllowedAddress, safeLookup } from './url-policy.js';

/** What one attempt came to. Exactly one of `httpStatus` and `error` is set. */
export interface WebhookAttempt {
  /** The status the receiver answered, once its status line arrived (any status, 3xx included). */
  httpStatus: number | null;
  /** Why no status arrived: `connection refused`, `timeout after 15000 ms`, `address not allowed: …`… */
  error: string | null;
  /** From the call to the end of the attempt, in whole milliseconds. */
  durationMs: number;
  /** The first `maxResponseBytes` of the response body, as UTF-8; null when no response arrived. */
  responseBody: string | null;
}

/** Connection pools for webhook requests, one per scheme (an agent serves only its own). */
export interface WebhookAgents {
  http: http.Agent;
  https: https.Agent;
}

export interface WebhookAgentOptions {
  /** Most sockets open to one origin (host and port) at once; further requests wait in the pool. */
  maxSockets?: number;
  /** Most sockets open in all, over every origin. */
  maxTotalSockets?: number;
  /** Idle sockets kept per origin for the next delivery. */
  maxFreeSockets?: number;
  /**
   * How long an idle socket is kept. Below the usual server keep-alive (5 s in Node) so that we
   * close first, rather than writing a delivery into a socket the receiver is closing.
   */
  idleTimeoutMs?: number;
}

/**
 * Keep-alive pools for webhook requests: a busy endpoint is sent to over a few warm connections
 * instead of a TCP and TLS handshake per delivery. Connections are checked by the policy when
 * they are opened, not when reused, so one pair of agents must serve one policy (one value of
 * `allowPrivateNetworks`) only. Destroy them (`agents.http.destroy()`…) at shutdown.
 */
export function createWebhookAgents(opts: WebhookAgentOptions = {}): WebhookAgents {
  const options: http.AgentOptions = {
    keepAlive: true,
    maxSockets: opts.maxSockets ?? 50,
    maxTotalSockets: opts.maxTotalSockets ?? 1000,
    maxFreeSockets: opts.maxFreeSockets ?? 10,
    // On an idle socket the agent's timeout closes it; on a busy one it only emits an event,
    // which nothing listens to here (the attempt has its own timer).
    timeout: opts.idleTimeoutMs ?? 4_000,
    scheduling: 'lifo',
  };
  return { http: new http.Agent(options), https: new https.Agent(options) };
}

const defaultAgents = new Map<boolean, WebhookAgents>();

/** The agents used when a caller brings none: one pair per policy, made on first use. */
function agentsFor(allowPrivateNetworks: boolean): WebhookAgents {
  let agents = defaultAgents.get(allowPrivateNetworks);
  if (!agents) defaultAgents.set(allowPrivateNetworks, (agents = createWebhookAgents()));
  return agents;
}

export interface SendWebhookInput {
  url: string | URL;
  /** Every request header but `content-length` (see `webhookHeaders` in signature.ts). */
  headers: Record<string, string>;
  /** The exact body that was signed. */
  body: string;
  /** The whole attempt, from the call to the end of the response body. */
  timeoutMs: number;
  /** Allow `http` and non-public addresses (development and tests only). */
  allowPrivateNetworks: boolean;
  /** The most of the response body read and returned; the rest is not read. */
  maxResponseBytes?: number;
  /** Connection pools; a pair shared by the process (per policy) when omitted. */
  agents?: WebhookAgents;
}

/** Sends one attempt. Never throws: every failure is in the returned `error`. */
export function sendWebhook(input: SendWebhookInput): Promise<WebhookAttempt> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const refuse = (error: string): Promise<WebhookAttempt> =>
    Promise.resolve({ httpStatus: null, error, durationMs: elapsed(), responseBody: null });

  let url: URL;
  try {
    url = typeof input.url === 'string' ? new URL(input.url) : input.url;
  } catch {
    return refuse('invalid URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return refuse(`unsupported scheme ${url.protocol.slice(0, -1)}`);
  if (!input.allowPrivateNetworks) {
    if (url.protocol !== 'https:') return refuse('the URL must use https');
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    if (net.isIP(host) !== 0 && !isAllowedAddress(host)) return refuse(`address not allowed: ${host} (${addressClass(host)})`);
  }

  const maxBytes = input.maxResponseBytes ?? 1024;
  const agents = input.agents ?? agentsFor(input.allowPrivateNetworks);
  const transport = url.protocol === 'https:' ? https : http;

  return new Promise<WebhookAttempt>((resolve) => {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, input.timeoutMs);
    let httpStatus: number | null = null;
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;

    const finish = (error: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({
        httpStatus,
        error: httpStatus === null ? (error ?? 'no response') : null,
        durationMs: elapsed(),
        responseBody: httpStatus === null ? null : Buffer.concat(chunks).subarray(0, maxBytes).toString('utf8'),
      });
    };
    const fail = (err: unknown) => finish(describeError(err, timedOut, input.timeoutMs));

    let req: http.ClientRequest;
    try {
      req = transport.request(url, {
        method: 'POST',
        headers: { ...input.headers, 'content-length': String(Buffer.byteLength(input.body)) },
        agent: url.protocol === 'https:' ? agents.https : agents.http,
        lookup: safeLookup(input.allowPrivateNetworks),
        signal: controller.signal,
      });
    } catch (err) {
      // Invalid header names or values throw here; their messages name the header, not its value.
      fail(err);
      return;
    }
    req.on('error', fail);
    req.on('response', (res) => {
      httpStatus = res.statusCode ?? null;
      const stop = () => {
        finish(null);
        res.destroy();
      };
      if (maxBytes <= 0) return stop();
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        received += chunk.length;
        if (received >= maxBytes) stop();
      });
      // Whatever ends the body — its end, the receiver closing, our timer — the status stands.
      res.on('end', () => finish(null));
      res.on('error', () => finish(null));
      res.on('close', () => finish(null));
    });
    req.end(input.body);
  });
}

/**
 * A short, stable description of why an attempt got no status, for the customer's delivery log.
 * Built from error codes rather than messages where it can be: messages vary between Node versions
 * and some name local details. Request headers (the signature) never appear in either.
 */
function describeError(err: unknown, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `timeout after ${timeoutMs} ms`;
  if (!(err instanceof Error)) return 'request failed';
  // With autoSelectFamily, net tries every address and reports all failures together.
  const inner = err instanceof AggregateError && err.errors[0] instanceof Error ? err.errors[0] : err;
  const code = (inner as NodeJS.ErrnoException).code ?? (err as NodeJS.ErrnoException).code;
  switch (code) {
    case ADDRESS_NOT_ALLOWED:
      return inner.message;
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return inner.message === 'socket hang up' ? 'connection closed before a response' : 'connection reset';
    case 'EPIPE':
      return 'connection closed while sending';
    case 'ENOTFOUND':
      return 'host not found';
    case 'EAI_AGAIN':
      return 'DNS lookup failed (temporary)';
    case 'ETIMEDOUT':
      return 'connect timed out';
    case 'EHOSTUNREACH':
      return 'host unreachable';
    case 'ENETUNREACH':
      return 'network unreachable';
    case undefined:
      return `request failed: ${inner.message}`.slice(0, 200);
  }
  if (code.startsWith('HPE_')) return `invalid HTTP response (${code})`;
  if (/TLS|SSL|CERT|_SIGNED_|UNABLE_TO_/.test(code)) return `TLS error: ${code}`;
  return `${code}: ${inner.message}`.slice(0, 200);
}
