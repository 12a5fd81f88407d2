// Retention's statements (dispatch/retention.ts decides the windows and how many batches): which
// ended runs and campaigns are past their organization's window, and their deletion, one batch per
// transaction. Every batch deletes a run together with everything that names it, children first
// (the foreign keys point that way), so a reader sees the run whole or not at all: a node that dies
// mid-batch leaves its transaction rolled back, and the next pass takes the same runs again.
import { sql } from '../engine/kysely.js';
import { lockingFreeRows, lockingRows } from '../engine/row-locks.js';
import type { RunState } from '../schema/schema.js';
import { atomically, queryable, type Connection, type StoreTransaction } from '../engine/store.js';

/** The tables retention deletes from, as dialtone_retention_pruned_rows_total labels them. */
export const PRUNED_TABLES = [
  'workflow_runs',
  'run_events',
  'webhook_deliveries',
  'webhook_attempts',
  'webhook_delivery_events',
  'idempotency_keys',
  'campaigns',
  'campaign_contacts',
  'campaign_events',
] as const;
export type PrunedTable = (typeof PRUNED_TABLES)[number];
export type PrunedRows = Partial<Record<PrunedTable, number>>;

/** A batch's outcome: the rows deleted by table, or `busy` when another node holds retention's lock (PostgreSQL). */
export type BatchOutcome = { kind: 'pruned'; runs: number; rows: PrunedRows } | { kind: 'busy' };

/** Called after each table's delete of a batch, inside its transaction (tests interrupt a batch there). */
export type BatchStep = (table: PrunedTable) => void | Promise<void>;

/** Every organization with its own window (null: the configured default; 0: keep forever). */
export function selectRetentionWindows(on: Connection): Promise<{ id: number; retention_days: number | null }[]> {
  return queryable(on).selectFrom('organizations').select(['id', 'retention_days']).orderBy('id').execute();
}

/**
 * PostgreSQL: retention's transaction-scoped advisory lock, so one node prunes at a time (another
 * that finds it taken leaves the pass to the holder). SQLite has one node and one writer.
 */
