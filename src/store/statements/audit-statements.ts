// Statements on the audit log (migration 025's audit_events): an entry is inserted inside the
// transaction of the change it records, and read back an organization's page at a time, newest
// first, by migration 025's (org_id, id) index, or by one target's entries, migration 027's
// (org_id, target_type, target_id, id).
import type { AuditActorKind } from '../schema/schema.js';
import { queryable, type Connection } from '../engine/store.js';

export interface NewAuditEventRow {
  org_id: number;
  actor: AuditActorKind;
  actor_key_id: number | null;
  actor_key_name: string | null;
  action: string;
  target_type: string;
  target_id: string | null;
  before: string | null;
  after: string | null;
  created_at: number;
}

/** Inserts an entry and returns its id: in the transaction of the change it records, the one the caller hands it. */
export async function insertAuditEvent(on: Connection, row: NewAuditEventRow): Promise<number> {
  const inserted = await queryable(on).insertInto('audit_events').values(row).returning('id').executeTakeFirstOrThrow();
  return Number(inserted.id);
}

export interface AuditEventFilter {
  action?: string;
  /** What changed: its type (`api_key`, `workflow`, …), and its id. */
  targetType?: string;
  targetId?: string;
  /** An API key's id: the entries it made. */
  actorKeyId?: number;
  /** Who acted: 'cli' or 'system' for the entries made without a key, 'api_key' for those made with one. */
  actor?: AuditActorKind;
  /** created_at at or after (ms). */
  since?: number;
  /** created_at before (ms). */
  until?: number;
  /** Entries older than this id (the previous page's last). */
  beforeId?: number;
}

/** One page of an organization's entries, newest first; `limit` rows at most. */
export function selectAuditEvents(on: Connection, orgId: number, filter: AuditEventFilter, limit: number) {
  let query = queryable(on).selectFrom('audit_events').selectAll().where('org_id', '=', orgId);
  if (filter.action !== undefined) query = query.where('action', '=', filter.action);
  if (filter.targetType !== undefined) query = query.where('target_type', '=', filter.targetType);
  if (filter.targetId !== undefined) query = query.where('target_id', '=', filter.targetId);
  if (filter.actorKeyId !== undefined) query = query.where('actor', '=', 'api_key').where('actor_key_id', '=', filter.actorKeyId);
  if (filter.actor !== undefined) query = query.where('actor', '=', filter.actor);
  if (filter.since !== undefined) query = query.where('created_at', '>=', filter.since);
  if (filter.until !== undefined) query = query.where('created_at', '<', filter.until);
  if (filter.beforeId !== undefined) query = query.where('id', '<', filter.beforeId);
  return query.orderBy('id', 'desc').limit(limit).execute();
}
