// The problem+json contract (RFC 9457, docs/design.md, "Errors") every refusal shares, asserted once.
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import type { ErrorCode } from '../../src/errors.js';

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  request_id: string;
  errors?: { pointer: string; detail: string }[];
  [extra: string]: unknown;
}

/** Asserts the status, the media type, the stable code and type, and the request id; returns the body. */
export function assertProblem(response: LightMyRequestResponse, status: number, code: ErrorCode): Problem {
  assert.equal(response.statusCode, status, response.body);
  assert.match(String(response.headers['content-type']), /^application\/problem\+json(;|$)/);
  const body = response.json() as Problem;
  assert.equal(body.code, code);
  assert.equal(body.status, status);
  assert.equal(body.type, `/problems/${code}`);
  assert.equal(typeof body.title, 'string');
  assert.equal(typeof body.detail, 'string');
  const header = response.headers['x-request-id'];
  assert.ok(typeof header === 'string' && header.length > 0, 'every response carries X-Request-Id');
  assert.equal(body.request_id, header);
  return body;
}
