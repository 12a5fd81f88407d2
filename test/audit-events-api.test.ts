// The audit log over the API (docs/api.md, "Audit log") and as `audit.event` webhook messages
// (docs/webhooks.md): an admin key lists its organization's entries newest first, filtered and
// paged, never with a secret; each entry is written to the endpoints that name audit.event in the
// change's transaction and delivered signed (checked with the standardwebhooks package); only an
// admin key may subscribe an endpoint to it, and endpoints subscribed to every type never get it.
import assert from 'node:assert/strict';
import { createApiKey } from '../src/auth/api-keys.js';
import { build, getJson, postJson, type TestEnv } from './helpers/app.js';
import { buildWithDispatcher } from './helpers/dispatch.js';
import { createOrgFixture, definition } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';
import { Receiver, startReceiver, WEBHOOK_TEST_ENV } from './helpers/webhooks.js';

const AUDIT = '/api/v1/public/audit-events';
const KEYS = '/api/v1/public/api-keys';
const WORKFLOWS = '/api/v1/public/workflows';
const ENDPOINTS = '/api/v1/public/webhook-endpoints';

interface AuditJson {
  id: number;
  action: string;
  actor: string;
  actor_key_id: number | null;
  actor_key_name: string | null;
  target_type: string;
  target_id: string | null;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  created_at: string;
}
type Page = { data: AuditJson[]; next_after: number | null };

/** A clock the test moves, so entries have distinct, known times. */
function steppingClock(start: number) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

async function list(env: TestEnv, key: string, query = ''): Promise<Page> {
  const answer = await getJson(env.app, `${AUDIT}${query}`, key);
  assert.equal(answer.statusCode, 200, answer.body);
  return answer.json() as Page;
}

