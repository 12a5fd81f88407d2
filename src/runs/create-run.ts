// Creating a run is enqueuing it: one transaction inserts the run in state `queued` (the runs table
// is the dispatcher's queue) and its first event. When it commits, the run exists durably and
// will be dialed; nothing can be lost between a database and a separate queue.
import type { RunMode } from '../store/schema/schema.js';
import type { Store, StoreTransaction } from '../store/engine/store.js';
import { insertQueuedRun, insertQueuedRunDurably, type InsertedRun, type InsertGuards, type InsertRefused, type NewRunRow } from '../store/statements/insert-run.js';
import { enforceQueueCap, type QueueCap } from './queue-cap.js';

export interface NewRun extends NewRunRow {
  /** Recorded in the `queued` event. */
  definitionVersion: number;
}

export interface CreatedRun {
  id: number;
  name: string;
  state: 'queued';
}

/** A created run, and how many webhook deliveries report it (the caller wakes the delivery worker). */
export interface CreateRunResult extends CreatedRun {
  webhookDeliveries: number;
}

/** The store notification channel that announces new queued runs. */
export const WORK_CHANNEL = 'dialtone_work';

const withState = ({ id, name, deliveries }: InsertedRun): CreateRunResult => ({ id, name, state: 'queued', webhookDeliveries: deliveries });

function runNamePrefix(mode: RunMode): string {
  return mode === 'test' ? 'WR-TEST-' : 'WR-API-';
}

export interface CreateRunOptions {
  /** Checked exactly inside the creating transaction (runs/queue-cap.ts): given when the organization is near its cap. */
  queueCap?: QueueCap;
  /**
   * The calling policy's checks that the insert itself makes exactly (the suppression list, the
   * per-number cap: admission/policy.ts); when one refuses, nothing is created and the
   * refusal is thrown.
   */
  checks?: InsertChecks;
  /** Runs inside the creating transaction before the insert, and may refuse it by throwing (a campaign's attempt: campaigns/scheduler.ts). */
  beforeInsert?: (trx: StoreTransaction) => Promise<void>;
  /** Runs inside the creating transaction (the Idempotency-Key record commits with the run). */
  onCreated?: (trx: StoreTransaction, run: CreatedRun) => Promise<void>;
}

/** Checks for the insert to make, and the error a refusal becomes. */
export interface InsertChecks {
  guards: InsertGuards;
  refusal(refused: InsertRefused): Error;
}

export async function createRun(store: Store, run: NewRun, now: number, options: CreateRunOptions = {}): Promise<CreateRunResult> {
  const campaign = run.campaignAttempt;
  const values = {
    ...run,
    at: now,
    eventDataJson: JSON.stringify({
      mode: run.mode,
      definition_version: run.definitionVersion,
      telephony_configuration_id: run.telephonyConfigurationId,
      ...(run.scheduledFor !== null ? { scheduled_for: new Date(run.scheduledFor).toISOString() } : {}),
      ...(campaign ? { campaign_id: campaign.campaignId, contact_id: campaign.contactId, attempt: campaign.attempt } : {}),
    }),
    namePrefix: runNamePrefix(run.mode),
  };
  const created = (inserted: InsertedRun | InsertRefused): InsertedRun => {
    if ('refused' in inserted) throw options.checks?.refusal(inserted) ?? new Error(`the insert refused (${inserted.refused}) without checks to make`);
    return inserted;
  };
  const guard = options.checks?.guards;
  // Nothing else to write in the same transaction: the store inserts it as cheaply as it can (one
  // statement on PostgreSQL, checks included).
  const result: CreateRunResult =
    !options.queueCap && !options.beforeInsert && !options.onCreated
      ? withState(created(await insertQueuedRunDurably(store, values, guard)))
      : await store.transaction('durable', async (trx) => {
          if (options.queueCap) await enforceQueueCap(trx, run.orgId, options.queueCap);
          await options.beforeInsert?.(trx);
          const queued = withState(created(await insertQueuedRun(trx, values, guard)));
          await options.onCreated?.(trx, queued);
          return queued;
        });
  // Committed: dispatchers on other nodes are woken (PostgreSQL; same-node ones are signalled
  // in-process by the caller). A deferred run is not due; their polls find it when it is.
  if (run.scheduledFor === null) store.announce(WORK_CHANNEL);
  return result;
}
