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
//
// The statistics count every run of their window, so their work grows with the window's runs, not
// with the store's. Beside them the part times their floor: the bare GROUP BY count of the same
// window (state, outcome, who answered) run by the bench process on the same database, in the same
// rounds, with no HTTP and no paging; its ratio says what any plain count of that data would do.
import { statSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import type { StoreKind } from '../../test/helpers/stores.js';
import { GROWTH_ANALYZE, GROWTH_READS, GROWTH_RUNS, GROWTH_SMALL, INSTANT_SIMULATOR } from '../knobs.js';
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
        // The series is bigint: created_at multiplies by DAY_MS, past integer range in PostgreSQL (int4 arithmetic) for all but the last 24 runs.
        // Bulk loading: the outbox trigger has no endpoint to write to, and firing it per row would dominate.
        await sql`set local session_replication_role = replica`.execute(trx);
        await sql.raw(`insert into workflow_runs (${runColumns}) select ${runValues} from generate_series(${start}::bigint, ${end}::bigint) as i`).execute(trx);
        await sql.raw(`insert into run_events (run_id, seq, type, at, data) with ids(i) as (select generate_series(${start}::bigint, ${end}::bigint)) ${eventValues.replaceAll("'{}'", "'{}'::jsonb")}`).execute(trx);
      } else {
        const ids_ = `with recursive ids(i) as (select ${start} union all select i + 1 from ids where i < ${end})`;
        await sql.raw(`insert into workflow_runs (${runColumns}) ${ids_} select ${runValues} from ids`).execute(trx);
        await sql.raw(`insert into run_events (run_id, seq, type, at, data) ${ids_} ${eventValues}`).execute(trx);
      }
    });
  }
  if (kind === 'postgres') await sql`select setval(pg_get_serial_sequence('workflow_runs', 'id'), ${to})`.execute(setup.store.db);
  if (GROWTH_ANALYZE) await sql`analyze`.execute(setup.store.db);
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

/** The windows of the statistics reads, for their floor: the API's default `since` is an hour ago. */
const STATS_WINDOWS_MS: Record<string, number> = { stats_hour: 3_600_000, stats_day: DAY_MS, stats_30_days: 30 * DAY_MS };

/** The floor of a statistics read: the bare count of the window's runs by state, outcome and who answered, timed in ms. */
async function timeFloorCounts(filled: Filled, since: number, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await filled.setup.store.db
      .selectFrom('workflow_runs')
      .select(['state', 'outcome_reason', 'answered_by', (eb) => eb.fn.countAll().as('count')])
      .where('org_id', '=', filled.ids.orgId)
      .where('created_at', '>=', since)
      .groupBy(['state', 'outcome_reason', 'answered_by'])
      .execute();
    times.push(performance.now() - started);
  }
  return times;
}

/** Sequential requests timed, in ms: `count` of them to paths drawn by `path`. */
async function timeReads(base: string, key: string, path: () => string, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const response = await fetch(`${base}${path()}`, { headers: { 'x-api-key': key } });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`${path()} answered ${response.status}`);
    times.push(performance.now() - started);
  }
  return times;
}

const quantiles = (times: number[]) => {
  const sorted = [...times].sort((a, b) => a - b);
  return { p50_ms: round(percentile(sorted, 50), 2), p99_ms: round(percentile(sorted, 99), 2) };
};

/** Rounds each read's GROWTH_READS requests are split into, alternating between the two sizes. */
const ROUNDS = 10;

/** The reads of the bench, on a store of `runs` runs. */
function readsOf(ids: Ids, runs: number, now: number): Record<string, () => string> {
  const anyRun = () => 1 + Math.floor(Math.random() * runs);
  const iso = (ms: number) => encodeURIComponent(new Date(ms).toISOString());
  return {
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
}

interface Filled {
  kind: StoreKind;
  setup: Setup;
  ids: Ids;
  runs: number;
  fillSeconds: number;
}

/** A fresh database of one store filled with `runs` runs. */
async function filledStore(kind: StoreKind, runs: number, now: number): Promise<Filled> {
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
    return { kind, setup, ids, runs, fillSeconds };
  } catch (error) {
    await setup.drop();
    throw error;
  }
}

/**
 * Both stores' reads, timed in alternating rounds: a shared machine's load changes over minutes,
 * and timing the small store's reads and then the large one's would put the change in the ratio.
 * Each read's requests are split into ROUNDS rounds, small and large taking turns (which goes
 * first alternates too), each size served by an API node of its own, both up throughout.
 */
