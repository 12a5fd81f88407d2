// The OpenAPI document's own parts (info, servers, tags, shared schemas) and the branding of the
// interactive reference at /docs. Operations describe themselves in their route schemas.
import { createHash } from 'node:crypto';
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import type { FastifyReply } from 'fastify';
import type { FastifySwaggerUiOptions } from '@fastify/swagger-ui';
import type { Config } from '../config.js';
import { packageInfo } from '../package-info.js';
import { SCOPE_SUMMARIES, SCOPES } from '../auth/scopes.js';
import { documentedSchema } from './schemas.js';
import { webhookMessageSchemas, webhooksSection } from './webhook-schemas.js';

export const TAGS = [
  { name: 'Calls', description: 'Start a call: each creates a durable workflow run that pins the agent definition it runs and dials through a telephony configuration.' },
  { name: 'Workflow runs', description: 'Follow and cancel the runs your organization created.' },
  { name: 'Workflows', description: 'The agents your organization can call, with their published and draft versions.' },
  { name: 'Telephony', description: 'The routes your calls dial through (credentials are never shown).' },
  { name: 'Webhooks', description: 'Endpoints that receive a signed message (Standard Webhooks) for every change of your runs: registered, rotated, tested, and their deliveries followed and retried.' },
  { name: 'Calling policy', description: 'The organization\'s suppression (do-not-call) list: numbers Initiate Call refuses (422 number_suppressed) and queued runs to them end without a dial.' },
  { name: 'Personal data', description: 'Erasure of a person\'s data by phone number, from every run, event, webhook delivery, campaign contact and Idempotency-Key record of the organization.' },
  { name: 'Campaigns', description: 'Call a list of contacts through one agent, with a schedule, retries and a circuit breaker: each attempt is an ordinary workflow run, created when its contact is due.' },
  { name: 'Management', description: 'Administer the organization (scope `admin`): its API keys, its settings and its audit log. Every change is recorded in the audit log, without secrets.' },
  { name: 'Agent runtime', description: 'What the agent runtime an answered call is handed to reads, with the per-run token it was given.' },
  { name: 'Operations', description: 'Liveness, readiness, metrics and this document, for load balancers, orchestrators and monitoring. No credentials.' },
];

/**
 * Drops the shared schemas nothing in the document refers to. Every status's problem schema is
 * registered, but some statuses are answered only by undocumented routes (403 for Twilio's
 * callbacks), and a dispatcher-only node documents only the operational endpoints.
 */
