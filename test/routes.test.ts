// A route's settings and credentials are checked against its provider's schema at creation, and a
// stored route that does not fit (written by an older version, or unreadable after a key change)
// is refused at start-up, at request time and at dial time, each time with every problem listed.
import assert from 'node:assert/strict';
import { DialtoneError } from '../src/errors.js';
import { insertConfiguration } from '../src/store/statements/configuration-statements.js';
import { createTelephonyConfiguration, listTelephonyConfigurations } from '../src/telephony/configurations.js';
import { postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, waitForRun } from './helpers/dispatch.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { prepareDatabase, startServiceProcess } from './helpers/service-process.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const pointers = (error: unknown) => {
  assert.ok(error instanceof DialtoneError, String(error));
  assert.equal(error.code, 'validation_failed');
  return (error.errors ?? []).map((e) => e.pointer).sort();
};

for (const store of await storeCases()) {
  describe(`Route schemas (${store.kind})`, { skip: store.skip }, () => {
    it('refuses at creation settings and credentials that do not fit the provider, listing every problem, and stores nothing', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const before = await listTelephonyConfigurations(env.deps.store, f.orgId);
      const create = (provider: string, settings: Record<string, unknown>, credentials?: Record<string, unknown>) =>
        createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: f.orgId, name: 'x', provider, settings, credentials, callerIds: ['+12025550100'] }, Date.now()).then(
          () => assert.fail('created'),
          (error: unknown) => pointers(error),
        );
      assert.deepEqual(await create('twilio', { ring_timeout_ms: 0 }, { account_sid: 'nope' }), ['/credentials/account_sid', '/credentials/auth_token', '/settings/ring_timeout_ms']);
      assert.deepEqual(await create('sip', { port: 70_000 }, { username: 'u' }), ['/credentials/password', '/settings/host', '/settings/port']);
      // The offer says c=IN IP4: an IPv6 address, or markup, is no media address.
      assert.deepEqual(await create('sip', { host: 'sip.example.net', media_address: '2001:db8::1' }), ['/settings/media_address']);
      assert.deepEqual(await create('sip', { host: 'sip.example.net', media_address: '<b>media</b>' }), ['/settings/media_address']);
      assert.deepEqual(await create('simulator', { ring_timeout_ms: 'soon' }), ['/settings/ring_timeout_ms']);
      assert.deepEqual(await listTelephonyConfigurations(env.deps.store, f.orgId), before);
    });

    it('refuses at request time a stored route that does not fit its provider, with its problems, and ends its queued runs failed instead of dialing them', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const route = await createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: f.orgId, name: 'sim', provider: 'simulator', callerIds: ['+12025550100'] }, Date.now());
      const queued = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: route.id }, { key: f.apiKey });
      assert.equal(queued.statusCode, 200, queued.body);
      // Written behind the API's back, as an older version or a hand edit might have.
      await env.deps.store.db.updateTable('telephony_configurations').set({ settings: JSON.stringify({ ring_timeout_ms: -5 }), updated_at: Date.now() + 1 }).where('id', '=', route.id).execute();

      const refused = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550124', telephony_configuration_id: route.id }, { key: f.apiKey });
      assert.match(assertProblem(refused, 422, 'telephony_not_ready').detail, /settings\/ring_timeout_ms: Must be a whole number/);

      env.dispatcher.start();
      const run = await waitForRun(env, queued.json().workflow_run_id as number, ended);
      assert.equal(run.state, 'failed');
      assert.equal(run.outcome_reason, 'dial_refused');
      assert.equal(run.raw_provider_status, 'route_invalid');
      assert.equal(env.simulator.dials.length, 0, 'nothing was dialed through it');
    });

    it('logs at start-up each active route that cannot place calls, with every problem listed', async (t) => {
      const { url, observer, deps, fixture: f } = await prepareDatabase(t, store.kind);
      const bad = await insertConfiguration(
        observer,
        {
          org_id: f.orgId,
          name: 'stale twilio',
          provider: 'twilio',
          credentials_encrypted: deps.cipher.encrypt(f.orgId, { account_sid: 'AC-not-a-sid' }),
          settings: { ring_timeout_ms: 'soon' },
          caller_ids: [],
          is_default: false,
          calls_per_second: 1,
          max_concurrent_calls: 1,
        },
        Date.now(),
      );
      const service = await startServiceProcess({ DATABASE_URL: url, DIALTONE_ROLE: 'api' });
      t.after(() => service.child.kill('SIGKILL'));
      const line = service
        .output()
        .split('\n')
        .map((text) => {
          try {
            return JSON.parse(text) as { msg?: string; telephonyConfigurationId?: number; problems?: string[] };
          } catch {
            return {};
          }
        })
        .find((entry) => entry.telephonyConfigurationId === bad.id);
      assert.ok(line, `the refused route is logged: ${service.output()}`);
      assert.match(line.msg ?? '', /cannot place calls/);
      assert.deepEqual(line.problems?.map((p) => p.split(':')[0]).sort(), ['credentials/account_sid', 'credentials/auth_token', 'settings/ring_timeout_ms']);
      service.child.kill('SIGTERM');
      assert.equal(await service.exited, 0, service.output());
    });
  });
}
