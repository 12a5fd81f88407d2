// Where webhooks may go: https to public unicast addresses only, unless private networks are
// allowed; IP literals of every special class are refused, and so is a host name that resolves
// to one (at registration through the resolver, at connection time through safeLookup).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  addressClass,
  checkWebhookUrl,
  isAllowedAddress,
  safeLookup,
  ADDRESS_NOT_ALLOWED,
  type WebhookUrlCheck,
} from '../src/webhooks/url-policy.js';

const strict = { allowPrivateNetworks: false, resolve: async () => ['93.184.216.34'] };
const lenient = { allowPrivateNetworks: true, resolve: async () => ['127.0.0.1'] };

function refusal(check: WebhookUrlCheck): { code: string; detail: string } {
  assert.equal(check.ok, false, 'expected a refusal');
  if (check.ok) throw new Error('unreachable');
  return { code: check.code, detail: check.detail };
}

describe('IP-literal hosts', () => {
  const refused: [string, string][] = [
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['[::1]', 'loopback'],
    ['[::ffff:127.0.0.1]', 'loopback'],
    ['[::ffff:10.1.2.3]', 'private'],
    ['[::ffff:169.254.169.254]', 'linkLocal'],
    ['169.254.169.254', 'linkLocal'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.254', 'private'],
    ['192.168.1.1', 'private'],
    ['[fe80::1]', 'linkLocal'],
    ['[fc00::1]', 'uniqueLocal'],
    ['[fd12:3456::1]', 'uniqueLocal'],
    ['224.0.0.1', 'multicast'],
    ['[ff02::1]', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['[::]', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['[2001:db8::1]', 'reserved'],
    ['[64:ff9b::7f00:1]', 'loopback'],
    ['[64:ff9b:1::a00:1]', 'rfc6052'],
    ['[2002:7f00:1::1]', '6to4'],
    ['[2001:0:4136:e378:8000:63bf:3fff:fdd2]', 'teredo'],
    ['[::ffff:0:7f00:1]', 'rfc6145'],
    ['[::127.0.0.1]', 'ipv4Compatible'],
    ['[::8.8.8.8]', 'ipv4Compatible'],
    ['[100::1]', 'discard'],
    ['[fec0::1]', 'deprecatedSiteLocal'],
  ];
  for (const [host, cls] of refused) {
    it(`refuses https://${host}/ as ${cls}`, async () => {
      const r = refusal(await checkWebhookUrl(`https://${host}/hook`, strict));
      assert.equal(r.code, 'webhook_url_not_allowed');
      assert.match(r.detail, new RegExp(`\\(${cls}\\)`));
    });
  }

  it('refuses IPv4 literals written in the forms URL parsers normalize (decimal, hex, short)', async () => {
    for (const host of ['2130706433', '0x7f.1', '127.1', '0177.0.0.1']) {
      const r = refusal(await checkWebhookUrl(`https://${host}/`, strict));
      assert.equal(r.code, 'webhook_url_not_allowed', host);
    }
  });

  for (const host of ['93.184.216.34', '[2606:4700::1111]', '[::ffff:93.184.216.34]', '[64:ff9b::5db8:d822]']) {
    it(`accepts the public address ${host}`, async () => {
      const check = await checkWebhookUrl(`https://${host}/hook`, strict);
      assert.equal(check.ok, true);
    });
  }

  it('accepts private and loopback literals over http when private networks are allowed', async () => {
    for (const host of ['127.0.0.1:8080', '[::1]', '10.0.0.1', '169.254.169.254']) {
      const check = await checkWebhookUrl(`http://${host}/hook`, lenient);
      assert.equal(check.ok, true, host);
    }
  });
});

describe('host names', () => {
  it('refuses a hostname that resolves to 127.0.0.1 without saying what it resolves to', async () => {
    for (const address of ['127.0.0.1', '10.0.0.7', '169.254.169.254', 'fd00::1']) {
      const r = refusal(await checkWebhookUrl('https://vm/hook', { allowPrivateNetworks: false, resolve: async () => ['93.184.216.34', address] }));
      assert.equal(r.code, 'webhook_url_not_allowed');
      assert.equal(r.detail, 'vm resolves to an address that is not public');
    }
  });

  it('refuses a hostname when any one of its addresses is private', async () => {
    const resolve = async () => ['93.184.216.34', '2606:4700::1111', '10.0.0.7'];
    const r = refusal(await checkWebhookUrl('https://mixed.example/', { allowPrivateNetworks: false, resolve }));
    assert.equal(r.code, 'webhook_url_not_allowed');
    assert.doesNotMatch(r.detail, /10\.0\.0\.7|private/);
  });

  it('accepts a hostname whose addresses are all public, and asks the resolver for the bare host', async () => {
    const asked: string[] = [];
    const resolve = async (host: string) => (asked.push(host), ['93.184.216.34', '2606:4700::1111']);
    const check = await checkWebhookUrl('https://hooks.example.com:8443/a?b=c', { allowPrivateNetworks: false, resolve });
    assert.equal(check.ok, true);
    if (check.ok) assert.equal(check.url.href, 'https://hooks.example.com:8443/a?b=c');
    assert.deepEqual(asked, ['hooks.example.com']);
  });

  it('refuses a hostname that does not resolve, as invalid', async () => {
    const resolve = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
    };
    assert.equal(refusal(await checkWebhookUrl('https://nowhere.invalid/', { allowPrivateNetworks: false, resolve })).code, 'invalid_webhook_url');
    assert.equal(refusal(await checkWebhookUrl('https://empty.example/', { allowPrivateNetworks: false, resolve: async () => [] })).code, 'invalid_webhook_url');
  });

  it('does not resolve at all when private networks are allowed', async () => {
    const resolve = async (): Promise<string[]> => assert.fail('resolver called');
    assert.equal((await checkWebhookUrl('http://localhost:3000/hook', { allowPrivateNetworks: true, resolve })).ok, true);
  });
});

describe('URL shape', () => {
  it('refuses http unless private networks are allowed', async () => {
    const r = refusal(await checkWebhookUrl('http://hooks.example.com/', strict));
    assert.equal(r.code, 'webhook_url_not_allowed');
    assert.match(r.detail, /https/);
    assert.equal((await checkWebhookUrl('http://hooks.example.com/', lenient)).ok, true);
  });

  it('refuses credentials in the URL, even when private networks are allowed', async () => {
    for (const url of ['https://user:pass@hooks.example.com/', 'https://user@hooks.example.com/', 'https://:pass@hooks.example.com/']) {
      assert.equal(refusal(await checkWebhookUrl(url, strict)).code, 'invalid_webhook_url', url);
      assert.equal(refusal(await checkWebhookUrl(url, lenient)).code, 'invalid_webhook_url', url);
    }
  });

  it('refuses relative URLs, other schemes and garbage as invalid', async () => {
    for (const url of ['/hook', 'hooks.example.com/hook', 'ftp://hooks.example.com/', 'file:///etc/passwd', 'javascript:alert(1)', 'https://', '', 'https://exa mple.com/']) {
      assert.equal(refusal(await checkWebhookUrl(url, lenient)).code, 'invalid_webhook_url', url);
    }
  });

  it('accepts 2048 characters and refuses 2049', async () => {
    const base = 'https://hooks.example.com/';
    assert.equal((await checkWebhookUrl(base + 'a'.repeat(2048 - base.length), strict)).ok, true);
    assert.equal(refusal(await checkWebhookUrl(base + 'a'.repeat(2049 - base.length), strict)).code, 'invalid_webhook_url');
  });
});

describe('addressClass', () => {
  it('names the class of the embedded address of an IPv4-mapped address', () => {
    assert.equal(addressClass('::ffff:127.0.0.1'), 'loopback');
    assert.equal(addressClass('::ffff:7f00:1'), 'loopback');
    assert.equal(addressClass('::ffff:8.8.8.8'), 'unicast');
  });

  it('calls anything that is not an IP address invalid, and never allows it', () => {
    for (const s of ['localhost', '127.1', '1.2.3', '', '::g', '[::1']) {
      assert.equal(addressClass(s), 'invalid', s);
      assert.equal(isAllowedAddress(s), false, s);
    }
  });
});

describe('safeLookup', () => {
  const lookupAll = (allowPrivate: boolean, host: string) =>
    new Promise<{ err: NodeJS.ErrnoException | null; addresses: unknown }>((resolve) => {
      safeLookup(allowPrivate)(host, { all: true }, (err, addresses) => resolve({ err, addresses }));
    });

  it('refuses localhost with WEBHOOK_ADDRESS_NOT_ALLOWED, without naming the address it resolved to', async () => {
    const { err } = await lookupAll(false, 'localhost');
    assert.equal(err?.code, ADDRESS_NOT_ALLOWED);
    assert.equal(err?.message, 'address not allowed: the host resolves to an address that is not public');
  });

  it('refuses in the one-address form too (all: false)', async () => {
    const err = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
      safeLookup(false)('localhost', { family: 4 }, (e) => resolve(e));
    });
    assert.equal(err?.code, ADDRESS_NOT_ALLOWED);
  });

  it('answers like dns.lookup when private networks are allowed, in both forms', async () => {
    const { err, addresses } = await lookupAll(true, 'localhost');
    assert.equal(err, null);
    assert.ok(Array.isArray(addresses) && addresses.length > 0);
    const one = await new Promise<[string, number]>((resolve, reject) => {
      safeLookup(true)('localhost', { family: 4 }, (e, address, family) => (e ? reject(e) : resolve([address, family])));
    });
    assert.deepEqual(one, ['127.0.0.1', 4]);
  });
});
