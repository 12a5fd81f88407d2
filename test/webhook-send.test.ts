// One webhook attempt against a local receiver on 127.0.0.1 that records what arrives and can be
// told how to answer: statuses reported as they are, redirects not followed, at most 1 KiB of a
// body read, a silent receiver timed out, and loopback refused — before any connection — when
// private networks are not allowed.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createWebhookAgents, sendWebhook, type SendWebhookInput } from '../src/webhooks/send.js';

interface Received {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const received: Received[] = [];
let connections = 0;
let base = '';
let port = 0;

const server = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => (body += chunk));
  req.on('end', () => {
    received.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body });
    switch (req.url) {
      case '/ok':
        return res.writeHead(204).end();
      case '/accepted':
        return res.writeHead(202, { 'content-type': 'text/plain' }).end('thanks');
      case '/fail':
        return res.writeHead(500, { 'content-type': 'text/plain' }).end('boom');
      case '/redirect':
        return res.writeHead(302, { location: '/ok' }).end();
      case '/big':
        res.writeHead(200, { 'content-type': 'text/plain' });
        return res.end('x'.repeat(64 * 1024));
      case '/hang':
        return; // never answers; the connection is closed when the server closes
      case '/stall-body':
        res.writeHead(200, { 'content-type': 'text/plain' });
        return res.write('partial');
      default:
        return res.writeHead(404).end();
    }
  });
});
server.on('connection', () => connections++);

const agents = createWebhookAgents({ maxSockets: 4 });

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});
after(async () => {
  agents.http.destroy();
  agents.https.destroy();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const send = (path: string, overrides: Partial<SendWebhookInput> = {}) =>
  sendWebhook({
    url: base + path,
    headers: { 'content-type': 'application/json', 'webhook-id': 'msg_1' },
    body: '{"type":"webhook.test","note":"☎"}',
    timeoutMs: 5_000,
    allowPrivateNetworks: true,
    agents,
    ...overrides,
  });

describe('statuses', () => {
  it('POSTs the body and headers, with a content length, and reports a 2xx with the response body', async () => {
    const before = received.length;
    const attempt = await send('/accepted');
    assert.deepEqual({ ...attempt, durationMs: 0 }, { httpStatus: 202, error: null, durationMs: 0, responseBody: 'thanks' });
    assert.ok(attempt.durationMs >= 0 && Number.isInteger(attempt.durationMs));
    const got = received.slice(before);
    assert.equal(got.length, 1);
    assert.equal(got[0]?.method, 'POST');
    assert.equal(got[0]?.body, '{"type":"webhook.test","note":"☎"}');
    assert.equal(got[0]?.headers['webhook-id'], 'msg_1');
    assert.equal(got[0]?.headers['content-type'], 'application/json');
    assert.equal(got[0]?.headers['content-length'], String(Buffer.byteLength('{"type":"webhook.test","note":"☎"}')));
  });

  it('reports a 204 with an empty body', async () => {
    const attempt = await send('/ok');
    assert.equal(attempt.httpStatus, 204);
    assert.equal(attempt.responseBody, '');
  });

  it('reports a 500 as a status, not an error, with its body', async () => {
    const attempt = await send('/fail');
    assert.equal(attempt.httpStatus, 500);
    assert.equal(attempt.error, null);
    assert.equal(attempt.responseBody, 'boom');
  });

  it('does not follow a 302: the redirect is the answer and its target is never asked', async () => {
    const before = received.length;
    const attempt = await send('/redirect');
    assert.equal(attempt.httpStatus, 302);
    assert.deepEqual(received.slice(before).map((r) => r.path), ['/redirect']);
  });

  it('reads at most 1 KiB of the response body, or the limit it is given', async () => {
    assert.equal((await send('/big')).responseBody, 'x'.repeat(1024));
    assert.equal((await send('/big', { maxResponseBytes: 10 })).responseBody, 'x'.repeat(10));
    assert.equal((await send('/big', { maxResponseBytes: 0 })).responseBody, '');
  });
});

describe('failures', () => {
  it('times out a receiver that never answers, after timeoutMs', async () => {
    const attempt = await send('/hang', { timeoutMs: 200 });
    assert.equal(attempt.httpStatus, null);
    assert.equal(attempt.error, 'timeout after 200 ms');
    assert.equal(attempt.responseBody, null);
    assert.ok(attempt.durationMs >= 195 && attempt.durationMs < 2_000, String(attempt.durationMs));
  });

  it('keeps the status of a receiver that answered but stalls its body, with what arrived of it', async () => {
    const attempt = await send('/stall-body', { timeoutMs: 200 });
    assert.deepEqual({ ...attempt, durationMs: 0 }, { httpStatus: 200, error: null, durationMs: 0, responseBody: 'partial' });
  });

  it('reports a closed port as connection refused', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const attempt = await send('/ok', { url: `http://127.0.0.1:${closedPort}/ok` });
    assert.deepEqual({ ...attempt, durationMs: 0 }, { httpStatus: null, error: 'connection refused', durationMs: 0, responseBody: null });
  });

  it('reports a URL that cannot be parsed instead of throwing', async () => {
    assert.equal((await send('', { url: 'not a url' })).error, 'invalid URL');
    assert.equal((await send('', { url: 'ftp://127.0.0.1/' })).error, 'unsupported scheme ftp');
  });

  it('reports an invalid header instead of throwing, without its value', async () => {
    const attempt = await send('/ok', { headers: { 'webhook-signature': 'v1,secret\nvalue' } });
    assert.equal(attempt.httpStatus, null);
    assert.ok(attempt.error && !attempt.error.includes('secret'), String(attempt.error));
  });
});

describe('private networks not allowed', () => {
  it('refuses a host name that resolves to loopback at the connection, and the receiver never hears of it', async () => {
    const [conns, reqs] = [connections, received.length];
    // https, as the policy requires; the lookup refuses before any TLS would begin.
    const attempt = await send('/ok', { url: `https://localhost:${port}/ok`, allowPrivateNetworks: false });
    assert.equal(attempt.httpStatus, null);
    // Recorded for the customer to read: what the name resolved to here is not said.
    assert.equal(attempt.error, 'address not allowed: the host resolves to an address that is not public');
    assert.equal(connections, conns);
    assert.equal(received.length, reqs);
  });

  it('reaches the same host name when private networks are allowed (the lookup path works)', async () => {
    const attempt = await send('/ok', { url: `http://localhost:${port}/ok`, allowPrivateNetworks: true });
    assert.equal(attempt.httpStatus, 204);
  });

  it('refuses an IP-literal loopback host without connecting (Node skips lookup for literals)', async () => {
    const conns = connections;
    for (const url of [`https://127.0.0.1:${port}/ok`, `https://[::1]:${port}/ok`, `https://[::ffff:127.0.0.1]:${port}/ok`]) {
      const attempt = await send('/ok', { url, allowPrivateNetworks: false });
      assert.match(attempt.error ?? '', /^address not allowed: .* \(loopback\)$/, url);
    }
    assert.equal(connections, conns);
  });

  it('refuses http without connecting', async () => {
    const conns = connections;
    const attempt = await send('/ok', { url: `http://localhost:${port}/ok`, allowPrivateNetworks: false });
    assert.equal(attempt.error, 'the URL must use https');
    assert.equal(connections, conns);
  });
});
