// The dispatcher's statements on telephony configurations (pacing state, its campaigns' dial
// pacing, live-call counts, which have work) and on dispatcher nodes (heartbeats, lost nodes). dispatch/ decides what to claim and
// when; these say how, in SQL.
import { lockingRows } from '../engine/row-locks.js';
import type { ProviderName, RunState, TelephonyConfigurationRow } from '../schema/schema.js';
import { queryable, type Connection } from '../engine/store.js';

/** An active configuration, locked for the claim's transaction (its pacing state is taken under the lock). */
export function selectConfigurationForClaim(on: Connection, configurationId: number): Promise<TelephonyConfigurationRow | undefined> {
  const trx = queryable(on);
  return lockingRows(on, trx.selectFrom('telephony_configurations').selectAll().where('id', '=', configurationId).where('status', '=', 'active')).executeTakeFirst();
}

/** A configuration's pacing, locked until the transaction ends. */
export function selectPacingForUpdate(on: Connection, configurationId: number) {
  const trx = queryable(on);
  return lockingRows(on, trx.selectFrom('telephony_configurations').select(['calls_per_second', 'pacing_next_at']).where('id', '=', configurationId)).executeTakeFirstOrThrow();
}

export async function setPacingNextAt(on: Connection, configurationId: number, nextAt: number): Promise<void> {
  const trx = queryable(on);
  await trx.updateTable('telephony_configurations').set({ pacing_next_at: nextAt }).where('id', '=', configurationId).execute();
}

/**
 * The paced campaigns of a configuration whose next dial slot (migration 014) is after `after`, with
 * their rate. Read inside a claim or re-slot, under the configuration's row lock, which every
 * writer of these rows holds (a campaign dials only its own route).
 */
export function selectCampaignDialPacing(on: Connection, configurationId: number, after: number): Promise<{ campaign_id: number; next_at: number; calls_per_second: number | null }[]> {
  const trx = queryable(on);
  return trx
    .selectFrom('campaign_dial_pacing as p')
    .innerJoin('campaigns as c', 'c.id', 'p.campaign_id')
    .select(['p.campaign_id', 'p.next_at', 'c.calls_per_second'])
    .where('p.telephony_configuration_id', '=', configurationId)
    .where('p.next_at', '>', after)
    .execute();
}

/** Moves on the next dial slot of these campaigns of a configuration (under its row lock, like the read). */
export async function setCampaignDialPacing(on: Connection, configurationId: number, next: readonly { campaignId: number; nextAt: number }[]): Promise<void> {
  const trx = queryable(on);
  if (next.length === 0) return;
  await trx
    .insertInto('campaign_dial_pacing')
    .values(next.map((n) => ({ campaign_id: n.campaignId, telephony_configuration_id: configurationId, next_at: n.nextAt })))
    .onConflict((oc) => oc.column('campaign_id').doUpdateSet((eb) => ({ next_at: eb.ref('excluded.next_at') })))
    .execute();
}

/** Runs of a configuration that hold a line (live, with a deadline). */
export async function countLiveRuns(on: Connection, configurationId: number, live: readonly RunState[]): Promise<number> {
  const trx = queryable(on);
  const row = await trx
    .selectFrom('workflow_runs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('telephony_configuration_id', '=', configurationId)
    .where('deadline_at', 'is not', null)
    .where('state', 'in', live)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Configurations with queued runs due at `now`, oldest work first: runs due at once, then deferred
 * runs whose scheduled_for has come (each part on its own partial index; deferred runs not due yet
 * make no configuration look busy). `deferredDue` says whether the claim needs to look for
 * deferred runs at all, which saves it a query in the common case of none.
 */
export async function selectConfigurationsWithQueuedRuns(on: Connection, limit: number, now: number): Promise<{ id: number; deferredDue: boolean }[]> {
  const immediate = await queryable(on)
    .selectFrom('workflow_runs')
    .select(['telephony_configuration_id as id', (eb) => eb.fn.min('id').as('oldest')])
    .where('state', '=', 'queued')
    .where('scheduled_for', 'is', null)
    .groupBy('telephony_configuration_id')
    .orderBy('oldest')
    .limit(limit)
    .execute();
  const deferred = await queryable(on)
    .selectFrom('workflow_runs')
    .select('telephony_configuration_id as id')
    .distinct()
    .where('state', '=', 'queued')
    .where('scheduled_for', 'is not', null)
    .where('scheduled_for', '<=', now)
    .limit(limit)
    .execute();
  const withDeferred = new Set(deferred.map((r) => r.id));
  return [...new Set([...immediate.map((r) => r.id), ...withDeferred])].slice(0, limit).map((id) => ({ id, deferredDue: withDeferred.has(id) }));
}

export async function upsertHeartbeat(on: Connection, nodeId: string, now: number): Promise<void> {
  await queryable(on)
    .insertInto('dispatcher_nodes')
    .values({ node_id: nodeId, started_at: now, heartbeat_at: now })
    .onConflict((oc) => oc.column('node_id').doUpdateSet({ heartbeat_at: now }))
    .execute();
}

export async function deleteNode(on: Connection, nodeId: string): Promise<void> {
  await queryable(on).deleteFrom('dispatcher_nodes').where('node_id', '=', nodeId).execute();
}

/**
 * Live runs, already handed to a provider whose calls live in the dialing process, held by nodes
 * whose heartbeat is older than `silentSince`. (A run still dialing without a call id is the claim
 * lease's to end, as dispatch_interrupted.)
 */
export function selectLostNodeRuns(on: Connection, silentSince: number, inProcess: readonly ProviderName[], limit: number) {
  return queryable(on)
    .selectFrom('workflow_runs as r')
    .innerJoin('dispatcher_nodes as n', 'n.node_id', 'r.lease_owner')
    .innerJoin('telephony_configurations as c', 'c.id', 'r.telephony_configuration_id')
    .select(['r.id', 'r.state'])
    // Live runs only: deadline_at is set exactly while a run is live.
    .where('r.deadline_at', 'is not', null)
    .where('r.provider_call_id', 'is not', null)
    .where('n.heartbeat_at', '<', silentSince)
    .where('c.provider', 'in', inProcess)
    .limit(limit)
    .execute();
}

/** Forgets nodes silent since before `silentSince` that hold no live run any more. */
export async function deleteForgottenNodes(on: Connection, silentSince: number): Promise<void> {
  await queryable(on)
    .deleteFrom('dispatcher_nodes')
    .where('heartbeat_at', '<', silentSince)
    .where('node_id', 'not in', queryable(on).selectFrom('workflow_runs').select('lease_owner').where('deadline_at', 'is not', null).where('lease_owner', 'is not', null))
    .execute();
}
