// Authentication of the public API: the first check of every request, before anything about the
// target or the body is revealed. Unknown and revoked keys get the same answer; a valid key without
// the scope the route requires (http/scopes.ts) is refused here too.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { authenticateApiKey, type AuthenticatedKey } from '../auth/api-keys.js';
import type { AuditActor } from '../audit/audit-log.js';
import type { Deps } from '../deps.js';
import { DialtoneError } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    auth: AuthenticatedKey | null;
  }
}

export function authenticateHook(deps: Deps) {
  return async function authenticate(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
    const header = request.headers['x-api-key'];
    const presented = Array.isArray(header) ? header[0] : header;
    if (presented === undefined || presented.trim() === '') {
      throw new DialtoneError('missing_api_key', 'Send your API key in the X-API-Key header.');
    }
    const auth = await authenticateApiKey(
      deps.store,
      presented.trim(),
      deps.clock.now(),
      deps.config.API_KEY_LAST_USED_WRITE_INTERVAL_MS,
      deps.lookups,
    );
    if (!auth) throw new DialtoneError('invalid_api_key', 'The API key is not valid.');
    // Authorization is part of this first check: a key without the route's scope learns nothing
    // about the request either (http/scopes.ts gives every public route its scope).
    const required = request.routeOptions.config.scope;
    if (required === undefined) throw new Error(`${request.method} ${request.routeOptions.url ?? request.url} has no scope`);
    if (required !== 'any' && !auth.scopes.includes(required)) {
      throw new DialtoneError('insufficient_scope', `This API key lacks the "${required}" scope, which ${request.method} ${request.routeOptions.url ?? ''} requires.`, {
        extra: { required_scope: required },
      });
    }
    request.auth = auth;
  };
}

/** Who acts, for the audit log: the request's key, by id and name. */
export function actorOf(request: FastifyRequest): AuditActor {
  const { keyId, keyName } = authOf(request);
  return { kind: 'api_key', keyId, keyName };
}

/** The authenticated key of a request that passed `authenticateHook`. */
export function authOf(request: FastifyRequest): AuthenticatedKey {
  if (!request.auth) throw new Error('authOf() called on a route without authentication');
  return request.auth;
}
