// The `growth` part: do reads stay fast as the store grows? A store grows by keeping history, not
// by calling faster, so two databases per store are filled directly (SQL, not the API: the API's
// write path is measured by other parts) at the same rate, 50,000 ended runs a day (issue 35's busy
// node), each run with its five state events: one with BENCH_GROWTH_SMALL runs (50,000: a day), one
// with BENCH_GROWTH_RUNS (5,000,000: 100 days). In both the last day is alike: the same number of
// runs, and the same campaign of a tenth of them. An API node serves the same reads on each, one at
// a time: the runs list unfiltered and with each filter, deep pages, one run, a run's events, the
// statistics over an hour, a day and 30 days, a campaign and its attempts. Reported: p50 and p99 of
// each read on both and the ratio of the p99s (issue 35's goal: at most 2), the node's resident
// memory after the 30-day statistics (which count 30 days of runs on the large store and one day's
// on the small: their time grows with the window, their memory must not), and the bytes on disk
// per run.
import { statSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import type { StoreKind } from '../../test/helpers/stores.js';
import { GROWTH_READS, GROWTH_RUNS, GROWTH_SMALL, INSTANT_SIMULATOR } from '../knobs.js';
import { percentile, round } from '../load.js';
import { memoryOf } from '../machine.js';
import { setUp, startBenchService, type Setup } from '../services.js';

const DAY_MS = 86_400_000;
/** Runs a day: the spacing of created_at whatever the store's size. */
const RUNS_PER_DAY = 50_000;
/** The campaign's attempts are among the last day's runs. */
const CAMPAIGN_SPAN = RUNS_PER_DAY;
/** Of every ten runs: seven completed, one busy, one no answer, one failed; a tenth are a campaign's attempts. */
const STATES = `case i % 10 when 7 then 'busy' when 8 then 'no_answer' when 9 then 'failed' else 'completed' end`;
const ANSWERED_BY = `case i % 10 when 7 then null when 8 then null when 9 then null else (case i % 4 when 0 then 'machine' else 'human' end) end`;
const EVENTS = ['queued', 'dialing', 'ringing', 'in_progress', 'ended'] as const;

interface Ids {
  orgId: number;
  workflowId: number;
  definitionId: number;
  routeId: number;
  campaignId: number;
  workflowUuid: string;
}

/** Runs 1 … `to` (ids in creation order), the last created just before `now`, RUNS_PER_DAY a day, with their events. */
async function fill(kind: StoreKind, setup: Setup, ids: Ids, to: number, now: number): Promise<void> {
  const batch = 250_000;
  for (let start = 1; start <= to; start += batch) {
    const end = Math.min(to, start + batch - 1);
    const created = `${now} - ((${to} - i + 1) * ${DAY_MS}) / ${RUNS_PER_DAY}`;
    const runColumns = `id, name, org_id, workflow_id, definition_id, mode, trigger_uuid, phone_number, caller_id, telephony_configuration_id, initial_context, state, outcome_reason, provider_call_id, created_at, updated_at, ended_at, campaign_id, answered_by, last_event_seq`;
    const runValues = `i, 'WR-API-' || i, ${ids.orgId}, ${ids.workflowId}, ${ids.definitionId}, 'published', null, '+1212' || (2000000 + i % 1000000), '+12025550000', ${ids.routeId}, '{"name":"Ada"}', ${STATES}, 'hangup', 'sim-' || i, ${created}, ${created} + 60000, ${created} + 60000, case when i % 10 = 3 and i > ${to - CAMPAIGN_SPAN} then ${ids.campaignId} else null end, ${ANSWERED_BY}, 5`;
    const eventValues = EVENTS.map((type, n) => `select i, ${n + 1}, case when ${n} = 4 then ${STATES} else '${type}' end, ${created} + ${n * 1000}, '{}' from ids`).join(' union all ');
    await setup.store.transaction('durable', async (trx) => {
      if (kind === 'postgres') {
        // Bulk loading: the outbox trigger has no endpoint to write to, and firing it per row would dominate.
        await sql`set local session_replication_role = replica`.execute(trx);
        await sql.raw(`insert into workflow_runs (${runColumns}) select ${runValues} from generate_series(${start}, ${end}) as i`).execute(trx);
        await sql.raw(`insert into run_events (run_id, seq, type, at, data) with ids(i) as (select generate_series(${start}, ${end})) ${eventValues.replaceAll("'{}'", "'{}'::jsonb")}`).execute(trx);
      } else {
        const ids_ = `with recursive ids(i) as (select ${start} union all select i + 1 from ids where i < ${end})`;
        await sql.raw(`insert into workflow_runs (${runColumns}) ${ids_} select ${runValues} from ids`).execute(trx);
        await sql.raw(`insert into run_events (run_id, seq, type, at, data) ${ids_} ${eventValues}`).execute(trx);
      }
    });
  }
  if (kind === 'postgres') await sql`select setval(pg_get_serial_sequence('workflow_runs', 'id'), ${to})`.execute(setup.store.db);
  await sql`analyze`.execute(setup.store.db);
}

async function bytesOnDisk(kind: StoreKind, setup: Setup): Promise<number> {
  if (kind === 'postgres') {
    const row = await sql<{ size: string }>`select pg_database_size(current_database())::text as size`.execute(setup.store.db);
    return Number(row.rows[0]?.size ?? 0);
  }
  await sql`pragma wal_checkpoint(truncate)`.execute(setup.store.db);
  const file = setup.url.replace(/^sqlite:/, '');
  return statSync(file).size;
}

/** p50/p99 (ms) of GROWTH_READS sequential requests to paths drawn by `path`. */
async function timeReads(base: string, key: string, path: () => string) {
  const times: number[] = [];
  for (let i = 0; i < GROWTH_READS; i++) {
    const started = performance.now();
    const response = await fetch(`${base}${path()}`, { headers: { 'x-api-key': key } });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`${path()} answered ${response.status}`);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return { p50_ms: round(percentile(times, 50), 2), p99_ms: round(percentile(times, 99), 2) };
}

async function measure(kind: StoreKind, setup: Setup, ids: Ids, runs: number, now: number) {
  const service = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: setup.url, DIALTONE_ROLE: 'api', RATE_LIMIT_KEY_PER_SECOND: '0', RATE_LIMIT_ORG_PER_SECOND: '0' });
  const key = setup.fixture.apiKey;
  const anyRun = () => 1 + Math.floor(Math.random() * runs);
  const iso = (ms: number) => encodeURIComponent(new Date(ms).toISOString());
  const reads: Record<string, () => string> = {
    list: () => '/api/v1/public/workflow-runs?limit=50',
    list_state: () => '/api/v1/public/workflow-runs?limit=50&state=busy',
    list_answered_by: () => '/api/v1/public/workflow-runs?limit=50&answered_by=machine',
    list_workflow: () => `/api/v1/public/workflow-runs?limit=50&workflow_uuid=${ids.workflowUuid}`,
    list_campaign: () => `/api/v1/public/workflow-runs?limit=50&campaign_id=${ids.campaignId}`,
    list_phone_number: () => `/api/v1/public/workflow-runs?limit=50&phone_number=${encodeURIComponent(`+1212${2_000_000 + (anyRun() % 1_000_000)}`)}`,
    list_created_after: () => `/api/v1/public/workflow-runs?limit=50&created_after=${iso(now - DAY_MS)}`,
    list_created_before: () => `/api/v1/public/workflow-runs?limit=50&created_before=${iso(now - DAY_MS / 2)}`,
    list_page_deep: () => `/api/v1/public/workflow-runs?limit=50&after=${anyRun()}`,
    read: () => `/api/v1/public/workflow-runs/${anyRun()}`,
    events: () => `/api/v1/public/workflow-runs/${anyRun()}/events`,
    stats_hour: () => '/api/v1/public/stats',
    stats_day: () => `/api/v1/public/stats?since=${iso(now - DAY_MS)}`,
    stats_30_days: () => `/api/v1/public/stats?since=${iso(now - 30 * DAY_MS)}`,
    campaign: () => `/api/v1/public/campaigns/${ids.campaignId}`,
    campaign_runs: () => `/api/v1/public/campaigns/${ids.campaignId}/runs?limit=50`,
  };
  try {
    const figures: Record<string, { p50_ms: number; p99_ms: number }> = {};
    for (const [name, path] of Object.entries(reads)) {
      figures[name] = await timeReads(service.url, key, path);
      if (name === 'stats_30_days') process.stdout.write(`  ${runs} runs: memory after 30-day stats ${JSON.stringify(memoryOf(service.child.pid))}\n`);
    }
    return { runs, reads: figures, memory_after_stats: memoryOf(service.child.pid), bytes_per_run: round((await bytesOnDisk(kind, setup)) / runs, 0) };
  } finally {
    service.child.kill('SIGTERM');
    await service.exited;
  }
}

