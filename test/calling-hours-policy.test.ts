// Calling hours on both stores, with a fake clock: refusing with the next allowed time, deferring a
// run to scheduled_for (not claimed before, claimed after), deferring again at claim time when a
// window closed while the run waited, the fallback zone, the queue cap and expiry of deferred runs,
// and ?dry_run=true.
import assert from 'node:assert/strict';
import { claimRuns, type ClaimOptions } from '../src/dispatch/claim-runs.js';
import { expireQueuedRuns } from '../src/dispatch/end-runs.js';
import { setCallingHours, setOrganizationLimits } from '../src/orgs/organizations.js';
import type { CallingHours } from '../src/policy/calling-hours.js';
import { getRun } from '../src/runs/read-run.js';
import { build, getJson, postJson } from './helpers/app.js';
import { buildWithDispatcher, eventTypes } from './helpers/dispatch.js';
import { FakeTime } from './helpers/fake-time.js';
import { countRuns, createOrgFixture, definition, OPERATION_CASES, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

/** The service's clock, moved by the test. */
class ManualClock {
  constructor(public current: number) {}
  now(): number {
    return this.current;
  }
  set(iso: string): void {
    this.current = Date.parse(iso);
  }
}

// Monday 2026-11-23 to Friday: 09:00-12:00 and 13:00-20:00 in the callee's time.
const WEEKDAY_HOURS = (outside: 'defer' | 'refuse', timezone = 'America/New_York'): CallingHours => ({
  timezone,
  outside,
  windows: { mon: ['09:00-12:00', '13:00-20:00'], tue: ['09:00-12:00', '13:00-20:00'], wed: ['09:00-20:00'] },
});
const NEW_YORK = '+12125550123';
const ALASKA = '+19075550123'; // Anchorage and Adak
const NO_ZONE = '+80012345678'; // international freephone: no known zone

const claimAt = (now: number, lookaheadMs = 0): ClaimOptions => ({ nodeId: 'node-a', now, leaseMs: 30_000, lookaheadMs, batchSize: 10, pacingHeadroom: 0 });

/**
 * Calling hours whose only window opens at the start of the second whole minute after `now` and
 * lasts ten minutes, in a fixed-offset zone of the tz database chosen so that the window does not
 * cross midnight (the dispatcher test runs on fake time that starts at the real time).
 */
function windowOpeningSoon(now: number): { hours: CallingHours; opensAt: number } {
  const opensAt = Math.ceil(now / 60_000) * 60_000 + 60_000;
  const hourUtc = new Date(opensAt).getUTCHours();
  const shift = hourUtc >= 1 && hourUtc <= 21 ? 0 : 6; // local = UTC + shift
  const local = new Date(opensAt + shift * 3_600_000);
  const hhmm = (d: Date) => `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
  const day = (['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const)[local.getUTCDay()] ?? 'mon';
  const timezone = shift === 0 ? 'Etc/UTC' : 'Etc/GMT-6'; // POSIX sign: Etc/GMT-6 is UTC+6
  return { hours: { timezone, outside: 'defer', windows: { [day]: [`${hhmm(local)}-${hhmm(new Date(local.getTime() + 10 * 60_000))}`] } }, opensAt };
}

for (const store of await storeCases()) {
  describe(`Calling hours with the dispatcher on fake time (${store.kind})`, { skip: store.skip }, () => {
    it('dials a deferred run only once its scheduled_for has come, and exactly once', async (t) => {
      const time = new FakeTime(t);
      const env = await buildWithDispatcher(t, store.kind, { start: false, wrapStore: time.watch, env: { DISPATCH_POLL_INTERVAL_MS: '1000' } });
      const f = await createOrgFixture(env.deps);
      time.start();
      try {
        const { hours, opensAt } = windowOpeningSoon(Date.now());
        await setCallingHours(env.deps.store, f.orgId, hours);
        const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: NO_ZONE }, { key: f.apiKey });
        assert.equal(response.json().status, 'scheduled', response.body);
        assert.equal(response.json().scheduled_for, new Date(opensAt).toISOString());
        const runId = response.json().workflow_run_id as number;
        env.dispatcher.start();
        await time.runUntil(() => Date.now() >= opensAt - 1, 3 * 60_000);
        assert.equal(env.simulator.dials.length, 0, 'not dialed before scheduled_for');
        await time.runUntil(() => env.simulator.dials.length > 0, 5_000);
        const dial = env.simulator.dials[0];
        assert.equal(dial?.runId, runId);
        assert.ok((dial?.at ?? 0) >= opensAt, 'dialed inside the window');
        await time.runUntil(() => env.dispatcher.liveCalls === 0, 60_000);
      } finally {
        time.stop();
      }
      assert.equal(env.simulator.dials.length, 1);
      const run = await getRun(env.deps.store, undefined, env.simulator.dials[0]?.runId ?? 0);
      assert.ok((await eventTypes(env, run.id)).includes('dialing'));
    });
  });

  describe(`Calling hours (${store.kind})`, { skip: store.skip }, () => {
    async function setup(t: Parameters<typeof build>[0], hours: CallingHours | null, start = '2026-11-23T15:00:00Z', env: Record<string, string> = {}) {
      const clock = new ManualClock(Date.parse(start));
      const env_ = await build(t, store.kind, { clock, env });
      const f = await createOrgFixture(env_.deps);
      if (hours) await setCallingHours(env_.deps.store, f.orgId, hours);
      return { ...env_, clock, f };
    }
    const call = (app: Awaited<ReturnType<typeof build>>['app'], f: OrgFixture, phone: string, query = '', headers: Record<string, string> = {}) =>
      postJson(app, `${PATHS.initiateCall(f.agentUuid)}${query}`, { phone_number: phone }, { key: f.apiKey, headers });

    it('refuses a call outside the hours with 422 outside_calling_hours, the next allowed time, and no run', async (t) => {
      const { app, deps, clock, f } = await setup(t, WEEKDAY_HOURS('refuse'));
      clock.set('2026-11-23T17:30:00Z'); // 12:30 in New York: the lunch gap
      const problem = assertProblem(await call(app, f, NEW_YORK), 422, 'outside_calling_hours');
      assert.equal(problem.next_allowed_at, '2026-11-23T18:00:00.000Z');
      assert.deepEqual(problem.time_zones, ['America/New_York']);
      assert.equal(await countRuns(deps), 0);
      clock.set('2026-11-23T18:00:00Z');
      assert.equal((await call(app, f, NEW_YORK)).statusCode, 200, 'inside the afternoon window');
    });

    it('defers a call outside the hours: status scheduled, scheduled_for in GET run, not claimed before it and claimed after', async (t) => {
      const { app, deps, clock, f } = await setup(t, WEEKDAY_HOURS('defer'));
      clock.set('2026-11-24T02:00:00Z'); // Monday 21:00 in New York
      const response = await call(app, f, NEW_YORK);
      assert.equal(response.statusCode, 200, response.body);
      const body = response.json();
      assert.equal(body.status, 'scheduled');
      assert.equal(body.scheduled_for, '2026-11-24T14:00:00.000Z'); // Tuesday 09:00 EST
      const run = await getJson(app, `/api/v1/public/workflow-runs/${body.workflow_run_id}`, f.apiKey);
      assert.equal(run.json().state, 'queued');
      assert.equal(run.json().scheduled_for, '2026-11-24T14:00:00.000Z');

      assert.equal((await claimRuns(deps.store, f.telephonyId, claimAt(Date.parse('2026-11-24T13:59:59Z')))).claimed.length, 0);
      const claimed = await claimRuns(deps.store, f.telephonyId, claimAt(Date.parse('2026-11-24T14:00:00Z')));
      assert.deepEqual(claimed.claimed.map((c) => c.run.id), [body.workflow_run_id]);
    });

    it('does not let a deferred run hold up a run due now behind it', async (t) => {
      const { app, deps, clock, f } = await setup(t, WEEKDAY_HOURS('defer'));
      clock.set('2026-11-24T02:00:00Z');
      const deferred = (await call(app, f, NEW_YORK)).json();
      const sydney = (await call(app, f, '+61212345678')).json(); // Tuesday 13:00 in Sydney: inside
      assert.equal(sydney.status, 'queued');
      const claimed = await claimRuns(deps.store, f.telephonyId, claimAt(clock.now()));
      assert.deepEqual(claimed.claimed.map((c) => c.run.id), [sydney.workflow_run_id]);
      assert.notEqual(deferred.workflow_run_id, sydney.workflow_run_id);
    });

    it('defers a run again when its window closed while it was queued, without taking a pacing slot, and never dials it outside', async (t) => {
      const { app, deps, clock, f } = await setup(t, WEEKDAY_HOURS('defer'));
      clock.set('2026-11-23T16:59:00Z'); // 11:59 in New York: inside
      const body = (await call(app, f, NEW_YORK)).json();
      assert.equal(body.status, 'queued');
      // The queue was slow: the claim comes at 12:05, in the lunch gap.
      const late = await claimRuns(deps.store, f.telephonyId, claimAt(Date.parse('2026-11-23T17:05:00Z')));
      assert.equal(late.claimed.length, 0);
      assert.equal(late.deferred, 1);
      const pacing = await deps.store.db.selectFrom('telephony_configurations').select('pacing_next_at').where('id', '=', f.telephonyId).executeTakeFirstOrThrow();
      assert.equal(pacing.pacing_next_at, null, 'a deferred run takes no pacing slot');
      const run = (await getJson(app, `/api/v1/public/workflow-runs/${body.workflow_run_id}`, f.apiKey)).json();
      assert.equal(run.state, 'queued');
      assert.equal(run.scheduled_for, '2026-11-23T18:00:00.000Z');
      const events = (await getJson(app, `/api/v1/public/workflow-runs/${body.workflow_run_id}/events`, f.apiKey)).json().data as { type: string; data: Record<string, unknown> }[];
      assert.deepEqual(events.map((e) => e.type), ['queued', 'deferred']);
      assert.equal(events[1]?.data.scheduled_for, '2026-11-23T18:00:00.000Z');
      assert.equal((await claimRuns(deps.store, f.telephonyId, claimAt(Date.parse('2026-11-23T17:59:00Z')))).claimed.length, 0);
      assert.equal((await claimRuns(deps.store, f.telephonyId, claimAt(Date.parse('2026-11-23T18:00:00Z')))).claimed.length, 1);
    });

    it('cancels at claim time, with reason outside_calling_hours, a run whose zones\' windows can no longer meet', async (t) => {
      const { app, deps, clock, f } = await setup(t, WEEKDAY_HOURS('defer'));
      clock.set('2026-11-23T20:00:00Z'); // 11:00 in Anchorage, 10:00 in Adak: inside
      const body = (await call(app, f, ALASKA)).json();
      assert.equal(body.status, 'queued');
      const halfHour = ['09:00-09:30'];
      await setCallingHours(deps.store, f.orgId, { timezone: 'America/Anchorage', outside: 'defer', windows: { mon: halfHour, tue: halfHour, wed: halfHour } });
      const result = await claimRuns(deps.store, f.telephonyId, claimAt(clock.now()));
      assert.equal(result.claimed.length, 0);
      assert.equal(result.canceled, 1);
      const run = (await getJson(app, `/api/v1/public/workflow-runs/${body.workflow_run_id}`, f.apiKey)).json();
      assert.equal(run.state, 'canceled');
      assert.equal(run.outcome_reason, 'outside_calling_hours');
    });

    it('defers at claim time a run whose pacing slot would fall after the window closes', async (t) => {
      const { app, deps, clock, f } = await setup(t, WEEKDAY_HOURS('defer'));
      clock.set('2026-11-23T16:59:00Z');
      await call(app, f, NEW_YORK);
      const result = await claimRuns(deps.store, f.telephonyId, claimAt(Date.parse('2026-11-23T16:59:59Z'), 2_000));
      assert.equal(result.claimed.length, 0);
      assert.equal(result.deferred, 1);
    });

    it('defers across daylight-saving changes by the tz database: to the jump on a spring-forward day, to the second 01:30 on a fall-back day', async (t) => {
      const sunday = (window: string): CallingHours => ({ timezone: 'America/New_York', outside: 'defer', windows: { sun: [window] } });
      const { app, deps, clock, f } = await setup(t, sunday('02:30-03:30'));
      clock.set('2026-03-08T06:45:00Z'); // 01:45 EST; 02:00-02:59 does not exist that day
      const spring = (await call(app, f, NEW_YORK)).json();
      assert.equal(spring.scheduled_for, '2026-03-08T07:00:00.000Z', '03:00 EDT, the first instant whose wall time is inside');
      assert.equal((await claimRuns(deps.store, f.telephonyId, claimAt(Date.parse('2026-03-08T06:59:59Z')))).claimed.length, 0);
      assert.equal((await claimRuns(deps.store, f.telephonyId, claimAt(Date.parse('2026-03-08T07:00:00Z')))).claimed.length, 1);

      await setCallingHours(deps.store, f.orgId, sunday('01:30-03:30'));
      clock.set('2026-11-01T06:15:00Z'); // 01:15 EST: the clock went back from 02:00 EDT a quarter of an hour ago
      const fall = (await call(app, f, NEW_YORK)).json();
      assert.equal(fall.scheduled_for, '2026-11-01T06:30:00.000Z', '01:30 EST, the second reading of 01:30');
    });

    it('calls a number spanning two zones only when both are inside', async (t) => {
      const { app, clock, f } = await setup(t, WEEKDAY_HOURS('refuse'));
      clock.set('2026-11-23T18:30:00Z'); // 09:30 in Anchorage, 08:30 in Adak
      const problem = assertProblem(await call(app, f, ALASKA), 422, 'outside_calling_hours');
      assert.equal(problem.next_allowed_at, '2026-11-23T19:00:00.000Z');
      assert.deepEqual(problem.time_zones, ['America/Adak', 'America/Anchorage']);
      clock.set('2026-11-23T19:00:00Z');
      assert.equal((await call(app, f, ALASKA)).statusCode, 200);
    });

    it('uses the organization\'s time zone for a number without a known zone', async (t) => {
      const { app, clock, f } = await setup(t, WEEKDAY_HOURS('refuse', 'Europe/Paris'));
      clock.set('2026-11-23T07:30:00Z'); // 08:30 in Paris
      const problem = assertProblem(await call(app, f, NO_ZONE), 422, 'outside_calling_hours');
      assert.deepEqual(problem.time_zones, ['Europe/Paris']);
      assert.equal(problem.next_allowed_at, '2026-11-23T08:00:00.000Z');
    });

    it('counts deferred runs apart from runs due now against the queue cap, so they never make an immediate call queue_full', async (t) => {
      const { app, deps, clock, f } = await setup(t, WEEKDAY_HOURS('defer'));
      await setOrganizationLimits(deps.store, f.orgId, { max_queued_runs: 2 });
      clock.set('2026-11-24T02:00:00Z');
      assert.equal((await call(app, f, NEW_YORK)).json().status, 'scheduled');
      assert.equal((await call(app, f, NEW_YORK)).json().status, 'scheduled');
      assertProblem(await call(app, f, NEW_YORK), 429, 'queue_full');
      assert.equal((await call(app, f, '+61212345678')).json().status, 'queued', 'a call due now still fits');
      assert.equal((await call(app, f, '+61212345678')).json().status, 'queued');
      assertProblem(await call(app, f, '+61212345678'), 429, 'queue_full');
    });

    it('counts queue expiry of a deferred run from its scheduled_for', async (t) => {
      const { app, deps, clock, f } = await setup(t, WEEKDAY_HOURS('defer'));
      clock.set('2026-11-24T02:00:00Z');
      const body = (await call(app, f, NEW_YORK)).json();
      const ttl = 60 * 60_000;
      // Ten hours after creation, but only 59 minutes after it became due: not expired.
      assert.deepEqual(await expireQueuedRuns(deps.store, deps.lifecycle, Date.parse('2026-11-24T14:59:00Z'), ttl), []);
      const expired = await expireQueuedRuns(deps.store, deps.lifecycle, Date.parse('2026-11-24T15:00:01Z'), ttl);
      assert.deepEqual(expired.map((e) => e.runId), [body.workflow_run_id]);
    });

    it('turns calling hours off with null, and refuses an invalid setting listing every problem', async (t) => {
      const { app, deps, clock, f } = await setup(t, WEEKDAY_HOURS('refuse'));
      clock.set('2026-11-23T17:30:00Z');
      await assert.rejects(setCallingHours(deps.store, f.orgId, { timezone: 'Nowhere', outside: 'defer', windows: { mon: ['x'] } }), (error: Error & { errors?: unknown[] }) => error.errors?.length === 2);
      assertProblem(await call(app, f, NEW_YORK), 422, 'outside_calling_hours');
      await setCallingHours(deps.store, f.orgId, null);
      assert.equal((await call(app, f, NEW_YORK)).statusCode, 200);
    });
  });

  describe(`Dry run (${store.kind})`, { skip: store.skip }, () => {
    it('answers valid with the definition version, telephony configuration and scheduled_for on each operation, creating nothing', async (t) => {
      const clock = new ManualClock(Date.parse('2026-11-24T02:00:00Z'));
      const { app, deps } = await build(t, store.kind, { clock });
      const f = await createOrgFixture(deps);
      for (const op of OPERATION_CASES) {
        const response = await postJson(app, `${op.path(f)}?dry_run=true`, { phone_number: NEW_YORK }, { key: f.apiKey });
        assert.equal(response.statusCode, 200, `${op.name}: ${response.body}`);
        assert.deepEqual(response.json(), { status: 'valid', workflow_run_id: null, workflow_run_name: null, definition_version: 1, telephony_configuration_id: f.telephonyId, scheduled_for: null });
      }
      await setCallingHours(deps.store, f.orgId, WEEKDAY_HOURS('defer'));
      const deferred = await postJson(app, `${PATHS.initiateCall(f.agentUuid)}?dry_run=true`, { phone_number: NEW_YORK }, { key: f.apiKey });
      assert.equal(deferred.json().scheduled_for, '2026-11-24T14:00:00.000Z');
      assert.equal(await countRuns(deps), 0);
    });

    it('consumes no Idempotency-Key: the real request with the same key afterwards creates the run', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const headers = { 'idempotency-key': 'order-42' };
      const dry = await postJson(app, `${PATHS.initiateCall(f.agentUuid)}?dry_run=true`, { phone_number: NEW_YORK }, { key: f.apiKey, headers });
      assert.equal(dry.json().status, 'valid');
      const real = await postJson(app, PATHS.initiateCall(f.agentUuid), { phone_number: NEW_YORK }, { key: f.apiKey, headers });
      assert.equal(real.statusCode, 200);
      assert.equal(real.headers['idempotent-replayed'], undefined);
      assert.equal(await countRuns(deps), 1);
    });

    it('answers each refusal exactly as the real request does, and creates nothing', async (t) => {
      const clock = new ManualClock(Date.parse('2026-11-23T17:30:00Z'));
      const { app, deps } = await build(t, store.kind, { clock });
      const f = await createOrgFixture(deps, 'Acme', definition({ variables: { name: { required: true } } }));
      const refusing = await createOrgFixture(deps, 'Refusing');
      await setCallingHours(deps.store, refusing.orgId, WEEKDAY_HOURS('refuse'));
      const ok = { phone_number: NEW_YORK, initial_context: { name: 'Ada' } };
      const cases: { name: string; path: string; body: unknown; key?: string; contentType?: string }[] = [
        { name: 'missing API key', path: PATHS.initiateCall(f.agentUuid), body: ok },
        { name: 'invalid API key', path: PATHS.initiateCall(f.agentUuid), body: ok, key: 'dt_live_AAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB' },
        { name: 'validation', path: PATHS.initiateCall(f.agentUuid), body: { phone_number: NEW_YORK, extra: 1 }, key: f.apiKey },
        { name: 'phone number', path: PATHS.initiateCall(f.agentUuid), body: { phone_number: '12' }, key: f.apiKey },
        { name: 'unknown agent', path: PATHS.initiateCall('0b5c2a8e-7f3d-4c1a-9e6b-2d4f8a1c3e57'), body: ok, key: f.apiKey },
        { name: 'telephony configuration', path: PATHS.initiateCall(f.agentUuid), body: { ...ok, telephony_configuration_id: 999 }, key: f.apiKey },
        { name: 'template variables', path: PATHS.initiateCall(f.agentUuid), body: { phone_number: NEW_YORK }, key: f.apiKey },
        { name: 'calling hours', path: PATHS.initiateCall(refusing.agentUuid), body: { phone_number: NEW_YORK }, key: refusing.apiKey },
      ];
      for (const c of cases) {
        const options = c.key ? { key: c.key } : {};
        const dry = await postJson(app, `${c.path}?dry_run=true`, c.body, options);
        const real = await postJson(app, c.path, c.body, options);
        assert.notEqual(real.statusCode, 200, c.name);
        assert.equal(dry.statusCode, real.statusCode, c.name);
        assert.equal(dry.json().code, real.json().code, c.name);
      }
      assert.equal(await countRuns(deps), 0);
    });
  });
}
