// The simulator as a long-running service uses it: it keeps nothing per call once the call is over,
// and records dials only when a test asks it to.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DecodedRoute } from '../src/telephony/provider.js';
import { SimulatorProvider } from '../src/telephony/simulator.js';

const TIMINGS = { latencyMs: 0, ringMs: 0, talkMs: 0, secondMs: 0 };
const route: DecodedRoute<null> = { id: 1, orgId: 1, provider: 'simulator', callerIds: [], ringTimeoutMs: undefined, config: null };

async function dialMany(simulator: SimulatorProvider, count: number): Promise<void> {
  for (let runId = 1; runId <= count; runId++) {
    await simulator.dial({ runId, to: '+12025550123', from: null, ringTimeoutMs: 1_000, route });
  }
}

describe('Simulator memory', () => {
  it('keeps no record of its dials unless asked to, and none of a call after it ends', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    let events = 0;
    const simulator = new SimulatorProvider(TIMINGS, { now: () => Date.now() }, () => void events++);
    await dialMany(simulator, 1_000);
    assert.equal(simulator.dials.length, 0, 'no list growing with every call');
    // Each call rings, is answered and hangs up, one zero-length timer after the other.
    for (let step = 0; step < 3; step++) t.mock.timers.tick(1);
    assert.equal(events, 3_000);
    assert.equal((simulator as unknown as { timers: Map<string, unknown> }).timers.size, 0, 'ended calls leave no timer behind');
    await simulator.close();
  });

  it('records every dial in order once a test asks for it', async () => {
    const simulator = new SimulatorProvider(TIMINGS, { now: () => Date.now() }, () => undefined);
    const record = simulator.record();
    await dialMany(simulator, 3);
    assert.deepEqual(record.map((d) => d.runId), [1, 2, 3]);
    assert.equal(simulator.dials, record);
    await simulator.close();
  });
});
