// Routing of requests a user agent client sends (RFC 3261 sections 8.1.2, 12.1.2 and 12.2.1.1):
// which Request-URI and Route header a request carries, and which hop it is sent to.
//
// The `sip` package routes too, but inside its own send(): it rewrites the Route array it is given
// and picks the next hop itself. Dialtone sends through its own transport (transport.ts), so the
// routing decision is made here, once, as a pure function the tests can check directly.
import { isIP } from 'node:net';
import type * as sip from 'sip';

export type SipTransportName = 'udp' | 'tcp' | 'tls';

/** What a request carries and where it goes first. */
export interface RoutedRequest {
  requestUri: string;
  /** The Route header, in order (empty: none). */
  route: sip.NameAddr[];
  /** The URI whose host, port and transport the request is sent to. */
  nextHop: string;
}

/** Parameters of a URI, inside its angle brackets (`<sip:host;lr>` keeps `lr` in the URI). */
export function uriParams(uri: string): Map<string, string | undefined> {
  const params = new Map<string, string | undefined>();
  const withoutHeaders = uri.split('?')[0] ?? '';
  for (const part of withoutHeaders.split(';').slice(1)) {
    const [name, value] = part.split('=', 2);
    if (name) params.set(name.toLowerCase(), value);
  }
  return params;
}

/** A loose router marks its URI with `lr` (RFC 3261 section 19.1.1); one without it is a strict router. */
export const isLooseRouter = (uri: string): boolean => uriParams(uri).has('lr');

const copy = (entry: sip.NameAddr): sip.NameAddr => ({ ...entry, params: { ...entry.params } });

/**
 * The Request-URI, Route header and next hop of a request to `remoteTarget` through `routeSet`
 * (RFC 3261 section 12.2.1.1). The same rule serves an initial request with a pre-existing route
 * set (an outbound proxy, section 8.1.2).
 * - No route set: to the remote target itself.
 * - Loose routing (the first URI has `lr`): Request-URI = remote target, Route = the route set,
 *   sent to the first route.
 * - Strict routing (the first URI lacks `lr`): Request-URI = the first route (without parameters a
 *   Request-URI may not carry), Route = the rest with the remote target appended last, sent to
 *   the Request-URI.
 */
export function routeRequest(remoteTarget: string, routeSet: readonly sip.NameAddr[]): RoutedRequest {
  const [first, ...rest] = routeSet;
  if (!first) return { requestUri: remoteTarget, route: [], nextHop: remoteTarget };
  if (isLooseRouter(first.uri)) return { requestUri: remoteTarget, route: routeSet.map(copy), nextHop: first.uri };
  const requestUri = requestUriOf(first.uri);
  return { requestUri, route: [...rest.map(copy), { uri: remoteTarget, params: {} }], nextHop: requestUri };
}

/** A URI as a Request-URI: without header fields and the `method` parameter (RFC 3261 table 1, section 19.1.1). */
function requestUriOf(uri: string): string {
  const [base = ''] = uri.split('?');
  return base
    .split(';')
    .filter((part, index) => index === 0 || !/^method(=|$)/i.test(part))
    .join(';');
}

/** The route set a UAC keeps from a 2xx: its Record-Route entries, last first (RFC 3261 section 12.1.2). */
export function routeSetOfResponse(response: sip.SipMessage, stringifyUri: (uri: sip.SipUri | string) => string): sip.NameAddr[] {
  const recordRoute = response.headers['record-route'];
  if (!Array.isArray(recordRoute)) return [];
  // The `sip` package parses Route and Record-Route URIs into objects (Contact URIs stay strings):
  // kept as strings here so routing reads one shape.
  return (recordRoute as { uri: sip.SipUri | string; params: sip.NameAddr['params'] }[]).map((entry) => ({ uri: stringifyUri(entry.uri), params: { ...entry.params } })).reverse();
}

/** The pre-existing route set of a route with an outbound proxy: the proxy alone. */
export function preloadedRouteSet(outboundProxy: string | undefined): sip.NameAddr[] {
  return outboundProxy ? [{ uri: outboundProxy, params: {} }] : [];
}

/** Where a URI says to send: host, port and transport (RFC 3263 without DNS SRV/NAPTR). */
export interface Hop {
  transport: SipTransportName;
  host: string;
  port: number;
}

/**
 * The hop a URI names. Its `transport` parameter wins; a `sips:` URI means TLS; otherwise the
 * route's own transport (a Contact or Record-Route without a transport parameter is reached the
 * way the route reaches its peers, not over UDP by default as RFC 3263 would have it: a trunk
 * that requires TCP is not reachable over UDP at all).
 */
export function hopOf(uri: string, routeTransport: SipTransportName, parseUri: (uri: string) => sip.SipUri | undefined): Hop {
  const parsed = parseUri(uri);
  if (!parsed?.host) throw new Error(`Not a SIP URI Dialtone can send to: ${uri}`);
  const param = uriParams(uri).get('transport')?.toLowerCase();
  const transport: SipTransportName =
    param === 'udp' || param === 'tcp' || param === 'tls' ? param : parsed.schema === 'sips' ? 'tls' : routeTransport;
  const host = parsed.host.replace(/^\[(.*)\]$/, '$1');
  return { transport, host, port: Number.isInteger(parsed.port) ? (parsed.port as number) : transport === 'tls' ? 5061 : 5060 };
}

export const isIpAddress = (host: string): boolean => isIP(host) !== 0;
