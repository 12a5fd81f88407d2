// The simulator as a long-running service uses it: it keeps nothing per call once the call is over,
// and records dials only when a test asks it to.
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { DecodedRoute } from '../src/telephony/provider.js';
import { routeInputProblems } from '../src/telephony/routes.js';
import { decodeSimulatorRoute, SimulatorProvider, type SimulatorRouteConfig } from '../src/telephony/simulator/provider.js';
import { simulatorDefinition } from '../src/telephony/simulator/definition.js';

const TIMINGS = { latencyMs: 0, ringMs: 0, talkMs: 0, secondMs: 0 };
const route: DecodedRoute<SimulatorRouteConfig> = { id: 1, orgId: 1, provider: 'simulator', capabilities: simulatorDefinition.capabilities, callerIds: [], ringTimeoutMs: undefined, config: {} };

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

describe('Simulator timings per route', () => {
  const SERVICE = { latencyMs: 100, ringMs: 2_000, talkMs: 5_000, secondMs: 1_000 };

  /** The simulated milliseconds from the dial to each event of an ordinary number's call on this route. */
  async function eventTimes(t: TestContext, settings: Record<string, unknown>): Promise<{ kind: string; at: number }[]> {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
    const decoded = decodeSimulatorRoute({ settings, credentials: null });
    assert.ok(decoded.ok, JSON.stringify(decoded));
    const events: { kind: string; at: number }[] = [];
    const simulator = new SimulatorProvider(SERVICE, { now: () => Date.now() }, (event) => void events.push({ kind: event.kind, at: event.at }));
    await simulator.dial({ runId: 1, to: '+12025550123', from: null, ringTimeoutMs: 30_000, route: { ...route, config: decoded.config } });
    for (let ms = 0; ms < 8_000 && events.length < 3; ms++) t.mock.timers.tick(1);
    await simulator.close();
    t.mock.timers.reset();
    return events;
  }

  it('plays a call on the service\'s SIMULATOR_* timings when its route sets none', async (t) => {
    assert.deepEqual(await eventTimes(t, {}), [
      { kind: 'ringing', at: 100 },
      { kind: 'answered', at: 2_100 },
      { kind: 'completed', at: 7_100 },
    ]);
  });

  it('plays a call on its route\'s answer_latency_ms, ring_ms and talk_ms, in place of the service\'s', async (t) => {
    assert.deepEqual(await eventTimes(t, { answer_latency_ms: 5, ring_ms: 20, talk_ms: 50, ring_timeout_ms: 10_000 }), [
      { kind: 'ringing', at: 5 },
      { kind: 'answered', at: 25 },
      { kind: 'completed', at: 75 },
    ]);
    // One setting alone replaces only its own timing.
    assert.deepEqual((await eventTimes(t, { talk_ms: 0 })).map((e) => e.at), [100, 2_100, 2_100]);
  });

  it('refuses a timing that is not a whole number of milliseconds within its bounds, and a setting the simulator does not know, naming each', () => {
    const problems = routeInputProblems('simulator', {
      settings: { answer_latency_ms: -1, ring_ms: 'fast', talk_ms: 3_600_001, second_ms: 1.5, ring_time_ms: 10 },
      credentials: null,
    });
    assert.deepEqual(problems.map((p) => p.pointer).sort(), ['/settings/answer_latency_ms', '/settings/ring_ms', '/settings/ring_time_ms', '/settings/second_ms', '/settings/talk_ms']);
    assert.deepEqual(routeInputProblems('simulator', { settings: { answer_latency_ms: 0, ring_ms: 600_000, talk_ms: 3_600_000, second_ms: 60_000 }, credentials: null }), [], 'the bounds themselves are allowed');
  });
});
