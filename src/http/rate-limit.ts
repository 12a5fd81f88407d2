// The rate-limit check of the public API: right after authentication (docs/design.md,
// "Check order"), before anything about the request is looked at. Every authenticated response
// carries the RateLimit-Policy and RateLimit fields; a refusal is 429 `rate_limited` with Retry-After.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../deps.js';
import { DialtoneError } from '../errors.js';
import { rateLimitHeaders } from '../limits/rate-limits.js';
import { authOf } from './authenticate.js';

export function rateLimitHook(deps: Deps) {
  return async function rateLimit(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const auth = authOf(request);
    const decision = await deps.rateLimits.check({
      keyId: auth.keyId,
      orgId: auth.orgId,
      keyRatePerSecond: auth.limits.keyRatePerSecond ?? deps.config.RATE_LIMIT_KEY_PER_SECOND,
      orgRatePerSecond: auth.limits.ratePerSecond ?? deps.config.RATE_LIMIT_ORG_PER_SECOND,
    });
    const headers = rateLimitHeaders(decision.policies);
    if (headers) reply.headers(headers);
    if (!decision.allowed) {
      const spent = decision.policies.filter((p) => decision.refused.includes(p.name)).map((p) => `${p.name} (${p.quota} per ${p.windowSeconds} s)`);
      for (const policy of decision.refused) deps.metrics.rateLimited.inc({ policy });
      throw new DialtoneError('rate_limited', `Rate limit reached: ${spent.join(', ')}. Retry after ${decision.retryAfterSeconds} s.`, {
        retryAfterSeconds: decision.retryAfterSeconds,
      });
    }
  };
}
