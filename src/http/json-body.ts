// Request bodies: JSON only, UTF-8 only, never compressed, and never nested deeper than a bound.
// The bound is checked right after parsing (V8's JSON.parse does not recurse on the stack), by a
// walk with an explicit stack, before validation or anything else that recurses walks the value.
import { isUtf8 } from 'node:buffer';
import { parse as parseContentType } from 'content-type';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DialtoneError, validationFailed } from '../errors.js';

/**
 * The JSON Pointer of the top-level member under which `value` nests deeper than `maxDepth`
 * (a scalar has depth 0, `{}` and `{"a":1}` depth 1), or undefined when it does not. Iterative,
 * and it stops at the first excess, so a body a few KB long but thousands of levels deep costs
 * no more than its first `maxDepth` levels.
 */
export function tooDeepAt(value: unknown, maxDepth: number): string | undefined {
  const pending: { value: unknown; depth: number; top: string }[] = [{ value, depth: 0, top: '' }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (typeof next.value !== 'object' || next.value === null) continue;
    const depth = next.depth + 1;
    if (depth > maxDepth) return next.top;
    const entries = Array.isArray(next.value) ? next.value.map((child, index) => [String(index), child] as const) : Object.entries(next.value);
    for (const [name, child] of entries) {
      pending.push({ value: child, depth, top: next.depth === 0 ? `/${escapePointer(name)}` : next.top });
    }
  }
  return undefined;
}

function escapePointer(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** A body is present when it has a length other than zero, or comes chunked. */
function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return (length !== undefined && length !== '0') || request.headers['transfer-encoding'] !== undefined;
}

/**
 * Refuses, before the body is read, what Dialtone would otherwise misread: a compressed body (it
 * would be parsed as text) and a charset other than UTF-8 (it would be decoded as UTF-8 anyway).
 */
export function refuseUnreadableBodies(request: FastifyRequest): void {
  if (!hasBody(request)) return;
  const encoding = request.headers['content-encoding']?.trim().toLowerCase();
  if (encoding !== undefined && encoding !== '' && encoding !== 'identity') {
    throw new DialtoneError('unsupported_media_type', 'Compressed bodies are not accepted (Content-Encoding); send the body uncompressed.');
  }
  const type = request.headers['content-type'];
  if (type === undefined) return;
  const charset = parseContentType(type).parameters.charset?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new DialtoneError('unsupported_media_type', `The body must be UTF-8; charset "${charset}" is not accepted.`);
  }
}

/**
 * Only JSON bodies: Fastify's text/plain parser would otherwise accept a body we must refuse. An
 * empty JSON body parses to undefined, so body-less POSTs (cancel) work whatever headers a client
 * library adds; operations that need a body refuse the empty one themselves.
 */
export function useJsonBodies(app: FastifyInstance, maxDepth: number): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser(['text/plain', 'application/json']);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    // Read as bytes: decoded as a string, bytes that are not UTF-8 would become U+FFFD silently,
    // and a name stored with them would be garbled for good.
    if (typeof body !== 'string' && !isUtf8(body)) return done(new DialtoneError('malformed_json', 'The request body is not valid UTF-8; JSON must be sent as UTF-8.'), undefined);
    const text = body.toString('utf8');
    if (text === '') return done(null, undefined);
    parseJson(request, text, (error, value) => {
      if (error) return done(error, undefined);
      const pointer = tooDeepAt(value, maxDepth);
      if (pointer === undefined) return done(null, value);
      const problem = validationFailed([{ pointer, detail: `Is nested more than ${maxDepth - 1} levels deep, the limit.` }]);
      done(problem, undefined);
    });
  });
}
