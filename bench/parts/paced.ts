// The `paced` part: request latency and time to dial at RATE requests a second, evenly spaced,
// with telephony capacity free.
import type { StoreKind } from '../../test/helpers/stores.js';
import { INSTANT_SIMULATOR, RATE, SECONDS } from '../knobs.js';
import { initiationTarget, openLoop } from '../load.js';
import { setUp, startBenchService, timeToDial, waitUntilDialed } from '../services.js';

export async function pacedLoad(kind: StoreKind) {
  process.stdout.write(`[${kind}] paced: ${RATE} requests/s for ${SECONDS} s, telephony capacity free\n`);
  const pacedSetup = await setUp(kind);
  const pacedService = await startBenchService({ ...INSTANT_SIMULATOR, DATABASE_URL: pacedSetup.url });
  let paced;
  let pacedDial;
  try {
    paced = await openLoop(initiationTarget(pacedService, pacedSetup), RATE, SECONDS);
    await waitUntilDialed(pacedSetup.store, 60_000);
    pacedDial = await timeToDial(pacedSetup.store);
  } finally {
    pacedService.child.kill('SIGTERM');
    await pacedService.exited;
    await pacedSetup.drop();
  }
  return { ...paced, time_to_dial_ms: pacedDial };
}
