// `dialtone audit list`: an organization's audit log, newest first, filtered and paged by id, as
// GET /api/v1/public/audit-events answers it (scope admin) and, in direct database mode, as
// audit/audit-events.ts reads it for that route: the same page either way.
import { InvalidArgumentError, type Command } from 'commander';
import type { components } from '@dialtone/client';
import { requireOrg } from '../action.js';
import { formatPage } from '../output.js';
import { positiveInt, rfc3339Time } from '../parsers.js';
import { answer, dual, orgOf } from '../remote.js';

type AuditEvent = components['schemas']['AuditEvent'];

/** Who may have acted (the API's AuditEvent.actor: kept in step by the type). */
const ACTORS = ['api_key', 'cli', 'system'] as const satisfies readonly AuditEvent['actor'][];
/** The API's largest page of entries (GET /audit-events). */
const PAGE_MAX = 100;

function actorKind(text: string): AuditEvent['actor'] {
  const kind = ACTORS.find((actor) => actor === text);
  if (kind === undefined) throw new InvalidArgumentError(`expected one of ${ACTORS.join(', ')}`);
  return kind;
}

interface AuditListOptions {
  org?: number;
  action?: string;
  targetType?: string;
  targetId?: string;
  actor?: AuditEvent['actor'];
  actorKey?: number;
  since?: string;
  until?: string;
  after?: number;
  limit: number;
}

/** Who acted, in one cell: the key by id and name, or cli, or system. */
const actorCell = (event: Pick<AuditEvent, 'actor' | 'actor_key_id' | 'actor_key_name'>) =>
  event.actor === 'api_key' ? `key ${event.actor_key_id ?? '?'}${event.actor_key_name !== null ? ` (${event.actor_key_name})` : ''}` : event.actor;

function pageOutput(page: { data: AuditEvent[]; next_after: number | null }) {
  const rows = page.data.map((event) => ({ id: event.id, created_at: event.created_at, action: event.action, actor: actorCell(event), target_type: event.target_type, target_id: event.target_id }));
  return { json: page, text: formatPage({ rows, next_after: page.next_after }, ['id', 'created_at', 'action', 'actor', 'target_type', 'target_id'], 'No audit events.', '(before and after of each: --json)') };
}

export function auditCommands(program: Command): void {
  const audit = program.command('audit').description("an organization's audit log: every change of how it is set up, who made it, before and after (docs/api.md, \"Audit log\")");
  audit
    .command('list')
    .description('list audit log entries, newest first, filtered by action, target, actor and time; --after pages (--json shows each entry\'s before and after, secrets redacted)')
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .option('--action <action>', 'only this action (api_key.created, workflow.published, organization.settings_updated, …)')
    .option('--target-type <type>', 'only changes of this kind of target (api_key, workflow, organization, …)')
    .option('--target-id <id>', 'only changes of this target (a key id, a workflow UUID, …)')
    .option('--actor <kind>', `only changes made by this kind of actor: ${ACTORS.join(', ')}`, actorKind)
    .option('--actor-key <key_id>', 'only changes made with this API key', positiveInt)
    .option('--since <time>', 'only changes at or after this RFC 3339 time', rfc3339Time)
    .option('--until <time>', 'only changes before this RFC 3339 time', rfc3339Time)
    .option('--after <id>', 'the page after this entry id (the previous page\'s next_after)', positiveInt)
    .option('--limit <n>', `entries per page, 1 to ${PAGE_MAX}`, positiveInt, 20)
    .action(
      dual(
        async (deps, opts: AuditListOptions) => {
          const orgId = orgOf(opts);
          await requireOrg(deps, orgId);
          // Loaded when the command runs (src/cli/README.md).
          const { listAuditEvents } = await import('../../audit/audit-events.js');
          const page = await listAuditEvents(
            deps.store,
            orgId,
            {
              ...(opts.action !== undefined ? { action: opts.action } : {}),
              ...(opts.targetType !== undefined ? { targetType: opts.targetType } : {}),
              ...(opts.targetId !== undefined ? { targetId: opts.targetId } : {}),
              ...(opts.actor !== undefined ? { actor: opts.actor } : {}),
              ...(opts.actorKey !== undefined ? { actorKeyId: opts.actorKey } : {}),
              ...(opts.since !== undefined ? { since: Date.parse(opts.since) } : {}),
              ...(opts.until !== undefined ? { until: Date.parse(opts.until) } : {}),
              ...(opts.after !== undefined ? { beforeId: opts.after } : {}),
            },
            Math.min(opts.limit, PAGE_MAX),
          );
          return pageOutput(page);
        },
        async (client, opts: AuditListOptions) => {
          const query = {
            ...(opts.action !== undefined ? { action: opts.action } : {}),
            ...(opts.targetType !== undefined ? { target_type: opts.targetType } : {}),
            ...(opts.targetId !== undefined ? { target_id: opts.targetId } : {}),
            ...(opts.actor !== undefined ? { actor: opts.actor } : {}),
            ...(opts.actorKey !== undefined ? { actor_key_id: String(opts.actorKey) } : {}),
            ...(opts.since !== undefined ? { since: opts.since } : {}),
            ...(opts.until !== undefined ? { until: opts.until } : {}),
            ...(opts.after !== undefined ? { after: String(opts.after) } : {}),
            limit: String(Math.min(opts.limit, PAGE_MAX)),
          };
          return pageOutput(await answer(client.api.GET('/api/v1/public/audit-events', { params: { query } })));
        },
      ),
    );
}
