// One configuration's dials on one node, on a fake clock: in slot order, never closer than the
// spacing, and when the node falls behind, fresh slots for everything still waiting in one store
// transaction, not one per late dial.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RoutePacer, type PacedDial, type PacerSettings } from '../src/dispatch/route-pacer.js';

interface Harness {
  pacer: RoutePacer<PacedDial>;
  clock: { at: number };
  dials: { runId: number; at: number }[];
  reslots: number[];
  gaveUp: number[];
  idle: number;
  /** The configuration's next free slot in the (fake) store. */
  store: { next: number; transactions: number };
}

function harness(settings: PacerSettings, dialCostMs = 0, { frozen = false } = {}): Harness {
  const h: Harness = { pacer: undefined as unknown as RoutePacer<PacedDial>, clock: { at: 0 }, dials: [], reslots: [], gaveUp: [], idle: 0, store: { next: 0, transactions: 0 } };
  h.pacer = new RoutePacer<PacedDial>(settings, {
    now: () => h.clock.at,
    // A frozen pacer waits for ever: what it holds can be inspected at any time.
    sleep: (ms) => (frozen ? new Promise<void>(() => undefined) : Promise.resolve(void (h.clock.at += ms))),
    takeSlots: async (items, now) => {
      h.store.transactions++;
      const first = Math.max(h.store.next, now);
      h.store.next = first + items.length * settings.spacingMs;
      return consecutive(first, items.length, settings.spacingMs);
    },
    dial: (item) => {
      h.dials.push({ runId: item.runId, at: h.clock.at });
      // A busy node: each dial costs it this much time before it can do anything else.
      h.clock.at += dialCostMs;
    },
    onReslot: (count) => h.reslots.push(count),
    onGaveUp: (item) => h.gaveUp.push(item.runId),
    onIdle: () => h.idle++,
  });
  return h;
}

/** `count` consecutive slots from `first`, as the store hands them out to direct runs. */
function consecutive(first: number, count: number, spacingMs: number): number[] {
  return Array.from({ length: count }, (_, i) => first + i * spacingMs);
}

/** Claimed runs 1..count with consecutive slots from `start`, as a claim hands them over. */
function claimed(count: number, start: number, spacingMs: number): PacedDial[] {
  return Array.from({ length: count }, (_, i) => ({ runId: i + 1, dialAt: start + i * spacingMs }));
}

function minimumGap(dials: { at: number }[]): number {
  let gap = Number.POSITIVE_INFINITY;
  for (let i = 1; i < dials.length; i++) gap = Math.min(gap, (dials[i]?.at ?? 0) - (dials[i - 1]?.at ?? 0));
  return gap;
}

