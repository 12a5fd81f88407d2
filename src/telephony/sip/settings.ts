// A SIP telephony configuration: the trunk's non-secret settings (configuration `settings`) and
// the optional digest credentials (stored encrypted).
import { X509Certificate } from 'node:crypto';
import { isIPv4 } from 'node:net';
import type { FieldError } from '../../errors.js';
import type { SipTransportName } from './route-set.js';

export interface SipTrunk {
  host: string;
  port: number;
  /** How Dialtone reaches the first hop (the outbound proxy, or the trunk when there is none). */
  transport: SipTransportName;
  /** A SIP URI every call of the route is sent through first (a pre-existing route set, RFC 3261 section 8.1.2). */
  outboundProxy: string | undefined;
  /** The name a TLS peer's certificate must carry, when it is not the host Dialtone connects to. */
  tlsServerName: string | undefined;
  /** PEM CA certificates a TLS peer's certificate must chain to, instead of Node's bundled ones. */
  tlsCaPem: string | undefined;
  /** Where our SDP offer says to send media (an RTP endpoint of the agent runtime or a media server). */
  mediaAddress: string | undefined;
  mediaPort: number;
}

export interface SipCredentials {
  username: string;
  password: string;
}

/** What an SDP offer's `c=IN IP4` line may name (RFC 4566, section 5.7): an IPv4 address or a fully qualified domain name. */
const isMediaAddress = (value: unknown): value is string => typeof value === 'string' && (isIPv4(value) || HOST_NAME.test(value));

const isPort = (value: unknown): value is number => Number.isInteger(value) && (value as number) > 0 && (value as number) < 65536;

export function sipSettingsProblems(settings: Record<string, unknown>): FieldError[] {
  const problems: FieldError[] = [];
  if (typeof settings.host !== 'string' || !/^[A-Za-z0-9.\-:[\]]+$/.test(settings.host)) problems.push({ pointer: '/settings/host', detail: 'Required: the trunk\'s host name or IP address.' });
  if (settings.port !== undefined && !isPort(settings.port)) problems.push({ pointer: '/settings/port', detail: 'Must be a port number (1 to 65535).' });
  if (settings.transport !== undefined && !TRANSPORTS.includes(settings.transport as SipTransportName)) problems.push({ pointer: '/settings/transport', detail: 'Must be "udp", "tcp" or "tls".' });
  if (settings.outbound_proxy !== undefined && !isProxyUri(settings.outbound_proxy)) {
    problems.push({ pointer: '/settings/outbound_proxy', detail: 'Must be a SIP URI with a host name or IPv4 address, e.g. "sip:proxy.example.net:5060;lr" (";lr" for a loose router, without it the proxy is routed to as a strict router).' });
  }
  if (settings.tls_server_name !== undefined && (typeof settings.tls_server_name !== 'string' || !HOST_NAME.test(settings.tls_server_name))) problems.push({ pointer: '/settings/tls_server_name', detail: 'Must be a host name (the name the TLS peer\'s certificate carries).' });
  if (settings.tls_ca_pem !== undefined) {
    const detail = caProblem(settings.tls_ca_pem);
    if (detail) problems.push({ pointer: '/settings/tls_ca_pem', detail });
  }
  if (settings.transport !== 'tls' && !usesTls(settings.outbound_proxy)) {
    for (const name of ['tls_server_name', 'tls_ca_pem'] as const) {
      if (settings[name] !== undefined) problems.push({ pointer: `/settings/${name}`, detail: 'Applies only to TLS: set "transport" to "tls" (or use a sips: or ;transport=tls outbound proxy).' });
    }
  }
  if (settings.media_address !== undefined && !isMediaAddress(settings.media_address)) {
    problems.push({ pointer: '/settings/media_address', detail: 'Must be an IPv4 address or a host name: the SDP offer names it in its "c=IN IP4" line.' });
  }
  if (settings.media_port !== undefined && !isPort(settings.media_port)) problems.push({ pointer: '/settings/media_port', detail: 'Must be a port number (1 to 65535).' });
  return problems;
}

const TRANSPORTS: readonly SipTransportName[] = ['udp', 'tcp', 'tls'];
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
/** sip: or sips:, optional user, a host name or IPv4 address, optional port, then parameters (no headers: a Route URI needs none). */
const PROXY_URI = /^sips?:(?:[^@;?\s]+@)?([A-Za-z0-9.-]+)(?::(\d{1,5}))?((?:;[A-Za-z0-9\-_.!~*'()%]+(?:=[A-Za-z0-9\-_.!~*'()%[\]:]+)?)*)$/;

function isProxyUri(value: unknown): boolean {
  if (typeof value !== 'string') return false;
  const match = PROXY_URI.exec(value);
  if (!match || !HOST_NAME.test(match[1] ?? '')) return false;
  return match[2] === undefined || isPort(Number(match[2]));
}

function usesTls(outboundProxy: unknown): boolean {
  return typeof outboundProxy === 'string' && (outboundProxy.startsWith('sips:') || /;transport=tls(;|$)/i.test(outboundProxy));
}

/** Why a tls_ca_pem is not one or more PEM certificates, or undefined when it is. */
function caProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'Must be PEM text: one or more "-----BEGIN CERTIFICATE-----" blocks.';
  const blocks = value.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) return 'Must be PEM text: one or more "-----BEGIN CERTIFICATE-----" blocks.';
  for (const [index, block] of blocks.entries()) {
    try {
      new X509Certificate(block);
    } catch {
      return `Certificate ${index + 1} of the PEM text cannot be read.`;
    }
  }
  return undefined;
}

export function sipCredentialProblems(credentials: Record<string, unknown>): FieldError[] {
  const problems: FieldError[] = [];
  if (typeof credentials.username !== 'string' || credentials.username.length === 0) problems.push({ pointer: '/credentials/username', detail: 'Required with a password.' });
  if (typeof credentials.password !== 'string' || credentials.password.length === 0) problems.push({ pointer: '/credentials/password', detail: 'Required with a username.' });
  return problems;
}

export function sipTrunkOf(settings: Record<string, unknown>): SipTrunk {
  const transport = TRANSPORTS.includes(settings.transport as SipTransportName) ? (settings.transport as SipTransportName) : 'udp';
  return {
    host: String(settings.host),
    port: isPort(settings.port) ? settings.port : transport === 'tls' ? 5061 : 5060,
    transport,
    outboundProxy: typeof settings.outbound_proxy === 'string' ? settings.outbound_proxy : undefined,
    tlsServerName: typeof settings.tls_server_name === 'string' ? settings.tls_server_name : undefined,
    tlsCaPem: typeof settings.tls_ca_pem === 'string' ? settings.tls_ca_pem : undefined,
    mediaAddress: typeof settings.media_address === 'string' ? settings.media_address : undefined,
    mediaPort: isPort(settings.media_port) ? settings.media_port : 4000,
  };
}

export function parseSipCredentials(raw: Record<string, unknown>): SipCredentials {
  const problems = sipCredentialProblems(raw);
  if (problems.length > 0) throw new Error(`SIP credentials are not usable: ${problems.map((p) => `${p.pointer} ${p.detail}`).join(' ')}`);
  return { username: raw.username as string, password: raw.password as string };
}
