// The campaign scheduler (issue 15) with the simulator dialing: retries up to the maximum with the
// clock moved by hand, completion, the calling policy per contact (suppression, per-number cap,
// calling hours in the contact's own zone), schedule windows, pause and resume, the circuit
// breaker, and a bounded window of queued runs for a large list. The test ticks the scheduler
// itself (runCampaignTick), so what it sees depends on the clock it moves, never on a timer.
import assert from 'node:assert/strict';
import { CampaignScheduler, runCampaignTick } from '../src/campaigns/scheduler.js';
import { claimCampaigns, releaseCampaignLease } from '../src/store/statements/campaign-statements.js';
import { setCallingHours, setOrganizationLimits } from '../src/orgs/organizations.js';
import { getRun } from '../src/runs/read-run.js';
import { build, postJson } from './helpers/app.js';
import { act, addContacts, campaignOf, contactsOf, createCampaign, offsetClock, openRuns, untilRunsEnd } from './helpers/campaigns.js';
import { buildWithDispatcher } from './helpers/dispatch.js';
import { FakeTime } from './helpers/fake-time.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const COMPLETES = '+12025550100';
const BUSY = '+12025550101';
const NO_ANSWER = '+12025550102';
const DIAL_FAILS = '+12025550104';
const DROPS = '+12025550105';

