// The run write queue (store/engine/run-write-queue.ts): call progress written together per moment, in
// order per run, each caller answered with its own result. On PostgreSQL the writes of a moment
// share one group commit and one statement per kind; on SQLite each is written alone.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Store } from '../src/store/engine/store.js';
import { RunWriteQueue } from '../src/store/engine/run-write-queue.js';
import { transitionWrite } from '../src/runs/transition-run.js';
import { build, postJson } from './helpers/app.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';

/** The store, counting the group commits (`batched`) asked of it. */
function countingBatches(store: Store): { store: Store; batches: () => number } {
  let batches = 0;
  return {
    store: { ...store, batched: (work) => (batches++, store.batched(work)) },
    batches: () => batches,
  };
}

for (const { kind, skip } of await storeCases()) {
  describe(`Run write queue (${kind})`, { skip }, () => {
    async function setUp(t: Parameters<typeof build>[0], runs: number) {
      let counting: ReturnType<typeof countingBatches> | undefined;
      const env = await build(t, kind, {
        wrapStore: (store) => {
          counting = countingBatches(store);
          return counting.store;
        },
      });
      const f = await createOrgFixture(env.deps);
      const ids: number[] = [];
      for (let i = 0; i < runs; i++) {
        const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123' }, { key: f.apiKey });
        assert.equal(response.statusCode, 200);
        ids.push((response.json() as { workflow_run_id: number }).workflow_run_id);
      }
      const events = async (runId: number) =>
        (await env.deps.store.db.selectFrom('run_events').select(['seq', 'type']).where('run_id', '=', runId).orderBy('seq').execute()).map((e) => `${e.seq}:${e.type}`);
      const run = (runId: number) => env.deps.store.db.selectFrom('workflow_runs').selectAll().where('id', '=', runId).executeTakeFirstOrThrow();
      return { env, ids, events, run, batches: () => (counting as ReturnType<typeof countingBatches>).batches() };
    }

    it('applies the writes one run makes in a moment in the order it made them, each caller answered with its own result', async (t) => {
      const { env, ids, events, run, batches } = await setUp(t, 4);
      const { lifecycle } = env.deps;
      const at = Date.now();
      const before = batches();
      const [queuedOnly, ...live] = ids as [number, ...number[]];
      // All made in one turn: each run's writes follow each other; the first run's ringing finds it
      // still queued (its guard does not hold) and writes nothing.
      const results = await Promise.all([
        lifecycle.transition(queuedOnly, 'ringing', { at }),
        ...live.flatMap((id, i) => [
          lifecycle.transition(id, 'dialing', { at, deadlineAt: at + 1_000 * (i + 1) }),
          lifecycle.recordDial(id, { providerCallId: `CALL${id}`, sentAt: at + 1, dialingDeadlineAt: at + 1_000 * (i + 1) }),
          lifecycle.transition(id, 'ringing', { at: at + 2, rawProviderStatus: 'ringing', deadlineAt: at + 10_000 }),
          lifecycle.transition(id, 'in_progress', { at: at + 3, rawProviderStatus: 'answered', deadlineAt: at + 20_000 }),
        ]),
      ]);
      assert.equal(results[0], undefined, 'a run not in a predecessor state is not moved');
      for (const [i, id] of live.entries()) {
        const [dialing, dial, ringing, answered] = results.slice(1 + 4 * i, 5 + 4 * i) as [{ seq: number }, { state: string; cancelRequested: boolean }, { seq: number }, { seq: number }];
        assert.deepEqual([dialing.seq, ringing.seq, answered.seq], [2, 3, 4]);
        assert.deepEqual(dial, { state: 'dialing', cancelRequested: false }, 'the dial is recorded after the claim it follows');
        assert.deepEqual(await events(id), ['1:queued', '2:dialing', '3:ringing', '4:in_progress']);
        const row = await run(id);
        assert.equal(row.state, 'in_progress');
        assert.equal(row.provider_call_id, `CALL${id}`);
        assert.equal(row.dial_sent_at, at + 1);
        assert.equal(row.deadline_at, at + 20_000);
        assert.equal(row.answered_at, at + 3);
      }
      assert.deepEqual(await events(queuedOnly), ['1:queued']);
      const written = batches() - before;
      if (kind === 'postgres') assert.equal(written, 4, 'one group commit per step, for all the runs together');
      else assert.equal(written, 13, 'each write alone');

      // Guards with values per run: the reaper's deadline and an exact state.
      const ended = await Promise.all(live.map((id) => lifecycle.transition(id, 'failed', { at: at + 4, reason: 'reaped', onlyFrom: 'in_progress', onlyIfDeadlineBefore: at + 20_001 })));
      assert.deepEqual(ended.map((e) => e?.seq), [5, 5, 5]);
      const again = await Promise.all(live.map((id) => lifecycle.transition(id, 'completed', { at: at + 5, reason: 'hangup' })));
      assert.deepEqual(again, [undefined, undefined, undefined], 'nothing moves a run out of a terminal state');
      for (const id of live) {
        const row = await run(id);
        assert.deepEqual([row.state, row.outcome_reason, row.deadline_at, row.ended_at], ['failed', 'reaped', null, at + 4]);
      }
    });

    it('leaves a run alone when its deadline guard does not hold, while moving the others of the same statement', async (t) => {
      const { env, ids, events } = await setUp(t, 2);
      const { lifecycle } = env.deps;
      const at = Date.now();
      const [early, late] = ids as [number, number];
      await Promise.all([lifecycle.transition(early, 'dialing', { at, deadlineAt: at + 1_000 }), lifecycle.transition(late, 'dialing', { at, deadlineAt: at + 5_000 })]);
      const reaped = await Promise.all(ids.map((id) => lifecycle.transition(id, 'failed', { at: at + 2_000, reason: 'dispatch_interrupted', onlyIfDeadlineBefore: at + 2_000 })));
      assert.deepEqual(reaped.map((r) => r?.seq), [3, undefined]);
      assert.deepEqual(await events(early), ['1:queued', '2:dialing', '3:failed']);
      assert.deepEqual(await events(late), ['1:queued', '2:dialing']);
    });

    // PostgreSQL only: on SQLite every write is a statement of its own already, so none shares one.
    if (kind === 'postgres') it('fails only the write that cannot be written when the statement it shared fails', async (t) => {
      const { env, ids, events } = await setUp(t, 3);
      const queue = new RunWriteQueue(env.deps.store);
      const at = Date.now();
      const writes = ids.map((id, i) => {
        const write = transitionWrite(id, 'dialing', { at, deadlineAt: at + 1_000 });
        // The second carries a value its column cannot take: the shared statement fails.
        return i === 1 ? { ...write, columns: { ...write.columns, deadline_at: 'soon' as unknown as number } } : write;
      });
      const results = await Promise.allSettled(writes.map((w) => queue.transition(w)));
      assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
      assert.deepEqual(await events(ids[0] as number), ['1:queued', '2:dialing']);
      assert.deepEqual(await events(ids[1] as number), ['1:queued'], 'nothing of the failed write was kept');
      assert.deepEqual(await events(ids[2] as number), ['1:queued', '2:dialing']);
    });
  });
}
