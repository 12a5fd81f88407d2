// A provider is one folder and one registry line. A fake one (test/fake-provider/), registered in
// the test alone, is dialed to the end of a run, listed by the catalog API and the CLI, offered its
// own CLI flags, and has its route settings checked with every problem at its JSON Pointer; and a
// SIP URI goes through it because it says it dials them, not because of its name.
import assert from 'node:assert/strict';
import { buildCli } from '../src/cli/main.js';
import { ConfigSchema, loadConfig } from '../src/config.js';
import { DialtoneError } from '../src/errors.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { BUILT_IN_PROVIDERS, builtInProviders, ProviderRegistry } from '../src/telephony/registry.js';
import { fakeDefinition, FakeProvider } from './fake-provider/definition.js';
import { getJson, postJson, TEST_SECRET_KEY, type TestEnv } from './helpers/app.js';
import { buildWithDispatcher, ended, waitForRun } from './helpers/dispatch.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const registry = builtInProviders.with(fakeDefinition);

async function fakeRoute(env: TestEnv, f: OrgFixture, line = 'L1') {
  return createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: f.orgId, name: 'Fake', provider: 'fake', callerIds: ['+12025550100'], settings: { line } }, env.deps.clock.now(), env.deps.registry);
}

/** Runs `dialtone --json …` in this process against the test's database; returns what it printed. */
async function cli(env: TestEnv, args: string[]): Promise<unknown> {
  const saved = { ...process.env };
  const written: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  Object.assign(process.env, { DATABASE_URL: env.deps.config.DATABASE_URL, DIALTONE_SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'silent', DIALTONE_FIRST_RUN_DEMO: 'false', NODE_ENV: 'test' });
  process.stdout.write = ((chunk: string) => written.push(chunk) > 0) as typeof process.stdout.write;
  try {
    await buildCli({ json: true, registry }).parseAsync(['node', 'dialtone', '--json', ...args]);
  } finally {
    process.stdout.write = write;
    process.env = saved;
  }
  return JSON.parse(written.join(''));
}

describe('The provider registry', () => {
  it('refuses two providers of one name, and a name the store and URLs could not carry', () => {
    assert.throws(() => builtInProviders.with({ ...fakeDefinition, name: 'twilio' }), /Two providers are named "twilio"/);
    assert.throws(() => new ProviderRegistry([{ ...fakeDefinition, name: 'Fake Carrier' }]), /lower case/);
  });

  it("takes every provider's environment variables into the one configuration schema from its definition, and no provider's from anywhere else", () => {
    const declared = BUILT_IN_PROVIDERS.flatMap((d) => Object.keys(d.configKeys)).sort();
    const providerLike = Object.keys(ConfigSchema.properties).filter((key) => /^(TWILIO|SIP|SIMULATOR)_/.test(key)).sort();
    assert.deepEqual(providerLike, declared);
    assert.equal(loadConfig({ SIP_PORT: '5080' }).SIP_PORT, 5080);
    assert.throws(() => loadConfig({ TWILIO_CALLBACK_RETRIES: '9' }), /TWILIO_CALLBACK_RETRIES/, "a provider's key is validated like any other");
  });

  it('declares, for every built-in provider, the capabilities it has today', () => {
    const capabilities = Object.fromEntries(BUILT_IN_PROVIDERS.map((d) => [d.name, d.capabilities]));
    assert.deepEqual(capabilities, {
      simulator: { callsOutliveNode: false, dialsSipUris: false, supportsMachineDetection: true, supportsTransfer: true, sendsDtmf: true },
      twilio: { callsOutliveNode: true, dialsSipUris: false, supportsMachineDetection: true, supportsTransfer: true, sendsDtmf: true },
      // SIP detects machines from the call's audio, on routes without media_address (test/sip-amd.test.ts).
      sip: { callsOutliveNode: false, dialsSipUris: true, supportsMachineDetection: true, supportsTransfer: true, sendsDtmf: true },
    });
  });
});