/** A fresh database of one store filled with `runs` runs, and the reads timed on it. */
async function storeOf(kind: StoreKind, runs: number, now: number) {
  const setup = await setUp(kind);
  try {
    const definition = await setup.store.db.selectFrom('workflow_definitions').select(['id', 'workflow_id']).executeTakeFirstOrThrow();
    // The campaign a tenth of the last day's runs are attempts of, made through the API like any other.
    const api = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: setup.url, DIALTONE_ROLE: 'api' });
    let campaignId: number;
    try {
      const created = await fetch(`${api.url}/api/v1/public/campaigns`, { method: 'POST', headers: { 'x-api-key': setup.fixture.apiKey, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Growth', agent_uuid: setup.fixture.agentUuid, mode: 'published' }) });
      if (created.status !== 201 && created.status !== 200) throw new Error(`campaign: ${created.status} ${await created.text()}`);
      campaignId = ((await created.json()) as { id: number }).id;
    } finally {
      api.child.kill('SIGTERM');
      await api.exited;
    }
    const ids: Ids = { orgId: setup.fixture.orgId, workflowId: definition.workflow_id, definitionId: definition.id, routeId: setup.routeId, campaignId, workflowUuid: setup.fixture.workflowUuid };
    const started = performance.now();
    await fill(kind, setup, ids, runs, now);
    const fillSeconds = round((performance.now() - started) / 1000, 1);
    process.stdout.write(`  ${runs} runs filled in ${fillSeconds} s\n`);
    return { fill_seconds: fillSeconds, ...(await measure(kind, setup, ids, runs, now)) };
  } finally {
    await setup.drop();
  }
}

export async function growthBench(kind: StoreKind) {
  process.stdout.write(`\n[${kind}] growth: reads at ${GROWTH_SMALL} and ${GROWTH_RUNS} runs (${RUNS_PER_DAY} a day, each with 5 events)\n`);
  const now = Date.now();
  const small = await storeOf(kind, GROWTH_SMALL, now);
  const large = await storeOf(kind, GROWTH_RUNS, now);
  const ratios = Object.fromEntries(Object.keys(small.reads).map((name) => [name, round((large.reads[name]?.p99_ms ?? NaN) / (small.reads[name]?.p99_ms ?? NaN), 2)]));
  const over = Object.entries(ratios).filter(([, ratio]) => ratio > 2).map(([name]) => name);
  return { runs_per_day: RUNS_PER_DAY, small, large, p99_ratio_large_to_small: ratios, reads_over_goal: over };
}
