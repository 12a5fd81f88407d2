// Managing telephony configurations over the API (docs/api.md, "Management"): an admin key creates,
// reads, updates, disables, enables and sets the default; readiness lists every problem with its
// JSON Pointer; credentials are write-only (never in an answer, a replay, the log or the audit
// log); a key without `admin` is refused; another organization's configuration is not found.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import { createApiKey } from '../src/auth/api-keys.js';
import type { DialtoneError } from '../src/errors.js';
import { createTelephonyConfiguration, updateTelephonyConfiguration } from '../src/telephony/configurations.js';
import { redactSecrets, REDACTED } from '../src/audit/audit-log.js';
import { selectAuditEvents } from '../src/store/statements/audit-statements.js';
import { build, getJson, postJson, type TestEnv } from './helpers/app.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const BASE = '/api/v1/public/telephony-configurations';
const ACCOUNT_SID = `AC${'0123456789abcdef'.repeat(2)}`;
const AUTH_TOKEN = 'auth-token-that-must-never-show-7f3a9c';
const ROTATED_TOKEN = 'rotated-token-that-must-never-show-2b8e1d';

interface Details {
  id: number;
  name: string;
  provider: string;
  caller_ids: string[];
  is_default: boolean;
  calls_per_second: number;
  max_concurrent_calls: number;
  status: 'active' | 'inactive';
  settings: Record<string, unknown>;
  has_credentials: boolean;
  credentials_set: Record<string, boolean>;
  created_at: string;
  updated_at: string;
}

const patchJson = (env: TestEnv, url: string, body: unknown, key: string) =>
  env.app.inject({ method: 'PATCH', url, headers: { 'content-type': 'application/json', 'x-api-key': key }, payload: JSON.stringify(body) });

/** Everything the store holds that could carry a secret: audit entries, stored Idempotency-Key answers. */
async function storedText(env: TestEnv): Promise<string> {
  const audit = await env.deps.store.db.selectFrom('audit_events').selectAll().execute();
  const answers = await env.deps.store.db.selectFrom('idempotency_keys').selectAll().execute();
  return JSON.stringify([audit, answers]);
}

/** A pino logger at its most verbose, writing every line into `lines`. */
function capturingLogger(lines: string[]) {
  return pino({ level: 'trace' }, new Writable({ write: (chunk: Buffer, _encoding, done) => (lines.push(chunk.toString()), done()) }));
}

const twilioBody = { name: 'Twilio main', provider: 'twilio', caller_ids: ['+1 202 555 0100'], credentials: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN } };

