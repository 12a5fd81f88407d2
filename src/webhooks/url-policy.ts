// Where a webhook may be sent. A customer chooses the URL, so without a policy a webhook endpoint
// is a way to make this service send requests into its own network: to the loopback admin port,
// a database on a private address, or the cloud metadata service at 169.254.169.254. Only public
// unicast addresses are reachable, over https, unless WEBHOOK_ALLOW_PRIVATE_NETWORKS=true (set
// explicitly, for a receiver in development; never implied by NODE_ENV) lifts both rules.
//
// The check runs twice: at registration on whatever the host resolves to then (`checkWebhookUrl`,
// so the customer hears about a bad URL at once), and at every connection on the addresses the
// socket is about to dial (`safeLookup`), because DNS can answer differently a second later
// (DNS rebinding). Node calls `lookup` only for host names, so a sender must check an IP-literal
// host itself (`isAllowedAddress`); `send.ts` does.
//
// Address classes come from ipaddr.js, which keeps the IANA special-purpose registries, rather
// than from ranges written here: anything whose class is not `unicast` is refused.
import dns, { type LookupAddress, type LookupAllOptions, type LookupOneOptions } from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/** Longest URL accepted; longer ones are refused rather than stored and sent. */
export const MAX_WEBHOOK_URL_LENGTH = 2048;

export type WebhookUrlCheck =
  | { ok: true; url: URL }
  | { ok: false; code: 'invalid_webhook_url' | 'webhook_url_not_allowed'; detail: string };

export interface WebhookUrlPolicy {
  /** Allow `http` and addresses that are not public unicast (loopback, private, link-local…). */
  allowPrivateNetworks: boolean;
  /** Every address of a host name; defaults to the system resolver (`dns.promises.lookup`, all). */
  resolve?: (host: string) => Promise<string[]>;
}

/** The error code `safeLookup` fails with; the socket's `error` event carries it. */
export const ADDRESS_NOT_ALLOWED = 'WEBHOOK_ADDRESS_NOT_ALLOWED';

/**
 * The class of an IP address as ipaddr.js names it (`unicast`, `loopback`, `private`,
 * `linkLocal`, `uniqueLocal`, …), or `invalid`. An address that carries an IPv4 address inside
 * it and is dialled as that IPv4 address — IPv4-mapped (`::ffff:127.0.0.1`) and the NAT64
 * well-known prefix (`64:ff9b::/96`) — takes the class of the embedded address, so a public
 * server behind either is reachable and a private one is not. Other transition forms (6to4,
 * Teredo, RFC 6145 translation, the NAT64 local-use prefix) keep their own non-unicast class and
 * are refused outright: following them would mean trusting a relay we do not know.
 */
export function addressClass(address: string): string {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  if (!ipaddr.isValid(bare) || net.isIP(bare.replace(/%.*$/, '')) === 0) return 'invalid';
  const parsed = ipaddr.parse(bare);
  if (parsed.kind() === 'ipv4') return parsed.range();
  const v6 = parsed as ipaddr.IPv6;
  const range = v6.range();
  if (range === 'ipv4Mapped' || (range === 'rfc6052' && v6.match(NAT64_WELL_KNOWN))) {
    return ipaddr.fromByteArray(v6.toByteArray().slice(12)).range();
  }
  if (range === 'unicast' && v6.match(IPV4_COMPATIBLE)) return 'ipv4Compatible';
  return range;
}

/** Whether a webhook may connect to this IP address: public unicast only. */
export function isAllowedAddress(address: string): boolean {
  return addressClass(address) === 'unicast';
}

// RFC 4291 §2.5.5.1: the deprecated IPv4-compatible form (::a.b.c.d), which ipaddr.js leaves in
// `unicast`. Stacks with an automatic tunnel route it to the embedded IPv4 address, and no public
// server is reached through it, so it is refused as a class of its own (:: and ::1 keep theirs).
const IPV4_COMPATIBLE = ipaddr.IPv6.parseCIDR('::/96');
// RFC 6052: the only prefix that maps to the public IPv4 Internet; 64:ff9b:1::/48 is local use.
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

