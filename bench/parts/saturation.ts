// The `saturation` part: the throughput and request latency of a node running the API and the
// dispatcher, with time from creation to dial; then the same with and without an Idempotency-Key on
// every request, in alternating halves (`idempotency_key_cost`).
import type { StoreKind } from '../../test/helpers/stores.js';
import { CONCURRENCY, INSTANT_SIMULATOR, SECONDS } from '../knobs.js';
import { closedLoop, initiationTarget, round, summarize, type LoadSample } from '../load.js';
import { setUp, startBenchService, timeToDial, waitUntilDialed } from '../services.js';

export async function saturationAndKeys(kind: StoreKind) {
  process.stdout.write(`\n[${kind}] saturation (API and dispatcher on one node): ${CONCURRENCY} clients for ${SECONDS} s\n`);
  const load = await setUp(kind);
  const service = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: load.url });
  let saturation;
  let saturationDial;
  let withKeys;
  try {
    saturation = summarize([await closedLoop(initiationTarget(service, load), SECONDS)]);
    await waitUntilDialed(load.store, 60_000);
    saturationDial = await timeToDial(load.store);
    // The cost of claiming and completing an Idempotency-Key: the same service and database, with
    // and without a fresh key on every request, in alternating halves so that warm-up and the
    // growing tables weigh on both sides alike.
    process.stdout.write(`[${kind}] saturation with and without an Idempotency-Key, alternating\n`);
    const without: LoadSample[] = [];
    const keyed: LoadSample[] = [];
    for (let round = 0; round < 2; round++) {
      without.push(await closedLoop(initiationTarget(service, load), SECONDS / 2));
      keyed.push(await closedLoop(initiationTarget(service, load, true), SECONDS / 2));
    }
    await waitUntilDialed(load.store, 60_000);
    withKeys = { without_key: summarize(without), with_key: summarize(keyed) };
  } finally {
    service.child.kill('SIGTERM');
    await service.exited;
    await load.drop();
  }
  return {
    saturation: { ...saturation, time_to_dial_ms: saturationDial },
    idempotency_key_cost: {
      ...withKeys,
      throughput_ratio: round((withKeys?.with_key.initiations_per_second ?? NaN) / (withKeys?.without_key.initiations_per_second ?? NaN), 2),
    },
  };
}
