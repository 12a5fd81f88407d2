// GET /: the address a newcomer opens first. A browser is sent on to the console; anything else
// (curl, an API client) gets a 404 problem that names where the console and the API reference are,
// instead of a redirect to an HTML page it cannot use.
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { DialtoneError } from '../../errors.js';

export const CONSOLE_PATH = '/console/';
export const DOCS_PATH = '/docs';

/** Browsers ask for HTML first when they navigate; API clients ask for JSON or for anything. */
function wantsHtml(request: FastifyRequest): boolean {
  return /(?:^|,)\s*text\/html\b/i.test(request.headers.accept ?? '');
}

export function rootRoute(): FastifyPluginAsync {
  return async (app) => {
    app.get('/', { schema: { hide: true } }, async (request, reply) => {
      // 302, not 301: a permanent redirect is cached by the browser, and what / shows may change.
      if (wantsHtml(request)) return reply.redirect(CONSOLE_PATH, 302);
      throw new DialtoneError('not_found', `No API at /. The console is at ${CONSOLE_PATH}, the API reference at ${DOCS_PATH}, the API under /api/v1/public/.`);
    });
  };
}
