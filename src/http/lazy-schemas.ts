// Schemas compiled when a route first uses them, not at start-up.
//
// Fastify compiles every route's schemas when the route is registered: a request validator per part
// (body, querystring, params, headers) and a response serializer per status, and every route
// declares its problem statuses too (413, 415, 431 and the like), most of which a node never sends.
// Compiled up front, the serializers held about 4 MB of an idle API node's heap, and generating the
// validators' code left 2-3 MB of garbage in a heap that had just started
// (docs/operations.md, "Memory and V8 flags"). Here the compilers are Fastify's own
// (@fastify/ajv-compiler and @fastify/fast-json-stringify-compiler: the same options and shared
// schemas), run on the first request that needs that part or the first response with that status;
// the function is kept from then on.
//
// A schema that cannot be compiled no longer stops the start: the test suite builds the app with
// `compileSchemasAtStart` (test/lazy-schemas.test.ts) so every declared schema is still proved to
// compile, and at run time the first use fails with an error naming the route and the part or
// status.
import { AjvCompiler, type ValidatorFactory } from '@fastify/ajv-compiler';
import { SerializerSelector, type RouteDefinition, type Serializer, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';

/** Thrown on a response schema's first use when it cannot be compiled: which route, which status, why. */
export class ResponseSchemaError extends Error {
  constructor(route: RouteDefinition, cause: unknown) {
    super(`The ${route.httpStatus} response schema of ${route.method} ${route.url} cannot be compiled: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'ResponseSchemaError';
  }
}

const eagerSerializers: SerializerFactory = SerializerSelector();

/** Fastify's default serializer factory, each route's serializer compiled on its first call. */
export const lazySerializers: SerializerFactory = (externalSchemas, options) => {
  const compile = eagerSerializers(externalSchemas, options);
  return (route) => {
    let serialize: Serializer | undefined;
    return (data: unknown) => {
      if (serialize === undefined) {
        try {
          serialize = compile(route);
        } catch (error) {
          throw new ResponseSchemaError(route, error);
        }
      }
      return serialize(data);
    };
  };
};

/** Thrown on a request schema's first use when it cannot be compiled: which route, which part, why. */
export class RequestSchemaError extends Error {
  constructor(route: ValidatorRoute, cause: unknown) {
    super(`The ${route.httpPart} schema of ${route.method} ${route.url} cannot be compiled: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'RequestSchemaError';
  }
}

interface ValidatorRoute {
  schema: unknown;
  method: string;
  url: string;
  httpPart: 'body' | 'headers' | 'params' | 'querystring';
}

/** What Fastify calls: Ajv's validate function (its `errors` after a failed call, its `schemaEnv`). */
type Validate = ((data: unknown, context?: unknown) => unknown) & { errors?: unknown; schemaEnv?: unknown };

/** The keywords a header schema may use here: a flat object whose property names are header names. */
const FLAT_HEADER_KEYWORDS = new Set(['type', 'properties', 'required', 'additionalProperties', 'description', 'title', '$id', 'examples']);

/**
 * Header names arrive lowercased (Node), so Fastify lowercases the names a header schema declares;
 * with a compiler of our own it leaves the schema as written, so that is done here, for the flat
 * object schemas routes use. Anything else is refused when the route is registered, not guessed at.
 */
function lowercaseHeaderNames(route: ValidatorRoute): unknown {
  const schema = route.schema as { properties?: Record<string, unknown>; required?: string[] } & Record<string, unknown>;
  const unsupported = Object.keys(schema ?? {}).filter((keyword) => !FLAT_HEADER_KEYWORDS.has(keyword));
  if (typeof schema !== 'object' || schema === null || unsupported.length > 0) {
    throw new Error(`The headers schema of ${route.method} ${route.url} is not a flat object of header names (${unsupported.join(', ') || typeof schema}): lazy-schemas.ts cannot lowercase its names.`);
  }
  return {
    ...schema,
    ...(schema.properties ? { properties: Object.fromEntries(Object.entries(schema.properties).map(([name, value]) => [name.toLowerCase(), value])) } : {}),
    ...(schema.required ? { required: schema.required.map((name) => name.toLowerCase()) } : {}),
  };
}

const eagerValidators = AjvCompiler() as unknown as (externalSchemas: unknown, options: unknown) => (route: ValidatorRoute) => Validate;

/** Fastify's default validator factory (Ajv), each route part's validator compiled on its first call. */
export const lazyValidators = ((externalSchemas: unknown, options: unknown) => {
  const compileNow = eagerValidators(externalSchemas, options);
  return (given: ValidatorRoute): Validate => {
    const route = given.httpPart === 'headers' ? { ...given, schema: lowercaseHeaderNames(given) } : given;
    let compiled: Validate | undefined;
    const compile = (): Validate => {
      if (compiled === undefined) {
        try {
          compiled = compileNow(route);
        } catch (error) {
          throw new RequestSchemaError(route, error);
        }
      }
      return compiled;
    };
    const validate = ((data: unknown, context?: unknown) => {
      const now = compile();
      return context !== undefined && now.schemaEnv ? now(data, context) : now(data);
    }) as Validate;
    // Fastify reads these after a call (errors) and before one (schemaEnv: whether Ajv may replace
    // the part's root value, so it passes the parent object).
    Object.defineProperty(validate, 'errors', { get: () => compiled?.errors });
    Object.defineProperty(validate, 'schemaEnv', { get: () => compile().schemaEnv });
    return validate;
  };
}) as unknown as ValidatorFactory;
