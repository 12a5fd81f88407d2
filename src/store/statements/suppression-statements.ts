// Statements on organizations' suppression (do-not-call) lists, and the per-number cap's count.
// A suppression is active while `expires_at` is null or still ahead; an expired row stays until it
// is replaced or deleted, and suppresses nothing.
import type { ExpressionBuilder, OnConflictBuilder } from 'kysely';
import type { Database, SuppressionRow } from '../schema/schema.js';
import { executeCompiled } from '../engine/compiled-statements.js';
import { explainQuery, notIndexed } from '../engine/query-plans.js';
import { queryable, type Connection } from '../engine/store.js';

export interface SuppressionValues {
  orgId: number;
  phoneNumber: string;
  reason: string | null;
  expiresAt: number | null;
}

/** Rows per INSERT of a bulk load: 6 parameters each stays far below both stores' limits (SQLite 32,766). */
export const SUPPRESSION_INSERT_CHUNK = 1_000;

function active(now: number) {
  return (eb: ExpressionBuilder<Database, 'suppressions'>) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]);
}

/** A suppression of a number the organization already has replaces its reason and expiry; created_at is kept. */
function replacingSuppression(oc: OnConflictBuilder<Database, 'suppressions'>) {
  return oc.columns(['org_id', 'phone_number']).doUpdateSet((eb) => ({
    reason: eb.ref('excluded.reason'),
    expires_at: eb.ref('excluded.expires_at'),
    updated_at: eb.ref('excluded.updated_at'),
  }));
}

/** Inserts or replaces suppressions (same organization and number: the reason and expiry are replaced, created_at kept). */
export async function upsertSuppressions(on: Connection, rows: readonly SuppressionValues[], now: number): Promise<void> {
  const db = queryable(on);
  for (let start = 0; start < rows.length; start += SUPPRESSION_INSERT_CHUNK) {
    const chunk = rows.slice(start, start + SUPPRESSION_INSERT_CHUNK);
    await db
      .insertInto('suppressions')
      .values(chunk.map((r) => ({ org_id: r.orgId, phone_number: r.phoneNumber, reason: r.reason, expires_at: r.expiresAt, created_at: now, updated_at: now })))
      .onConflict(replacingSuppression)
      .execute();
  }
}

/** Inserts or replaces one suppression, as upsertSuppressions does, and returns its row as written. */
export function upsertSuppression(on: Connection, row: SuppressionValues, now: number): Promise<SuppressionRow> {
  return queryable(on)
    .insertInto('suppressions')
    .values({ org_id: row.orgId, phone_number: row.phoneNumber, reason: row.reason, expires_at: row.expiresAt, created_at: now, updated_at: now })
    .onConflict(replacingSuppression)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function selectSuppression(on: Connection, orgId: number, phoneNumber: string): Promise<SuppressionRow | undefined> {
  return queryable(on).selectFrom('suppressions').selectAll().where('org_id', '=', orgId).where('phone_number', '=', phoneNumber).executeTakeFirst();
}

/** True when the organization had this suppression (deleted now). */
export async function deleteSuppression(on: Connection, orgId: number, phoneNumber: string): Promise<boolean> {
  const result = await queryable(on).deleteFrom('suppressions').where('org_id', '=', orgId).where('phone_number', '=', phoneNumber).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/** Up to `limit` of an organization's suppressions (expired ones too), by number, after `after`. */
export function selectSuppressionPage(on: Connection, orgId: number, after: string | undefined, limit: number): Promise<SuppressionRow[]> {
  return queryable(on)
    .selectFrom('suppressions')
    .selectAll()
    .where('org_id', '=', orgId)
    .$if(after !== undefined, (q) => q.where('phone_number', '>', after as string))
    .orderBy('phone_number')
    .limit(limit)
    .execute();
}

/** The active suppression of one number, if any (the request-time check: one primary-key lookup, from its compiled template). */
export async function selectActiveSuppression(
  on: Connection,
  orgId: number,
  phoneNumber: string,
  now: number,
): Promise<Pick<SuppressionRow, 'reason' | 'expires_at'> | undefined> {
  const { rows } = await executeCompiled(queryable(on), on.dialect, 'suppression-statements:active', { orgId, phoneNumber, now }, (p) =>
    queryable(on).selectFrom('suppressions').select(['reason', 'expires_at']).where('org_id', '=', p('orgId')).where('phone_number', '=', p('phoneNumber')).where(active(p('now'))),
  );
  return rows[0];
}

/** Which of these numbers the organization suppresses now: one statement for a whole claim batch. */
export async function selectSuppressedAmong(on: Connection, orgId: number, phoneNumbers: readonly string[], now: number): Promise<Set<string>> {
  if (phoneNumbers.length === 0) return new Set();
  const rows = await queryable(on)
    .selectFrom('suppressions')
    .select('phone_number')
    .where('org_id', '=', orgId)
    .where('phone_number', 'in', [...new Set(phoneNumbers)])
    .where(active(now))
    .execute();
  return new Set(rows.map((r) => r.phone_number));
}

function capOpeningQuery(on: Connection, orgId: number, phoneNumber: string, since: number, maxCalls: number) {
  return queryable(on)
    .selectFrom('workflow_runs')
    .select('created_at')
    .where('org_id', '=', orgId)
    .where('phone_number', '=', phoneNumber)
    // A filter, not an index range: on SQLite the (org_id, created_at) index would otherwise win and
    // every request would walk all of the organization's runs in the window (query-plans.ts).
    .where(notIndexed('created_at'), '>', since)
    .orderBy('id', 'desc')
    .limit(maxCalls);
}

/**
 * When a place under the per-number cap opens: the created_at of the `maxCalls`-th newest run of
 * the organization to this number created after `since`, or null while fewer are in the window.
 * Reads the runs as they are, taking no lock (a check that creates nothing).
 * Walks migration 009's (org_id, phone_number, id) index from the newest run and stops after
 * `maxCalls` matches: ids follow creation order, so the newest by id are the newest by time.
 */
export async function selectCapOpening(on: Connection, orgId: number, phoneNumber: string, since: number, maxCalls: number): Promise<number | null> {
  const rows = await capOpeningQuery(on, orgId, phoneNumber, since, maxCalls).execute();
  if (rows.length < maxCalls) return null;
  return Math.min(...rows.map((r) => Number(r.created_at)));
}

/** The plan of selectCapOpening's statement, as text (a test checks the number's index serves it). */
export function explainCapOpening(on: Connection, orgId: number, phoneNumber: string, since: number, maxCalls: number): Promise<string> {
  return explainQuery(on, capOpeningQuery(on, orgId, phoneNumber, since, maxCalls));
}

