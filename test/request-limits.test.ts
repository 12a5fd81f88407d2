// Limits Node's HTTP layer enforces before a route runs, over a real socket: a slow client cannot
// hold a connection past HEADERS_TIMEOUT_MS, oversized headers are refused with 431, and both
// answers are problem+json like every other refusal.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, it } from 'node:test';
import { listening as listeningEnv, parseResponses, untilClosed } from './helpers/raw-http.js';

const listening = async (t: Parameters<typeof listeningEnv>[0], env: Record<string, string>) => (await listeningEnv(t, { env })).port;

function problemOf(raw: string): { status: number; code: string; request_id: string } {
  const [response] = parseResponses(raw);
  assert.match(response?.headers['content-type'] ?? '', /^application\/problem\+json/);
  return JSON.parse(response?.body ?? '{}') as { status: number; code: string; request_id: string };
}

describe('HTTP limits on a real socket', () => {
  it('answers 408 request_timeout and closes the connection of a client that trickles its headers past HEADERS_TIMEOUT_MS', async (t) => {
    const port = await listening(t, { HEADERS_TIMEOUT_MS: '400', REQUEST_TIMEOUT_MS: '5000' });
    const socket = connect(port, '127.0.0.1');
    t.after(() => socket.destroy());
    const closed = untilClosed(socket);
    const startedAt = Date.now();
    socket.write('POST /api/v1/public/agent/00000000-0000-4000-8000-000000000000 HTTP/1.1\r\nHost: x\r\n');
    // One header byte every 50 ms would take 10 s to finish the headers.
    const header = `X-Slow: ${'a'.repeat(200)}\r\n`;
    let sent = 0;
    const trickle = setInterval(() => {
      if (!socket.writable || sent >= header.length) return clearInterval(trickle);
      socket.write(header[sent++] ?? '');
    }, 50);
    t.after(() => clearInterval(trickle));
    const { text, closedAt } = await closed;
    clearInterval(trickle);
    assert.ok(closedAt - startedAt < 1_500, `closed after ${closedAt - startedAt} ms`);
    assert.ok(sent < header.length, 'the client had not finished its headers');
    assert.match(text, /^HTTP\/1\.1 408 /);
    const problem = problemOf(text);
    assert.equal(problem.code, 'request_timeout');
    assert.equal(problem.status, 408);
  });

  it('answers 431 request_header_fields_too_large to headers over MAX_HEADER_BYTES, and serves headers under it', async (t) => {
    const port = await listening(t, { MAX_HEADER_BYTES: '2048' });
    const socket = connect(port, '127.0.0.1');
    t.after(() => socket.destroy());
    const closed = untilClosed(socket);
    socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(4096)}\r\n\r\n`);
    const { text } = await closed;
    assert.match(text, /^HTTP\/1\.1 431 /);
    const problem = problemOf(text);
    assert.equal(problem.code, 'request_header_fields_too_large');
    assert.match(text, new RegExp(`x-request-id: ${problem.request_id}`, 'i'));

    const fine = await fetch(`http://127.0.0.1:${port}/healthz`, { headers: { 'x-small': 'c'.repeat(1000) } });
    assert.equal(fine.status, 200);
  });
});
