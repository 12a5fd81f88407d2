// `npm run bench`: measures the service as a user runs it (a real process, a real socket), on the
// embedded default (SQLite) and, when reachable, PostgreSQL, with the simulator, including the
// cost of an Idempotency-Key on every request. Prints a summary and
// writes the figures as JSON to bench/results/. Rerun it to check any figure quoted elsewhere.
//
// This file runs the parts (bench/parts/, one file each: floor, saturation, paced, drain, webhooks,
// policy, campaigns, import) on each store and writes the results; what they share lives beside
// it: the knobs (knobs.ts), the service and its database (services.ts), the load and its
// summaries (load.ts, with the generator process in open-loop.ts), and what is read of the machine
// (machine.ts). The media part (parts/media.ts) runs once, on SQLite, with peers of its own
// (media-generator.ts, media-runtime.ts, media-floor.ts). The machine is shared and noisy: only
// figures from one run compare.
//
//   BENCH_SECONDS       length of each load phase (default 10)
//   BENCH_ROUNDS        alternating floor/service rounds of the floor comparison (default 4)
//   BENCH_CONCURRENCY   concurrent HTTP clients of the closed-loop phases (default 10)
//   BENCH_RATE          requests per second of the paced phase (default 100)
//   BENCH_BACKLOG       queued runs for the dispatcher throughput phase (default 3000)
//   BENCH_PARTS         which parts to run, comma-separated, of floor,saturation,paced,drain,webhooks,policy,campaigns,import,media,growth (default all but growth)
//   BENCH_GROWTH_RUNS   runs the growth part fills each store with (default 5000000; bench/parts/growth.ts)
//   BENCH_GROWTH_SMALL  the smaller size it compares against, filled first (default 50000)
//   BENCH_GROWTH_READS  requests per read and size (default 200)
//   BENCH_IMPORT_LINES  numbers in the suppression CSV of the import part (default 1000000; bench/parts/import.ts)
//   BENCH_SUPPRESSIONS  suppressed numbers loaded for the policy part (default 1000000)
//   BENCH_DELIVERIES    pending webhook deliveries for the delivery throughput phase (default 5000)
//   BENCH_WEBHOOK_RATE  calls per second of the event-to-first-attempt phase, each reported by about
//                       five messages to one endpoint (default 20: well within delivery capacity)
//   BENCH_CAMPAIGN_CONTACTS  contacts imported into a campaign, 10,000 per request (default 100000)
//   BENCH_CAMPAIGN_CALLS     simulator calls of the campaign whose pace is measured (default 10000)
//   BENCH_CAMPAIGN_RATE      that campaign's calls_per_second (default 200)
//   BENCH_STORES        which stores, comma-separated, of sqlite,postgres (default both; postgres when reachable)
//   BENCH_NODE_OPTIONS  NODE_OPTIONS of the service processes (default none; node refuses most V8
//                       flags there and npm start's command line overrides the rest: to compare V8
//                       flags, edit scripts.start)
//   DATABASE_PREPARED_STATEMENTS  passed to the service processes, to compare (the floor always
//                       prepares its insert on PostgreSQL)
//   DISPATCH_WAKE_INTERVAL_MS  passed to the service processes, to compare (0: a wake-up per
//                       created run whenever the last has been answered)
//   BENCH_IDLE_SETTLE_SECONDS  how long a node is left without work before its idle memory is read
//                       again (default 30: V8's memory reducer shrank idle nodes 15-18 s after start)
//   BENCH_MEDIA_CALLS   concurrent bridged SIP calls of the media part (default 200; bench/parts/media.ts)
//   BENCH_MEDIA_SECONDS seconds of audio each side (service, floor) plays in all (default 20)
//   BENCH_MEDIA_ROUNDS  alternating floor/service rounds they are split into (default 2)
//   BENCH_MEDIA_DIAL_RATE  calls per second the media part's SIP route dials (default 20)
//   TEST_DATABASE_URL   PostgreSQL server to use (a fresh database is created and dropped)
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, TEST_DATABASE_URL, type StoreKind } from '../test/helpers/stores.js';
import {
  BACKLOG,
  CAMPAIGN_CALLS,
  CAMPAIGN_CONTACTS,
  CAMPAIGN_RATE,
  CONCURRENCY,
  DELIVERIES,
  IMPORT_LINES,
  MEDIA_CALLS,
  MEDIA_DIAL_RATE,
  MEDIA_ROUNDS,
  MEDIA_SECONDS,
  PARTS,
  RATE,
  ROUNDS,
  SECONDS,
  STORES,
  SUPPRESSIONS,
  WEBHOOK_RATE,
} from './knobs.js';
import { diskAndLoad } from './machine.js';
import { campaignBench } from './parts/campaigns.js';
import { drainBench } from './parts/drain.js';
import { floorComparison } from './parts/floor.js';
import { growthBench } from './parts/growth.js';
import { importBench } from './parts/import.js';
import { mediaBench } from './parts/media.js';
import { pacedLoad } from './parts/paced.js';
import { policyCost } from './parts/policy.js';
import { saturationAndKeys } from './parts/saturation.js';
import { webhookBench } from './parts/webhooks.js';

