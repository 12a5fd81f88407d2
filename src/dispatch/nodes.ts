// Dispatcher heartbeats. Each running dispatcher writes one every REAPER_INTERVAL_MS; a node whose
// heartbeat is older than NODE_HEARTBEAT_TIMEOUT_MS is presumed dead. Its live calls whose dialog
// lived in its process (SIP, simulator) died with it, so their runs end `failed` (node_lost) now
// rather than when their deadline (ring timeout or maximum duration, plus grace) runs out. Calls
// that outlive their node (Twilio) are left to their provider's callbacks.
import type { RunLifecycle } from '../runs/lifecycle.js';
import type { AppliedTransition } from '../runs/transition-run.js';
import type { ProviderName } from '../store/schema.js';
import type { Store } from '../store/store.js';

const BATCH = 500;

export async function heartbeat(store: Store, nodeId: string, now: number): Promise<void> {
  await store.db
    .insertInto('dispatcher_nodes')
    .values({ node_id: nodeId, started_at: now, heartbeat_at: now })
    .onConflict((oc) => oc.column('node_id').doUpdateSet({ heartbeat_at: now }))
    .execute();
}

/** A node that stops cleanly says so, so it is never mistaken for a dead one. */
export async function leave(store: Store, nodeId: string): Promise<void> {
  await store.db.deleteFrom('dispatcher_nodes').where('node_id', '=', nodeId).execute();
}

export async function endLostNodeCalls(store: Store, lifecycle: RunLifecycle, now: number, timeoutMs: number, inProcess: ProviderName[]): Promise<AppliedTransition[]> {
  if (inProcess.length === 0) return [];
  const lost = await store.db
    .selectFrom('workflow_runs as r')
    .innerJoin('dispatcher_nodes as n', 'n.node_id', 'r.lease_owner')
    .innerJoin('telephony_configurations as c', 'c.id', 'r.telephony_configuration_id')
    .select(['r.id', 'r.state'])
    // Live runs only (deadline_at is set exactly while a run is live), already handed to a provider:
    // a run still dialing without a call id is the claim lease's to end (dispatch_interrupted).
    .where('r.deadline_at', 'is not', null)
    .where('r.provider_call_id', 'is not', null)
    .where('n.heartbeat_at', '<', now - timeoutMs)
    .where('c.provider', 'in', inProcess)
    .limit(BATCH)
    .execute();
  const ended: AppliedTransition[] = [];
  for (const row of lost) {
    const t = await lifecycle.transition(row.id, 'failed', { at: now, reason: 'node_lost', data: { lost_in: row.state }, onlyFrom: row.state });
    if (t) ended.push(t);
  }
  // Forget nodes long gone once nothing of theirs is left to end.
  await store.db.deleteFrom('dispatcher_nodes').where('heartbeat_at', '<', now - 10 * timeoutMs).where('node_id', 'not in', store.db.selectFrom('workflow_runs').select('lease_owner').where('deadline_at', 'is not', null).where('lease_owner', 'is not', null)).execute();
  return ended;
}
