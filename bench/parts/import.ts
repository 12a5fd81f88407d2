// The `import` part: a suppression CSV of BENCH_IMPORT_LINES numbers (default a million, the
// size SUPPRESSION_IMPORT_MAX_BYTES is documented to hold) posted over a real socket to the app
// running in this process, so that perf_hooks.monitorEventLoopDelay watches the very event loop
// that parses and writes it. Reports the import's duration and the loop's worst stall during it
// (goal: under 50 ms, so that /healthz, the dispatcher and every other request keep being served).
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg } from 'node:os';
import pino from 'pino';
import { buildApp } from '../../src/app.js';
import { buildDeps } from '../../src/deps.js';
import { migrateToLatest } from '../../src/store/schema/migrate.js';
import { testConfig } from '../../test/helpers/app.js';
import { createOrgFixture } from '../../test/helpers/fixtures.js';
import { createTestDatabase, openTestStore, type StoreKind } from '../../test/helpers/stores.js';
import { IMPORT_LINES } from '../knobs.js';

/** node:http, not fetch: fetch gives up waiting for an answer after 300 s, as a slow machine may need. */
function post(port: number, apiKey: string, body: Buffer): Promise<{ status: number; answer: { imported?: number } }> {
  return new Promise((resolve, reject) => {
    const sent = request({ host: '127.0.0.1', port, method: 'POST', path: '/api/v1/public/suppressions/import', headers: { 'content-type': 'text/csv', 'x-api-key': apiKey, 'content-length': body.length } }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, answer: JSON.parse(Buffer.concat(chunks).toString()) as { imported?: number } }));
      response.on('error', reject);
    });
    sent.on('error', reject);
    sent.end(body);
  });
}

export async function importBench(kind: StoreKind) {
  process.stdout.write(`\n[${kind}] suppression import: ${IMPORT_LINES} lines over HTTP, the event loop watched\n`);
  const database = await createTestDatabase(kind);
  const store = openTestStore(database);
  // The import's quiet time is not what is measured: the figure is how long it takes, however long.
  const deps = buildDeps(testConfig(database.url, { DIALTONE_ROLE: 'api', CSV_IMPORT_TIMEOUT_MS: '3600000' }), { store, logger: pino({ level: 'silent' }) });
  await migrateToLatest(store);
  const fixture = await createOrgFixture(deps, 'Bench');
  const app = await buildApp(deps);
  try {
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const lines = Array.from({ length: IMPORT_LINES }, (_, i) => `+1646${2_000_000 + i},bench`);
    const csv = Buffer.from(`phone_number,reason\n${lines.join('\n')}\n`);
    // 1 ms resolution: the histogram's samples are timer callbacks, each late by the stall it met.
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    const started = performance.now();
    const { status, answer } = await post(port, fixture.apiKey, csv);
    const seconds = (performance.now() - started) / 1000;
    delay.disable();
    return {
      lines: IMPORT_LINES,
      bytes: csv.length,
      status,
      imported: answer.imported ?? null,
      seconds: Math.round(seconds * 100) / 100,
      event_loop_worst_stall_ms: Math.round(delay.max / 1e4) / 100,
      event_loop_p99_ms: Math.round(delay.percentile(99) / 1e4) / 100,
      goal_worst_stall_ms: 50,
      // The stall is wall time: with more runnable processes than cores, waiting for a core counts too.
      load_average_1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
      cpus: cpus().length,
    };
  } finally {
    await app.close();
    await deps.rateLimits.close();
    await store.close();
    await database.drop();
  }
}
