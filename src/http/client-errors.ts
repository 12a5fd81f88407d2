// Requests Node's HTTP server answers itself, before Fastify routes them: headers over
// MAX_HEADER_BYTES (431), a client too slow to send its headers or body (408), bytes that are not
// HTTP (400), an Expect header Node cannot meet (417). Node's own answers are bare status lines;
// ours are the problem+json every other refusal uses.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { ErrorCode } from '../errors.js';
import { PROBLEM_TYPE_BASE, PROBLEMS } from './problems.js';

interface ClientError extends Error {
  code?: string;
}

function classify(error: ClientError): { code: ErrorCode; detail: string } {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return { code: 'request_header_fields_too_large', detail: 'The request headers are larger than the limit (MAX_HEADER_BYTES).' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { code: 'request_timeout', detail: 'The request was not received in time (HEADERS_TIMEOUT_MS / REQUEST_TIMEOUT_MS).' };
    default:
      return { code: 'bad_request', detail: 'The request is not valid HTTP.' };
  }
}

interface RawProblem {
  status: number;
  title: string;
  headers: Record<string, string>;
  body: string;
}

function rawProblem(code: ErrorCode, detail: string, requestId: string): RawProblem {
  const { status, title } = PROBLEMS[code];
  const body = JSON.stringify({ type: `${PROBLEM_TYPE_BASE}${code}`, title, status, detail, code, request_id: requestId });
  return {
    status,
    title,
    body,
    headers: {
      'Content-Type': 'application/problem+json',
      'Content-Length': String(Buffer.byteLength(body)),
      'X-Request-Id': requestId,
      Connection: 'close',
    },
  };
}

/**
 * Requests of each connection that Node has handed on and whose answers are not sent yet. A client
 * error on a connection must not discard the answer to a request already accepted on it (the
 * request may have created a run), so the refusal waits for those answers.
 */
const inFlight = new WeakMap<Socket, Set<IncomingMessage>>();
const whenIdle = new WeakMap<Socket, () => void>();

function trackRequest(request: IncomingMessage, response: ServerResponse): void {
  const socket = request.socket;
  let requests = inFlight.get(socket);
  if (!requests) inFlight.set(socket, (requests = new Set()));
  requests.add(request);
  response.once('close', () => {
    requests.delete(request);
    if (requests.size > 0) return;
    const then = whenIdle.get(socket);
    whenIdle.delete(socket);
    then?.();
  });
}

/** Whether an answer is owed on this socket to a request received whole (one that may be acting). */
function owesAnswers(socket: Socket): boolean {
  const requests = inFlight.get(socket);
  if (!requests || requests.size === 0) return false;
  // A request still waiting for its body (the one a request timeout is about) has done nothing
  // yet: it is answered by the refusal itself.
  for (const request of requests) if (!request.complete) return false;
  return true;
}

export function clientErrorHandler(logger: Logger) {
  return (error: ClientError, socket: Socket): void => {
    // A reset connection has nobody to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const { code, detail } = classify(error);
    const requestId = randomUUID();
    // Only what identifies the failure: the error also carries the raw request bytes (API key and
    // body included), which must never reach a log.
    logger.info({ requestId, code, parserError: error.code }, 'client error before routing');
    const refuse = () => {
      if (socket.destroyed) return;
      if (!socket.writable) return void socket.destroy();
      const problem = rawProblem(code, detail, requestId);
      const head = Object.entries(problem.headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
      // end() flushes the answer before closing; destroy() could drop it.
      socket.end(`HTTP/1.1 ${problem.status} ${problem.title}\r\n${head}\r\n${problem.body}`, () => socket.destroy());
    };
    if (owesAnswers(socket)) whenIdle.set(socket, refuse);
    else refuse();
  };
}

/** Answers `Expect` values other than 100-continue with 417 problem+json instead of Node's bare 417. */
function refuseExpectation(logger: Logger) {
  return (_request: IncomingMessage, response: ServerResponse): void => {
    const requestId = randomUUID();
    logger.info({ requestId, code: 'expectation_failed' }, 'unsupported Expect header');
    const problem = rawProblem('expectation_failed', 'Only "Expect: 100-continue" is supported.', requestId);
    response.writeHead(problem.status, problem.headers).end(problem.body);
  };
}

/** Wires the answers above into Fastify's underlying HTTP server. */
export function guardHttpServer(server: Server, logger: Logger): void {
  server.prependListener('request', trackRequest);
  server.on('checkExpectation', refuseExpectation(logger));
}
