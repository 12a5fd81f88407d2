// Reading the audit log: one page of an organization's entries, newest first, filtered, as
// GET /api/v1/public/audit-events answers it and `dialtone audit list` prints it in direct
// database mode (the one place both read it, so they page alike).
import type { Connection } from '../store/engine/store.js';
import { selectAuditEvents, type AuditEventFilter } from '../store/statements/audit-statements.js';
import { auditEventView, type AuditEventView } from './audit-log.js';

export type { AuditEventFilter };

export interface AuditEventPage {
  data: AuditEventView[];
  /** The last entry's id when older entries follow (the next page's `beforeId`), else null. */
  next_after: number | null;
}

/** Up to `limit` entries matching `filter`, newest first, and whether older ones follow. */
export async function listAuditEvents(on: Connection, orgId: number, filter: AuditEventFilter, limit: number): Promise<AuditEventPage> {
  // One row more than the page: its presence says a next page exists.
  const rows = await selectAuditEvents(on, orgId, filter, limit + 1);
  const data = rows.slice(0, limit).map(auditEventView);
  const last = data[data.length - 1];
  return { data, next_after: rows.length > limit && last !== undefined ? last.id : null };
}
