// The statements behind the queue gauges of /metrics: the runs table is the queue, so every node
// reads the same numbers from it when scraped.
import { sql } from 'kysely';
import type { RunState } from './schema.js';
import type { Store } from './store.js';

export interface QueueStats {
  config: number;
  depth: number;
  /** Creation time of the oldest queued run (epoch ms). */
  oldest: number;
}

/** Queued runs per telephony configuration: how many, and since when. */
export async function selectQueueStats(store: Store): Promise<QueueStats[]> {
  const rows = await store.db
    .selectFrom('workflow_runs')
    .select(['telephony_configuration_id as config', (eb) => eb.fn.countAll<number>().as('depth'), sql<number>`min(created_at)`.as('oldest')])
    .where('state', '=', 'queued')
    .groupBy('telephony_configuration_id')
    .execute();
  return rows.map((r) => ({ config: r.config, depth: Number(r.depth), oldest: Number(r.oldest) }));
}

/** Live runs (with a deadline) in these states, per telephony configuration. */
export async function countLiveRunsPerConfiguration(store: Store, states: readonly RunState[]): Promise<{ config: number; n: number }[]> {
  const rows = await store.db
    .selectFrom('workflow_runs')
    .select(['telephony_configuration_id as config', (eb) => eb.fn.countAll<number>().as('n')])
    .where('deadline_at', 'is not', null)
    .where('state', 'in', states)
    .groupBy('telephony_configuration_id')
    .execute();
  return rows.map((r) => ({ config: r.config, n: Number(r.n) }));
}
