// The `policy` part: what the calling policy costs run creation (a million suppressions and a
// per-number cap against neither), how long loading the suppressions took, and a 100,000-line CSV
// import over HTTP.
import { performance } from 'node:perf_hooks';
import { setOrganizationLimits } from '../../src/orgs/organizations.js';
import { upsertSuppressions, type SuppressionValues } from '../../src/store/statements/suppression-statements.js';
import type { ServiceProcess } from '../../test/helpers/service-process.js';
import type { StoreKind } from '../../test/helpers/stores.js';
import { INSTANT_SIMULATOR, ROUNDS, SECONDS, SUPPRESSIONS } from '../knobs.js';
import { closedLoop, initiationTarget, round, summarize, type LoadSample, type Target } from '../load.js';
import { setUp, startBenchService, type Setup } from '../services.js';

/**
 * The calling policy's cost: initiation throughput with SUPPRESSIONS suppressed numbers and a
 * per-number cap on, against both off, in alternating rounds on two fresh databases of the same
 * store (API-only nodes). Every request calls a number of its own that is not suppressed, so every
 * one is accepted, and each pays for the suppression lookup among SUPPRESSIONS entries and for the
 * cap's count (inside the creating transaction, under the number's lock on PostgreSQL). Also
 * timed: loading the suppressions in bulk (the store's batched upsert, as the CSV import writes),
 * and a 100,000-line CSV import over HTTP.
 */
export async function policyCost(kind: StoreKind) {
  process.stdout.write(`\n[${kind}] calling policy: ${SUPPRESSIONS} suppressions and a per-number cap, against both off\n`);
  const offSetup = await setUp(kind);
  const onSetup = await setUp(kind);
  const loadStarted = performance.now();
  const batch = 50_000;
  for (let start = 0; start < SUPPRESSIONS; start += batch) {
    const rows: SuppressionValues[] = [];
    for (let i = start; i < Math.min(SUPPRESSIONS, start + batch); i++) rows.push({ orgId: onSetup.fixture.orgId, phoneNumber: `+1646${2_000_000 + i}`, reason: 'bench', expiresAt: null });
    await onSetup.store.transaction('durable', (trx) => upsertSuppressions(trx, rows, Date.now()));
  }
  const loadSeconds = (performance.now() - loadStarted) / 1000;
  await setOrganizationLimits(onSetup.store, onSetup.fixture.orgId, { number_max_calls: 3, number_window_seconds: 86_400 });
  const off = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: offSetup.url, DIALTONE_ROLE: 'api' });
  const on = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: onSetup.url, DIALTONE_ROLE: 'api' });
  try {
    let next = 0;
    const distinct = (service: ServiceProcess, setup: Setup): Target => ({
      ...initiationTarget(service, setup),
      body: () => JSON.stringify({ phone_number: `+1212${2_000_000 + next++}`, telephony_configuration_id: setup.routeId, initial_context: { name: 'Ada' } }),
    });
    const offTarget = distinct(off, offSetup);
    const onTarget = distinct(on, onSetup);
    await closedLoop(offTarget, 1);
    await closedLoop(onTarget, 1);
    const offSamples: LoadSample[] = [];
    const onSamples: LoadSample[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      offSamples.push(await closedLoop(offTarget, SECONDS / ROUNDS));
      onSamples.push(await closedLoop(onTarget, SECONDS / ROUNDS));
    }
    const offSummary = summarize(offSamples);
    const onSummary = summarize(onSamples);

    const lines = 100_000;
    const csv = `phone_number,reason\n${Array.from({ length: lines }, (_, i) => `+1312${2_000_000 + i},bench`).join('\n')}\n`;
    const importStarted = performance.now();
    const imported = await fetch(`${on.url}/api/v1/public/suppressions/import`, { method: 'POST', headers: { 'content-type': 'text/csv', 'x-api-key': onSetup.fixture.apiKey }, body: csv });
    const importBody = (await imported.json()) as { imported?: number };
    const importSeconds = (performance.now() - importStarted) / 1000;
    return {
      suppressions: SUPPRESSIONS,
      number_cap: { max_calls: 3, window_seconds: 86_400 },
      load_suppressions_seconds: round(loadSeconds, 1),
      off: offSummary,
      on: onSummary,
      throughput_ratio: round(onSummary.initiations_per_second / offSummary.initiations_per_second, 2),
      csv_import: { lines, status: imported.status, imported: importBody.imported ?? null, seconds: round(importSeconds, 2), bytes: csv.length },
    };
  } finally {
    off.child.kill('SIGTERM');
    on.child.kill('SIGTERM');
    await off.exited;
    await on.exited;
    await offSetup.drop();
    await onSetup.drop();
  }
}
