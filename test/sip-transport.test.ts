// The SIP provider's transport (src/telephony/sip/transport.ts) against raw sockets: what it writes
// in Via, the branch it gives each transaction, how it reports a peer it cannot reach, a taken
// port, and a peer that floods a connection.
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import type { TestContext } from 'node:test';
import type * as sip from 'sip';
import { createServer as createTlsServer } from 'node:tls';
import { SipEndpoint } from '../src/telephony/sip/transport.js';
import { PROXY_SERVER_NAME, testPki } from './helpers/kamailio.js';
import { describe, it } from './helpers/suite.js';

const sipLibrary = createRequire(import.meta.url)('sip') as typeof sip;
const ADDRESS = '127.0.0.1';

async function freeUdpTcpPort(): Promise<number> {
  for (;;) {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, ADDRESS, resolve));
    const { port } = socket.address();
    await new Promise<void>((resolve) => socket.close(() => resolve()));
    const server = createServer();
    const free = await new Promise<boolean>((resolve) => server.once('error', () => resolve(false)).listen(port, ADDRESS, () => resolve(true)));
    if (free) await new Promise((resolve) => server.close(resolve));
    if (free) return port;
  }
}

async function endpoint(t: TestContext, options: { maxMessageBytes?: number; port?: number } = {}): Promise<{ endpoint: SipEndpoint; port: number; errors: Error[] }> {
  const port = options.port ?? (await freeUdpTcpPort());
  const errors: Error[] = [];
  const ep = new SipEndpoint(sipLibrary, { bindAddress: ADDRESS, port, publicHost: ADDRESS, ...(options.maxMessageBytes ? { maxMessageBytes: options.maxMessageBytes } : {}) }, () => undefined, (error) => errors.push(error));
  t.after(() => ep.close());
  return { endpoint: ep, port, errors };
}

const options = (uri: string): sip.SipMessage => ({
  method: 'OPTIONS',
  uri,
  headers: { to: { uri, params: {} }, from: { uri: 'sip:dialtone@127.0.0.1', params: { tag: 'a1' } }, 'call-id': `c${Math.random()}@test`, cseq: { method: 'OPTIONS', seq: 1 }, 'max-forwards': 70 },
});

const responses = () => {
  const got: sip.SipMessage[] = [];
  let notify: (() => void) | undefined;
  return {
    onResponse: (response: sip.SipMessage) => {
      got.push(response);
      notify?.();
    },
    next: async (): Promise<sip.SipMessage> => {
      while (got.length === 0) await new Promise<void>((resolve) => (notify = resolve));
      return got.shift() as sip.SipMessage;
    },
  };
};

