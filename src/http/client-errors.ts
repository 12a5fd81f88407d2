// Requests Node's HTTP parser refuses before Fastify routes them: headers over MAX_HEADER_BYTES
// (431), a client too slow to send its headers or body (408), bytes that are not HTTP (400).
// Fastify's default answer is its own JSON; ours is the problem+json every other refusal uses.
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Deps } from '../deps.js';
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

export function clientErrorHandler(deps: Deps) {
  return (error: ClientError, socket: Socket): void => {
    // A reset connection has nobody to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const { code, detail } = classify(error);
    const { status, title } = PROBLEMS[code];
    const requestId = randomUUID();
    deps.logger.info({ requestId, err: error, code }, 'client error before routing');
    if (socket.writable) {
      const body = JSON.stringify({ type: `${PROBLEM_TYPE_BASE}${code}`, title, status, detail, code, request_id: requestId });
      socket.write(
        `HTTP/1.1 ${status} ${title}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy(error);
  };
}
