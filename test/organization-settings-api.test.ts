// The organization's settings over the API (docs/api.md, "Management"): an admin key reads and
// changes its own limits, per-number cap, calling hours and retention window with the CLI's rules,
// every problem with its JSON Pointer; each change is audited with before and after; and a change
// changes what requests are admitted, on every node within LOOKUP_CACHE_TTL_MS (a fake clock).
import assert from 'node:assert/strict';
import { createApiKey } from '../src/auth/api-keys.js';
import { showOrganization } from '../src/orgs/organizations.js';
import type { Clock } from '../src/shared/clock.js';
import { selectAuditEvents } from '../src/store/statements/audit-statements.js';
import { build, getJson, postJson, type TestEnv } from './helpers/app.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const PATH = '/api/v1/public/organization';
const TTL_MS = 1_000;
/** Monday 03:00 UTC: Sunday 22:00 in New York, outside any weekday office hours there. */
const SUNDAY_NIGHT_IN_NEW_YORK = Date.UTC(2026, 10, 23, 3);
const OFFICE_HOURS = { timezone: 'America/New_York', outside: 'refuse', windows: { mon: ['09:00-17:00'], tue: ['09:00-17:00'], wed: ['09:00-17:00'], thu: ['09:00-17:00'], fri: ['09:00-17:00'] } };

class FakeClock implements Clock {
  constructor(public at: number) {}
  now(): number {
    return this.at;
  }
}

const patch = (env: TestEnv, body: unknown, key: string) => env.app.inject({ method: 'PATCH', url: PATH, headers: { 'content-type': 'application/json', 'x-api-key': key }, payload: JSON.stringify(body) });

