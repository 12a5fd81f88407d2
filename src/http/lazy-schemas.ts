// Response serializers compiled when a route first answers with a status, not at start-up.
//
// Fastify compiles every route's response schemas when the route is registered: one generated
// function per route and status, and every route declares its problem statuses too (413, 415, 431
// and the like), most of which a node never sends. Compiled up front they held about 4 MB of an
// idle API node's heap, and churned more while it started (README, Memory). Here the compiler is
// Fastify's own (@fastify/fast-json-stringify-compiler: the same options and shared schemas), run
// on the first response of that route and status; the function is kept from then on.
//
// A schema that cannot be compiled no longer stops the start: the test suite builds the app with
// `compileResponsesAtStart` (test/openapi.test.ts) so every declared response is still proved to
// compile, and at run time the first response fails with an error naming the route and status.
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