async function measureBoth(small: Filled, large: Filled, now: number) {
  const start = (filled: Filled) => startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: filled.setup.url, DIALTONE_ROLE: 'api', RATE_LIMIT_KEY_PER_SECOND: '0', RATE_LIMIT_ORG_PER_SECOND: '0' });
  const services = [await start(small), await start(large)] as const;
  try {
    const sizes = [small, large] as const;
    const reads = sizes.map((filled) => readsOf(filled.ids, filled.runs, now));
    const perRound = Math.max(1, Math.ceil(GROWTH_READS / ROUNDS));
    const figures: [Record<string, { p50_ms: number; p99_ms: number }>, Record<string, { p50_ms: number; p99_ms: number }>] = [{}, {}];
    const floors: [Record<string, { p50_ms: number; p99_ms: number }>, Record<string, { p50_ms: number; p99_ms: number }>] = [{}, {}];
    const memory: [ReturnType<typeof memoryOf> | undefined, ReturnType<typeof memoryOf> | undefined] = [undefined, undefined];
    for (const name of Object.keys(reads[0] ?? {})) {
      const times: [number[], number[]] = [[], []];
      const floorTimes: [number[], number[]] = [[], []];
      const window = STATS_WINDOWS_MS[name];
      for (let round_ = 0; round_ < ROUNDS; round_++) {
        for (const which of round_ % 2 === 0 ? [0, 1] as const : [1, 0] as const) {
          const path = reads[which]?.[name];
          if (!path) throw new Error(`no read ${name}`);
          times[which].push(...(await timeReads(services[which].url, sizes[which].setup.fixture.apiKey, path, perRound)));
          if (window !== undefined) floorTimes[which].push(...(await timeFloorCounts(sizes[which], now - window, perRound)));
        }
      }
      process.stdout.write(`  ${name}: p99 ${round(percentile([...times[0]].sort((a, b) => a - b), 99), 1)} ms at ${small.runs}, ${round(percentile([...times[1]].sort((a, b) => a - b), 99), 1)} ms at ${large.runs}\n`);
      for (const which of [0, 1] as const) {
        figures[which][name] = quantiles(times[which]);
        if (window !== undefined) floors[which][name] = quantiles(floorTimes[which]);
      }
      if (name === 'stats_30_days') {
        for (const which of [0, 1] as const) {
          memory[which] = memoryOf(services[which].child.pid);
          process.stdout.write(`  ${sizes[which].runs} runs: memory after 30-day stats ${JSON.stringify(memory[which])}\n`);
        }
      }
    }
    const result = async (which: 0 | 1) => ({
      runs: sizes[which].runs,
      fill_seconds: sizes[which].fillSeconds,
      reads: figures[which],
      statistics_floor: floors[which],
      memory_after_stats: memory[which],
      bytes_per_run: round((await bytesOnDisk(sizes[which].kind, sizes[which].setup)) / sizes[which].runs, 0),
    });
    return { small: await result(0), large: await result(1), requests_per_read: perRound * ROUNDS, rounds: ROUNDS };
  } finally {
    for (const service of services) {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  }
}

export async function growthBench(kind: StoreKind) {
  process.stdout.write(`\n[${kind}] growth: reads at ${GROWTH_SMALL} and ${GROWTH_RUNS} runs (${RUNS_PER_DAY} a day, each with 5 events), in alternating rounds\n`);
  const now = Date.now();
  const small = await filledStore(kind, GROWTH_SMALL, now);
  try {
    const large = await filledStore(kind, GROWTH_RUNS, now);
    try {
      const { small: smallFigures, large: largeFigures, requests_per_read, rounds } = await measureBoth(small, large, now);
      const ratios = Object.fromEntries(Object.keys(smallFigures.reads).map((name) => [name, round((largeFigures.reads[name]?.p99_ms ?? NaN) / (smallFigures.reads[name]?.p99_ms ?? NaN), 2)]));
      const over = Object.entries(ratios).filter(([, ratio]) => ratio > 2).map(([name]) => name);
      const floorRatios = Object.fromEntries(Object.keys(smallFigures.statistics_floor).map((name) => [name, round((largeFigures.statistics_floor[name]?.p99_ms ?? NaN) / (smallFigures.statistics_floor[name]?.p99_ms ?? NaN), 2)]));
      return { runs_per_day: RUNS_PER_DAY, analyzed: GROWTH_ANALYZE, requests_per_read, rounds, small: smallFigures, large: largeFigures, p99_ratio_large_to_small: ratios, statistics_floor_p99_ratio_large_to_small: floorRatios, reads_over_goal: over };
    } finally {
      await large.setup.drop();
    }
  } finally {
    await small.setup.drop();
  }
}