async function takeRetentionLock(trx: StoreTransaction): Promise<boolean> {
  if (trx.dialect !== 'postgres') return true;
  const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_xact_lock(hashtextextended('dialtone.retention', 0)) as locked`.execute(trx);
  return rows[0]?.locked === true;
}

/**
 * Deletes up to `limit` runs of an organization that ended (in one of `ended`) before `cutoff`,
 * oldest end first, with their events, webhook deliveries (the outbox), the deliveries' attempts
 * and stream rows, and Idempotency-Key records, in one transaction. Never a run with a webhook
 * delivery still pending (it is skipped until the delivery is settled), nor a campaign attempt its
 * contact still waits on (in progress with it as its last run: the scheduler settles it first).
 */
export async function deleteEndedRunsBatch(
  on: Connection,
  batch: { orgId: number; cutoff: number; limit: number; ended: readonly RunState[]; step?: BatchStep },
): Promise<BatchOutcome> {
  // Relaxed: a deletion lost in a power cut is simply done again by the next pass.
  return atomically(on, 'relaxed', async (trx) => {
    if (!(await takeRetentionLock(trx))) return { kind: 'busy' };
    const picked = await lockingFreeRows(
      trx,
      trx
        .selectFrom('workflow_runs as r')
        .select('r.id')
        .where('r.org_id', '=', batch.orgId)
        .where('r.ended_at', 'is not', null)
        .where('r.ended_at', '<', batch.cutoff)
        .where('r.state', 'in', batch.ended)
        .where(({ not, exists, selectFrom }) =>
          not(exists(selectFrom('webhook_deliveries as d').select('d.id').whereRef('d.run_id', '=', 'r.id').where('d.status', '=', 'pending'))),
        )
        .where(({ or, eb, not, exists, selectFrom }) =>
          or([
            eb('r.campaign_id', 'is', null),
            not(
              exists(
                selectFrom('campaign_contacts as c').select('c.id').whereRef('c.campaign_id', '=', 'r.campaign_id').where('c.status', '=', 'in_progress').whereRef('c.last_run_id', '=', 'r.id'),
              ),
            ),
          ]),
        )
        .orderBy('r.ended_at')
        .limit(batch.limit),
    ).execute();
    // The picked runs' deliveries, locked (PostgreSQL) and read again: one requeued meanwhile
    // (`webhook retry`, which locks the delivery it requeues) is pending now and keeps its run, and
    // a requeue that comes after this waits for the batch, then finds the delivery gone.
    const deliveryStates = picked.length === 0 ? [] : await lockingRows(trx, trx.selectFrom('webhook_deliveries').select(['run_id', 'status']).where('run_id', 'in', picked.map((r) => r.id))).execute();
    const pending = new Set(deliveryStates.filter((d) => d.status === 'pending').map((d) => d.run_id));
    const ids = picked.map((r) => r.id).filter((id) => !pending.has(id));
    if (ids.length === 0) return { kind: 'pruned', runs: 0, rows: {} };
    const rows: PrunedRows = {};
    const done = async (table: PrunedTable, deleted: { numDeletedRows: bigint }) => {
      rows[table] = Number(deleted.numDeletedRows);
      await batch.step?.(table);
    };
    const deliveries = trx.selectFrom('webhook_deliveries').select('id').where('run_id', 'in', ids);
    await done('webhook_attempts', await trx.deleteFrom('webhook_attempts').where('delivery_id', 'in', deliveries).executeTakeFirstOrThrow());
    await done('webhook_delivery_events', await trx.deleteFrom('webhook_delivery_events').where('run_id', 'in', ids).executeTakeFirstOrThrow());
    await done('webhook_deliveries', await trx.deleteFrom('webhook_deliveries').where('run_id', 'in', ids).executeTakeFirstOrThrow());
    await done('run_events', await trx.deleteFrom('run_events').where('run_id', 'in', ids).executeTakeFirstOrThrow());
    await done('idempotency_keys', await trx.deleteFrom('idempotency_keys').where('run_id', 'in', ids).executeTakeFirstOrThrow());
    // The run's own guard again: what was picked is still ended before the cutoff.
    await done('workflow_runs', await trx.deleteFrom('workflow_runs').where('id', 'in', ids).where('ended_at', '<', batch.cutoff).executeTakeFirstOrThrow());
    return { kind: 'pruned', runs: rows.workflow_runs ?? 0, rows };
  });
}

/**
 * Deletes, in one transaction, up to `limit` contacts of one ended campaign (completed or canceled)
 * of the organization that finished before `cutoff` and has no run left (its last run pruned), and
 * the campaign itself, with its stream rows and pacing, once no contact is left. Returns the rows
 * deleted, nothing when no campaign qualifies.
 */
export async function deleteEndedCampaignBatch(on: Connection, batch: { orgId: number; cutoff: number; limit: number }): Promise<BatchOutcome> {
  return atomically(on, 'relaxed', async (trx) => {
    if (!(await takeRetentionLock(trx))) return { kind: 'busy' };
    const campaign = await lockingFreeRows(
      trx,
      trx
        .selectFrom('campaigns as c')
        .select('c.id')
        .where('c.org_id', '=', batch.orgId)
        .where('c.state', 'in', ['completed', 'canceled'])
        .where('c.finished_at', 'is not', null)
        .where('c.finished_at', '<', batch.cutoff)
        .where(({ not, exists, selectFrom }) => not(exists(selectFrom('workflow_runs as r').select('r.id').whereRef('r.campaign_id', '=', 'c.id'))))
        .orderBy('c.id')
        .limit(1),
    ).executeTakeFirst();
    if (!campaign) return { kind: 'pruned', runs: 0, rows: {} };
    const rows: PrunedRows = {};
    const contacts = await trx
      .deleteFrom('campaign_contacts')
      .where('id', 'in', trx.selectFrom('campaign_contacts').select('id').where('campaign_id', '=', campaign.id).orderBy('id').limit(batch.limit))
      .executeTakeFirstOrThrow();
    rows.campaign_contacts = Number(contacts.numDeletedRows);
    if (rows.campaign_contacts < batch.limit) {
      rows.campaign_events = Number((await trx.deleteFrom('campaign_events').where('campaign_id', '=', campaign.id).executeTakeFirstOrThrow()).numDeletedRows);
      await trx.deleteFrom('campaign_dial_pacing').where('campaign_id', '=', campaign.id).execute();
      rows.campaigns = Number((await trx.deleteFrom('campaigns').where('id', '=', campaign.id).executeTakeFirstOrThrow()).numDeletedRows);
    }
    return { kind: 'pruned', runs: 0, rows };
  });
}

/** When the organization's oldest stored ended run ended (null: none), read from migration 023's index. */
export async function selectOldestEndedAt(on: Connection, orgId: number): Promise<number | null> {
  const row = await queryable(on)
    .selectFrom('workflow_runs')
    .select('ended_at')
    .where('org_id', '=', orgId)
    .where('ended_at', 'is not', null)
    .orderBy('ended_at')
    .limit(1)
    .executeTakeFirst();
  return row?.ended_at ?? null;
}