for (const store of await storeCases()) {
  describe(`Campaign scheduler (${store.kind})`, { skip: store.skip }, () => {
    it('retries busy and no_answer contacts delay_seconds after each attempt ends, up to max_attempts, then completes the campaign', async (t) => {
      const clock = offsetClock();
      const env = await buildWithDispatcher(t, store.kind, { clock });
      const f = await createOrgFixture(env.deps);
      const { id } = await createCampaign(env.app, f, { retry: { max_attempts: 3, delay_seconds: 60, on: ['busy', 'no_answer'] } });
      await addContacts(env.app, f, id, [{ phone_number: COMPLETES }, { phone_number: BUSY }, { phone_number: NO_ANSWER }]);
      assert.equal((await runCampaignTick(env.deps)).created, 0, 'a draft campaign creates nothing');
      await act(env.app, f, id, 'start');

      for (let attempt = 1; attempt <= 3; attempt++) {
        const tick = await runCampaignTick(env.deps);
        assert.equal(tick.created, attempt === 1 ? 3 : 2, `attempt ${attempt}`);
        await untilRunsEnd(env, id);
        await runCampaignTick(env.deps); // settles
        if (attempt < 3) {
          const waiting = await contactsOf(env, f, id);
          assert.equal(waiting.get(BUSY)?.status, 'pending');
          const due = Date.parse(waiting.get(BUSY)?.next_attempt_at ?? '');
          const ended = Date.parse((await getRun(env.deps.store, f.orgId, waiting.get(BUSY)?.attempts.at(-1)?.run_id ?? 0)).ended_at ?? '');
          assert.equal(due, ended + 60_000, 'the next attempt is due delay_seconds after the last ended');
          assert.equal((await runCampaignTick(env.deps)).created, 0, 'nothing is created before the delay');
          clock.advance(61_000);
        }
      }
      const contacts = await contactsOf(env, f, id);
      assert.equal(contacts.get(COMPLETES)?.status, 'reached');
      assert.deepEqual(contacts.get(COMPLETES)?.attempts.map((a) => a.state), ['completed']);
      assert.equal(contacts.get(BUSY)?.status, 'exhausted');
      assert.deepEqual(contacts.get(BUSY)?.attempts.map((a) => [a.attempt, a.state]), [[1, 'busy'], [2, 'busy'], [3, 'busy']]);
      assert.deepEqual(contacts.get(NO_ANSWER)?.attempts.map((a) => a.state), ['no_answer', 'no_answer', 'no_answer']);

      const runId = contacts.get(BUSY)?.attempts[1]?.run_id ?? 0;
      const run = await getRun(env.deps.store, f.orgId, runId);
      assert.deepEqual([run.campaign_id, run.contact_id, run.attempt], [id, contacts.get(BUSY)?.id, 2], 'each attempt is an ordinary run naming its campaign, contact and attempt');
      const dials = env.simulator.dials.map((d) => d.runId);
      assert.equal(dials.length, 7);
      assert.equal(new Set(dials).size, 7, 'every attempt dialed once');

      await runCampaignTick(env.deps);
      const done = await campaignOf(env, f, id);
      assert.equal(done.state, 'completed');
      assert.deepEqual({ ...done.progress, outcomes: undefined }, { total: 3, pending: 0, in_progress: 0, reached: 1, exhausted: 2, suppressed: 0, invalid: 0, canceled: 0, attempts: 7, outcomes: undefined, answered_by: { human: 0, machine: 0, fax: 0, unknown: 0 } });
      assert.deepEqual(done.progress.outcomes, { completed: 1, busy: 3, no_answer: 3 });
    });

    it('marks a suppressed contact suppressed, defers a capped one and one outside calling hours in its own time zone, and dials none of them', async (t) => {
      // Monday 2026-03-02 15:00 UTC: 10:00 in New York, 00:00 the next day in Tokyo.
      const clock = { now: () => Date.parse('2026-03-02T15:00:00Z') };
      const { app, deps } = await build(t, store.kind, { clock });
      const f = await createOrgFixture(deps);
      await setCallingHours(deps.store, f.orgId, { timezone: 'America/New_York', outside: 'defer', windows: { mon: ['09:00-18:00'], tue: ['09:00-18:00'] } });
      await setOrganizationLimits(deps.store, f.orgId, { number_max_calls: 1, number_window_seconds: 3600 });
      const suppressed = '+12025550131';
      const capped = '+12025550132';
      assert.equal((await app.inject({ method: 'PUT', url: `/api/v1/public/suppressions/${encodeURIComponent(suppressed)}`, headers: { 'x-api-key': f.apiKey } })).statusCode, 200);
      assert.equal((await postJson(app, PATHS.initiateCall(f.agentUuid), { phone_number: capped }, { key: f.apiKey })).statusCode, 200);
      const { id } = await createCampaign(app, f);
      await addContacts(app, f, id, [{ phone_number: suppressed }, { phone_number: capped }, { phone_number: '+12025550133', timezone: 'Asia/Tokyo' }, { phone_number: '+12025550134' }]);
      await act(app, f, id, 'start');
      assert.equal((await runCampaignTick(deps)).created, 1);
      const contacts = await contactsOf({ app, deps, close: async () => undefined }, f, id);
      assert.equal(contacts.get(suppressed)?.status, 'suppressed');
      assert.equal(contacts.get(capped)?.status, 'pending');
      assert.equal(contacts.get(capped)?.next_attempt_at, '2026-03-02T16:00:00.000Z', 'deferred until the cap opens');
      assert.equal(contacts.get('+12025550133')?.status, 'pending');
      assert.equal(contacts.get('+12025550133')?.next_attempt_at, '2026-03-03T00:00:00.000Z', '09:00 in Tokyo');
      assert.equal(contacts.get('+12025550134')?.status, 'in_progress');
      assert.equal(contacts.get(suppressed)?.attempts.length, 0);
    });

    it('creates no attempt outside the schedule windows, across a daylight-saving day, and creates them inside', async (t) => {
      let now = Date.parse('2026-03-08T13:30:00Z'); // Sunday of the spring-forward in New York: 09:30 EDT (08:30 EST the day before)
      const { app, deps } = await build(t, store.kind, { clock: { now: () => now } });
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f, { schedule: { timezone: 'America/New_York', windows: { sun: ['10:00-12:00'], mon: ['09:00-10:00'] } } });
      await addContacts(app, f, id, [{ phone_number: '+12025550141' }]);
      await act(app, f, id, 'start');
      assert.equal((await runCampaignTick(deps)).created, 0, '09:30 EDT is before the window');
      now = Date.parse('2026-03-08T14:00:00Z'); // 10:00 EDT (it would be 09:00 under EST)
      assert.equal((await runCampaignTick(deps)).created, 1, '10:00 EDT is inside');
      // No dispatcher here: the attempt is still queued when the window closes at 12:00 EDT.
      now = Date.parse('2026-03-08T16:00:00Z');
      await runCampaignTick(deps);
      await runCampaignTick(deps);
      const [contact] = (await contactsOf({ app, deps, close: async () => undefined }, f, id)).values();
      assert.equal(contact?.status, 'pending', 'given back for the next window');
      assert.deepEqual(contact?.attempts.map((a) => a.state), ['canceled']);
      const run = await getRun(deps.store, f.orgId, contact?.attempts[0]?.run_id ?? 0);
      assert.equal(run.outcome_reason, 'outside_campaign_schedule');
      now = Date.parse('2026-03-09T13:00:00Z'); // Monday 09:00 EDT
      assert.equal((await runCampaignTick(deps)).created, 1, 'the next window calls it again');
    });

    it('creates at most calls_per_second attempts a second, with no more than one second saved up', async (t) => {
      let now = Date.parse('2026-03-02T15:00:00Z');
      const { app, deps } = await build(t, store.kind, { clock: { now: () => now } });
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f, { calls_per_second: 2 });
      await addContacts(app, f, id, Array.from({ length: 20 }, (_, i) => ({ phone_number: `+1202555${String(1100 + i)}` })));
      await act(app, f, id, 'start');
      const created: number[] = [];
      for (const step of [0, 0, 499, 1, 1000, 10_000]) {
        now += step;
        created.push((await runCampaignTick(deps)).created);
      }
      assert.deepEqual(created, [2, 0, 0, 1, 2, 2]);
    });

    it('creates attempts of a campaign slower than one call a second, one per slot, none saved up', async (t) => {
      let now = Date.parse('2026-03-02T15:00:00Z');
      const { app, deps } = await build(t, store.kind, { clock: { now: () => now } });
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f, { calls_per_second: 0.25 });
      await addContacts(app, f, id, Array.from({ length: 10 }, (_, i) => ({ phone_number: `+1202555${String(1200 + i)}` })));
      await act(app, f, id, 'start');
      const created: number[] = [];
      for (const step of [0, 1000, 2999, 1, 60_000]) {
        now += step;
        created.push((await runCampaignTick(deps)).created);
      }
      assert.deepEqual(created, [1, 0, 0, 1, 1], 'one every 4 s; a minute idle saves nothing up');
    });

    it('pauses at once: queued attempts end canceled undialed and their contacts get the attempt back; resume dials them', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const { id } = await createCampaign(env.app, f);
      await addContacts(env.app, f, id, [{ phone_number: '+12025550151' }, { phone_number: '+12025550152' }]);
      await act(env.app, f, id, 'start');
      assert.equal((await runCampaignTick(env.deps)).created, 2);
      const paused = await act(env.app, f, id, 'pause');
      assert.equal(paused.json().state, 'paused');
      assert.equal(await openRuns(env, id), 0, 'no queued attempt is left to dial');
      env.dispatcher.start();
      await runCampaignTick(env.deps);
      assert.equal((await runCampaignTick(env.deps)).created, 0, 'a paused campaign creates nothing');
      const waiting = await contactsOf(env, f, id);
      for (const contact of waiting.values()) {
        assert.equal(contact.status, 'pending');
        assert.deepEqual(contact.attempts.map((a) => a.state), ['canceled']);
      }
      await act(env.app, f, id, 'resume');
      assert.equal((await runCampaignTick(env.deps)).created, 2, 'max_attempts 1: the canceled attempt was given back');
      await untilRunsEnd(env, id);
      await runCampaignTick(env.deps);
      await runCampaignTick(env.deps);
      const done = await campaignOf(env, f, id);
      assert.equal(done.state, 'completed');
      assert.equal(done.progress.reached, 2);
      const canceledRuns = [...waiting.values()].map((c) => c.attempts[0]?.run_id);
      assert.ok(env.simulator.dials.every((d) => !canceledRuns.includes(d.runId)), 'the canceled attempts were never dialed');
      assert.equal(env.simulator.dials.length, 2);
    });

    it("stops a paused campaign's queued attempts on its next tick when the pause's own sweep never ran (its node died after committing the pause)", async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const { id } = await createCampaign(env.app, f);
      await addContacts(env.app, f, id, [{ phone_number: '+12025550153' }, { phone_number: '+12025550154' }]);
      await act(env.app, f, id, 'start');
      assert.equal((await runCampaignTick(env.deps)).created, 2);
      // The pause committed; the sweep that follows it in the API did not happen.
      await env.deps.store.db.updateTable('campaigns').set({ state: 'paused', paused_reason: 'request' }).where('id', '=', id).execute();
      assert.equal(await openRuns(env, id), 2);
      await runCampaignTick(env.deps);
      assert.equal(await openRuns(env, id), 0, 'the tick stopped them');
      env.dispatcher.start();
      await runCampaignTick(env.deps);
      assert.equal(env.simulator.dials.length, 0, 'nothing of a paused campaign was dialed');
    });

    it('trips the circuit breaker when the failed share of ended attempts reaches failure_ratio, pausing with reason circuit_breaker', async (t) => {
      const env = await buildWithDispatcher(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const { id } = await createCampaign(env.app, f, { max_concurrent_calls: 2, circuit_breaker: { failure_ratio: 0.5, window_seconds: 60, min_calls: 2 } });
      await addContacts(env.app, f, id, [{ phone_number: DIAL_FAILS }, { phone_number: DROPS }, { phone_number: '+12025550161' }, { phone_number: '+12025550162' }]);
      await act(env.app, f, id, 'start');
      assert.equal((await runCampaignTick(env.deps)).created, 2, 'max_concurrent_calls bounds the attempts');
      await untilRunsEnd(env, id);
      await runCampaignTick(env.deps);
      const paused = await campaignOf(env, f, id);
      assert.deepEqual([paused.state, paused.paused_reason], ['paused', 'circuit_breaker']);
      assert.equal(paused.progress.pending, 2, 'the rest wait');
      assert.equal((await runCampaignTick(env.deps)).created, 0);
      assert.equal(env.simulator.dials.length, 2);
    });

    it('cancels a campaign: queued attempts and pending contacts end canceled, and the scheduler finishes with it', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const { id } = await createCampaign(env.app, f, { max_concurrent_calls: 1 });
      await addContacts(env.app, f, id, [{ phone_number: '+12025550171' }, { phone_number: '+12025550172' }]);
      await act(env.app, f, id, 'start');
      await runCampaignTick(env.deps);
      assert.equal((await act(env.app, f, id, 'cancel')).json().state, 'canceled');
      await runCampaignTick(env.deps);
      const contacts = await contactsOf(env, f, id);
      assert.deepEqual([...contacts.values()].map((c) => c.status), ['canceled', 'canceled']);
      assert.equal(await openRuns(env, id), 0);
      const row = await env.deps.store.db.selectFrom('campaigns').select('finished_at').where('id', '=', id).executeTakeFirstOrThrow();
      assert.notEqual(row.finished_at, null);
    });

    it('ticks every CAMPAIGN_TICK_INTERVAL_MS on its own, creating the first attempt within one interval after starts_at', async (t) => {
      const time = new FakeTime(t);
      const { app, deps } = await build(t, store.kind, { wrapStore: time.watch, env: { CAMPAIGN_TICK_INTERVAL_MS: '1000' } });
      const f = await createOrgFixture(deps);
      const startsAt = Math.ceil(Date.now() / 1000) * 1000 + 5_000;
      const { id } = await createCampaign(app, f, { starts_at: new Date(startsAt).toISOString() });
      await addContacts(app, f, id, [{ phone_number: '+12025550181' }]);
      await act(app, f, id, 'start');
      let created = 0;
      // The scheduler signals the dispatcher when it has created attempts.
      const off = deps.signals.onWork(() => created++);
      time.start();
      const scheduler = new CampaignScheduler(deps);
      scheduler.start();
      t.after(async () => {
        off();
        await scheduler.stop();
        time.stop();
      });
      await time.runUntil(() => created > 0, 10_000);
      assert.ok(Date.now() >= startsAt, 'nothing before starts_at');
      assert.ok(Date.now() < startsAt + 1_000, `created within one tick interval of starts_at (at +${Date.now() - startsAt} ms)`);
    });

    it('leases the campaign worked least recently first, so every campaign gets its turn', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const ids: number[] = [];
      for (let i = 0; i < 3; i++) {
        const { id } = await createCampaign(app, f);
        await act(app, f, id, 'start');
        ids.push(id);
      }
      let now = deps.clock.now();
      const [held] = await claimCampaigns(deps.store, 'node-a', now, now + 30_000, 1);
      assert.ok(held);
      const others = await claimCampaigns(deps.store, 'node-b', now, now + 30_000, 10);
      assert.deepEqual(others.map((r) => r.id).sort(), ids.filter((id) => id !== held.id).sort(), 'another node never takes a leased campaign');
      await releaseCampaignLease(deps.store, held.id, 'node-a', now);
      for (const row of others) await releaseCampaignLease(deps.store, row.id, 'node-b', now);
      const turns: number[] = [];
      for (let turn = 0; turn < 3; turn++) {
        now += 1;
        const [leased] = await claimCampaigns(deps.store, 'node-a', now, now + 30_000, 1);
        assert.ok(leased);
        turns.push(leased.id);
        await releaseCampaignLease(deps.store, leased.id, 'node-a', now);
      }
      assert.deepEqual([...turns].sort(), [...ids].sort(), 'three turns, three campaigns');
    });

    it('never holds more than max_concurrent_calls queued or live runs of a 2,000-contact campaign, and reaches every contact', { timeout: 300_000 }, async (t) => {
      // Every deadline far beyond the simulator's 1 ms phases: a node starved of CPU on a loaded
      // machine must not end a call by its ring timeout, maximum duration or the reaper, since the
      // test counts every contact reached.
      const patient = { RING_TIMEOUT_MS: '120000', MAX_CALL_DURATION_MS: '120000', REAPER_GRACE_MS: '120000', DISPATCH_LEASE_MS: '120000' };
      const env = await buildWithDispatcher(t, store.kind, { env: { CAMPAIGN_BATCH_SIZE: '100', SIMULATOR_RING_MS: '1', SIMULATOR_TALK_MS: '1', SIMULATOR_LATENCY_MS: '1', ...patient } });
      const f = await createOrgFixture(env.deps);
      const { id } = await createCampaign(env.app, f, { max_concurrent_calls: 40 });
      const csv = `phone_number\n${Array.from({ length: 2000 }, (_, i) => `+1415555${String(i).padStart(4, '0')}`).join('\n')}\n`;
      const imported = await env.app.inject({ method: 'POST', url: `/api/v1/public/campaigns/${id}/contacts`, headers: { 'x-api-key': f.apiKey, 'content-type': 'text/csv' }, payload: csv });
      assert.equal(imported.json().added, 2000, imported.body);
      await act(env.app, f, id, 'start');
      let most = 0;
      for (let tick = 0; tick < 2000; tick++) {
        await runCampaignTick(env.deps);
        most = Math.max(most, await openRuns(env, id));
        if ((await campaignOf(env, f, id)).state === 'completed') break;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const done = await campaignOf(env, f, id);
      assert.equal(done.state, 'completed');
      assert.equal(done.progress.reached, 2000, JSON.stringify(done.progress));
      assert.ok(most <= 40, `at most 40 open runs at once (saw ${most})`);
      assert.ok(most > 1, 'it did run attempts side by side');
      assert.equal(new Set(env.simulator.dials.map((d) => d.runId)).size, 2000);
      assert.equal(env.simulator.dials.length, 2000);
    });
  });
}
