// Erasure of one phone number from an organization's data (erasure/erase-number.ts decides and
// documents what; docs/operations.md, "Erasure", lists every place a number can live). Every
// statement runs in the caller's transaction, so an erasure is whole or nothing. A row is kept and
// its personal fields overwritten rather than deleted: the run's id, name, state and times stay, so
// counts, campaign progress and the event stream's order are unchanged. Handed the store rather than
// a transaction, eraseRuns opens one of its own (atomically), so its tables still change together.
import { sql } from '../engine/kysely.js';
import { lockingRows } from '../engine/row-locks.js';
import { atomically, queryable, type Connection } from '../engine/store.js';
import type { RunState } from '../schema/schema.js';

/** What an erased run's phone_number becomes: no phone number, nor a SIP URI, so nothing matches or dials it. */
export const ERASED_NUMBER = 'erased';
/** What an erased run event's data becomes. */
const ERASED_DATA = JSON.stringify({ erased: true });
/** Ids per `in (…)` list: far below both stores' parameter limits (SQLite 32,766). */
const ID_CHUNK = 500;

export interface ErasureCounts {
  workflow_runs: number;
  run_events: number;
  webhook_deliveries: number;
  webhook_attempts: number;
  campaign_contacts: number;
  idempotency_keys: number;
  suppressions: number;
}

export interface RunOfNumber {
  id: number;
  name: string | null;
  state: RunState;
}

function chunks<T>(items: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let start = 0; start < items.length; start += ID_CHUNK) out.push(items.slice(start, start + ID_CHUNK));
  return out;
}

const affected = (result: { numUpdatedRows?: bigint; numInsertedOrUpdatedRows?: bigint } | undefined): number =>
  Number(result?.numUpdatedRows ?? result?.numInsertedOrUpdatedRows ?? 0);

/**
 * The organization's runs to this number, locked on PostgreSQL (FOR UPDATE) so that none of them
 * changes under the caller's feet; SQLite's one writer holds the whole transaction already.
 */
export function selectRunsOfNumber(on: Connection, orgId: number, phoneNumber: string): Promise<RunOfNumber[]> {
  return lockingRows(on, queryable(on).selectFrom('workflow_runs').select(['id', 'name', 'state']).where('org_id', '=', orgId).where('phone_number', '=', phoneNumber).orderBy('id')).execute();
}

/** A delivery's payload (`{ run, event }`, run-event-outbox.ts) with the run's personal fields and the event's data erased. */
function erasedPayload(payload: string): string {
  let message: { run?: Record<string, unknown>; event?: Record<string, unknown> } & Record<string, unknown>;
  try {
    message = JSON.parse(payload) as typeof message;
  } catch {
    // Not JSON (never written so): nothing of it can be kept safely.
    return ERASED_DATA;
  }
  if (message.run && typeof message.run === 'object') message.run = { ...message.run, phone_number: ERASED_NUMBER, initial_context: null, result: null };
  if (message.event && typeof message.event === 'object') message.event = { ...message.event, data: { erased: true } };
  return JSON.stringify(message);
}

/**
 * Erases the runs' personal data and everything written from it: the runs' number, initial_context
 * and result; their events' data; their webhook deliveries' payloads (pending ones included, which
 * then send the erased message) and the bodies their receivers answered (which may echo it); the
 * fingerprint of the Idempotency-Key records that created them (a hash of the request body, number
 * included: a number's hash is easily reversed). Counts per table.
 */
export function eraseRuns(on: Connection, runIds: readonly number[]): Promise<Omit<ErasureCounts, 'campaign_contacts' | 'suppressions'>> {
  return atomically(on, 'durable', async (trx) => {
    const counts = { workflow_runs: 0, run_events: 0, webhook_deliveries: 0, webhook_attempts: 0, idempotency_keys: 0 };
    for (const ids of chunks(runIds)) {
      counts.run_events += affected(await trx.updateTable('run_events').set({ data: ERASED_DATA }).where('run_id', 'in', ids).executeTakeFirst());
      const deliveries = await trx.selectFrom('webhook_deliveries').select(['id', 'payload']).where('run_id', 'in', ids).orderBy('id').execute();
      for (const delivery of deliveries) {
        await trx.updateTable('webhook_deliveries').set({ payload: erasedPayload(delivery.payload) }).where('id', '=', delivery.id).execute();
      }
      counts.webhook_deliveries += deliveries.length;
      for (const deliveryIds of chunks(deliveries.map((d) => d.id))) {
        counts.webhook_attempts += affected(await trx.updateTable('webhook_attempts').set({ response_body: null }).where('delivery_id', 'in', deliveryIds).where('response_body', 'is not', null).executeTakeFirst());
      }
      counts.idempotency_keys += affected(await trx.updateTable('idempotency_keys').set({ fingerprint: ERASED_NUMBER }).where('run_id', 'in', ids).executeTakeFirst());
      counts.workflow_runs += affected(await trx.updateTable('workflow_runs').set({ phone_number: ERASED_NUMBER, initial_context: null, result: null }).where('id', 'in', ids).executeTakeFirst());
    }
    return counts;
  });
}

/**
 * Erases the organization's campaign contacts with this number: the number (made unique per
 * campaign, `erased:<id>`, as the campaign's unique key asks), initial_context and time zone. A
 * contact still due (pending, or in progress with its run ended) is canceled, so the scheduler
 * never calls it again.
 */
export async function eraseContacts(on: Connection, orgId: number, phoneNumber: string, now: number): Promise<number> {
  const db = queryable(on);
  const campaigns = db.selectFrom('campaigns').select('id').where('org_id', '=', orgId);
  const result = await db
    .updateTable('campaign_contacts')
    .set({
      phone_number: sql<string>`${`${ERASED_NUMBER}:`} || cast(id as text)`,
      initial_context: null,
      timezone: null,
      status: sql`case when status in ('pending', 'in_progress') then 'canceled' else status end`,
      updated_at: now,
    })
    .where('campaign_id', 'in', campaigns)
    .where('phone_number', '=', phoneNumber)
    .executeTakeFirst();
  return affected(result);
}

/**
 * Suppresses the number for good: a new suppression, or an existing one made permanent (its reason
 * kept). 1 when something changed, 0 when it was already suppressed for good.
 */
export async function suppressForGood(on: Connection, orgId: number, phoneNumber: string, reason: string, now: number): Promise<number> {
  const result = await queryable(on)
    .insertInto('suppressions')
    .values({ org_id: orgId, phone_number: phoneNumber, reason, expires_at: null, created_at: now, updated_at: now })
    .onConflict((oc) => oc.columns(['org_id', 'phone_number']).doUpdateSet({ expires_at: null, updated_at: now }).where('suppressions.expires_at', 'is not', null))
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0);
}
