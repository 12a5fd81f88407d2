// The organization's audit log over the API (scope `admin`; docs/design.md, "Audit log"): newest
// first, filtered, paged by id. Entries are shown as audit/audit-log.ts wrote them, secrets already
// redacted there; the `audit.event` webhook message carries the same AuditEvent.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { listAuditEvents, type AuditEventFilter } from '../../audit/audit-events.js';
import type { Deps } from '../../deps.js';
import { authOf } from '../authenticate.js';
import { problemResponses } from '../problem-schemas.js';
import { requiresScope } from '../scopes.js';
import { StringEnum, withRateLimitHeaders } from '../schemas.js';
import { PageLimit } from '../paging.js';

const ID = '^[1-9][0-9]{0,14}$';

export const AuditEvent = Type.Object(
  {
    id: Type.Integer({ minimum: 1 }),
    action: Type.String({ description: '`<target>.<verb>`: api_key.created, api_key.revoked, workflow.created, workflow.draft_saved, workflow.published, workflow.archived, phone_number.erased, …', examples: ['workflow.published'] }),
    actor: StringEnum(['api_key', 'cli', 'system'] as const, { description: 'Who acted: an API key, the CLI on the database, or the service itself' }),
    actor_key_id: Type.Union([Type.Integer(), Type.Null()], { description: 'The key that acted; null unless actor is api_key' }),
    actor_key_name: Type.Union([Type.String(), Type.Null()], { description: 'The key\'s name when it acted' }),
    target_type: Type.String({ description: 'What changed: api_key, workflow, phone_number, …', examples: ['workflow'] }),
    target_id: Type.Union([Type.String(), Type.Null()], { description: 'Its id (a key\'s id, a workflow\'s UUID, a masked number)' }),
    before: Type.Unknown({ description: 'The target before the change, as the API shows it, secrets redacted; null for a creation' }),
    after: Type.Unknown({ description: 'The target after the change, secrets redacted; null for a deletion' }),
    created_at: Type.String({ format: 'date-time' }),
  },
  {
    $id: 'AuditEvent',
    title: 'AuditEvent',
    description: 'One change of how the organization is set up: who, what, before and after (secrets redacted), when',
    examples: [
      {
        id: 12,
        action: 'workflow.published',
        actor: 'api_key',
        actor_key_id: 3,
        actor_key_name: 'ops',
        target_type: 'workflow',
        target_id: '6f1c7a52-0c1e-4c8e-9f3a-2b7d9c0e4a11',
        before: { workflow_uuid: '6f1c7a52-0c1e-4c8e-9f3a-2b7d9c0e4a11', name: 'Reminder', status: 'active', published_version: 1, draft_version: 2 },
        after: { workflow_uuid: '6f1c7a52-0c1e-4c8e-9f3a-2b7d9c0e4a11', name: 'Reminder', status: 'active', published_version: 2, draft_version: null },
        created_at: '2026-11-27T17:20:00.000Z',
      },
    ],
  },
);

export function auditEventRoutes(deps: Deps): FastifyPluginAsync {
  return async (app) => {
    app.addSchema(AuditEvent);

    app.get(
      '/audit-events',
      {
        schema: {
          tags: ['Management'],
          security: requiresScope('admin'),
          operationId: 'listAuditEvents',
          summary: 'List Audit Events',
          description:
            'The organization\'s audit log, newest first: every change of how it is set up (keys, workflows, erasures, …), who made it, and the target before and after, secrets redacted. Filter by any of action, target, the key that acted and time; page with `after` (the `next_after` of the previous page).',
          querystring: Type.Object(
            {
              action: Type.Optional(Type.String({ maxLength: 100, description: 'Only this action', examples: ['api_key.created'] })),
              target_type: Type.Optional(Type.String({ maxLength: 100, description: 'Only changes of this kind of target', examples: ['workflow'] })),
              target_id: Type.Optional(Type.String({ maxLength: 200, description: 'Only changes of this target (with or without target_type)' })),
              actor_key_id: Type.Optional(Type.String({ pattern: ID, description: 'Only changes made with this API key' })),
              actor: Type.Optional(StringEnum(['api_key', 'cli', 'system'] as const, { description: 'Only changes made by this kind of actor' })),
              since: Type.Optional(Type.String({ format: 'date-time', description: 'Only changes at or after this time (RFC 3339)' })),
              until: Type.Optional(Type.String({ format: 'date-time', description: 'Only changes before this time (RFC 3339)' })),
              after: Type.Optional(Type.String({ pattern: ID, description: 'Return entries older than this entry id (the previous page\'s `next_after`)' })),
              limit: Type.Optional(PageLimit(20)),
            },
            { additionalProperties: false },
          ),
          response: {
            200: withRateLimitHeaders(
              Type.Object({
                data: Type.Array(Type.Ref('AuditEvent')),
                next_after: Type.Union([Type.Integer(), Type.Null()], { description: 'Pass as `after` for older entries; null on the last page' }),
              }),
            ),
            ...problemResponses(['missing_api_key', 'invalid_api_key', 'rate_limited', 'validation_failed']),
          },
        },
      },
      async (request) => {
        const query = request.query as { action?: string; target_type?: string; target_id?: string; actor_key_id?: string; actor?: 'api_key' | 'cli' | 'system'; since?: string; until?: string; after?: string; limit?: string };
        const limit = Number(query.limit ?? 20);
        const filter: AuditEventFilter = {
          ...(query.action !== undefined ? { action: query.action } : {}),
          ...(query.target_type !== undefined ? { targetType: query.target_type } : {}),
          ...(query.target_id !== undefined ? { targetId: query.target_id } : {}),
          ...(query.actor_key_id !== undefined ? { actorKeyId: Number(query.actor_key_id) } : {}),
          ...(query.actor !== undefined ? { actor: query.actor } : {}),
          ...(query.since !== undefined ? { since: Date.parse(query.since) } : {}),
          ...(query.until !== undefined ? { until: Date.parse(query.until) } : {}),
          ...(query.after !== undefined ? { beforeId: Number(query.after) } : {}),
        };
        return listAuditEvents(deps.store, authOf(request).orgId, filter, limit);
      },
    );
  };
}
