// Where a provider calls back for a run: /api/v1/providers/<provider>/runs/<run id>/<route>. The
// HTTP layer mounts the routes a provider declares (definition.ts `callbackRoutes`) under the same
// prefix, so the URL a provider is given and the route that answers it are spelt in one place.
import type { CallbackRoute } from './definition.js';

/** The mount point of a provider's callback routes. */
export function callbackPrefix(provider: string): string {
  return `/api/v1/providers/${provider}`;
}

/** The path of one callback route, relative to the prefix, as the HTTP layer registers it. */
export function callbackRoutePath(route: CallbackRoute): string {
  return `/runs/:id/${route}`;
}

/** The URL a provider is told to call for a run (without any fragment of its own). */
export function callbackUrl(publicBaseUrl: string, provider: string, runId: number, route: CallbackRoute): string {
  return `${publicBaseUrl.replace(/\/+$/, '')}${callbackPrefix(provider)}/runs/${runId}/${route}`;
}
