// Statements on Idempotency-Key records (calls/idempotency.ts says how claims work). A record is
// one per organization and key; every change after its insertion is compare-and-set on its owner
// and state, so of two requests racing for one key exactly one wins.
import type { Selectable } from 'kysely';
import type { IdempotencyKeysTable, IdempotencyState } from '../schema/schema.js';
import { queryable, relaxed, type Connection } from '../engine/store.js';

/** A fresh in-flight claim: every column but the organization and the key. */
export interface InFlightClaimColumns {
  fingerprint: string;
  state: 'in_flight';
  owner: string;
  locked_until: number;
  response_status: null;
  response_body: null;
  run_id: null;
  created_at: number;
  expires_at: number;
}

/** Which record, and held by whom. */
export interface ClaimKey {
  orgId: number;
  key: string;
  owner: string;
}

/**
 * Inserts the claim unless the organization already has a record for the key; true when inserted.
 * Relaxed (Store.relaxed): a claim promises nothing to anyone, and the durable write that ends its
 * request (the run with its answer, or the claim's release) flushes it too; on SQLite it would
 * otherwise cost every such request a flush of its own.
 */
export async function insertIdempotencyClaim(on: Connection, orgId: number, key: string, claim: InFlightClaimColumns): Promise<boolean> {
  const inserted = await relaxed(on, (db) =>
    db
      .insertInto('idempotency_keys')
      .values({ org_id: orgId, key, ...claim })
      .onConflict((oc) => oc.columns(['org_id', 'key']).doNothing())
      .executeTakeFirst(),
  );
  return Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1;
}

export type IdempotencyRow = Selectable<IdempotencyKeysTable>;

export function selectIdempotencyRecord(on: Connection, orgId: number, key: string): Promise<IdempotencyRow | undefined> {
  return queryable(on).selectFrom('idempotency_keys').selectAll().where('org_id', '=', orgId).where('key', '=', key).executeTakeFirst();
}

/** Replaces a record with a fresh claim if it is still as it was read (same owner, same state); true when replaced. Relaxed, as a claim's insert is. */
export async function takeOverIdempotencyRecord(
  on: Connection,
  orgId: number,
  key: string,
  seen: { owner: string; state: IdempotencyState },
  claim: InFlightClaimColumns,
): Promise<boolean> {
  const taken = await relaxed(on, (db) =>
    db
      .updateTable('idempotency_keys')
      .set(claim)
      .where('org_id', '=', orgId)
      .where('key', '=', key)
      .where('owner', '=', seen.owner)
      .where('state', '=', seen.state)
      .executeTakeFirst(),
  );
  return Number(taken.numUpdatedRows) === 1;
}

/** Completes an in-flight claim with its response and run, if the claim is still this owner's; true when completed. */
export async function setIdempotencyCompleted(
  on: Connection,
  claim: ClaimKey,
  response: { status: number; body: string; runId: number | null },
  now: number,
): Promise<boolean> {
  const trx = queryable(on);
  const done = await trx
    .updateTable('idempotency_keys')
    .set({ state: 'completed', response_status: response.status, response_body: response.body, run_id: response.runId, locked_until: now })
    .where('org_id', '=', claim.orgId)
    .where('key', '=', claim.key)
    .where('owner', '=', claim.owner)
    .where('state', '=', 'in_flight')
    .executeTakeFirst();
  return Number(done.numUpdatedRows) === 1;
}

/** Deletes an in-flight claim if it is still this owner's. */
export async function deleteIdempotencyClaim(on: Connection, claim: ClaimKey): Promise<void> {
  await queryable(on)
    .deleteFrom('idempotency_keys')
    .where('org_id', '=', claim.orgId)
    .where('key', '=', claim.key)
    .where('owner', '=', claim.owner)
    .where('state', '=', 'in_flight')
    .execute();
}

/** Deletes records past their retention; returns how many. */
export async function deleteExpiredIdempotencyRecords(on: Connection, now: number): Promise<number> {
  const result = await queryable(on).deleteFrom('idempotency_keys').where('expires_at', '<=', now).executeTakeFirst();
  return Number(result.numDeletedRows);
}
