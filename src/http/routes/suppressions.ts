// The organization's suppression (do-not-call) list (policy/suppressions.ts does the work).
// Numbers in the path are URL-encoded E.164 (`%2B12025550123`), normalized like an Initiate Call's
// phone_number. Another organization's suppressions answer 404, like absent ones.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import type { Deps } from '../../deps.js';
import { DialtoneError, type ErrorCode } from '../../errors.js';
import {
  getSuppression,
  importLimitsOf,
  importSuppressions,
  listSuppressions,
  putSuppression,
  removeSuppression,
  REASON_MAX_LENGTH,
  type SuppressionContext,
  type SuppressionInput,
} from '../../policy/suppressions.js';
import type { Readable } from 'node:stream';
import { authOf } from '../authenticate.js';
import { allowQuietImport } from '../quiet-import.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { documentedAs, withRateLimitHeaders } from '../schemas.js';

const Suppression = Type.Object(
  {
    phone_number: Type.String({ description: 'E.164', examples: ['+12025550123'] }),
    reason: Type.Union([Type.String(), Type.Null()], { description: 'Free text for your own reference' }),
    expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the number may be called again; null: never' }),
    active: Type.Boolean({ description: 'False once expires_at has passed: the number is no longer suppressed' }),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'Suppression', title: 'Suppression' },
);

const NumberParams = Type.Object({ phone_number: Type.String({ description: 'The number, URL-encoded E.164 (%2B12025550123)' }) });

/** What every suppression operation can refuse with. */
const REFUSALS: ErrorCode[] = ['missing_api_key', 'invalid_api_key', 'rate_limited'];
/** A body that is sent is parsed even where none is read. */
const BODY: ErrorCode[] = ['unsupported_media_type', 'payload_too_large', 'malformed_json'];
/** And those naming a number: a URL the router cannot decode, a number the organization has not suppressed. */
const OWN: ErrorCode[] = [...REFUSALS, 'not_found', 'suppression_not_found'];

function csvType(contentType: string | undefined): boolean {
  return contentType?.split(';')[0]?.trim().toLowerCase() === 'text/csv';
}

