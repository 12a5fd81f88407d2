// Bounds for waits in tests, scaled to the machine the tests run on. A bound is not a measurement:
// a test waits on a condition and the bound only ends a wait that will never succeed, so it may be
// generous. What it must not be is a guess at this machine's speed: on a loaded 2-core machine
// (load average 12-15) child processes took several times their usual time to start and answer,
// and fixed 30 s bounds failed tests that were only slow. So every bound here is multiplied by
//   DIALTONE_TEST_TIMEOUT_FACTOR (default 1; CI or a slow VM sets it), and by
//   the run queue per core, measured when the wait starts (os.loadavg()'s 1-minute figure over
//   the cores available, at least 1): a machine twice as busy as it has cores gets twice as long.
import { availableParallelism, loadavg } from 'node:os';

/** How much slower than an idle machine this one is taken to be, now. */
export function timeoutFactor(): number {
  const configured = Number(process.env.DIALTONE_TEST_TIMEOUT_FACTOR ?? '1');
  if (!Number.isFinite(configured) || configured <= 0) throw new Error(`DIALTONE_TEST_TIMEOUT_FACTOR must be a positive number, not ${process.env.DIALTONE_TEST_TIMEOUT_FACTOR}`);
  const [oneMinute = 0] = loadavg();
  const busy = Math.max(1, oneMinute / availableParallelism());
  return configured * busy;
}

/** `ms` (the bound on an idle machine) scaled by timeoutFactor(). */
export function scaledTimeout(ms: number): number {
  return Math.ceil(ms * timeoutFactor());
}