const systemResolve = async (host: string): Promise<string[]> =>
  (await dns.promises.lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/**
 * Checks a webhook URL when it is registered or changed: an absolute http(s) URL of at most
 * 2048 characters without credentials (they would be stored in clear and sent to every redirect
 * target's logs; the signature authenticates us instead), `https` unless private networks are
 * allowed, and a host that is — or resolves only to — public unicast addresses. A host that does
 * not resolve is refused as invalid: it cannot be delivered to, and saying so now beats a week of
 * failed attempts. Never throws.
 */
export async function checkWebhookUrl(url: string, opts: WebhookUrlPolicy): Promise<WebhookUrlCheck> {
  const invalid = (detail: string) => ({ ok: false, code: 'invalid_webhook_url', detail }) as const;
  const notAllowed = (detail: string) => ({ ok: false, code: 'webhook_url_not_allowed', detail }) as const;

  if (url.length > MAX_WEBHOOK_URL_LENGTH) return invalid(`the URL is longer than ${MAX_WEBHOOK_URL_LENGTH} characters`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return invalid('not an absolute URL');
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    return invalid(`the scheme must be https (or http on private networks), not ${parsed.protocol.slice(0, -1)}`);
  }
  if (parsed.username !== '' || parsed.password !== '') return invalid('the URL must not contain credentials (user:password@)');
  if (parsed.hostname === '') return invalid('the URL has no host');
  if (opts.allowPrivateNetworks) return { ok: true, url: parsed };

  if (parsed.protocol !== 'https:') return notAllowed('the URL must use https');
  // The WHATWG parser has already normalized IPv4 literals (0x7f.1, 2130706433 → 127.0.0.1).
  const host = parsed.hostname.startsWith('[') ? parsed.hostname.slice(1, -1) : parsed.hostname;
  if (net.isIP(host) !== 0) {
    const cls = addressClass(host);
    return cls === 'unicast' ? { ok: true, url: parsed } : notAllowed(`${host} is not a public address (${cls})`);
  }
  let addresses: string[];
  try {
    addresses = await (opts.resolve ?? systemResolve)(host);
  } catch {
    return invalid(`the host ${host} does not resolve`);
  }
  if (addresses.length === 0) return invalid(`the host ${host} does not resolve`);
  // Which address, and of which class, is not said: the answer would tell a customer what the
  // service's own resolver knows of internal names ("vm resolves to 10.0.0.7").
  if (!addresses.every(isAllowedAddress)) return notAllowed(`${host} resolves to an address that is not public`);
  return { ok: true, url: parsed };
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for `http.request`/`https.request` (and `net.connect`) that resolves like
 * `dns.lookup` and fails with code `WEBHOOK_ADDRESS_NOT_ALLOWED` when any address of the host is
 * not public unicast, so the addresses checked are exactly those the socket dials. Any address,
 * not only the first: with `autoSelectFamily` (on by default in Node 20) net asks for all of them
 * (`all: true`) and tries each in turn. With `allowPrivate` it is plain `dns.lookup`.
 *
 * Node does not call `lookup` for an IP-literal host: check those with `isAllowedAddress`.
 */
export function safeLookup(allowPrivate: boolean): typeof dns.lookup {
  if (allowPrivate) return dns.lookup;
  function lookup(hostname: string, options: number | LookupOneOptions | LookupAllOptions, callback: LookupCallback): void {
    const opts = typeof options === 'number' ? { family: options } : options;
    dns.lookup(hostname, { ...opts, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      if (!addresses.every((a) => isAllowedAddress(a.address))) {
        // Recorded with the attempt, which the customer reads: it must not say what the name
        // resolved to here (an internal address), only that it was refused.
        const error: NodeJS.ErrnoException = new Error('address not allowed: the host resolves to an address that is not public');
        error.code = ADDRESS_NOT_ALLOWED;
        return callback(error, []);
      }
      if (opts.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) {
        const error: NodeJS.ErrnoException = new Error(`no address for ${hostname}`);
        error.code = 'ENOTFOUND';
        return callback(error, []);
      }
      callback(null, first.address, first.family);
    });
  }
  return lookup as typeof dns.lookup;
}