for (const store of await storeCases()) {
  describe(`Telephony configuration management (${store.kind})`, { skip: store.skip }, () => {
    it('creates a configuration whose credentials are never shown, only whether each is set, reads it, replays its creation, and audits it without a credential or a log line holding one', async (t) => {
      const lines: string[] = [];
      const env = await build(t, store.kind, { logger: capturingLogger(lines) });
      const f = await createOrgFixture(env.deps);
      const created = await postJson(env.app, BASE, twilioBody, { key: f.apiKey, headers: { 'idempotency-key': 'twilio-once' } });
      assert.equal(created.statusCode, 201, created.body);
      const route = created.json() as Details;
      assert.deepEqual(
        { ...route, id: undefined, created_at: undefined, updated_at: undefined },
        {
          id: undefined,
          name: 'Twilio main',
          provider: 'twilio',
          caller_ids: ['+12025550100'],
          is_default: false,
          calls_per_second: 1,
          max_concurrent_calls: 10,
          status: 'active',
          settings: {},
          has_credentials: true,
          credentials_set: { account_sid: true, auth_token: true, api_key_sid: false, api_key_secret: false },
          created_at: undefined,
          updated_at: undefined,
        },
      );
      assert.ok(!created.body.includes(AUTH_TOKEN), 'the answer never holds a credential');

      const replay = await postJson(env.app, BASE, twilioBody, { key: f.apiKey, headers: { 'idempotency-key': 'twilio-once' } });
      assert.equal(replay.statusCode, 201);
      assert.equal(replay.headers['idempotent-replayed'], 'true');
      assert.deepEqual(replay.json(), route, 'a replay answers the same, and creates nothing');

      const read = await getJson(env.app, `${BASE}/${route.id}`, f.apiKey);
      assert.equal(read.statusCode, 200, read.body);
      assert.deepEqual(read.json(), route);
      const listed = await getJson(env.app, BASE, f.apiKey);
      assert.deepEqual((listed.json() as { data: { name: string }[] }).data.map((c) => c.name), ['Simulator', 'Twilio main']);
      for (const answer of [replay, read, listed]) assert.ok(!answer.body.includes(AUTH_TOKEN));

      const [entry, ...rest] = await selectAuditEvents(env.deps.store, f.orgId, { action: 'telephony_configuration.created' }, 10);
      assert.ok(entry);
      assert.equal(rest.length, 1, 'the fixture\'s route (made as the CLI makes one) and this one');
      assert.deepEqual([entry.actor, Number(entry.actor_key_id), entry.actor_key_name, entry.target_type, entry.target_id], ['api_key', f.apiKeyId, 'test key', 'telephony_configuration', String(route.id)]);
      const after = JSON.parse(entry.after ?? '{}') as Record<string, unknown>;
      assert.deepEqual(after.credentials_set, route.credentials_set, 'whether each credential is set stays visible in the audit log');
      assert.equal(after.name, 'Twilio main');
      assert.ok(!(await storedText(env)).includes(AUTH_TOKEN), 'neither the audit log nor the stored answer holds a credential');
      assert.ok(lines.length > 0, 'the requests were logged');
      assert.ok(!lines.join('').includes(AUTH_TOKEN), 'no log line holds a credential');
    });

    it('updates part of a configuration: rotates one credential and keeps the others, merges settings, removes credentials with null, and audits before and after with only whether each is set', async (t) => {
      const lines: string[] = [];
      const env = await build(t, store.kind, { logger: capturingLogger(lines) });
      const f = await createOrgFixture(env.deps);
      const route = (await postJson(env.app, BASE, twilioBody, { key: f.apiKey })).json() as Details;
      const url = `${BASE}/${route.id}`;
      const stored = async () => {
        const row = await env.deps.store.db.selectFrom('telephony_configurations').selectAll().where('id', '=', route.id).executeTakeFirstOrThrow();
        return row.credentials_encrypted === null ? null : env.deps.cipher.decrypt(f.orgId, row.credentials_encrypted);
      };

      const rotated = await patchJson(env, url, { name: 'Twilio rotated', calls_per_second: 5, credentials: { auth_token: ROTATED_TOKEN } }, f.apiKey);
      assert.equal(rotated.statusCode, 200, rotated.body);
      const view = rotated.json() as Details;
      assert.deepEqual([view.name, view.calls_per_second, view.caller_ids, view.credentials_set.auth_token], ['Twilio rotated', 5, ['+12025550100'], true]);
      assert.ok(!rotated.body.includes(ROTATED_TOKEN));
      assert.deepEqual(await stored(), { account_sid: ACCOUNT_SID, auth_token: ROTATED_TOKEN }, 'the other credential is kept');

      // A change the provider's schema refuses: every problem with its pointer, nothing changed.
      const refused = await patchJson(env, url, { caller_ids: ['12'], credentials: { api_key_sid: 'SK1' } }, f.apiKey);
      const problem = assertProblem(refused, 422, 'validation_failed');
      assert.deepEqual(problem.errors?.map((e) => e.pointer).sort(), ['/caller_ids/0', '/credentials/api_key_secret', '/credentials/api_key_sid']);
      assert.deepEqual((await getJson(env.app, url, f.apiKey)).json(), view, 'a refused update changes nothing');
      assert.deepEqual(await stored(), { account_sid: ACCOUNT_SID, auth_token: ROTATED_TOKEN });

      const unchanged = await patchJson(env, url, { name: 'Twilio rotated' }, f.apiKey);
      assert.deepEqual(unchanged.json(), view, 'a change to what it already is changes nothing');

      const removed = await patchJson(env, url, { credentials: null }, f.apiKey);
      assert.equal(removed.statusCode, 200, removed.body);
      const bare = removed.json() as Details;
      assert.deepEqual([bare.has_credentials, bare.credentials_set], [false, { account_sid: false, auth_token: false, api_key_sid: false, api_key_secret: false }]);
      assert.equal(await stored(), null);

      const entries = await selectAuditEvents(env.deps.store, f.orgId, { action: 'telephony_configuration.updated' }, 10);
      assert.equal(entries.length, 2, 'one entry per update that changed something');
      type Audited = Details & { credentials_changed: Record<string, boolean> };
      const [last, first] = entries.map((e) => ({ before: JSON.parse(e.before ?? '{}') as Audited, after: JSON.parse(e.after ?? '{}') as Audited }));
      assert.deepEqual([first?.before.name, first?.after.name, first?.after.calls_per_second], ['Twilio main', 'Twilio rotated', 5]);
      assert.deepEqual(first?.after.credentials_changed, { auth_token: true }, 'the entry says which credential was replaced, never with what');
      assert.deepEqual([last?.before.credentials_set.auth_token, last?.after.credentials_set.auth_token], [true, false]);
      assert.deepEqual(last?.after.credentials_changed, { account_sid: true, auth_token: true });
      const text = await storedText(env);
      for (const secret of [AUTH_TOKEN, ROTATED_TOKEN]) {
        assert.ok(!text.includes(secret), 'the audit log holds no credential');
        assert.ok(!lines.join('').includes(secret), 'no log line holds a credential');
      }
    });

    it('merges settings member by member, a null removing one, and refuses settings the provider\'s schema does not take', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const created = await postJson(env.app, BASE, { name: 'Trunk', provider: 'sip', caller_ids: ['+12025550100'], settings: { host: 'sip.example.net', transport: 'tcp', port: 5080 } }, { key: f.apiKey });
      assert.equal(created.statusCode, 201, created.body);
      const url = `${BASE}/${(created.json() as Details).id}`;
      const merged = await patchJson(env, url, { settings: { port: null, transport: 'udp' } }, f.apiKey);
      assert.equal(merged.statusCode, 200, merged.body);
      assert.deepEqual((merged.json() as Details).settings, { host: 'sip.example.net', transport: 'udp' });
      const refused = await patchJson(env, url, { settings: { host: 'not a host!', transport: 'carrier pigeon' } }, f.apiKey);
      assert.deepEqual(assertProblem(refused, 422, 'validation_failed').errors?.map((e) => e.pointer).sort(), ['/settings/host', '/settings/transport']);
      const createRefused = await postJson(env.app, BASE, { name: 'Trunk', provider: 'sip', settings: {} }, { key: f.apiKey });
      assert.deepEqual(assertProblem(createRefused, 422, 'validation_failed').errors?.map((e) => e.pointer), ['/settings/host']);
      const unknownProvider = await postJson(env.app, BASE, { name: 'Carrier pigeon', provider: 'pigeon' }, { key: f.apiKey });
      assert.deepEqual(assertProblem(unknownProvider, 422, 'validation_failed').errors?.map((e) => e.pointer), ['/provider']);
      assert.equal((await env.deps.store.db.selectFrom('telephony_configurations').select('id').execute()).length, 2, 'nothing refused was created');
    });

    it('refuses a blank name, a pace out of range and a fractional concurrency on creation and on update alike (the CLI\'s way in, past the routes\' schemas), each with its pointer, changing nothing', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const { store: db, cipher } = env.deps;
      const bad = { name: '   ', callsPerSecond: 20_000, maxConcurrentCalls: 1.5 };
      const pointers = ['/calls_per_second', '/max_concurrent_calls', '/name'];
      const pointersOf = (error: unknown) => (error as DialtoneError).errors?.map((e) => e.pointer).sort();
      const input = { orgId: f.orgId, name: 'Sim', provider: 'simulator' as const, callerIds: ['+12025550100'] };
      await assert.rejects(createTelephonyConfiguration(db, cipher, { ...input, ...bad }, Date.now()), (error) => (assert.deepEqual(pointersOf(error), pointers), true));
      const created = await createTelephonyConfiguration(db, cipher, input, Date.now());
      await assert.rejects(updateTelephonyConfiguration(db, cipher, created.id, bad, Date.now()), (error) => (assert.deepEqual(pointersOf(error), pointers), true));
      const [after] = await db.db.selectFrom('telephony_configurations').select(['name', 'calls_per_second', 'max_concurrent_calls']).where('id', '=', created.id).execute();
      assert.deepEqual(after, { name: 'Sim', calls_per_second: 1, max_concurrent_calls: 10 });
    });

    it('disables, enables and sets the default, each audited once; a disabled configuration cannot become the default, and calls follow each change', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const call = (body: Record<string, unknown> = {}) => postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123', ...body }, { key: f.apiKey });
      const second = (await postJson(env.app, BASE, { name: 'Second', provider: 'simulator', caller_ids: ['+12025550100'] }, { key: f.apiKey })).json() as Details;
      const act = async (id: number, verb: string, status = 200) => {
        const answer = await postJson(env.app, `${BASE}/${id}/${verb}`, {}, { key: f.apiKey });
        assert.equal(answer.statusCode, status, answer.body);
        return answer;
      };
      const flags = async () => ((await getJson(env.app, BASE, f.apiKey)).json() as { data: Details[] }).data.map((c) => [c.name, c.status, c.is_default]);

      assert.equal(((await act(second.id, 'set-default')).json() as Details).is_default, true);
      assert.deepEqual(await flags(), [['Simulator', 'active', false], ['Second', 'active', true]], 'one default per organization');
      await act(second.id, 'set-default');

      const disabled = (await act(second.id, 'disable')).json() as Details;
      assert.deepEqual([disabled.status, disabled.is_default], ['inactive', false]);
      await act(second.id, 'disable');
      assertProblem(await call(), 422, 'telephony_not_configured');
      assertProblem(await call({ telephony_configuration_id: second.id }), 404, 'telephony_configuration_not_found');
      assertProblem(await act(second.id, 'set-default', 409), 409, 'telephony_configuration_disabled');
      assert.deepEqual(await flags(), [['Simulator', 'active', false], ['Second', 'inactive', false]], 'the refusal changed nothing');

      const enabled = (await act(second.id, 'enable')).json() as Details;
      assert.deepEqual([enabled.status, enabled.is_default], ['active', false], 'enabled, not the default again by itself');
      assert.equal((await call({ telephony_configuration_id: second.id })).statusCode, 200);
      await act(f.telephonyId, 'set-default');
      assert.equal((await call()).statusCode, 200);

      const actions = (await selectAuditEvents(env.deps.store, f.orgId, {}, 20)).filter((e) => e.target_type === 'telephony_configuration' && e.actor === 'api_key');
      assert.deepEqual(
        actions.map((e) => [e.action, Number(e.target_id)]).reverse(),
        [
          ['telephony_configuration.created', second.id],
          ['telephony_configuration.default_set', second.id],
          ['telephony_configuration.disabled', second.id],
          ['telephony_configuration.enabled', second.id],
          ['telephony_configuration.default_set', f.telephonyId],
        ],
        'each change audited once; what changed nothing (the default again, a second disable, a refusal) is not',
      );
      const disabledEntry = actions.find((e) => e.action === 'telephony_configuration.disabled');
      assert.deepEqual([JSON.parse(disabledEntry?.before ?? '{}').status, JSON.parse(disabledEntry?.after ?? '{}').status], ['active', 'inactive']);
    });

    it('reports readiness with every problem and its JSON Pointer', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const readiness = async (id: number) => {
        const answer = await getJson(env.app, `${BASE}/${id}/readiness`, f.apiKey);
        assert.equal(answer.statusCode, 200, answer.body);
        return answer.json() as { id: number; ready: boolean; problems: { pointer: string; detail: string }[] };
      };
      assert.deepEqual(await readiness(f.telephonyId), { id: f.telephonyId, ready: true, problems: [] });
      const twilio = (await postJson(env.app, BASE, { name: 'Bare Twilio', provider: 'twilio' }, { key: f.apiKey })).json() as Details;
      const bare = await readiness(twilio.id);
      assert.equal(bare.ready, false);
      assert.deepEqual(bare.problems.map((p) => p.pointer), ['/credentials', '/caller_ids', ''], 'no credentials, no caller ID, and no PUBLIC_BASE_URL for the service');
      await postJson(env.app, `${BASE}/${twilio.id}/disable`, {}, { key: f.apiKey });
      assert.deepEqual((await readiness(twilio.id)).problems.map((p) => p.pointer), ['/status', '/credentials', '/caller_ids', '']);
      // What readiness says is what a call through it is refused with.
      await postJson(env.app, `${BASE}/${twilio.id}/enable`, {}, { key: f.apiKey });
      assertProblem(await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: twilio.id }, { key: f.apiKey }), 422, 'telephony_not_ready');
    });

    it('wakes the webhook delivery workers after each audited change, so its audit.event message is sent at once', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      let wakes = 0;
      const stop = env.deps.signals.onOutbox(() => wakes++);
      t.after(stop);
      const created = await postJson(env.app, BASE, { name: 'b', provider: 'simulator' }, { key: f.apiKey });
      assert.equal(created.statusCode, 201, created.body);
      assert.equal(wakes, 1, 'after the creation');
      const id = (created.json() as Details).id;
      assert.equal((await patchJson(env, `${BASE}/${id}`, { name: 'c' }, f.apiKey)).statusCode, 200);
      assert.equal(wakes, 2, 'after the update');
      for (const verb of ['disable', 'enable', 'set-default']) assert.equal((await postJson(env.app, `${BASE}/${id}/${verb}`, {}, { key: f.apiKey })).statusCode, 200, verb);
      assert.equal(wakes, 5, 'after each action');
    });

    it('pages the listing with after and limit', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      for (const name of ['b', 'c', 'd']) assert.equal((await postJson(env.app, BASE, { name, provider: 'simulator' }, { key: f.apiKey })).statusCode, 201);
      const names: string[] = [];
      let url = `${BASE}?limit=2`;
      for (let pages = 0; pages < 5; pages++) {
        const page = (await getJson(env.app, url, f.apiKey)).json() as { data: Details[]; next_after: number | null };
        names.push(...page.data.map((c) => c.name));
        if (page.next_after === null) break;
        url = `${BASE}?limit=2&after=${page.next_after}`;
      }
      assert.deepEqual(names, ['Simulator', 'b', 'c', 'd']);
      assertProblem(await getJson(env.app, `${BASE}?limit=500`, f.apiKey), 422, 'validation_failed');
    });

    it('refuses a key without the admin scope on every operation, and answers 404 for another organization\'s configuration or a malformed id, changing nothing', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const other: OrgFixture = await createOrgFixture(env.deps, 'Other');
      const limited = await createApiKey(env.deps.store, f.orgId, 'no admin', env.deps.clock.now(), { scopes: ['calls', 'campaigns', 'webhooks'] });
      const operations = (id: number | string) =>
        [
          ['POST', BASE, { name: 'x', provider: 'simulator' }],
          ['GET', `${BASE}/${id}`, undefined],
          ['PATCH', `${BASE}/${id}`, { name: 'taken over' }],
          ['POST', `${BASE}/${id}/disable`, {}],
          ['POST', `${BASE}/${id}/enable`, {}],
          ['POST', `${BASE}/${id}/set-default`, {}],
          ['GET', `${BASE}/${id}/readiness`, undefined],
        ] as const;
      const send = (method: 'GET' | 'POST' | 'PATCH', url: string, body: unknown, key: string) =>
        env.app.inject({ method, url, headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, ...(body === undefined ? {} : { payload: JSON.stringify(body) }) });

      for (const [method, url, body] of operations(f.telephonyId)) {
        const refused = assertProblem(await send(method, url, body, limited.key), 403, 'insufficient_scope');
        assert.equal(refused.required_scope, 'admin', `${method} ${url}`);
      }
      assert.equal((await getJson(env.app, BASE, limited.key)).statusCode, 200, 'the listing stays open to scope calls');

      const before = await env.deps.store.db.selectFrom('telephony_configurations').selectAll().where('org_id', '=', other.orgId).execute();
      for (const [method, url, body] of operations(other.telephonyId).slice(1)) {
        assertProblem(await send(method, url, body, f.apiKey), 404, 'telephony_configuration_not_found');
      }
      for (const [method, url, body] of operations('12abc').slice(1)) {
        assertProblem(await send(method, url, body, f.apiKey), 404, 'telephony_configuration_not_found');
      }
      assert.deepEqual(await env.deps.store.db.selectFrom('telephony_configurations').selectAll().where('org_id', '=', other.orgId).execute(), before, 'the other organization\'s configuration is unchanged');
      assert.deepEqual((await selectAuditEvents(env.deps.store, other.orgId, {}, 10)).map((e) => e.action).sort(), ['api_key.created', 'telephony_configuration.created', 'workflow.created'], 'only the other fixture\'s own making');
      assert.equal((await postJson(env.app, PATHS.initiateCall(other.agentUuid), { phone_number: '+12025550123' }, { key: other.apiKey })).statusCode, 200, 'the other organization still calls');
    });
  });
}

describe('The audit log\'s redaction of credentials', () => {
  it('keeps a map of whether each credential is set, and still hides any value under a credential\'s name', () => {
    assert.deepEqual(redactSecrets({ credentials_set: { auth_token: true, api_key_secret: false }, credentials: { auth_token: true, account_sid: 'AC1' } }), {
      credentials_set: { auth_token: true, api_key_secret: false },
      credentials: REDACTED,
    });
  });
});
