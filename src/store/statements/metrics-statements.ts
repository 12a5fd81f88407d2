// The statements behind the queue gauges of /metrics: the runs table is the queue, so every node
// reads the same numbers from it when scraped.
import { sql } from '../engine/kysely.js';
import type { RunState } from '../schema/schema.js';
import { queryable, type Connection } from '../engine/store.js';

export interface QueueStats {
  config: number;
  depth: number;
  /** Since when the oldest run has been due (its creation, or a deferred run's scheduled_for; epoch ms). */
  oldest: number;
}

/**
 * Runs due and waiting per telephony configuration: how many, and since when. Runs due at once
 * and deferred runs whose scheduled_for has come are read on their own partial indexes (migration
 * 007); deferred runs not due yet are not waiting on the dispatcher and are left out.
 */
export async function selectQueueStats(on: Connection, now: number): Promise<QueueStats[]> {
  const immediate = await queryable(on)
    .selectFrom('workflow_runs')
    .select(['telephony_configuration_id as config', (eb) => eb.fn.countAll<number>().as('depth'), sql<number>`min(created_at)`.as('oldest')])
    .where('state', '=', 'queued')
    .where('scheduled_for', 'is', null)
    .groupBy('telephony_configuration_id')
    .execute();
  const deferred = await queryable(on)
    .selectFrom('workflow_runs')
    .select(['telephony_configuration_id as config', (eb) => eb.fn.countAll<number>().as('depth'), sql<number>`min(scheduled_for)`.as('oldest')])
    .where('state', '=', 'queued')
    .where('scheduled_for', 'is not', null)
    .where('scheduled_for', '<=', now)
    .groupBy('telephony_configuration_id')
    .execute();
  const stats = new Map<number, QueueStats>();
  for (const r of [...immediate, ...deferred]) {
    const known = stats.get(r.config);
    const depth = Number(r.depth);
    const oldest = Number(r.oldest);
    stats.set(r.config, known ? { config: r.config, depth: known.depth + depth, oldest: Math.min(known.oldest, oldest) } : { config: r.config, depth, oldest });
  }
  return [...stats.values()];
}

/** Live runs (with a deadline) in these states, per telephony configuration. */
export async function countLiveRunsPerConfiguration(on: Connection, states: readonly RunState[]): Promise<{ config: number; n: number }[]> {
  const rows = await queryable(on)
    .selectFrom('workflow_runs')
    .select(['telephony_configuration_id as config', (eb) => eb.fn.countAll<number>().as('n')])
    .where('deadline_at', 'is not', null)
    .where('state', 'in', states)
    .groupBy('telephony_configuration_id')
    .execute();
  return rows.map((r) => ({ config: r.config, n: Number(r.n) }));
}
