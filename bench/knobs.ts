// The bench's knobs, read once from the environment (bench/bench.ts lists them with their defaults;
// docs/benchmarks.md, "Knobs"), and the simulator settings every service process it starts gets.

export const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
export const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 10);
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
export const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 3_000);
export const RATE = Number(process.env.BENCH_RATE ?? 100);
export const PARTS = new Set((process.env.BENCH_PARTS ?? 'floor,saturation,paced,drain,webhooks,policy,campaigns,import,media').split(','));
export const SUPPRESSIONS = Number(process.env.BENCH_SUPPRESSIONS ?? 1_000_000);
export const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 5_000);
export const WEBHOOK_RATE = Number(process.env.BENCH_WEBHOOK_RATE ?? 20);
export const CAMPAIGN_CONTACTS = Number(process.env.BENCH_CAMPAIGN_CONTACTS ?? 100_000);
export const CAMPAIGN_CALLS = Number(process.env.BENCH_CAMPAIGN_CALLS ?? 10_000);
export const CAMPAIGN_RATE = Number(process.env.BENCH_CAMPAIGN_RATE ?? 200);
export const STORES = new Set((process.env.BENCH_STORES ?? 'sqlite,postgres').split(','));
export const IDLE_SETTLE_SECONDS = Number(process.env.BENCH_IDLE_SETTLE_SECONDS ?? 30);
export const IMPORT_LINES = Number(process.env.BENCH_IMPORT_LINES ?? 1_000_000);

/** Simulated calls end at once, so capacity stays free and the figures measure Dialtone itself. */
export const INSTANT_SIMULATOR = {
  SIMULATOR_LATENCY_MS: '0',
  SIMULATOR_RING_MS: '0',
  SIMULATOR_TALK_MS: '0',
  LOG_LEVEL: 'info',
  ...(process.env.BENCH_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS } : {}),
  ...(process.env.DATABASE_PREPARED_STATEMENTS ? { DATABASE_PREPARED_STATEMENTS: process.env.DATABASE_PREPARED_STATEMENTS } : {}),
  ...(process.env.DISPATCH_WAKE_INTERVAL_MS ? { DISPATCH_WAKE_INTERVAL_MS: process.env.DISPATCH_WAKE_INTERVAL_MS } : {}),
};
export const GROWTH_RUNS = Number(process.env.BENCH_GROWTH_RUNS ?? 5_000_000);
export const GROWTH_SMALL = Number(process.env.BENCH_GROWTH_SMALL ?? 50_000);
export const GROWTH_READS = Number(process.env.BENCH_GROWTH_READS ?? 200);
/** Whether the fill ends with ANALYZE: PostgreSQL's autovacuum gathers statistics in use; the embedded SQLite store never does. */
export const GROWTH_ANALYZE = (process.env.BENCH_GROWTH_ANALYZE ?? 'true') !== 'false';
export const MEDIA_CALLS = Number(process.env.BENCH_MEDIA_CALLS ?? 200);
export const MEDIA_SECONDS = Number(process.env.BENCH_MEDIA_SECONDS ?? 20);
export const MEDIA_ROUNDS = Number(process.env.BENCH_MEDIA_ROUNDS ?? 2);
export const MEDIA_DIAL_RATE = Number(process.env.BENCH_MEDIA_DIAL_RATE ?? 20);