describe('SIP transport', () => {
  it('sends over UDP with its address, port, rport and a 96-bit branch in Via, and hands the peer\'s response to the transaction', async (t) => {
    const { endpoint: ep, port } = await endpoint(t);
    const peer = createSocket('udp4');
    t.after(() => peer.close());
    await new Promise<void>((resolve) => peer.bind(0, '127.0.0.2', resolve));
    const received = new Promise<{ text: string; port: number }>((resolve) => peer.once('message', (data, remote) => resolve({ text: data.toString(), port: remote.port })));
    const got = responses();
    ep.request(options(`sip:peer@127.0.0.2:${peer.address().port}`), { transport: 'udp', host: '127.0.0.2', port: peer.address().port }, {}, got.onResponse);
    const { text, port: sourcePort } = await received;
    assert.equal(sourcePort, port, 'sent from the SIP port itself');
    const via = /^Via: SIP\/2\.0\/UDP 127\.0\.0\.1:(\d+);branch=(z9hG4bK[0-9a-f]{24});rport\r$/m.exec(text);
    assert.ok(via, text);
    assert.equal(Number(via[1]), port);
    const request = sipLibrary.parse(text);
    assert.ok(request);
    peer.send(sipLibrary.stringify(sipLibrary.makeResponse(request, 200, 'OK')), port, ADDRESS);
    assert.equal((await got.next()).status, 200);
  });

  it('gives every transaction its own branch', async (t) => {
    const { endpoint: ep } = await endpoint(t);
    const peer = createSocket('udp4');
    t.after(() => peer.close());
    await new Promise<void>((resolve) => peer.bind(0, '127.0.0.2', resolve));
    const branches = new Set<string>();
    const all = new Promise<void>((resolve) =>
      peer.on('message', (data) => {
        branches.add(/branch=([^;\r]+)/.exec(data.toString())?.[1] ?? '');
        if (branches.size === 50) resolve();
      }),
    );
    for (let i = 0; i < 50; i += 1) ep.request(options('sip:peer@127.0.0.2'), { transport: 'udp', host: '127.0.0.2', port: peer.address().port }, {}, () => undefined);
    await all;
    assert.equal(branches.size, 50);
  });

  it('over TCP writes TCP and alias in Via (RFC 5923: the peer may send its requests back over the connection)', async (t) => {
    const { endpoint: ep, port } = await endpoint(t);
    const server = createServer();
    const sockets: Socket[] = [];
    t.after(() => {
      for (const socket of sockets) socket.destroy();
      server.close();
    });
    const received = new Promise<string>((resolve) =>
      server.on('connection', (socket) => {
        sockets.push(socket);
        let text = '';
        socket.on('data', (chunk) => (text += chunk.toString()).includes('\r\n\r\n') && resolve(text));
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.2', resolve));
    const peerPort = (server.address() as { port: number }).port;
    ep.request(options(`sip:peer@127.0.0.2:${peerPort};transport=tcp`), { transport: 'tcp', host: '127.0.0.2', port: peerPort }, {}, () => undefined);
    assert.match(await received, new RegExp(`^Via: SIP/2\\.0/TCP 127\\.0\\.0\\.1:${port};branch=z9hG4bK[0-9a-f]{24};alias\\r$`, 'm'));
  });

  it('over TLS checks the peer\'s certificate against the route\'s CA and server name, writes TLS in Via, and refuses a certificate for another name with a 503', async (t) => {
    const { endpoint: ep, port } = await endpoint(t);
    const pki = testPki();
    const server = createTlsServer({ cert: readFileSync(pki.certFile), key: readFileSync(pki.keyFile) });
    const sockets: Socket[] = [];
    t.after(() => {
      for (const socket of sockets) socket.destroy();
      server.close();
    });
    const received = new Promise<string>((resolve) =>
      server.on('secureConnection', (socket) => {
        sockets.push(socket);
        let text = '';
        socket.on('data', (chunk) => (text += chunk.toString()).includes('\r\n\r\n') && resolve(text));
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.2', resolve));
    const peerPort = (server.address() as { port: number }).port;
    const hop = { transport: 'tls' as const, host: '127.0.0.2', port: peerPort };
    ep.request(options(`sip:peer@127.0.0.2:${peerPort};transport=tls`), hop, { serverName: PROXY_SERVER_NAME, ca: pki.caPem }, () => undefined);
    assert.match(await received, new RegExp(`^Via: SIP/2\\.0/TLS 127\\.0\\.0\\.1:${port};branch=z9hG4bK[0-9a-f]{24};alias\\r$`, 'm'));

    const got = responses();
    ep.request(options(`sip:peer@127.0.0.2:${peerPort};transport=tls`), hop, { serverName: 'other.dialtone.test', ca: pki.caPem }, got.onResponse);
    const refused = await got.next();
    assert.equal(refused.status, 503);
    assert.match(refused.reason ?? '', /TLS connection to 127\.0\.0\.2:\d+ failed: .*other\.dialtone\.test/);
  });

  it('answers a request it cannot deliver (connection refused) with a 503 naming the peer and the reason', async (t) => {
    const { endpoint: ep } = await endpoint(t);
    const closedPort = await freeUdpTcpPort();
    const got = responses();
    ep.request(options('sip:peer@127.0.0.2'), { transport: 'tcp', host: '127.0.0.2', port: closedPort }, {}, got.onResponse);
    const response = await got.next();
    assert.equal(response.status, 503);
    assert.match(response.reason ?? '', new RegExp(`TCP connection to 127\\.0\\.0\\.2:${closedPort} failed: .*ECONNREFUSED`));
  });

  it('answers a request to a host name that does not resolve with a 503', async (t) => {
    const { endpoint: ep } = await endpoint(t);
    const got = responses();
    ep.request(options('sip:peer@nowhere.invalid'), { transport: 'udp', host: 'nowhere.invalid', port: 5060 }, {}, got.onResponse);
    const response = await got.next();
    assert.equal(response.status, 503);
    assert.match(response.reason ?? '', /nowhere\.invalid/);
  });

  it('rejects binding a taken UDP or TCP port with a message naming it, and binds once the port is free', async (t) => {
    const port = await freeUdpTcpPort();
    const squatter = createSocket('udp4');
    await new Promise<void>((resolve) => squatter.bind(port, ADDRESS, resolve));
    const tcpSquatter = createServer();
    await new Promise<void>((resolve) => tcpSquatter.listen(port, ADDRESS, resolve));
    const { endpoint: ep } = await endpoint(t, { port });
    await assert.rejects(ep.listen('udp'), new RegExp(`^Error: The SIP UDP port 127\\.0\\.0\\.1:${port} cannot be bound: .*EADDRINUSE`));
    await assert.rejects(ep.listen('tcp'), new RegExp(`^Error: The SIP TCP port 127\\.0\\.0\\.1:${port} cannot be bound: .*EADDRINUSE`));
    await ep.listen('tls'); // TLS needs no listener: Dialtone accepts no TLS connections
    await new Promise<void>((resolve) => squatter.close(() => resolve()));
    await new Promise((resolve) => tcpSquatter.close(resolve));
    await ep.listen('udp');
    await ep.listen('tcp');
  });

  it('disconnects a TCP peer that sends a message over the size limit, and keeps serving others', async (t) => {
    const { endpoint: ep, port } = await endpoint(t, { maxMessageBytes: 2048 });
    await ep.listen('tcp');
    const { connect } = await import('node:net');
    const flooder = connect(port, ADDRESS);
    t.after(() => flooder.destroy());
    const closed = new Promise<void>((resolve) => flooder.on('close', () => resolve()).on('error', () => undefined));
    flooder.write(`OPTIONS sip:dialtone@127.0.0.1 SIP/2.0\r\nX-Filler: ${'x'.repeat(4096)}\r\n`);
    await closed;
    const honest = connect(port, ADDRESS);
    t.after(() => honest.destroy());
    await new Promise<void>((resolve, reject) => honest.once('connect', resolve).once('error', reject));
  });
});
