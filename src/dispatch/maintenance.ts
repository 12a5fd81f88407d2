// The dispatcher's maintenance pass, every REAPER_INTERVAL_MS: this node's heartbeat, the end of
// live calls of nodes that stopped beating (node_lost), queue expiry, the reaper, retention (ended
// runs past their window, retention.ts), and whatever housekeeping the service adds (expired
// Idempotency-Key records). Each step decides which runs
// to end; the run lifecycle writes them.
import type { Deps } from '../deps.js';
import type { ProviderName } from '../store/schema/schema.js';
import { expireQueuedRuns, reapSilentRuns } from './end-runs.js';
import { upsertHeartbeat } from '../store/statements/dispatch-statements.js';
import { endLostNodeCalls } from './nodes.js';
import { pruneExpiredRuns } from './retention.js';

/** A periodic chore of the service's, run with the maintenance pass. */
export type Housekeeping = (now: number) => Promise<unknown>;

export interface MaintenanceHooks {
  /** Providers whose calls live in this process and die with it. */
  inProcessProviders: ProviderName[];
  /** Providers whose overdue runs are asked about before they end (reconcile.ts ends them): the reaper leaves them. */
  askFirstProviders?: ProviderName[];
  /** The reaper ended this run: put down its line if this node holds it. */
  reaped(runId: number): Promise<void>;
  housekeeping: readonly Housekeeping[];
}

export async function maintain(deps: Deps, now: number, hooks: MaintenanceHooks): Promise<void> {
  await upsertHeartbeat(deps.store, deps.nodeId, now);
  const lost = await endLostNodeCalls(deps.store, deps.lifecycle, now, deps.config.NODE_HEARTBEAT_TIMEOUT_MS, hooks.inProcessProviders);
  for (const t of lost) deps.logger.warn({ runId: t.runId }, 'ended a live call of a node that stopped beating (node_lost)');
  await expireQueuedRuns(deps.store, deps.lifecycle, now, deps.config.QUEUE_TTL_MS);
  for (const { run, providerCallId } of await reapSilentRuns(deps.store, deps.lifecycle, now, hooks.askFirstProviders)) {
    deps.logger.warn({ runId: run.runId, providerCallId }, 'reaped a run that stopped hearing from its provider or node');
    await hooks.reaped(run.runId);
  }
  const pruned = await pruneExpiredRuns(deps, now);
  if (pruned.runs > 0) deps.logger.info({ runs: pruned.runs, rows: pruned.rows }, 'retention: deleted ended runs past their window');
  for (const chore of hooks.housekeeping) await chore(now);
}
