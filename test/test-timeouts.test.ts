// The test suite's own time bounds (helpers/timeouts.ts): scaled by DIALTONE_TEST_TIMEOUT_FACTOR
// and by the machine's load, never shorter than the bound on an idle machine.
import assert from 'node:assert/strict';
import { availableParallelism, loadavg } from 'node:os';
import { describe, it, type TestContext } from 'node:test';
import { scaledTimeout, timeoutFactor } from './helpers/timeouts.js';

/** Sets DIALTONE_TEST_TIMEOUT_FACTOR for the rest of the test (undefined: unset); restored when it ends. */
function factorSetter(t: TestContext): (value: string | undefined) => void {
  const before = process.env.DIALTONE_TEST_TIMEOUT_FACTOR;
  t.after(() => {
    if (before === undefined) delete process.env.DIALTONE_TEST_TIMEOUT_FACTOR;
    else process.env.DIALTONE_TEST_TIMEOUT_FACTOR = before;
  });
  return (value) => {
    if (value === undefined) delete process.env.DIALTONE_TEST_TIMEOUT_FACTOR;
    else process.env.DIALTONE_TEST_TIMEOUT_FACTOR = value;
  };
}

describe('Test time bounds', () => {
  it('are never shorter than the idle bound, and grow with the run queue per core', (t) => {
    factorSetter(t)(undefined);
    const busy = Math.max(1, (loadavg()[0] ?? 0) / availableParallelism());
    const factor = timeoutFactor();
    // The load average may move between the two reads; the factor follows it within a margin.
    assert.ok(factor >= 1);
    assert.ok(Math.abs(factor - busy) < 0.5 * busy, `factor ${factor} for a load of ${busy} per core`);
    assert.ok(scaledTimeout(30_000) >= 30_000);
  });

  it('multiply by DIALTONE_TEST_TIMEOUT_FACTOR, and refuse a factor that is not a positive number', (t) => {
    const setFactor = factorSetter(t);
    setFactor('4');
    assert.ok(scaledTimeout(1_000) >= 4_000);
    setFactor('0');
    assert.throws(() => scaledTimeout(1_000), /DIALTONE_TEST_TIMEOUT_FACTOR must be a positive number/);
    setFactor('fast');
    assert.throws(() => scaledTimeout(1_000), /DIALTONE_TEST_TIMEOUT_FACTOR/);
  });
});
