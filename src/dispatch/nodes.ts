// Dispatcher heartbeats. Each running dispatcher writes one every REAPER_INTERVAL_MS; a node whose
// heartbeat is older than NODE_HEARTBEAT_TIMEOUT_MS is presumed dead. Its live calls whose dialog
// lived in its process (SIP, simulator) died with it, so their runs end `failed` (node_lost) now
// rather than when their deadline (ring timeout or maximum duration, plus grace) runs out. Calls
// that outlive their node (Twilio) are left to their provider's callbacks.
import type { RunLifecycle } from '../runs/lifecycle.js';
import type { AppliedTransition } from '../runs/transition-run.js';
import type { ProviderName } from '../store/schema/schema.js';
import { deleteForgottenNodes, selectLostNodeRuns } from '../store/statements/dispatch-statements.js';
import type { Store } from '../store/engine/store.js';

const BATCH = 500;

export async function endLostNodeCalls(store: Store, lifecycle: RunLifecycle, now: number, timeoutMs: number, inProcess: ProviderName[]): Promise<AppliedTransition[]> {
  if (inProcess.length === 0) return [];
  const ended: AppliedTransition[] = [];
  for (const row of await selectLostNodeRuns(store, now - timeoutMs, inProcess, BATCH)) {
    const t = await lifecycle.transition(row.id, 'failed', { at: now, reason: 'node_lost', data: { lost_in: row.state }, onlyFrom: row.state });
    if (t) ended.push(t);
  }
  // Forget nodes long gone once nothing of theirs is left to end.
  await deleteForgottenNodes(store, now - 10 * timeoutMs);
  return ended;
}
