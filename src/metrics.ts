// Prometheus metrics. One registry per process (not prom-client's global one), so tests can build
// several apps side by side. Queue gauges are read from the store when scraped: the runs table is
// the queue, and every node sees the same numbers.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { RunState } from './store/schema/schema.js';
import { countLiveRunsPerConfiguration, selectQueueStats } from './store/statements/metrics-statements.js';
import type { Store } from './store/engine/store.js';
import { selectOutboxDepth } from './store/statements/webhook-statements.js';

/** The states of the runs dialtone_active_calls counts. */
const ACTIVE_CALL_STATES: readonly RunState[] = ['dialing', 'ringing', 'in_progress'];

export class Metrics {
  readonly registry = new Registry();
  readonly runsCreated: Counter<'mode'>;
  readonly transitions: Counter<'state'>;
  readonly dialLatency: Histogram;
  readonly providerEvents: Counter<'provider' | 'kind' | 'applied'>;
  readonly pacingReslots: Counter;
  readonly reconciliations: Counter<'provider' | 'result'>;
  readonly rateLimited: Counter<'policy'>;
  readonly idempotency: Counter<'outcome'>;
  readonly queueFull: Counter;
  readonly policyRefusals: Counter<'code'>;
  readonly webhookAttempts: Counter<'result'>;
  readonly webhookDeliveries: Counter<'outcome'>;
  readonly webhookAttemptDuration: Histogram;
  readonly walFlush: Histogram;
  readonly durableWrite: Histogram;
  readonly retentionPrunedRows: Counter<'table'>;
  readonly retentionOldestRunAge: Gauge;

  constructor(store: Store, options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry });
    this.runsCreated = new Counter({ name: 'dialtone_runs_created_total', help: 'Workflow runs created, by mode', labelNames: ['mode'], registers });
    this.transitions = new Counter({ name: 'dialtone_run_transitions_total', help: 'Run state transitions, by state entered', labelNames: ['state'], registers });
    this.dialLatency = new Histogram({
      name: 'dialtone_dial_latency_seconds',
      help: 'Time from run creation to the dial request being sent to the provider',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    });
    this.providerEvents = new Counter({
      name: 'dialtone_provider_events_total',
      help: 'Provider events received, and whether they moved a run (duplicates and late events do not)',
      labelNames: ['provider', 'kind', 'applied'],
      registers,
    });
    this.reconciliations = new Counter({
      name: 'dialtone_reconciliations_total',
      help: 'Questions to a provider about a live run (reconciliation), by what came of it: moved, unchanged, ended_live (past its deadline, ended by Dialtone), not_found, error',
      labelNames: ['provider', 'result'],
      registers,
    });
    this.rateLimited = new Counter({ name: 'dialtone_rate_limited_total', help: 'Requests refused with 429 rate_limited, by policy spent', labelNames: ['policy'], registers });
    this.idempotency = new Counter({
      name: 'dialtone_idempotency_requests_total',
      help: 'Initiate Call requests with an Idempotency-Key, by outcome (created, replayed, in_use, reused)',
      labelNames: ['outcome'],
      registers,
    });
    this.queueFull = new Counter({ name: 'dialtone_queue_full_total', help: 'Initiate Call requests refused with 429 queue_full', registers });
    this.policyRefusals = new Counter({
      name: 'dialtone_calling_policy_refusals_total',
      help: 'Initiate Call requests the calling policy refused, by code (number_suppressed, number_frequency_capped, outside_calling_hours)',
      labelNames: ['code'],
      registers,
    });
    this.pacingReslots = new Counter({
      name: 'dialtone_pacing_reslots_total',
      help: 'Times a node behind its pacing slots took fresh slots for every dial it still held, in one store transaction',
      registers,
    });
    this.webhookAttempts = new Counter({
      name: 'dialtone_webhook_attempts_total',
      help: 'Webhook delivery attempts, by result (2xx, 4xx, 5xx, … or error: timeout, refused, address not allowed)',
      labelNames: ['result'],
      registers,
    });
    this.webhookDeliveries = new Counter({
      name: 'dialtone_webhook_deliveries_total',
      help: 'Webhook deliveries finished, by outcome (succeeded, or failed after the last attempt or a 410)',
      labelNames: ['outcome'],
      registers,
    });
    this.webhookAttemptDuration = new Histogram({
      name: 'dialtone_webhook_attempt_duration_seconds',
      help: 'Duration of a webhook delivery attempt, from connecting to the answer',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.walFlush = new Histogram({
      name: 'dialtone_sqlite_wal_flush_seconds',
      help: "SQLite: duration of each flush (fdatasync) of the write-ahead log that durable commits wait for; every such commit's latency includes one or two",
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    });
    this.durableWrite = new Histogram({
      name: 'dialtone_sqlite_durable_write_seconds',
      help: 'SQLite: time a durable write (an accepted call, a claim) took from being queued to being on the disk: its wait for a group commit, its statements, the commit and the WAL flush that covers it',
      buckets: [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    });
    this.retentionPrunedRows = new Counter({
      name: 'dialtone_retention_pruned_rows_total',
      help: 'Rows deleted by retention (RETENTION_DAYS, an organization\'s own window), by table',
      labelNames: ['table'],
      registers,
    });
    // Set by each maintenance pass (dispatch/retention.ts), from the store: every dispatcher node reports it.
    this.retentionOldestRunAge = new Gauge({
      name: 'dialtone_retention_oldest_run_age_seconds',
      help: 'Age of the oldest ended run still stored, since it ended (retention deletes runs older than their window); 0 when none',
      registers,
    });
    new Gauge({
      name: 'dialtone_webhook_outbox_depth',
      help: 'Webhook deliveries pending (of enabled endpoints)',
      registers,
      async collect() {
        this.set((await selectOutboxDepth(store)).pending);
      },
    });
    new Gauge({
      name: 'dialtone_webhook_oldest_pending_age_seconds',
      help: 'Age of the oldest pending webhook delivery (of enabled endpoints); 0 when none is pending',
      registers,
      async collect() {
        const { oldestCreatedAt } = await selectOutboxDepth(store);
        this.set(oldestCreatedAt === null ? 0 : Math.max(0, (Date.now() - oldestCreatedAt) / 1000));
      },
    });
    new Gauge({
      name: 'dialtone_queue_depth',
      help: 'Queued runs due per telephony configuration (runs deferred to their calling hours count once due)',
      labelNames: ['telephony_configuration_id'],
      registers,
      async collect() {
        this.reset();
        for (const row of await selectQueueStats(store, Date.now())) this.set({ telephony_configuration_id: String(row.config) }, row.depth);
      },
    });
    new Gauge({
      name: 'dialtone_queue_oldest_age_seconds',
      help: 'How long the oldest due queued run has waited per telephony configuration (a deferred run: since its scheduled_for)',
      labelNames: ['telephony_configuration_id'],
      registers,
      async collect() {
        this.reset();
        const now = Date.now();
        for (const row of await selectQueueStats(store, now)) this.set({ telephony_configuration_id: String(row.config) }, Math.max(0, (now - row.oldest) / 1000));
      },
    });
    new Gauge({
      name: 'dialtone_active_calls',
      help: 'Runs dialing, ringing or in progress, per telephony configuration',
      labelNames: ['telephony_configuration_id'],
      registers,
      async collect() {
        this.reset();
        for (const row of await countLiveRunsPerConfiguration(store, ACTIVE_CALL_STATES)) this.set({ telephony_configuration_id: String(row.config) }, row.n);
      },
    });
  }
}