for (const store of await storeCases()) {
  describe(`A provider added by a registry line (${store.kind})`, { skip: store.skip }, () => {
    it('is dialed: a run through its route ends completed, and the decoded route carries its capabilities', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { registry });
      const f = await createOrgFixture(env.deps);
      const route = await fakeRoute(env, f);
      const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: route.id }, { key: f.apiKey });
      assert.equal(response.statusCode, 200, response.body);
      const runId = response.json().workflow_run_id as number;
      const run = await waitForRun(env, runId, ended);
      assert.equal(run.state, 'completed');
      const fake = env.deps.providers.fake as FakeProvider;
      assert.deepEqual(fake.dials, [{ runId, to: '+12025550123', line: 'L1' }]);
      const row = await env.deps.store.db.selectFrom('telephony_configurations').selectAll().where('id', '=', route.id).executeTakeFirstOrThrow();
      const decoded = env.deps.routes.decode(row);
      assert.ok(decoded.ok);
      assert.equal(decoded.route.capabilities.dialsSipUris, true);
      assert.equal(decoded.route.capabilities.supportsMachineDetection, false);
    });

    it('takes a SIP URI because it declares dialsSipUris, where the simulator, which does not, refuses one', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { registry, start: false });
      const f = await createOrgFixture(env.deps);
      const route = await fakeRoute(env, f);
      const through = (id: number) => postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: 'sip:alice@example.com', telephony_configuration_id: id }, { key: f.apiKey });
      assert.equal((await through(route.id)).statusCode, 200);
      const refused = await through(f.telephonyId);
      assert.equal(refused.statusCode, 422);
      assert.match(refused.json().detail, /dials SIP URIs \(sip, fake\)/);
    });

    it('is listed by the catalog API, with what it can do and what its routes take, and so are its routes', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { registry, start: false });
      const f = await createOrgFixture(env.deps);
      const route = await fakeRoute(env, f);
      const catalog = await getJson(env.app, '/api/v1/public/telephony-providers', f.apiKey);
      assert.equal(catalog.statusCode, 200, catalog.body);
      const known = catalog.json().data as { name: string; capabilities: Record<string, boolean>; settings: { name: string; required: boolean }[] }[];
      assert.deepEqual(known.map((p) => p.name), ['simulator', 'twilio', 'sip', 'fake']);
      assert.deepEqual(known.at(-1), {
        name: 'fake',
        summary: fakeDefinition.summary,
        capabilities: { calls_outlive_node: false, dials_sip_uris: true, supports_machine_detection: false, supports_transfer: false, sends_dtmf: false },
        settings: [{ name: 'line', description: 'The fake line to dial on.', type: 'string', required: true }],
        credentials: [],
      });
      const listed = await getJson(env.app, '/api/v1/public/telephony-configurations', f.apiKey);
      assert.equal(listed.statusCode, 200, listed.body);
      const providers = (listed.json().data as { id: number; provider: string }[]).map((c) => [c.id, c.provider]);
      assert.deepEqual(providers, [
        [f.telephonyId, 'simulator'],
        [route.id, 'fake'],
      ]);
    });

    it('has its route settings validated by its own schema, every problem at its JSON Pointer', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { registry, start: false });
      const f = await createOrgFixture(env.deps);
      const attempt = createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: f.orgId, name: 'Bad', provider: 'fake', settings: { line: 7, colour: 'red', ring_timeout_ms: 0 } }, env.deps.clock.now(), env.deps.registry);
      await assert.rejects(attempt, (error: unknown) => {
        assert.ok(error instanceof DialtoneError);
        assert.equal(error.code, 'validation_failed');
        assert.deepEqual(error.errors?.map((e) => e.pointer).sort(), ['/settings/colour', '/settings/line', '/settings/ring_timeout_ms']);
        return true;
      });
      const unregistered = createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: f.orgId, name: 'Fake', provider: 'fake', settings: { line: 'L1' } }, env.deps.clock.now());
      await assert.rejects(unregistered, (error: unknown) => error instanceof DialtoneError && error.errors?.[0]?.pointer === '/provider', 'without its registry line the provider is unknown');
    });

    it('is listed by the CLI with what it can do, and its routes are created with its own flags and checked by its schema', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { registry, start: false });
      const f = await createOrgFixture(env.deps);
      const providers = (await cli(env, ['telephony', 'providers'])) as { name: string; capabilities: Record<string, boolean>; settings: { name: string; flag: string }[] }[];
      assert.deepEqual(providers.map((p) => p.name), ['simulator', 'twilio', 'sip', 'fake']);
      const fake = providers.find((p) => p.name === 'fake');
      assert.equal(fake?.capabilities.dialsSipUris, true);
      assert.deepEqual(fake?.settings.map((s) => s.flag), ['--fake-line']);

      const created = (await cli(env, ['telephony', 'create', '--org', String(f.orgId), '--name', 'Fake by CLI', '--provider', 'fake', '--fake-line', 'L9'])) as { id: number; provider: string; settings: unknown };
      assert.equal(created.provider, 'fake');
      assert.deepEqual(created.settings, { line: 'L9' });
      const listed = (await cli(env, ['telephony', 'list', '--org', String(f.orgId)])) as { id: number; provider: string }[];
      assert.ok(listed.some((c) => c.id === created.id && c.provider === 'fake'));

      await assert.rejects(cli(env, ['telephony', 'create', '--org', String(f.orgId), '--name', 'No line', '--provider', 'fake']), (error: unknown) => {
        assert.ok(error instanceof DialtoneError);
        assert.deepEqual(error.errors?.map((e) => e.pointer), ['/settings/line']);
        return true;
      });
      await assert.rejects(cli(env, ['telephony', 'create', '--org', String(f.orgId), '--name', 'Mixed', '--provider', 'simulator', '--fake-line', 'L1']), /--fake-line is a fake setting/);
    });
  });
}