function withoutUnusedSchemas(document: Record<string, unknown>): Record<string, unknown> {
  const components = (document.components ?? {}) as { schemas?: Record<string, unknown> };
  const schemas = components.schemas ?? {};
  const refsIn = (value: unknown) => [...JSON.stringify(value).matchAll(/"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1] ?? '');
  const used = new Set(refsIn({ ...document, components: { ...components, schemas: {} } }));
  // Schemas may refer to one another: follow the references until nothing new turns up.
  for (let pending = [...used]; pending.length > 0; ) {
    pending = refsIn(pending.map((name) => schemas[name])).filter((name) => !used.has(name));
    for (const name of pending) used.add(name);
  }
  const kept = Object.fromEntries(Object.entries(schemas).filter(([name]) => used.has(name)));
  return { ...document, components: { ...components, schemas: kept } };
}

/** Every answer carries the request id (app.ts's onRequest hook; client-errors.ts before routing). */
export const X_REQUEST_ID_HEADER = {
  description: 'The request id: the caller\'s own X-Request-Id when it is a sane token (1-128 of A-Z a-z 0-9 . _ : -), else a UUID. Problems repeat it as request_id.',
  schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
};

type Responses = Record<string, { headers?: Record<string, unknown> } & Record<string, unknown>>;

/** Declares X-Request-Id on every response of every operation. */
function withRequestIdHeaders(document: Record<string, unknown>): Record<string, unknown> {
  const paths = (document.paths ?? {}) as Record<string, Record<string, { responses?: Responses }>>;
  const withHeader = (responses: Responses = {}): Responses =>
    Object.fromEntries(Object.entries(responses).map(([status, response]) => [status, { ...response, headers: { ...response.headers, 'X-Request-Id': X_REQUEST_ID_HEADER } }]));
  return {
    ...document,
    paths: Object.fromEntries(
      Object.entries(paths).map(([path, item]) => [path, Object.fromEntries(Object.entries(item).map(([method, operation]) => [method, { ...operation, responses: withHeader(operation.responses) }]))]),
    ),
  };
}

/** Marks a route's schema whose body may be left out (the route's own preValidation makes it `{}`). */
export const OPTIONAL_BODY = 'x-optional-body';

/**
 * @fastify/swagger declares every body required, since Fastify validates whatever a route's body
 * schema is given; a route that turns a missing body into `{}` first says so with OPTIONAL_BODY,
 * and its requestBody is declared not required (the marker itself is dropped).
 */
function withOptionalBodies(document: Record<string, unknown>): Record<string, unknown> {
  const paths = (document.paths ?? {}) as Record<string, Record<string, Record<string, unknown>>>;
  const operation = (op: Record<string, unknown>) => {
    if (op[OPTIONAL_BODY] !== true) return op;
    const { [OPTIONAL_BODY]: _marker, ...rest } = op;
    return { ...rest, requestBody: { ...(rest.requestBody as Record<string, unknown>), required: false } };
  };
  return { ...document, paths: Object.fromEntries(Object.entries(paths).map(([path, item]) => [path, Object.fromEntries(Object.entries(item).map(([method, op]) => [method, operation(op)]))])) };
}

/** The webhook messages (webhook-schemas.ts): the `webhooks` section and the bodies it refers to. */
function withWebhooks(document: Record<string, unknown>): Record<string, unknown> {
  const components = (document.components ?? {}) as { schemas?: Record<string, unknown> };
  return { ...document, webhooks: webhooksSection(), components: { ...components, schemas: { ...components.schemas, ...webhookMessageSchemas() } } };
}

export function openApiOptions(config: Pick<Config, 'PUBLIC_BASE_URL'>): FastifyDynamicSwaggerOptions {
  const { version, license } = packageInfo();
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Dialtone',
        version,
        description:
          'Outbound call initiation: your backend asks Dialtone to phone a person, and an agent decides what happens on the call. Errors are RFC 9457 problem details (application/problem+json) with a stable `code` and the `request_id`; every response carries X-Request-Id.',
        license: { name: license, identifier: license },
        // Whoever runs this service answers for it (the project has no address of its own to give):
        // a problem's request_id is what they look up.
        contact: { name: 'The operator of this Dialtone service; quote the request_id (X-Request-Id) of the request in question' },
      },
      // PUBLIC_BASE_URL is where this service is reached from outside; without it, "/" is the
      // origin this document was fetched from.
      servers: [{ url: config.PUBLIC_BASE_URL?.replace(/\/+$/, '') || '/', description: 'This Dialtone service' }],
      tags: TAGS,
      components: {
        securitySchemes: {
          ApiKey: {
            type: 'apiKey',
            in: 'header',
            name: 'X-API-Key',
            description: `Your organization's API key. Each operation names the one scope the key must hold (a key without it is refused with 403 \`insufficient_scope\`): ${SCOPES.map((scope) => `\`${scope}\`: ${SCOPE_SUMMARIES[scope]}`).join('; ')}.`,
          },
          RunToken: { type: 'http', scheme: 'bearer', description: 'The per-run token handed to the agent runtime with an answered call.' },
          MetricsToken: { type: 'http', scheme: 'bearer', description: 'METRICS_TOKEN, required by /metrics when the operator sets it.' },
        },
      },
    },
    // Shared schemas (the per-status problem schemas) appear under their own $id, not def-N.
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
    // Request members a handler checks itself are shown with their exact rule (schemas.ts, documentedAs).
    transform: ({ schema, url }) => ({ schema: documentedSchema(schema) as typeof schema, url }),
    transformObject: (documentObject) =>
      'openapiObject' in documentObject
        ? withoutUnusedSchemas(withWebhooks(withOptionalBodies(withRequestIdHeaders(documentObject.openapiObject as Record<string, unknown>))))
        : documentObject.swaggerObject,
  };
}

// A tone's wave in a green disc: the mark, alone as the favicon and beside the name as the logo.
// The name is fitted to its box (textLength): the page's fonts vary, and a wider one was clipped.
const MARK = '<circle cx="20" cy="20" r="19" fill="#12a36b"/><path d="M7 20q3.25-9 6.5 0t6.5 0t6.5 0t6.5 0" fill="none" stroke="#fff" stroke-width="3" stroke-linecap="round"/>';
export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 40 40">${MARK}</svg>`;
export const LOGO_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 168 40" role="img" aria-label="Dialtone">' +
  `<title>Dialtone</title>${MARK}<text x="48" y="28.5" fill="#fff" font-family="system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif" font-size="24" font-weight="600" textLength="112" lengthAdjust="spacingAndGlyphs">Dialtone</text></svg>`;

/** /docs as Dialtone's: page title, logo and favicon, instead of Swagger UI's and Fastify's. */
export const DOCS_UI_OPTIONS: FastifySwaggerUiOptions = {
  routePrefix: '/docs',
  theme: {
    title: 'Dialtone API reference',
    favicon: [{ filename: 'dialtone.svg', rel: 'icon', type: 'image/svg+xml', sizes: 'any', content: FAVICON_SVG }],
  },
  logo: { type: 'image/svg+xml', content: LOGO_SVG, href: '/docs', target: '_self' },
};

/**
 * The one inline style Swagger UI renders: the <style> inside its own top-bar logo, drawn for a
 * moment before the initializer puts Dialtone's in its place. Allowed by its hash, so the browser
 * reports no violation and no other inline style is allowed. (An upgrade of @fastify/swagger-ui
 * that changes it shows as a CSP violation in test/docs-browser.test.ts.)
 */
const SWAGGER_LOGO_STYLE = '.logo_small_svg__cls-2{fill:#fff}.logo_small_svg__cls-3{fill:#85ea2d}';

/**
 * The Content-Security-Policy of /docs, as strict as Swagger UI allows: its page loads only its own
 * scripts and style sheets (no inline script; it sets styles through the DOM, which CSP permits),
 * its images are its own or data: URIs (the logo, the style sheet's icons), it fetches the document
 * and "Try it out" requests from this origin (and PUBLIC_BASE_URL's, the document's server, when
 * that is another), and nothing may frame it.
 */
export function docsCsp(config: Pick<Config, 'PUBLIC_BASE_URL'>): string {
  const publicOrigin = config.PUBLIC_BASE_URL && URL.canParse(config.PUBLIC_BASE_URL) ? new URL(config.PUBLIC_BASE_URL).origin : undefined;
  return [
    "default-src 'none'",
    "script-src 'self'",
    `style-src 'self' 'sha256-${createHash('sha256').update(SWAGGER_LOGO_STYLE).digest('base64')}'`,
    "img-src 'self' data:",
    `connect-src 'self'${publicOrigin ? ` ${publicOrigin}` : ''}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** The headers every answer under /docs carries (the console's, with the CSP Swagger UI needs). */
export function docsSecurityHeaders(config: Pick<Config, 'PUBLIC_BASE_URL'>): (reply: FastifyReply) => void {
  const csp = docsCsp(config);
  return (reply) => {
    reply
      .header('content-security-policy', csp)
      .header('x-frame-options', 'DENY')
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('cross-origin-opener-policy', 'same-origin');
  };
}
