// Inserting a queued run and its first event: the one statement the request path writes, so the
// dialects part ways here. On PostgreSQL it is one round trip: the id is drawn from the table's
// sequence first so the name (which embeds it) is written with the row, the first event is
// inserted by the same statement, and dispatchers on other nodes are woken (pg_notify, delivered at
// commit); the event's insert fires the outbox trigger (migration 005), which writes the webhook
// deliveries of its `run.queued` message. On SQLite, in-process, the same work is a few statements in the caller's
// transaction.
import { sql, type Kysely } from 'kysely';
import { runMessageId } from '../webhooks/event-types.js';
import { appendRunEvents } from './run-event-outbox.js';
import type { Database, RunMode } from './schema.js';
import type { DialectName, Store } from './store.js';

/** What a new run's row holds besides its id, name, state and times. */
export interface NewRunRow {
  orgId: number;
  workflowId: number;
  definitionId: number;
  mode: RunMode;
  triggerUuid: string | null;
  phoneNumber: string;
  callerId: string | null;
  telephonyConfigurationId: number;
  /** The caller's initial_context exactly as received (serialized JSON), or null. */
  initialContextJson: string | null;
  /** When the run becomes due (queued outside calling hours); null when due at once. */
  scheduledFor: number | null;
  /** A campaign's attempt (the unique (contact_id, attempt) index refuses a second one); absent for a direct run. */
  campaignAttempt?: CampaignAttempt | undefined;
}

export interface CampaignAttempt {
  campaignId: number;
  contactId: number;
  attempt: number;
}

export interface QueuedRunValues extends NewRunRow {
  at: number;
  /** The `queued` event's data, serialized. */
  eventDataJson: string;
  /** The run's name is this prefix followed by its id (`WR-API-` → `WR-API-42`). */
  namePrefix: string;
  /** Channel announcing new queued runs to other nodes. */
  wakeChannel: string;
}

/** The new run's id and name, and how many webhook deliveries report its creation. */
export interface InsertedRun {
  id: number;
  name: string;
  deliveries: number;
}

export async function insertQueuedRun(db: Kysely<Database>, dialect: DialectName, run: QueuedRunValues): Promise<InsertedRun> {
  const campaign = run.campaignAttempt;
  if (dialect === 'postgres') {
    const result = await sql<{ id: number; name: string }>`
      with next as (select nextval(pg_get_serial_sequence('workflow_runs', 'id')) as id),
      run as (
        insert into workflow_runs (id, name, org_id, workflow_id, definition_id, mode, trigger_uuid, phone_number, caller_id,
          telephony_configuration_id, initial_context, scheduled_for, state, created_at, updated_at, campaign_id, contact_id, attempt)
        select id, ${run.namePrefix} || id, ${run.orgId}, ${run.workflowId}, ${run.definitionId}, ${run.mode}, ${run.triggerUuid}, ${run.phoneNumber},
          ${run.callerId}, ${run.telephonyConfigurationId}, ${run.initialContextJson}, ${run.scheduledFor}::bigint, 'queued', ${run.at}, ${run.at},
          ${campaign?.campaignId ?? null}::bigint, ${campaign?.contactId ?? null}::bigint, ${campaign?.attempt ?? null}::integer
        from next
        returning id, name
      ),
      event as (
        insert into run_events (run_id, seq, type, at, data)
        select id, 1, 'queued', ${run.at}, ${run.eventDataJson}::jsonb from run
      )
      select run.id, run.name, pg_notify(${run.wakeChannel}, '') from run`.execute(db);
    const row = result.rows[0];
    if (!row) throw new Error('inserting a run returned no row');
    // The event's insert fired the outbox trigger (migration 005): its deliveries are written and announced.
    return { id: Number(row.id), name: row.name, deliveries: 0 };
  }
  const inserted = await db
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
      scheduled_for: run.scheduledFor,
      state: 'queued',
      outcome_reason: null,
      provider_call_id: null,
      created_at: run.at,
      updated_at: run.at,
      ended_at: null,
      ...(campaign ? { campaign_id: campaign.campaignId, contact_id: campaign.contactId, attempt: campaign.attempt } : {}),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  const name = `${run.namePrefix}${inserted.id}`;
  await db.updateTable('workflow_runs').set({ name }).where('id', '=', inserted.id).execute();
  const deliveries = await appendRunEvents(db, 'sqlite', [
    {
      run: { ...inserted, name },
      type: 'queued',
      at: run.at,
      data: JSON.parse(run.eventDataJson) as Record<string, unknown>,
      webhookType: 'run.queued',
      messageId: runMessageId(inserted.id, inserted.last_event_seq),
    },
  ]);
  return { id: inserted.id, name, deliveries };
}

/**
 * A queued run with nothing else to commit beside it. On PostgreSQL the insert is one statement,
 * and a statement outside a transaction commits durably on its own, in one round trip; SQLite
 * needs its durable transaction to fsync.
 */
export async function insertQueuedRunDurably(store: Store, run: QueuedRunValues): Promise<InsertedRun> {
  if (store.dialect === 'postgres') return insertQueuedRun(store.db, store.dialect, run);
  return store.transaction('durable', (trx) => insertQueuedRun(trx, store.dialect, run));
}
