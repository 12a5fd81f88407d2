// A campaign's calls_per_second held where its calls are placed (issue 15): the dispatcher spaces a
// campaign's dials at its own pace inside its route's, whatever number of attempts the scheduler
// queued at once, while direct runs on the same route keep the route's pace. On fake time
// (helpers/fake-time.ts), with the campaign scheduler and the dispatcher both running: the dial
// times asserted are the ones the code chose.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { CampaignScheduler } from '../src/campaigns/scheduler.js';
import { takePacingSlots } from '../src/dispatch/claim-runs.js';
import { planSlots } from '../src/dispatch/pacing-slots.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson } from './helpers/app.js';
import { act, addContacts, createCampaign } from './helpers/campaigns.js';
import { buildWithDispatcher, type DispatchEnv } from './helpers/dispatch.js';
import { FakeTime } from './helpers/fake-time.js';
import { createOrgFixture, type OrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const ROUTE_CPS = 10;

/** The most dials in any one-second window (the busiest starts at a dial). */
function busiestSecond(times: readonly number[]): number {
  return Math.max(0, ...times.map((start) => times.filter((x) => x >= start && x < start + 1000).length));
}

function gaps(times: readonly number[]): number[] {
  return times.slice(1).map((at, i) => at - (times[i] as number));
}

function spacingOf(env: DispatchEnv, cps: number): number {
  return (1000 * (1 + env.deps.config.DISPATCH_PACING_HEADROOM)) / cps;
}

async function setUp(t: TestContext, kind: Parameters<typeof buildWithDispatcher>[1]) {
  const time = new FakeTime(t);
  const env = await buildWithDispatcher(t, kind, { start: false, wrapStore: time.watch, env: { SIMULATOR_RING_MS: '20', SIMULATOR_TALK_MS: '50', CAMPAIGN_TICK_INTERVAL_MS: '1000' } });
  const f = await createOrgFixture(env.deps);
  const route = await createTelephonyConfiguration(
    env.deps.store,
    env.deps.cipher,
    { orgId: f.orgId, name: 'Shared', provider: 'simulator', callsPerSecond: ROUTE_CPS, maxConcurrentCalls: 50 },
    env.deps.clock.now(),
  );
  return { time, env, f, routeId: route.id };
}

/** A running campaign on the route with `contacts` contacts (numbers from `first`). */
async function campaign(env: DispatchEnv, f: OrgFixture, routeId: number, cps: number, contacts: number, first: number): Promise<number> {
  const { id } = await createCampaign(env.app, f, { telephony_configuration_id: routeId, calls_per_second: cps, max_concurrent_calls: 20 });
  await addContacts(env.app, f, id, Array.from({ length: contacts }, (_, i) => ({ phone_number: `+1202555${String(first + i)}` })));
  await act(env.app, f, id, 'start');
  return id;
}

/** Runs the scheduler and the dispatcher on fake time until `count` dials were placed and every call ended. */
async function dialAll(t: TestContext, time: FakeTime, env: DispatchEnv, count: number): Promise<void> {
  const scheduler = new CampaignScheduler(env.deps);
  time.start();
  t.after(async () => {
    await scheduler.stop();
    time.stop();
  });
  env.dispatcher.start();
  scheduler.start();
  await time.runUntil(() => env.simulator.dials.length >= count && env.dispatcher.liveCalls === 0, 60_000);
}

/** The dial times of a campaign's runs, in order. */
async function dialsOf(env: DispatchEnv, campaignId: number): Promise<number[]> {
  const rows = await env.deps.store.db.selectFrom('workflow_runs').select('id').where('campaign_id', '=', campaignId).execute();
  const ids = new Set(rows.map((r) => r.id));
  return env.simulator.dials.filter((d) => ids.has(d.runId)).map((d) => d.at);
}

describe('Campaign dial slots (planSlots)', () => {
  it("gives a campaign run the later of the route's slot and its campaign's, fills the route's slots between with direct runs, and leaves runs past the horizon without one", () => {
    // Route every 100 ms; the campaign (2 a second, no headroom) may dial again at 250 ms.
    const requests = [
      { campaignId: 7, campaignCallsPerSecond: 2 },
      { campaignId: 7, campaignCallsPerSecond: 2 },
      { campaignId: null, campaignCallsPerSecond: null },
      { campaignId: null, campaignCallsPerSecond: null },
      { campaignId: 7, campaignCallsPerSecond: 2 },
    ];
    const plan = planSlots(requests, { firstAt: 0, spacingMs: 100 }, new Map([[7, 250]]), 0, 1_000);
    assert.deepEqual(plan.slots, [250, 750, 0, 100, undefined]);
    assert.equal(plan.routeNextAt, 850);
    assert.deepEqual([...plan.campaignNextAt], [[7, 1_250]]);
  });

  it('gives every run a slot with no horizon (a re-slot), each campaign at its own spacing', () => {
    const requests = [
      { campaignId: 1, campaignCallsPerSecond: 5 },
      { campaignId: 1, campaignCallsPerSecond: 5 },
      { campaignId: 2, campaignCallsPerSecond: 10 },
      { campaignId: 2, campaignCallsPerSecond: 10 },
      { campaignId: 3, campaignCallsPerSecond: null },
    ];
    const plan = planSlots(requests, { firstAt: 1_000, spacingMs: 10 }, new Map(), 0, Number.POSITIVE_INFINITY);
    assert.deepEqual(plan.slots, [1_000, 1_200, 1_010, 1_110, 1_020]);
    assert.equal(plan.routeNextAt, 1_210);
  });
});

for (const store of await storeCases()) {
  describe(`Campaign dial pacing (${store.kind})`, { skip: store.skip }, () => {
    it("spaces a campaign's dials at its own calls_per_second inside a faster route, while direct runs on the route keep the route's pace", async (t) => {
      const { time, env, f, routeId } = await setUp(t, store.kind);
      const campaignId = await campaign(env, f, routeId, 2, 8, 1200);
      const direct: number[] = [];
      for (let i = 0; i < 15; i++) {
        const response = await postJson(env.app, `/api/v1/public/agent/${f.agentUuid}`, { phone_number: `+1202555${String(1300 + i)}`, telephony_configuration_id: routeId }, { key: f.apiKey });
        assert.equal(response.statusCode, 200, response.body);
        direct.push(response.json().workflow_run_id);
      }
      await dialAll(t, time, env, 8 + 15);

      assert.equal(new Set(env.simulator.dials.map((d) => d.runId)).size, 23, 'each run dialed once');
      const campaignDials = await dialsOf(env, campaignId);
      assert.equal(campaignDials.length, 8);
      const campaignSpacing = spacingOf(env, 2);
      assert.ok(Math.min(...gaps(campaignDials)) >= campaignSpacing, `the campaign's dials ${gaps(campaignDials).join(', ')} ms apart, at least ${campaignSpacing}`);
      assert.ok(busiestSecond(campaignDials) <= 2, `busiest one-second window of the campaign: ${busiestSecond(campaignDials)} dials`);

      // The route's pace over everything, and no route slot left idle while direct runs waited.
      const routeSpacing = spacingOf(env, ROUTE_CPS);
      const all = env.simulator.dials.map((d) => d.at);
      assert.ok(Math.min(...gaps(all)) >= routeSpacing, `the route's dials at least ${routeSpacing} ms apart`);
      assert.ok(busiestSecond(all) <= ROUTE_CPS);
      const lastDirect = env.simulator.dials.map((d, i) => (direct.includes(d.runId) ? i : -1)).reduce((a, b) => Math.max(a, b));
      const whileDirectWaited = gaps(all.slice(0, lastDirect + 1));
      assert.ok(
        whileDirectWaited.every((gap) => gap <= routeSpacing + 1),
        `while direct runs waited, every dial came one route slot after the previous (${whileDirectWaited.join(', ')} ms)`,
      );
    });

    it("gives late runs fresh slots (a node's catch-up) that keep their campaign's spacing after the slots it already took, and the route's", async (t) => {
      const { env, f, routeId } = await setUp(t, store.kind);
      const campaignId = await campaign(env, f, routeId, 2, 1, 1600);
      const run = { campaignId, campaignCallsPerSecond: 2 };
      const headroom = env.deps.config.DISPATCH_PACING_HEADROOM;
      const now = env.deps.clock.now();
      const first = (await takePacingSlots(env.deps.store, routeId, [run, run], now, headroom)).map((s) => s.dialAt);
      const second = (await takePacingSlots(env.deps.store, routeId, [run, { campaignId: null, campaignCallsPerSecond: null }, run], now, headroom)).map((s) => s.dialAt);
      const campaignSpacing = spacingOf(env, 2);
      const routeSpacing = spacingOf(env, ROUTE_CPS);
      assert.deepEqual(first, [now, now + campaignSpacing]);
      // The route's slots already taken run to now + campaignSpacing + routeSpacing; the campaign's to now + 2 × campaignSpacing.
      const routeNext = Math.ceil(now + campaignSpacing + routeSpacing);
      assert.deepEqual(second, [Math.ceil(now + 2 * campaignSpacing), routeNext, Math.ceil(now + 2 * campaignSpacing) + campaignSpacing]);
    });

    it('keeps each of two campaigns on one route at its own pace, neither waiting for the other', async (t) => {
      const { time, env, f, routeId } = await setUp(t, store.kind);
      const slow = await campaign(env, f, routeId, 2, 6, 1400);
      const fast = await campaign(env, f, routeId, 4, 10, 1500);
      await dialAll(t, time, env, 16);

      assert.equal(new Set(env.simulator.dials.map((d) => d.runId)).size, 16, 'each run dialed once');
      for (const [id, cps, count] of [[slow, 2, 6], [fast, 4, 10]] as const) {
        const dials = await dialsOf(env, id);
        assert.equal(dials.length, count);
        const spacing = spacingOf(env, cps);
        assert.ok(Math.min(...gaps(dials)) >= spacing, `campaign at ${cps}/s: dials ${gaps(dials).join(', ')} ms apart, at least ${spacing}`);
        assert.ok(busiestSecond(dials) <= cps, `campaign at ${cps}/s: busiest one-second window ${busiestSecond(dials)} dials`);
        // Its own pace, not the other's: all its dials within its count at its spacing, plus a scheduler tick.
        const span = (dials.at(-1) as number) - (dials[0] as number);
        assert.ok(span <= (count - 1) * spacing + 1_000 + 1, `campaign at ${cps}/s took ${span} ms for ${count} dials`);
      }
      const all = env.simulator.dials.map((d) => d.at);
      assert.ok(Math.min(...gaps(all)) >= spacingOf(env, ROUTE_CPS), "the route's own spacing holds over both");
    });
  });
}
