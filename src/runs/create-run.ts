// Creating a run is enqueuing it: one transaction inserts the run in state `queued` (the runs table
// is the dispatcher's queue) and its first event. When it commits, the run exists durably and
// will be dialed; nothing can be lost between a database and a separate queue.
import type { Transaction } from 'kysely';
import { DialtoneError } from '../errors.js';
import type { Database, RunMode } from '../store/schema.js';
import type { Store } from '../store/store.js';

export interface NewRun {
  orgId: number;
  workflowId: number;
  definitionId: number;
  definitionVersion: number;
  mode: RunMode;
  triggerUuid: string | null;
  phoneNumber: string;
  callerId: string | null;
  telephonyConfigurationId: number;
  /** The caller's initial_context exactly as received (serialized JSON), or null. */
  initialContextJson: string | null;
}

export interface CreatedRun {
  id: number;
  name: string;
  state: 'queued';
}

/** The store notification channel that announces new queued runs. */
export const WORK_CHANNEL = 'dialtone_work';

export function runName(mode: RunMode, id: number): string {
  return `${mode === 'test' ? 'WR-TEST' : 'WR-API'}-${id}`;
}

export interface CreateRunOptions {
  /**
   * The organization's queue cap: the run is refused (429 queue_full) when the organization already
   * has this many queued runs. `callsPerSecond` (the route's pacing) estimates when a slot opens.
   */
  queueCap?: { maxQueued: number; callsPerSecond: number; lockMargin: number };
  /** Runs inside the creating transaction (the Idempotency-Key record commits with the run). */
  onCreated?: (trx: Transaction<Database>, run: CreatedRun) => Promise<void>;
}

export async function createRun(store: Store, run: NewRun, now: number, options: CreateRunOptions = {}): Promise<CreatedRun> {
  return store.transaction('durable', async (trx) => {
    if (options.queueCap) await enforceQueueCap(store, trx, run.orgId, options.queueCap);
    const { id } = await trx
      .insertInto('workflow_runs')
      .values({
        name: null,
        org_id: run.orgId,
        workflow_id: run.workflowId,
        definition_id: run.definitionId,
        mode: run.mode,
        trigger_uuid: run.triggerUuid,
        phone_number: run.phoneNumber,
        caller_id: run.callerId,
        telephony_configuration_id: run.telephonyConfigurationId,
        initial_context: run.initialContextJson,
        state: 'queued',
        outcome_reason: null,
        provider_call_id: null,
        created_at: now,
        updated_at: now,
        ended_at: null,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    // The name embeds the id, which only exists after the insert; both happen before commit.
    const name = runName(run.mode, id);
    await trx.updateTable('workflow_runs').set({ name }).where('id', '=', id).execute();
    // Wakes dispatchers on other nodes as this commits (PostgreSQL); same-node ones are signalled in-process.
    await store.notify(trx, WORK_CHANNEL);
    await trx
      .insertInto('run_events')
      .values({
        run_id: id,
        seq: 1,
        type: 'queued',
        at: now,
        data: JSON.stringify({ mode: run.mode, definition_version: run.definitionVersion, telephony_configuration_id: run.telephonyConfigurationId }),
      })
      .execute();
    const created = { id, name, state: 'queued' as const };
    await options.onCreated?.(trx, created);
    return created;
  });
}

/**
 * Counts the organization's queued runs inside the creating transaction. SQLite runs one write
 * transaction at a time, so the count cannot go stale before the insert. On PostgreSQL, locking the
 * organization's row makes the count exact but serializes the organization's run creation for the
 * length of a durable commit, which caps its request rate; so the lock is taken only once the
 * queue is within `lockMargin` of the cap. Below that, concurrent creations could overshoot only
 * if more than `lockMargin` of them were in flight at once for one organization.
 */
async function enforceQueueCap(store: Store, trx: Transaction<Database>, orgId: number, cap: NonNullable<CreateRunOptions['queueCap']>): Promise<void> {
  const countQueued = async () => {
    const { queued } = await trx
      .selectFrom('workflow_runs')
      .select((eb) => eb.fn.countAll<number | string>().as('queued'))
      .where('org_id', '=', orgId)
      .where('state', '=', 'queued')
      .executeTakeFirstOrThrow();
    return Number(queued);
  };
  let count = await countQueued();
  if (store.dialect === 'postgres' && count >= cap.maxQueued - cap.lockMargin) {
    await trx.selectFrom('organizations').select('id').where('id', '=', orgId).forUpdate().execute();
    count = await countQueued();
  }
  if (count >= cap.maxQueued) {
    // Queued runs leave the queue at the route's pacing rate: this is when the first slot opens.
    const retryAfterSeconds = Math.min(3_600, Math.max(1, Math.ceil((count - cap.maxQueued + 1) / Math.max(1, cap.callsPerSecond))));
    throw new DialtoneError('queue_full', `The organization has ${count} runs queued; the limit is ${cap.maxQueued}. Retry after ${retryAfterSeconds} s.`, {
      retryAfterSeconds,
      extra: { queued_runs: count, max_queued_runs: cap.maxQueued },
    });
  }
}
