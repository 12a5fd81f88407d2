// 405 instead of 404 for a path that exists under another method (RFC 9110 section 15.5.6): the
// caller learns it used the wrong verb, and `Allow` says which ones work. Fastify's not-found
// handler does not say whether the path matched another method, so the routes are mirrored into a
// second find-my-way router (Fastify's own router library) as they are registered.
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import type { FastifyInstance } from 'fastify';

/** Call before any route is registered; returns the methods a path answers (empty: unknown path). */
export function methodNotAllowed(app: FastifyInstance): (path: string) => string[] {
  const router = FindMyWay();
  const methods = new Set<HTTPMethod>();
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      const name = method.toUpperCase() as HTTPMethod;
      methods.add(name);
      if (!router.hasRoute(name, route.url)) router.on(name, route.url, () => undefined);
    }
  });
  return (path) => [...methods].filter((method) => router.find(method, path) !== null).sort();
}
