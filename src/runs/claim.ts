// The claim's writes: queued runs of one configuration become `dialing`, leased to a node, each
// with its event, inside the transaction of the caller (dispatch/claim-runs.ts), which decides
// how many may be claimed (pacing, concurrency) and commits. FOR UPDATE SKIP LOCKED on PostgreSQL
// lets several nodes claim at once without taking the same runs.
import type { Transaction } from 'kysely';
import { lockingFreeRows } from '../store/row-locks.js';
import type { Database, WorkflowRunRow } from '../store/schema.js';
import type { Store } from '../store/store.js';

export interface ClaimWrite {
  configurationId: number;
  /** Most runs to claim, oldest first. */
  limit: number;
  nodeId: string;
  now: number;
  leaseMs: number;
}

export type ClaimedRow = Pick<WorkflowRunRow, 'id' | 'created_at' | 'phone_number' | 'caller_id' | 'telephony_configuration_id' | 'mode'>;

/** Claims up to `limit` queued runs; returns them in id order (empty when none is queued). */
export async function claimQueuedRuns(store: Pick<Store, 'dialect'>, trx: Transaction<Database>, claim: ClaimWrite): Promise<ClaimedRow[]> {
  const candidates = await lockingFreeRows(
    store,
    trx.selectFrom('workflow_runs').select('id').where('telephony_configuration_id', '=', claim.configurationId).where('state', '=', 'queued').orderBy('id').limit(claim.limit),
  ).execute();
  if (candidates.length === 0) return [];

  const deadline = claim.now + claim.leaseMs;
  const rows = await trx
    .updateTable('workflow_runs')
    .set((eb) => ({
      state: 'dialing',
      lease_owner: claim.nodeId,
      lease_expires_at: deadline,
      deadline_at: deadline,
      claimed_at: claim.now,
      updated_at: claim.now,
      last_event_seq: eb('last_event_seq', '+', 1),
    }))
    .where('id', 'in', candidates.map((c) => c.id))
    .where('state', '=', 'queued')
    .returning(['id', 'created_at', 'phone_number', 'caller_id', 'telephony_configuration_id', 'mode', 'last_event_seq'])
    .execute();
  if (rows.length === 0) return [];
  rows.sort((a, b) => a.id - b.id);
  await trx
    .insertInto('run_events')
    .values(rows.map((r) => ({ run_id: r.id, seq: r.last_event_seq, type: 'dialing', at: claim.now, data: JSON.stringify({ node: claim.nodeId }) })))
    .execute();
  return rows.map(({ last_event_seq: _seq, ...run }) => run);
}