describe('Route pacer', () => {
  it('dials on-time runs exactly at their slots, in slot order, and takes no fresh slots', async () => {
    const settings = { spacingMs: 210, toleranceMs: 40, maxReslots: 20 };
    const h = harness(settings);
    h.store.next = 10 * 210;
    await h.pacer.add(claimed(10, 0, 210).reverse(), settings);
    assert.deepEqual(h.dials.map((d) => d.runId), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert.deepEqual(h.dials.map((d) => d.at), claimed(10, 0, 210).map((c) => c.dialAt));
    assert.equal(h.store.transactions, 0);
    assert.equal(h.idle, 1, 'says once when it has nothing left');
  });

  it('catches up on a backlog it cannot dial in time with a few batch re-slots, never closer than the spacing, each run dialed once', async () => {
    // 3,000 runs claimed at 10,000 calls per second, on a node that needs 1 ms per dial: it can keep none of its slots.
    const settings = { spacingMs: 0.105, toleranceMs: 40, maxReslots: 20 };
    const h = harness(settings, 1);
    h.store.next = 3_000 * 0.105;
    await h.pacer.add(claimed(3_000, 0, 0.105), settings);
    assert.equal(h.dials.length, 3_000);
    assert.equal(new Set(h.dials.map((d) => d.runId)).size, 3_000, 'no run dialed twice');
    assert.ok(minimumGap(h.dials) >= 0.105, `never closer than the spacing (${minimumGap(h.dials)} ms)`);
    // One re-slot per ~40 ms of lateness: about 3,000 ms / 41 ms, where one per late dial would be ~3,000.
    assert.ok(h.store.transactions <= 80, `${h.store.transactions} store transactions for 3,000 late dials`);
    assert.equal(h.reslots.length, h.store.transactions);
    assert.deepEqual(h.gaveUp, []);
  });

  it('keeps every one-second window at or under calls_per_second when the node stalls for less than the tolerance and catches up', async () => {
    // 100 calls per second with 5 % headroom: slots 10.5 ms apart; the node stalls 35 ms every 40th dial.
    const settings = { spacingMs: 10.5, toleranceMs: 40, maxReslots: 20 };
    const h = harness(settings);
    const pacerDeps = h.pacer as unknown as { deps: { dial: (item: PacedDial) => void } };
    pacerDeps.deps.dial = (item) => {
      h.dials.push({ runId: item.runId, at: h.clock.at });
      if (h.dials.length % 40 === 0) h.clock.at += 35;
    };
    h.store.next = 500 * 10.5;
    await h.pacer.add(claimed(500, 0, 10.5), settings);
    assert.equal(h.dials.length, 500);
    const times = h.dials.map((d) => d.at);
    for (const start of times) {
      const inWindow = times.filter((at) => at >= start && at < start + 1_000).length;
      assert.ok(inWindow <= 100, `${inWindow} dials in the second from ${start} ms`);
    }
  });

  it('takes fresh slots far enough ahead to keep them when the store answers slower than the tolerance, so it never dials outside a slot', async () => {
    // 150 calls per second over three nodes (slots 7 ms apart); this node's store round trip takes
    // 60 ms, more than the 40 ms tolerance. Fresh slots starting at the moment it asked were already
    // late when they arrived: it re-slotted until it gave up and dialed outside any slot, which
    // bunched its dial with the other nodes' punctual ones (a one-second window over the limit).
    const settings = { spacingMs: 7, toleranceMs: 40, maxReslots: 20 };
    const h = harness(settings);
    const pacerDeps = h.pacer as unknown as { deps: { takeSlots: (items: readonly PacedDial[], now: number) => Promise<number[]> } };
    pacerDeps.deps.takeSlots = async (items, now) => {
      h.store.transactions++;
      h.clock.at += 60;
      const first = Math.max(h.store.next, now);
      h.store.next = first + items.length * settings.spacingMs;
      return consecutive(first, items.length, settings.spacingMs);
    };
    // Its node stalled: every run is 100 ms past its slot when the pacer gets to it.
    h.clock.at = 100;
    h.store.next = 100;
    const runs = claimed(3, 0, 7);
    await h.pacer.add(runs, settings);
    assert.deepEqual(h.gaveUp, [], 'no run dialed outside its slot');
    assert.equal(h.dials.length, 3);
    // A re-slot moves each waiting run's slot in place: `dialAt` is the slot it was dialed against.
    const slots = new Map(runs.map((run) => [run.runId, run.dialAt]));
    for (const dial of h.dials) {
      const lateness = dial.at - (slots.get(dial.runId) ?? Number.NaN);
      assert.ok(lateness >= 0 && lateness <= settings.toleranceMs, `run ${dial.runId} dialed ${lateness} ms after its slot`);
    }
    assert.ok(h.store.transactions <= 3, `${h.store.transactions} re-slots`);
  });

  it('dials each run once, in slot order, when runs with earlier slots are added while it waits for a slot', async () => {
    const settings = { spacingMs: 10, toleranceMs: 40, maxReslots: 20 };
    const h = harness(settings);
    let added = false;
    const pacerDeps = h.pacer as unknown as { deps: { sleep: (ms: number) => Promise<void> } };
    pacerDeps.deps.sleep = async (ms) => {
      await Promise.resolve();
      // A claim lands while the pacer sleeps until run 1's slot, with a slot before it.
      if (!added) {
        added = true;
        void h.pacer.add([{ runId: 2, dialAt: 100 }], settings);
      }
      h.clock.at += ms;
    };
    h.store.next = 1_000;
    await h.pacer.add([{ runId: 1, dialAt: 200 }], settings);
    // Run 2's slot had passed when it came first: it takes a fresh one; run 1 keeps its own.
    assert.deepEqual(h.dials, [{ runId: 1, at: 200 }, { runId: 2, at: 1_000 }], 'each run dialed once, in slot order');
  });

  it('keeps the slots a claim reserved when it is added while the pacer re-slots the runs that were late', async () => {
    const settings = { spacingMs: 10, toleranceMs: 40, maxReslots: 20 };
    const h = harness(settings);
    const pacerDeps = h.pacer as unknown as { deps: { takeSlots: (items: readonly PacedDial[], now: number) => Promise<number[]> } };
    const taken: number[] = [];
    pacerDeps.deps.takeSlots = async (items, now) => {
      taken.push(items.length);
      // A claim of another batch commits (its slots reserved in the store) during this round trip.
      await Promise.resolve();
      if (taken.length === 1) void h.pacer.add([{ runId: 9, dialAt: 500 }], settings);
      const first = Math.max(h.store.next, now);
      h.store.next = first + items.length * settings.spacingMs;
      return consecutive(first, items.length, settings.spacingMs);
    };
    h.clock.at = 100;
    h.store.next = 300;
    const late = claimed(2, 0, 10);
    await h.pacer.add(late, settings);
    assert.deepEqual(taken, [2], 'fresh slots for the two late runs only');
    const nine = h.dials.find((d) => d.runId === 9);
    assert.equal(nine?.at, 500, 'the added run was dialed at the slot its claim reserved');
    assert.deepEqual(h.dials.map((d) => d.runId), [1, 2, 9]);
  });

  it('re-slots only the runs whose slots have passed: a run still on time keeps the slot its claim reserved', async () => {
    const settings = { spacingMs: 100, toleranceMs: 40, maxReslots: 20 };
    const h = harness(settings);
    h.store.next = 2_000;
    // Run 1's slot passed 50 ms ago (the node fell behind); run 2 (a slow campaign's, say) is due in 950 ms.
    h.clock.at = 50;
    await h.pacer.add([{ runId: 1, dialAt: 0 }, { runId: 2, dialAt: 1_000 }], settings);
    assert.deepEqual(h.reslots, [1], 'one fresh slot, for the late run only');
    assert.deepEqual(h.dials, [{ runId: 2, at: 1_000 }, { runId: 1, at: 2_000 }]);
  });

  it('dials a run anyway, and says so, once it was re-slotted maxReslots times in a row', async () => {
    const settings = { spacingMs: 10, toleranceMs: 1, maxReslots: 3 };
    const h = harness(settings, 0);
    // Every fresh slot is already 5 ms in the past when the pacer gets it (another node keeps taking the next ones).
    const pacerDeps = h.pacer as unknown as { deps: { takeSlots: (items: readonly PacedDial[], now: number) => Promise<number[]> } };
    pacerDeps.deps.takeSlots = async (items, now) => {
      h.store.transactions++;
      return consecutive(now - 5, items.length, settings.spacingMs);
    };
    await h.pacer.add([{ runId: 1, dialAt: -100 }], settings);
    assert.equal(h.store.transactions, 3);
    assert.deepEqual(h.gaveUp, [1]);
    assert.deepEqual(h.dials.map((d) => d.runId), [1]);
  });

  it('lets the dispatcher claim more only while what waits is on time and due within the lookahead', () => {
    const settings = { spacingMs: 100, toleranceMs: 40, maxReslots: 20 };
    const h = harness(settings, 0, { frozen: true });
    assert.equal(h.pacer.canTakeMore(0, 100), true, 'nothing waits');
    void h.pacer.add(claimed(3, 1_000, 100), settings);
    assert.equal(h.pacer.pending, 3);
    assert.equal(h.pacer.canTakeMore(1_000, 100), false, 'the last slot is 200 ms away, past the lookahead');
    assert.equal(h.pacer.canTakeMore(1_000, 250), true, 'all due within the lookahead, none late');
    assert.equal(h.pacer.canTakeMore(1_041, 250), false, 'the first is late: the node is behind its slots');
  });
});