for (const store of await storeCases()) {
  describe(`Organization settings (${store.kind})`, { skip: store.skip }, () => {
    it('wakes the webhook delivery workers after a change, so its audit.event message is sent at once', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      let wakes = 0;
      const stop = env.deps.signals.onOutbox(() => wakes++);
      t.after(stop);
      const changed = await patch(env, { max_queued_runs: 500 }, f.apiKey);
      assert.equal(changed.statusCode, 200, changed.body);
      assert.equal(wakes, 1);
    });

    it('reads the settings with the service\'s defaults, changes only what the body names, and audits the change with before and after', async (t) => {
      const env = await build(t, store.kind, { env: { RATE_LIMIT_ORG_PER_SECOND: '50', RATE_LIMIT_KEY_PER_SECOND: '20', RETENTION_DAYS: '30' } });
      const f = await createOrgFixture(env.deps);
      const read = await getJson(env.app, PATH, f.apiKey);
      assert.equal(read.statusCode, 200, read.body);
      const initial = {
        id: f.orgId,
        name: 'Acme',
        rate_limit_per_second: null,
        key_rate_limit_per_second: null,
        max_queued_runs: null,
        number_cap: null,
        calling_hours: null,
        retention_days: null,
        defaults: { rate_limit_per_second: 50, key_rate_limit_per_second: 20, max_queued_runs: 10_000, retention_days: 30 },
      };
      assert.deepEqual(read.json(), initial);

      const changed = await patch(env, { max_queued_runs: 500, number_cap: { max_calls: 3, window_seconds: 86_400 }, calling_hours: OFFICE_HOURS, retention_days: 0 }, f.apiKey);
      assert.equal(changed.statusCode, 200, changed.body);
      const after = { ...initial, max_queued_runs: 500, number_cap: { max_calls: 3, window_seconds: 86_400 }, calling_hours: OFFICE_HOURS, retention_days: 0 };
      assert.deepEqual(changed.json(), after);
      assert.deepEqual((await getJson(env.app, PATH, f.apiKey)).json(), after, 'read back as written');
      const stored = await showOrganization(env.deps.store, f.orgId);
      assert.deepEqual([stored?.max_queued_runs, stored?.number_max_calls, stored?.number_window_seconds, stored?.retention_days], [500, 3, 86_400, 0], 'the columns the CLI shows');

      assert.deepEqual((await patch(env, { retention_days: 0 }, f.apiKey)).json(), after, 'a change to what it already is changes nothing');
      const off = await patch(env, { number_cap: null, max_queued_runs: null }, f.apiKey);
      assert.deepEqual(off.json(), { ...after, number_cap: null, max_queued_runs: null });

      const entries = await selectAuditEvents(env.deps.store, f.orgId, { action: 'organization.settings_updated' }, 10);
      assert.equal(entries.length, 2, 'one entry per change that changed something');
      const first = entries[1];
      assert.deepEqual([first?.actor, Number(first?.actor_key_id), first?.target_type, first?.target_id], ['api_key', f.apiKeyId, 'organization', String(f.orgId)]);
      const { defaults: _initialDefaults, ...initialSettings } = initial;
      const { defaults: _afterDefaults, ...afterSettings } = after;
      assert.deepEqual(JSON.parse(first?.before ?? '{}'), initialSettings);
      assert.deepEqual(JSON.parse(first?.after ?? '{}'), afterSettings);
    });

    it('refuses settings with any problem, listing each with its JSON Pointer, and changes nothing', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const before = (await getJson(env.app, PATH, f.apiKey)).json();
      const hours = await patch(env, { calling_hours: { timezone: 'Mars/Olympus_Mons', outside: 'sometimes', windows: { mon: ['17:00-09:00'], someday: [] } }, max_queued_runs: 100 }, f.apiKey);
      assert.deepEqual(
        assertProblem(hours, 422, 'validation_failed').errors?.map((e) => e.pointer).sort(),
        ['/calling_hours/outside', '/calling_hours/timezone', '/calling_hours/windows/mon/0', '/calling_hours/windows/someday'],
      );
      const shapes = await patch(env, { number_cap: { max_calls: 0, window_seconds: 40_000_000 }, retention_days: 36_501, rate_limit_per_second: -1 }, f.apiKey);
      assert.deepEqual(
        [...new Set(assertProblem(shapes, 422, 'validation_failed').errors?.map((e) => e.pointer))].sort(),
        ['/number_cap', '/number_cap/max_calls', '/number_cap/window_seconds', '/rate_limit_per_second', '/retention_days'],
      );
      assert.deepEqual((await getJson(env.app, PATH, f.apiKey)).json(), before, 'nothing changed');
      assert.deepEqual(await selectAuditEvents(env.deps.store, f.orgId, { action: 'organization.settings_updated' }, 10), []);
    });

    it('refuses a key without the admin scope, and changes only the key\'s own organization', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const other = await createOrgFixture(env.deps, 'Other');
      const limited = await createApiKey(env.deps.store, f.orgId, 'no admin', env.deps.clock.now(), { scopes: ['calls', 'campaigns', 'webhooks'] });
      assert.equal(assertProblem(await getJson(env.app, PATH, limited.key), 403, 'insufficient_scope').required_scope, 'admin');
      assert.equal(assertProblem(await patch(env, { retention_days: 7 }, limited.key), 403, 'insufficient_scope').required_scope, 'admin');
      assert.equal((await patch(env, { retention_days: 7 }, f.apiKey)).statusCode, 200);
      assert.deepEqual([((await getJson(env.app, PATH, f.apiKey)).json() as { retention_days: number }).retention_days, ((await getJson(env.app, PATH, other.apiKey)).json() as { retention_days: null }).retention_days], [7, null]);
      assert.deepEqual(await selectAuditEvents(env.deps.store, other.orgId, { action: 'organization.settings_updated' }, 10), []);
    });

    it('changes what is admitted: calling hours refuse a call and a per-number cap caps it, on the node within LOOKUP_CACHE_TTL_MS, and turning them off admits it again', async (t) => {
      const clock = new FakeClock(SUNDAY_NIGHT_IN_NEW_YORK);
      const env = await build(t, store.kind, { clock, env: { LOOKUP_CACHE_TTL_MS: String(TTL_MS) } });
      const f = await createOrgFixture(env.deps);
      let n = 0;
      // A new number each time (Washington, DC: America/New_York), unless told, so the cap counts only what it should.
      const call = (phone = `+1202555${String(1000 + n++)}`) => postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: phone }, { key: f.apiKey });
      assert.equal((await call()).statusCode, 200, 'no calling hours yet');

      assert.equal((await patch(env, { calling_hours: OFFICE_HOURS }, f.apiKey)).statusCode, 200);
      assert.equal((await call()).statusCode, 200, 'within LOOKUP_CACHE_TTL_MS the node still uses the settings it read with the key');
      clock.at += TTL_MS + 1;
      assertProblem(await call(), 422, 'outside_calling_hours');

      assert.equal((await patch(env, { calling_hours: null, number_cap: { max_calls: 1, window_seconds: 3_600 } }, f.apiKey)).statusCode, 200);
      clock.at += TTL_MS + 1;
      assert.equal((await call('+12025550150')).statusCode, 200, 'calling hours off: admitted again');
      assertProblem(await call('+12025550150'), 429, 'number_frequency_capped');

      assert.equal((await patch(env, { number_cap: null }, f.apiKey)).statusCode, 200);
      clock.at += TTL_MS + 1;
      assert.equal((await call('+12025550150')).statusCode, 200, 'the cap off: the number is admitted again');
    });
  });
}
