// The scope each public route requires (docs/api.md, "Scopes"). A route declares it once, in its
// schema's security requirement (`security: requiresScope('calls')`, OpenAPI 3.1 lets an apiKey
// requirement name roles), so the reference shows it; `declareScopes` reads it back when the route
// is registered, refuses a public route that declares nothing, and hands it to the authentication
// hook, which answers 403 insufficient_scope when the key lacks it. A route any valid key may use
// (a key reading its own scopes) says so explicitly: `security: requiresAnyScope()`, the API key
// with no role named, which is how OpenAPI writes "any key".
import type { FastifyInstance, RouteOptions } from 'fastify';
import { isScope, type Scope } from '../auth/scopes.js';
import { problemResponses } from './problem-schemas.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope a public route requires, or `any` (set by declareScopes from its security requirement). */
    scope?: RouteScope;
  }
  interface FastifyInstance {
    /** Every route of the public API with the scope it requires, as registered (HEAD routes included). */
    publicRoutes: readonly PublicRoute[];
  }
}

/** What a route requires of the key: one scope, or `any` valid key of the organization. */
export type RouteScope = Scope | 'any';

export interface PublicRoute {
  method: string;
  url: string;
  scope: RouteScope;
}

/** A public operation's security requirement: the API key, holding `scope`. */
export function requiresScope(scope: Scope): [{ ApiKey: [Scope] }] {
  return [{ ApiKey: [scope] }];
}

/**
 * A public operation any valid key may use, whatever its scopes: the API key, no role named. Only
 * for what a key needs to know about itself (GET /api-keys/current), never for the organization's data.
 */
export function requiresAnyScope(): [{ ApiKey: [] }] {
  return [{ ApiKey: [] }];
}

/** What a route's schema requires, or undefined when it declares nothing usable. */
export function scopeOfSchema(schema: unknown): RouteScope | undefined {
  const security = (schema as { security?: unknown } | undefined)?.security;
  if (!Array.isArray(security) || security.length !== 1) return undefined;
  const names = (security[0] as { ApiKey?: unknown }).ApiKey;
  if (Array.isArray(names) && names.length === 0) return 'any';
  if (!Array.isArray(names) || names.length !== 1 || typeof names[0] !== 'string' || !isScope(names[0])) return undefined;
  return names[0];
}

/**
 * Registered on the public API's scope before its routes: every route must require exactly one
 * scope, or say it takes any key (a route that declares neither fails the app's start, and so every test), which is copied to
 * the route's config for the authentication hook; the 403 it can answer is added to the route's
 * documented responses. Each route is listed in `registered` (the app's `publicRoutes`), which the
 * tests walk.
 */
export function declareScopes(app: FastifyInstance, registered: PublicRoute[]): void {
  app.addHook('onRoute', (route: RouteOptions) => {
    const scope = scopeOfSchema(route.schema);
    const methods = Array.isArray(route.method) ? route.method.join(',') : route.method;
    if (scope === undefined) throw new Error(`${methods} ${route.url} declares no scope: give its schema \`security: requiresScope(…)\` (http/scopes.ts)`);
    route.config = { ...route.config, scope };
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) registered.push({ method, url: route.url, scope });
    // A route any key may use can refuse no key for its scope: nothing to document.
    if (scope === 'any') return;
    const response = (route.schema?.response ?? {}) as Record<string, unknown>;
    // A HEAD route Fastify derives from a GET passes here again, with the 403 already added.
    const own = response[403] as { description?: string } | undefined;
    if (own !== undefined && !own.description?.includes('`insufficient_scope`')) throw new Error(`${methods} ${route.url} declares its own 403; insufficient_scope is added by http/scopes.ts`);
    route.schema = { ...route.schema, response: { ...response, 403: problemResponses(['insufficient_scope'])[403] } };
  });
}
