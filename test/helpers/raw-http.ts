// HTTP over a bare TCP socket, for what a client library would never send: pipelined bytes that
// are not HTTP, missing Host headers, odd Expect values, bodies that stall.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import type { TestContext } from 'node:test';
import { build, type TestEnv, type TestEnvOptions } from './app.js';

export interface ListeningEnv extends TestEnv {
  port: number;
}

/** The real application on a fresh SQLite database, listening on a free loopback port. */
export async function listening(t: TestContext, options: TestEnvOptions = {}): Promise<ListeningEnv> {
  const env = await build(t, 'sqlite', options);
  await env.app.listen({ host: '127.0.0.1', port: 0 });
  const address = env.app.server.address();
  assert.ok(address && typeof address === 'object');
  return { ...env, port: address.port };
}

export function rawSocket(t: TestContext, port: number): Socket {
  const socket = connect(port, '127.0.0.1');
  t.after(() => socket.destroy());
  return socket;
}

/** Everything the server sends until it closes the connection, and when that happened. */
export function untilClosed(socket: Socket): Promise<{ text: string; closedAt: number }> {
  return new Promise((resolve) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve({ text, closedAt: Date.now() }));
  });
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Splits what a connection received into its responses (each framed by Content-Length). */
export function parseResponses(text: string): RawResponse[] {
  const responses: RawResponse[] = [];
  let rest = text;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    assert.ok(end >= 0, `an incomplete response head: ${JSON.stringify(rest.slice(0, 200))}`);
    const [statusLine = '', ...lines] = rest.slice(0, end).split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    const bodyStart = end + 4;
    // Content-Length counts bytes; these bodies are ASCII JSON.
    responses.push({ status, headers, body: rest.slice(bodyStart, bodyStart + length) });
    rest = rest.slice(bodyStart + length);
  }
  return responses;
}

/** Asserts a raw response is problem+json with this status and code, and that its request id matches. */
export function assertRawProblem(response: RawResponse | undefined, status: number, code: string): void {
  assert.ok(response, 'a response was received');
  assert.equal(response.status, status);
  assert.match(response.headers['content-type'] ?? '', /^application\/problem\+json/);
  const body = JSON.parse(response.body) as { status: number; code: string; request_id: string; type: string };
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  assert.equal(body.type, `/problems/${code}`);
  assert.equal(response.headers['x-request-id'], body.request_id);
}

/** Sends `bytes` on a new connection and returns everything received until the server closed it. */
export async function exchange(t: TestContext, port: number, bytes: string): Promise<string> {
  const socket = rawSocket(t, port);
  const received = untilClosed(socket);
  socket.write(bytes);
  return (await received).text;
}

/** An Initiate Call request as bytes, with its API key and JSON body (and any extra header lines). */
export function initiateCallBytes(path: string, apiKey: string, body: unknown, extraHeaders = ''): string {
  const json = JSON.stringify(body);
  return `POST ${path} HTTP/1.1\r\nHost: x\r\n${extraHeaders}X-API-Key: ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`;
}