for (const store of await storeCases()) {
  describe(`Audit log over the API (${store.kind})`, { skip: store.skip }, () => {
    it('lists the organization\'s entries newest first, filtered by action, target, key and time, paged, and never with a secret', async (t) => {
      const clock = steppingClock(Date.parse('2026-11-27T10:00:00Z'));
      const env = await build(t, store.kind, { clock });
      const f = await createOrgFixture(env.deps);
      const other = await createOrgFixture(env.deps, 'Other');
      clock.advance(60_000);
      const made = await postJson(env.app, KEYS, { name: 'crm', scopes: ['calls'] }, { key: f.apiKey });
      assert.equal(made.statusCode, 201, made.body);
      const crm = made.json() as { id: number; key: string; prefix: string };
      clock.advance(60_000);
      const workflow = await postJson(env.app, WORKFLOWS, { name: 'Reminder', definition: definition() }, { key: f.apiKey });
      assert.equal(workflow.statusCode, 201, workflow.body);
      const uuid = (workflow.json() as { workflow_uuid: string }).workflow_uuid;
      clock.advance(60_000);
      assert.equal((await postJson(env.app, `${KEYS}/${crm.id}/revoke`, {}, { key: f.apiKey })).statusCode, 200);
      assert.equal((await postJson(env.app, KEYS, { name: 'theirs', scopes: ['calls'] }, { key: other.apiKey })).statusCode, 201);

      const all = await list(env, f.apiKey);
      assert.deepEqual(
        all.data.map((e) => [e.action, e.actor, e.target_type]),
        [
          ['api_key.revoked', 'api_key', 'api_key'],
          ['workflow.created', 'api_key', 'workflow'],
          ['api_key.created', 'api_key', 'api_key'],
          ['workflow.created', 'cli', 'workflow'],
          ['telephony_configuration.created', 'cli', 'telephony_configuration'],
          ['api_key.created', 'cli', 'api_key'],
        ],
        'newest first, this organization\'s only (the fixture\'s key, route and workflow were made as the CLI makes them)',
      );
      const created = all.data[2];
      assert.deepEqual(
        { ...created, id: undefined },
        {
          id: undefined,
          action: 'api_key.created',
          actor: 'api_key',
          actor_key_id: f.apiKeyId,
          actor_key_name: 'test key',
          target_type: 'api_key',
          target_id: String(crm.id),
          before: null,
          after: { id: crm.id, name: 'crm', prefix: crm.prefix, scopes: ['calls'], created_at: Date.parse('2026-11-27T10:01:00Z'), last_used_at: null, revoked_at: null },
          created_at: '2026-11-27T10:01:00.000Z',
        },
      );
      const secretPart = crm.key.slice(crm.prefix.length + 1);
      assert.ok(!JSON.stringify(all).includes(secretPart), 'the listing never holds the created key\'s secret');

      const actions = async (query: string) => (await list(env, f.apiKey, query)).data.map((e) => e.action);
      assert.deepEqual(await actions('?action=api_key.created'), ['api_key.created', 'api_key.created']);
      assert.deepEqual(await actions('?target_type=workflow'), ['workflow.created', 'workflow.created']);
      assert.deepEqual(await actions(`?target_type=workflow&target_id=${uuid}`), ['workflow.created']);
      assert.deepEqual(await actions(`?target_id=${crm.id}`), ['api_key.revoked', 'api_key.created']);
      assert.deepEqual(await actions(`?actor_key_id=${f.apiKeyId}`), ['api_key.revoked', 'workflow.created', 'api_key.created']);
      assert.deepEqual(await actions('?actor=cli'), ['workflow.created', 'telephony_configuration.created', 'api_key.created']);
      assert.deepEqual(await actions('?since=2026-11-27T10:01:00Z&until=2026-11-27T10:03:00Z'), ['workflow.created', 'api_key.created']);

      const paged: string[] = [];
      let query = '?limit=2';
      for (let pages = 0; pages < 5; pages++) {
        const page = await list(env, f.apiKey, query);
        paged.push(...page.data.map((e) => e.action));
        if (page.next_after === null) break;
        query = `?limit=2&after=${page.next_after}`;
      }
      assert.deepEqual(paged, all.data.map((e) => e.action));

      const bad = await getJson(env.app, `${AUDIT}?since=yesterday`, f.apiKey);
      assert.equal(bad.statusCode, 422, bad.body);
    });

    it('refuses a key without the admin scope, and shows another organization\'s entries to no one else', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const other = await createOrgFixture(env.deps, 'Other');
      const everythingButAdmin = await createApiKey(env.deps.store, f.orgId, 'no admin', env.deps.clock.now(), { scopes: ['calls', 'campaigns', 'webhooks'] });
      const refused = await getJson(env.app, AUDIT, everythingButAdmin.key);
      assert.equal(refused.statusCode, 403);
      assert.deepEqual([(refused.json() as { code: string }).code, (refused.json() as { required_scope: string }).required_scope], ['insufficient_scope', 'admin']);
      assert.equal((await list(env, other.apiKey)).data.length, 3, 'the other organization has entries of its own (its fixture\'s key, route and workflow)');
      const mine = await list(env, f.apiKey);
      assert.deepEqual(mine.data.filter((e) => e.target_id === String(other.apiKeyId) || e.target_id === other.workflowUuid), []);
      assert.equal((await list(env, f.apiKey, `?target_id=${other.workflowUuid}`)).data.length, 0);
    });
  });

  describe(`audit.event webhook messages (${store.kind})`, { skip: store.skip }, () => {
    it('delivers each audit entry signed, as the listing shows it, to endpoints naming audit.event and to no endpoint subscribed to every type', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV });
      const f = await createOrgFixture(env.deps);
      const named = await postJson(env.app, ENDPOINTS, { url: receiver.url, events: ['audit.event'] }, { key: f.apiKey });
      assert.equal(named.statusCode, 201, named.body);
      const { id: namedId, secret } = named.json() as { id: number; secret: string };
      const every = await postJson(env.app, ENDPOINTS, { url: 'https://93.184.216.34/hooks' }, { key: f.apiKey });
      assert.equal(every.statusCode, 201, every.body);
      const everyId = (every.json() as { id: number }).id;

      const made = await postJson(env.app, KEYS, { name: 'crm', scopes: ['calls'] }, { key: f.apiKey });
      const crm = made.json() as { id: number; key: string; prefix: string };
      const workflow = await postJson(env.app, WORKFLOWS, { name: 'Reminder', definition: definition() }, { key: f.apiKey });
      const uuid = (workflow.json() as { workflow_uuid: string }).workflow_uuid;
      assert.equal((await postJson(env.app, `${WORKFLOWS}/${uuid}/archive`, {}, { key: f.apiKey })).statusCode, 200);

      // Written with each change, whatever the worker has sent yet; only to the endpoint naming the type.
      const written = await env.deps.store.db.selectFrom('webhook_deliveries').select(['endpoint_id', 'event_type', 'message_id']).orderBy('id').execute();
      assert.deepEqual(written.map((d) => [d.endpoint_id, d.event_type]), [[namedId, 'audit.event'], [namedId, 'audit.event'], [namedId, 'audit.event']]);
      assert.ok(!written.some((d) => d.endpoint_id === everyId));

      const messages = await receiver.waitFor((all) => all.length >= 3, scaledTimeout(10_000));
      const listed = (await list(env, f.apiKey, '?limit=3')).data;
      const verified = messages.map((m) => Receiver.verify(secret, m) as { type: string; timestamp: string; data: { audit_event: AuditJson } });
      assert.deepEqual(verified.map((v) => v.type), ['audit.event', 'audit.event', 'audit.event']);
      // No order between audit messages: compare by the entry's id.
      const byId = (a: AuditJson, b: AuditJson) => a.id - b.id;
      assert.deepEqual(verified.map((v) => v.data.audit_event).sort(byId), [...listed].sort(byId), 'each message carries the entry as the listing shows it');
      assert.deepEqual(messages.map((m) => m.headers['webhook-id']).sort(), listed.map((e) => `msg_audit${e.id}`).sort());
      assert.ok(!messages.some((m) => m.body.includes(crm.key.slice(crm.prefix.length + 1))), 'no message holds the created key\'s secret');
    });

    it('lets only a key with the admin scope subscribe an endpoint to audit.event, or change, delete or rotate the secret of one that is', async (t) => {
      const env = await build(t, store.kind, { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } });
      const f = await createOrgFixture(env.deps);
      const webhooksOnly = await createApiKey(env.deps.store, f.orgId, 'hooks', env.deps.clock.now(), { scopes: ['webhooks'] });
      const refused = await postJson(env.app, ENDPOINTS, { url: 'https://93.184.216.34/a', events: ['audit.event', 'run.ended'] }, { key: webhooksOnly.key });
      assert.equal(refused.statusCode, 403, refused.body);
      assert.deepEqual([(refused.json() as { code: string }).code, (refused.json() as { required_scope: string }).required_scope], ['insufficient_scope', 'admin']);
      const runs = await postJson(env.app, ENDPOINTS, { url: 'https://93.184.216.34/b', events: ['run.ended'] }, { key: webhooksOnly.key });
      assert.equal(runs.statusCode, 201, 'other types need no more than webhooks');
      const runsId = (runs.json() as { id: number }).id;
      const widened = await env.app.inject({ method: 'PATCH', url: `${ENDPOINTS}/${runsId}`, headers: { 'x-api-key': webhooksOnly.key, 'content-type': 'application/json' }, payload: JSON.stringify({ events: ['run.ended', 'audit.event'] }) });
      assert.equal(widened.statusCode, 403, widened.body);
      const audited = await postJson(env.app, ENDPOINTS, { url: 'https://93.184.216.34/c', events: ['audit.event'] }, { key: f.apiKey });
      assert.equal(audited.statusCode, 201, audited.body);
      const auditedId = (audited.json() as { id: number }).id;
      const redirected = await env.app.inject({ method: 'PATCH', url: `${ENDPOINTS}/${auditedId}`, headers: { 'x-api-key': webhooksOnly.key, 'content-type': 'application/json' }, payload: JSON.stringify({ url: 'https://93.184.216.34/mine' }) });
      assert.equal(redirected.statusCode, 403, 'nor redirect an endpoint that receives the audit log');
      const shown = (await getJson(env.app, `${ENDPOINTS}/${auditedId}`, f.apiKey)).json() as { url: string; events: string[] };
      assert.deepEqual([shown.url, shown.events], ['https://93.184.216.34/c', ['audit.event']], 'unchanged');
      const rotated = await postJson(env.app, `${ENDPOINTS}/${auditedId}/rotate-secret`, {}, { key: webhooksOnly.key });
      assert.equal(rotated.statusCode, 403, 'nor take the secret that verifies the audit log\'s messages');
      const deleted = await env.app.inject({ method: 'DELETE', url: `${ENDPOINTS}/${auditedId}`, headers: { 'x-api-key': webhooksOnly.key } });
      assert.equal(deleted.statusCode, 403, 'nor delete the audit log\'s endpoint');
      assert.equal((await getJson(env.app, `${ENDPOINTS}/${auditedId}`, f.apiKey)).statusCode, 200, 'still there');
      assert.equal((await postJson(env.app, `${ENDPOINTS}/${runsId}/rotate-secret`, {}, { key: webhooksOnly.key })).statusCode, 200, 'other endpoints\' secrets stay the webhooks scope\'s');
    });
  });
}
