// The HTTP application. Load order shows the layering: Fastify's own settings and the error edge,
// then documentation, then the routes.
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { Deps } from './deps.js';
import { DialtoneError } from './errors.js';
import { authenticateHook } from './http/authenticate.js';
import { clientErrorHandler, guardHttpServer } from './http/client-errors.js';
import { refuseUnreadableBodies, useJsonBodies } from './http/json-body.js';
import { lazySerializers, lazyValidators } from './http/lazy-schemas.js';
import { methodNotAllowed } from './http/method-not-allowed.js';
import { OneLinePerRequest } from './http/request-logging.js';
import { DOCS_UI_OPTIONS, docsSecurityHeaders, openApiOptions } from './http/openapi.js';
import { problemSchemas } from './http/problem-schemas.js';
import { sharedSchemas } from './http/schemas.js';
import { WebhookEventTypeSchema } from './http/webhook-schemas.js';
import { errorHandler, sendProblem } from './http/problems.js';
import { rateLimitHook } from './http/rate-limit.js';
import { declareScopes, type PublicRoute } from './http/scopes.js';
import { apiKeyRoutes } from './http/routes/api-keys.js';
import { organizationRoutes } from './http/routes/organization.js';
import { telephonyConfigurationRoutes } from './http/routes/telephony-configurations.js';
import { auditEventRoutes } from './http/routes/audit-events.js';
import { initiateCallRoutes } from './http/routes/initiate-call.js';
import { operationsRoutes } from './http/routes/operations.js';
import { problemPageRoutes } from './http/routes/problem-pages.js';
import { campaignRoutes } from './http/routes/campaigns.js';
import { catalogRoutes } from './http/routes/catalog.js';
import { consoleRoutes, type ConsoleOptions } from './http/routes/console.js';
import { rootRoute } from './http/routes/root.js';
import { runtimeRoutes } from './http/routes/runtime.js';
import { runStateRoutes } from './http/routes/run-states.js';
import { statsRoutes } from './http/routes/stats.js';
import { streamRoutes } from './http/routes/stream.js';
import { providerCallbackRoutes } from './http/routes/provider-callbacks.js';
import { callbackPrefix } from './telephony/callback-urls.js';
import { suppressionRoutes } from './http/routes/suppressions.js';
import { phoneNumberRoutes } from './http/routes/phone-numbers.js';
import { webhookEndpointRoutes } from './http/routes/webhook-endpoints.js';
import { workflowRunRoutes } from './http/routes/workflow-runs.js';
import { workflowRoutes } from './http/routes/workflows.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export interface AppOptions {
  /** Serve the public API; a dispatcher-only node serves just the operational endpoints. */
  publicApi?: boolean;
  /**
   * Compile every route's request validators and response serializers when the route is registered
   * (Fastify's default), instead of on first use (http/lazy-schemas.ts). The tests use it to prove
   * every declared schema compiles; a serving node has no reason to.
   */
  compileSchemasAtStart?: boolean;
  /** The console's settings (http/routes/console.ts): where the built @dialtone/client it serves is. */
  console?: ConsoleOptions;
}