export function suppressionRoutes(deps: Deps): FastifyPluginAsync {
  const ctx: SuppressionContext = { store: deps.store, clock: deps.clock };
  const common = { tags: ['Calling policy'], security: requiresScope('campaigns') };
  return async (app) => {
    app.addSchema(Suppression);

    app.put(
      '/suppressions/:phone_number',
      {
        // No body is the same as an empty object: no reason, no expiry.
        preValidation: async (request) => {
          request.body ??= {};
        },
        schema: {
          ...common,
          operationId: 'putSuppression',
          summary: 'Suppress Number',
          description:
            'Adds the number to the organization\'s suppression (do-not-call) list, or replaces its reason and expiry (idempotent). Initiating a call to it is refused with 422 number_suppressed, and runs to it still queued end `canceled` with reason `suppressed` when the dispatcher reaches them.',
          params: NumberParams,
          body: Type.Object(
            {
              reason: Type.Optional(Type.Union([Type.String({ maxLength: REASON_MAX_LENGTH }), Type.Null()], { description: 'Free text for your own reference' })),
              // Checked by the handler (policy/suppressions.ts), which also says when it has passed.
              expires_at: Type.Optional(
                Type.Union([documentedAs(Type.String({ description: 'RFC 3339 date-time, in the future' }), { type: 'string', format: 'date-time', description: 'RFC 3339 date-time, in the future' }), Type.Null()], {
                  description: 'When the number may be called again; omitted or null: never',
                }),
              ),
            },
            { additionalProperties: false, description: 'Optional: no body means no reason and no expiry' },
          ),
          response: {
            200: withRateLimitHeaders(Type.Ref('Suppression')),
            ...problemResponses([...REFUSALS, 'not_found', ...BODY, 'validation_failed', 'invalid_phone_number']),
          },
        },
      },
      async (request) => {
        const { phone_number: phoneNumber } = request.params as { phone_number: string };
        return putSuppression(ctx, authOf(request).orgId, phoneNumber, request.body as SuppressionInput);
      },
    );

    app.get(
      '/suppressions/:phone_number',
      {
        schema: {
          ...common,
          operationId: 'getSuppression',
          summary: 'Get Suppression',
          description: 'The organization\'s suppression of this number (also once it has expired: see `active`).',
          params: NumberParams,
          response: { 200: withRateLimitHeaders(Type.Ref('Suppression')), ...problemResponses(OWN) },
        },
      },
      async (request) => {
        const { phone_number: phoneNumber } = request.params as { phone_number: string };
        return getSuppression(ctx, authOf(request).orgId, phoneNumber);
      },
    );

    app.delete(
      '/suppressions/:phone_number',
      {
        schema: {
          ...common,
          operationId: 'deleteSuppression',
          summary: 'Remove Suppression',
          description: 'Removes the number from the suppression list: it may be called again.',
          params: NumberParams,
          response: { 204: withRateLimitHeaders(Type.Null({ description: 'Removed' })), ...problemResponses([...OWN, ...BODY]) },
        },
      },
      async (request, reply) => {
        const { phone_number: phoneNumber } = request.params as { phone_number: string };
        await removeSuppression(ctx, authOf(request).orgId, phoneNumber);
        return reply.code(204).send();
      },
    );

    app.get(
      '/suppressions',
      {
        schema: {
          ...common,
          operationId: 'listSuppressions',
          summary: 'List Suppressions',
          description: 'The organization\'s suppressions in number order, expired ones included. Page with `after` (the `next_after` of the previous page).',
          querystring: Type.Object(
            {
              after: Type.Optional(Type.String({ pattern: '^\\+[1-9][0-9]{1,14}$', description: 'Return numbers after this one (E.164)' })),
              limit: Type.Optional(Type.String({ pattern: '^([1-9][0-9]{0,2}|1000)$', description: 'Page size, 1 to 1000 (default 100)' })),
            },
            { additionalProperties: false },
          ),
          response: {
            200: withRateLimitHeaders(
              Type.Object({
                data: Type.Array(Type.Ref('Suppression')),
                next_after: Type.Union([Type.String(), Type.Null()], { description: 'Pass as `after` for the next page; null on the last' }),
              }),
            ),
            ...problemResponses([...REFUSALS, 'validation_failed']),
          },
        },
      },
      async (request) => {
        const query = request.query as { after?: string; limit?: string };
        return listSuppressions(ctx, authOf(request).orgId, { after: query.after, limit: Number(query.limit ?? 100) });
      },
    );

    // The import alone takes text/csv: its parser lives in a scope of its own, so every other
    // route here refuses a CSV body with 415 like any body that is not JSON. The body is handed
    // over unread, as a stream (shared/csv-body.ts receives it, enforcing the byte limit).
    await app.register(async (csv) => {
      csv.addContentTypeParser('text/csv', (_request, payload, done) => done(null, payload));
      csv.post(
        '/suppressions/import',
        {
          preValidation: async (request) => {
            if (!csvType(request.headers['content-type'])) throw new DialtoneError('unsupported_media_type', 'Send the list as text/csv.');
            const length = Number(request.headers['content-length'] ?? 0);
            if (length > deps.config.SUPPRESSION_IMPORT_MAX_BYTES) {
              throw new DialtoneError('payload_too_large', `The CSV is larger than ${deps.config.SUPPRESSION_IMPORT_MAX_BYTES} bytes (SUPPRESSION_IMPORT_MAX_BYTES).`);
            }
          },
          schema: {
            ...common,
            operationId: 'importSuppressions',
            summary: 'Import Suppressions',
            description:
              'Adds every number of a CSV to the suppression list (replacing the reason and expiry of numbers already on it). The first line is a header naming a `phone_number` column, and optionally `reason` and `expires_at` (RFC 3339). Lines whose number is not valid are skipped and listed by line; the others are imported; a header alone imports nothing. The file must be UTF-8, at most SUPPRESSION_IMPORT_MAX_BYTES (default 32 MiB, about a million numbers) and SUPPRESSION_IMPORT_MAX_LINES lines after the header (default 1,000,000; invalid and repeated lines count), each at most CSV_IMPORT_MAX_LINE_BYTES (default 64 KiB). It is received whole (within REQUEST_TIMEOUT_MS), then checked and written while other requests go on being served; a million numbers take tens of seconds, during which the connection may stay quiet up to CSV_IMPORT_TIMEOUT_MS. An upload cut off before its end imports nothing (400 bad_request).',
            body: {
              content: {
                'text/csv': {
                  schema: Type.Unsafe<Readable>({ description: 'CSV with a header row', examples: ['phone_number,reason\n+12025550123,asked not to be called\n'] }),
                },
              },
            },
            response: {
              200: withRateLimitHeaders(
                Type.Object({
                  imported: Type.Integer({ minimum: 0, description: 'Distinct numbers written (a number on several lines counts once; its last line wins)' }),
                  invalid: Type.Array(
                    Type.Object({
                      line: Type.Integer({ minimum: 2, description: 'Line in the file (the header is line 1)' }),
                      value: Type.String({ description: 'The phone_number as found on the line' }),
                      detail: Type.String(),
                    }),
                    { description: 'Lines skipped, at most SUPPRESSION_IMPORT_MAX_INVALID_LISTED of them' },
                  ),
                  invalid_count: Type.Integer({ minimum: 0, description: 'Every line skipped, listed or not' }),
                }),
              ),
              ...problemResponses([...REFUSALS, 'bad_request', 'unsupported_media_type', 'payload_too_large', 'validation_failed']),
            },
          },
        },
        async (request) => {
          allowQuietImport(request, deps.config.CSV_IMPORT_TIMEOUT_MS);
          return importSuppressions(ctx, authOf(request).orgId, request.body as Readable, importLimitsOf(deps.config));
        },
      );
    });
  };
}
