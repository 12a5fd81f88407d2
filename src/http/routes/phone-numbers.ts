// Erasure of a person's data by phone number (erasure/erase-number.ts does the work). The number in
// the path is URL-encoded E.164 (`%2B12025550123`), normalized like an Initiate Call's phone_number.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { listApiKeys } from '../../auth/api-keys.js';
import type { Deps } from '../../deps.js';
import { eraseNumber, type ErasureContext } from '../../erasure/erase-number.js';
import { authOf } from '../authenticate.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { StringEnum, withRateLimitHeaders } from '../schemas.js';

const count = (what: string) => Type.Integer({ minimum: 0, description: what });

const Erasure = Type.Object(
  {
    phone_number: Type.String({ description: 'The number erased, E.164', examples: ['+12025550123'] }),
    counts: Type.Object(
      {
        workflow_runs: count('Runs whose phone_number, initial_context and result were erased'),
        run_events: count('Events of those runs whose data was erased'),
        webhook_deliveries: count('Webhook deliveries of those runs whose payload had the number, initial_context, result and event data erased'),
        webhook_attempts: count('Attempts of those deliveries whose recorded response body was erased'),
        campaign_contacts: count('Campaign contacts whose number, initial_context and time zone were erased (a contact still due is canceled)'),
        idempotency_keys: count('Idempotency-Key records of those runs whose request fingerprint was erased'),
        suppressions: count('1 when ?suppress=true added the number to the suppression list (or made its suppression permanent)'),
      },
      { additionalProperties: false, description: 'Rows changed per table; all 0 when nothing of the number was left' },
    ),
  },
  { $id: 'Erasure', title: 'Erasure' },
);

export function phoneNumberRoutes(deps: Deps): FastifyPluginAsync {
  const ctx: ErasureContext = { store: deps.store, clock: deps.clock, logger: deps.logger };
  return async (app) => {
    app.addSchema(Erasure);
    app.delete(
      '/phone-numbers/:phone_number/data',
      {
        schema: {
          tags: ['Personal data'],
          security: requiresScope('admin'),
          operationId: 'erasePhoneNumberData',
          summary: 'Erase Phone Number Data',
          description:
            'Erases everything the organization\'s data holds of a phone number (a person\'s right to erasure): the number, initial_context and result of every run to it, its runs\' event data, the payloads of their webhook deliveries (a pending one then sends the erased message) and the response bodies recorded for them, the number, initial_context and time zone of its campaign contacts (a contact still due is canceled), and the request fingerprint of the Idempotency-Key records that created its runs. Runs keep their id, name, state and times; their phone_number reads `erased`. With ?suppress=true the number is also added to the suppression list for good, in the same transaction. A second erasure finds nothing (every count 0). A run to the number that has not ended refuses the whole erasure (409 runs_not_ended, listing the runs) and nothing is changed. Other organizations\' data is never touched.',
          params: Type.Object({ phone_number: Type.String({ description: 'The number, URL-encoded E.164 (%2B12025550123)' }) }),
          querystring: Type.Object(
            { suppress: Type.Optional(StringEnum(['true', 'false'] as const, { description: 'true: also add the number to the suppression list for good (default false)' })) },
            { additionalProperties: false },
          ),
          response: {
            200: withRateLimitHeaders(Type.Ref('Erasure')),
            ...problemResponses(['missing_api_key', 'invalid_api_key', 'rate_limited', 'not_found', 'unsupported_media_type', 'payload_too_large', 'malformed_json', 'validation_failed', 'invalid_phone_number', 'runs_not_ended']),
          },
        },
      },
      async (request) => {
        const { phone_number: phoneNumber } = request.params as { phone_number: string };
        const { suppress } = request.query as { suppress?: 'true' | 'false' };
        const auth = authOf(request);
        // The audit log names the key; the authenticated key carries only its id, so its name is
        // read here (an organization has a handful of keys, and an erasure is rare).
        const keyName = (await listApiKeys(deps.store, auth.orgId)).find((key) => key.id === auth.keyId)?.name ?? '';
        const erased = await eraseNumber(ctx, auth.orgId, phoneNumber, { suppress: suppress === 'true', actor: { kind: 'api_key', keyId: auth.keyId, keyName } });
        // Committed with its audit entry, whose audit.event message the delivery workers send now.
        deps.signals.outbox();
        return erased;
      },
    );
  };
}