export async function buildApp(deps: Deps, options: AppOptions = {}): Promise<FastifyInstance> {
  const { config } = deps;
  // Node enforces the header and request timeouts on a periodic sweep (30 s by default), which
  // would let a slow client hold a socket far past them; sweep at a quarter of the header timeout.
  const sweepInterval = Math.max(25, Math.min(1_000, Math.floor(config.HEADERS_TIMEOUT_MS / 4)));
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: config.BODY_LIMIT_BYTES,
    requestTimeout: config.REQUEST_TIMEOUT_MS,
    keepAliveTimeout: config.KEEP_ALIVE_TIMEOUT_MS,
    // The socket's inactivity timeout closes without a word; the request timeout answers 408. The
    // former is set past the latter (and its sweep), so a stalled body always gets its answer.
    connectionTimeout: config.REQUEST_TIMEOUT_MS + 2 * sweepInterval + 1_000,
    http: {
      maxHeaderSize: config.MAX_HEADER_BYTES,
      headersTimeout: config.HEADERS_TIMEOUT_MS,
      connectionsCheckingInterval: sweepInterval,
      // Node answers a missing Host with a bare 400; the onRequest hook below answers problem+json.
      requireHostHeader: false,
    },
    // A request Node refuses before Fastify sees it (headers too large, too slow) still gets a
    // problem+json answer, then the connection closes.
    clientErrorHandler: clientErrorHandler(deps.logger),
    // A caller's own X-Request-Id is kept when it is a sane token, so logs line up across systems.
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    // While closing, requests on kept-alive connections get our own 503 problem (hook below).
    return503OnClosing: false,
    logController: new OneLinePerRequest(),
    // Request validators and response serializers are compiled on first use (http/lazy-schemas.ts).
    ...(options.compileSchemasAtStart ? {} : { schemaController: { compilersFactory: { buildValidator: lazyValidators, buildSerializer: lazySerializers } } }),
    ajv: {
      // Unknown fields are refused, not silently dropped; types are never coerced; every problem
      // is reported at once.
      customOptions: { removeAdditional: false, coerceTypes: false, allErrors: true },
    },
    // A URL the router cannot match (bad percent-encoding, a path segment over maxParamLength) is
    // answered before any hook runs: without this it would be Fastify's own JSON, with no request id.
    frameworkErrors: (_error, request, reply) => {
      reply.header('x-request-id', request.id);
      return sendProblem(reply, new DialtoneError('not_found', 'No route matches this URL.'));
    },
  });

  guardHttpServer(app.server, deps.logger);
  // A JSON body is one level deeper than the initial_context it carries.
  useJsonBodies(app, config.INITIAL_CONTEXT_MAX_DEPTH + 1);
  app.decorateRequest('auth', null);
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      reply.header('connection', 'close');
      throw new DialtoneError('bad_request', 'HTTP/1.1 requests must carry a Host header.');
    }
    if (closing) {
      reply.header('connection', 'close');
      throw new DialtoneError('unavailable', 'The service is shutting down; retry on another node or shortly.', { retryAfterSeconds: 1 });
    }
  });
  // A request already being served when the stop began still gets its answer, and then its
  // connection closes: kept alive, it would hold the server open (and the process, and the port)
  // until the client left or SHUTDOWN_GRACE_MS ran out.
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });
  app.addHook('preParsing', async (request) => refuseUnreadableBodies(request));
  app.setErrorHandler(errorHandler);
  const otherMethods = methodNotAllowed(app);
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = otherMethods(path);
    if (allowed.length === 0) return sendProblem(reply, new DialtoneError('not_found', `No route for ${request.method} ${path}.`));
    reply.header('allow', allowed.join(', '));
    return sendProblem(reply, new DialtoneError('method_not_allowed', `${path} does not answer ${request.method}; it answers ${allowed.join(', ')}.`));
  });

  // Shared before any route refers to them, by $id: the objects several operations show (a run, a
  // page of runs, …) and each status's problem schema. The document names them under components.schemas.
  for (const schema of [...sharedSchemas(), WebhookEventTypeSchema, ...problemSchemas()]) app.addSchema(schema);
  await app.register(swagger, openApiOptions(config));
  // /docs in a plugin of its own, so its security headers reach every answer under it (Swagger UI's
  // static files are served by @fastify/static, which its own `hooks` option does not cover).
  const secureDocs = docsSecurityHeaders(config);
  await app.register(async (docs) => {
    docs.addHook('onRequest', async (_request, reply) => secureDocs(reply));
    await docs.register(swaggerUi, DOCS_UI_OPTIONS);
  });

  await app.register(operationsRoutes(deps));
  // Every node answers problems, so every node serves the pages their `type` URIs name.
  await app.register(problemPageRoutes());
  const publicRoutes: PublicRoute[] = [];
  app.decorate('publicRoutes', publicRoutes);
  if (options.publicApi === false) return app;
  await deps.rateLimits.ready();
  await app.register(
    async (publicApi) => {
      declareScopes(publicApi, publicRoutes);
      publicApi.addHook('onRequest', authenticateHook(deps));
      publicApi.addHook('onRequest', rateLimitHook(deps));
      await publicApi.register(initiateCallRoutes(deps));
      await publicApi.register(workflowRunRoutes(deps));
      await publicApi.register(webhookEndpointRoutes(deps));
      await publicApi.register(suppressionRoutes(deps));
      await publicApi.register(phoneNumberRoutes(deps));
      await publicApi.register(campaignRoutes(deps));
      await publicApi.register(catalogRoutes(deps));
      await publicApi.register(runStateRoutes());
      await publicApi.register(statsRoutes(deps));
      await publicApi.register(streamRoutes(deps));
      await publicApi.register(apiKeyRoutes(deps));
      await publicApi.register(telephonyConfigurationRoutes(deps));
      await publicApi.register(organizationRoutes(deps));
      await publicApi.register(workflowRoutes(deps));
      await publicApi.register(auditEventRoutes(deps));
    },
    { prefix: '/api/v1/public' },
  );
  // Each provider that declares callback routes (its definition, telephony/registry.ts) gets them
  // under its own name, answered by its `callbacks`.
  for (const definition of deps.registry.definitions) {
    const callbacks = deps.providers[definition.name]?.callbacks;
    if (definition.callbackRoutes.length === 0) continue;
    if (!callbacks) throw new Error(`Provider "${definition.name}" declares callback routes but has no callbacks to answer them.`);
    await app.register(providerCallbackRoutes(deps, definition.name, definition.callbackRoutes, callbacks), { prefix: callbackPrefix(definition.name) });
  }
  await app.register(runtimeRoutes(deps), { prefix: '/api/v1/runtime' });
  await app.register(consoleRoutes(options.console), { prefix: '/console' });
  await app.register(rootRoute());
  return app;
}
