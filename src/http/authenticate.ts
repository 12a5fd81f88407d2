// Authentication of the public API: the first check of every request, before anything about the
// target or the body is revealed. Unknown and revoked keys get the same answer.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { authenticateApiKey, type AuthenticatedKey } from '../auth/api-keys.js';
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
    request.auth = auth;
  };
}

/** The authenticated key of a request that passed `authenticateHook`. */
export function authOf(request: FastifyRequest): AuthenticatedKey {
  if (!request.auth) throw new Error('authOf() called on a route without authentication');
  return request.auth;
}
