// Creating a run is enqueuing it: one transaction inserts the run in state `queued` (the runs table
// is the dispatcher's queue) and its first event. When it commits, the run exists durably and
// will be dialed; nothing can be lost between a database and a separate queue.
import type { Transaction } from 'kysely';
import type { Database, RunMode } from '../store/schema.js';
import type { Store } from '../store/store.js';
import { enforceQueueCap, type QueueCap } from './queue-cap.js';

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
  /** Checked exactly inside the creating transaction (runs/queue-cap.ts): given when the organization is near its cap. */
  queueCap?: QueueCap;
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