/** The chosen parts on one store, in this order; a part not chosen is left out of the results. */
async function benchStore(kind: StoreKind) {
  const versusFloor = PARTS.has('floor') ? await floorComparison(kind) : undefined;
  const saturation = PARTS.has('saturation') ? await saturationAndKeys(kind) : undefined;
  const paced = PARTS.has('paced') ? await pacedLoad(kind) : undefined;
  const dispatcher = PARTS.has('drain') ? await drainBench(kind) : undefined;
  const webhooks = PARTS.has('webhooks') ? await webhookBench(kind) : undefined;
  const policy = PARTS.has('policy') ? await policyCost(kind) : undefined;
  const campaigns = PARTS.has('campaigns') ? await campaignBench(kind) : undefined;
  const csvImport = PARTS.has('import') ? await importBench(kind) : undefined;
  const growth = PARTS.has('growth') ? await growthBench(kind) : undefined;
  return { versus_floor: versusFloor, ...saturation, paced, dispatcher, webhooks, policy, campaigns, import: csvImport, growth };
}

async function postgresReachable(): Promise<boolean> {
  try {
    const db = await createTestDatabase('postgres');
    await db.drop();
    return true;
  } catch {
    return false;
  }
}

const results: Record<string, unknown> = {
  at: new Date().toISOString(),
  machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version, at_start: diskAndLoad() },
  settings: { seconds: SECONDS, rounds: ROUNDS, concurrency: CONCURRENCY, rate: RATE, backlog: BACKLOG, deliveries: DELIVERIES, webhook_rate: WEBHOOK_RATE, suppressions: SUPPRESSIONS, campaign_contacts: CAMPAIGN_CONTACTS, campaign_calls: CAMPAIGN_CALLS, campaign_rate: CAMPAIGN_RATE, import_lines: IMPORT_LINES, media_calls: MEDIA_CALLS, media_seconds: MEDIA_SECONDS, media_rounds: MEDIA_ROUNDS, media_dial_rate: MEDIA_DIAL_RATE, parts: [...PARTS], stores: [...STORES] },
};
const dir = fileURLToPath(new URL('./results/', import.meta.url));
mkdirSync(dir, { recursive: true });
const file = `${dir}bench-${String(results.at).replace(/[:.]/g, '-')}.json`;
/** Written after each part, so that a part that fails later (a long growth run, say) loses only its own figures. */
const save = () => {
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(`${dir}latest.json`, `${JSON.stringify(results, null, 2)}\n`);
};
// The media part runs once, on the embedded default: its calls touch the store only to be placed and ended.
if (PARTS.has('media')) results.media = await mediaBench();
save();
if (STORES.has('sqlite')) results.sqlite = await benchStore('sqlite');
save();
if (!STORES.has('postgres')) results.postgres = 'skipped: not in BENCH_STORES';
else if (await postgresReachable()) results.postgres = await benchStore('postgres');
else results.postgres = `skipped: PostgreSQL not reachable at ${TEST_DATABASE_URL}`;

(results.machine as Record<string, unknown>).at_end = diskAndLoad();
save();
process.stdout.write(`\n${JSON.stringify(results, null, 2)}\nwritten to ${file}\n`);
