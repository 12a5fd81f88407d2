// `dialtone` in remote mode: the command as a subprocess (bin/dialtone, compiled as after `npm ci`)
// speaking to a real service process on each store through @dialtone/client, with DIALTONE_URL and
// DIALTONE_API_KEY and no usable database of its own (a DATABASE_URL that cannot open: a command
// that touched the database would fail). Each command's output is checked, and its effect through
// the service. Refusals: a key without the scope gets the 403 problem readably, a wrong URL says it
// cannot reach the service, org create and org list (no API form) say they need direct database mode. Last,
// bin/dialtone with no build at all (TypeScript sources through tsx, as after
// `npm ci --omit=dev`) still finds @dialtone/client.
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { Dialtone } from '../packages/client/src/index.js';
import { isTerminal } from '../src/runs/states.js';
import { definition } from './helpers/fixtures.js';
import { ensureBuilt, ROOT, runToCompletion, stopOnTeardown, type Finished } from './helpers/process.js';
import { prepareDatabase, startServiceProcess } from './helpers/service-process.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { before, describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';
import { startReceiver, WEBHOOK_TEST_ENV } from './helpers/webhooks.js';

const BIN = join(ROOT, 'bin', 'dialtone');
const ANSWERED = '+12025550100';
const BUSY = '+12025550101';
const LONG = '+12025550107';
// Quick simulated calls and campaign ticks (as test/client.test.ts).
const QUICK = { SIMULATOR_LATENCY_MS: '5', SIMULATOR_RING_MS: '20', SIMULATOR_TALK_MS: '30', SIMULATOR_SECOND_MS: '10', DISPATCH_POLL_INTERVAL_MS: '20', CAMPAIGN_TICK_INTERVAL_MS: '50' };
/** A database no command can open: remote mode must never need one. */
const NO_DATABASE = { DATABASE_URL: 'sqlite:/nonexistent/dialtone-cli-remote/never.db' };

type Json = Record<string, unknown> & { data?: Record<string, unknown>[] };

interface Remote {
  url: string;
  key: string;
  dir: string;
  client: Dialtone;
  db: Awaited<ReturnType<typeof prepareDatabase>>;
  fixture: Awaited<ReturnType<typeof prepareDatabase>>['fixture'];
  /** `dialtone args…` in remote mode; `env` adds to (or, with undefined, removes from) its environment. */
  cli(args: string[], env?: Record<string, string | undefined>): Promise<Finished>;
  /** `dialtone --json args…`, required to succeed without a word on stderr; its JSON. */
  json<T = Json>(...args: string[]): Promise<T>;
  /** `dialtone --json args…`, required to fail; its error object from stderr. */
  refused(args: string[], env?: Record<string, string | undefined>): Promise<{ code: string; message: string; status?: number; errors?: { pointer: string; detail: string }[] }>;
  file(name: string, content: string): string;
}

async function remote(t: TestContext, kind: StoreKind): Promise<Remote> {
  const db = await prepareDatabase(t, kind);
  const service = await startServiceProcess({ DATABASE_URL: db.url, ...QUICK, ...WEBHOOK_TEST_ENV });
  stopOnTeardown(t, service.child);
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-cli-remote-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const base = { ...NO_DATABASE, DIALTONE_URL: service.url, DIALTONE_API_KEY: db.fixture.apiKey };
  const cli = (args: string[], env: Record<string, string | undefined> = {}) => runToCompletion(process.execPath, [BIN, ...args], { ...base, ...env });
  return {
    url: service.url,
    key: db.fixture.apiKey,
    dir,
    client: new Dialtone({ baseUrl: service.url, apiKey: db.fixture.apiKey }),
    db,
    fixture: db.fixture,
    cli,
    async json<T>(...args: string[]): Promise<T> {
      const result = await cli(['--json', ...args]);
      assert.equal(result.code, 0, `dialtone ${args.join(' ')} failed:\n${result.stderr}`);
      assert.equal(result.stderr, '', `dialtone ${args.join(' ')} wrote to stderr`);
      return JSON.parse(result.stdout) as T;
    },
    async refused(args, env = {}) {
      const result = await cli(['--json', ...args], env);
      assert.notEqual(result.code, 0, `dialtone ${args.join(' ')} succeeded:\n${result.stdout}`);
      assert.equal(result.stdout, '');
      return (JSON.parse(result.stderr) as { error: Awaited<ReturnType<Remote['refused']>> }).error;
    },
    file(name, content) {
      const path = join(dir, name);
      writeFileSync(path, content);
      return path;
    },
  };
}

/** Polls `read` until `done` holds (scaled timeout). */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + scaledTimeout(30_000);
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

for (const store of await storeCases()) {
  describe(`dialtone remote mode against the service (${store.kind})`, { skip: store.skip }, () => {
    before(ensureBuilt);

    it('places calls (dry run, published, test, idempotent), shows, lists with filters and pages, cancels runs and reads the stats', async (t) => {
      const r = await remote(t, store.kind);
      const agent = r.fixture.agentUuid;

      const dry = await r.json('call', 'start', agent, '--phone', ANSWERED, '--dry-run', '--context', '{"name":"Ada"}');
      assert.equal(dry.status, 'valid');
      assert.equal(dry.workflow_run_id, null);
      assert.equal((await r.client.runs.list()).data.length, 0, 'a dry run creates nothing');

      const first = await r.json('call', 'start', agent, '--phone', ANSWERED, '--context', '{"name":"Ada"}', '--route', String(r.fixture.telephonyId), '--idempotency-key', 'cli-1');
      const again = await r.json('call', 'start', agent, '--phone', ANSWERED, '--context', '{"name":"Ada"}', '--route', String(r.fixture.telephonyId), '--idempotency-key', 'cli-1');
      assert.equal(first.status, 'queued');
      assert.equal(again.workflow_run_id, first.workflow_run_id, 'the same idempotency key answers the first run');
      const text = await r.cli(['call', 'start', agent, '--phone', BUSY, '--test']);
      assert.equal(text.code, 0, text.stderr);
      const busyId = Number(/workflow_run_id\s+(\d+)/.exec(text.stdout)?.[1]);
      assert.match(text.stdout, new RegExp(`Follow it: dialtone run show ${busyId}`));

      const firstId = Number(first.workflow_run_id);
      const done = await until(() => r.client.runs.get(firstId), (run) => isTerminal(run.state), 'the first call to end');
      assert.equal(done.state, 'completed');
      assert.deepEqual(done.initial_context, { name: 'Ada' });
      const busy = await until(() => r.client.runs.get(busyId), (run) => isTerminal(run.state), 'the busy call to end');
      assert.equal(busy.state, 'busy');
      assert.equal(busy.mode, 'test');

      const shown = await r.json('run', 'show', String(firstId));
      assert.equal(shown.name, first.workflow_run_name);
      const shownText = await r.cli(['run', 'show', String(busyId)]);
      assert.match(shownText.stdout, /^state\s+busy$/m);
      const events = await r.json<{ type: string }[]>('run', 'events', String(firstId));
      assert.deepEqual(events.map((e) => e.type), ['queued', 'dialing', 'ringing', 'in_progress', 'completed']);
      assert.deepEqual((await r.json<{ seq: number }[]>('run', 'events', String(firstId), '--after', '3')).map((e) => e.seq), [4, 5]);

      // Filters: state, outcome (the busy run's own reason), campaign (none of these runs), and paging.
      const byState = await r.json<{ data: { id: number }[] }>('run', 'list', '--state', 'busy');
      assert.deepEqual(byState.data.map((run) => run.id), [busyId]);
      assert.ok(busy.outcome_reason, 'a busy run has an outcome reason');
      const byOutcome = await r.json<{ data: { id: number; outcome_reason: string }[] }>('run', 'list', '--outcome', busy.outcome_reason ?? '');
      assert.deepEqual(byOutcome.data.map((run) => run.id), [busyId]);
      assert.notEqual(done.outcome_reason, busy.outcome_reason);
      assert.deepEqual((await r.json<{ data: unknown[] }>('run', 'list', '--campaign', '99')).data, []);
      const page = await r.json<{ data: { id: number }[]; next_after: number | null }>('run', 'list', '--limit', '1');
      assert.deepEqual([page.data.map((run) => run.id), page.next_after], [[busyId], busyId]);
      const next = await r.json<{ data: { id: number }[]; next_after: number | null }>('run', 'list', '--limit', '1', '--after', String(page.next_after));
      assert.deepEqual([next.data.map((run) => run.id), next.next_after], [[firstId], null]);
      const listed = await r.cli(['run', 'list', '--limit', '1']);
      assert.match(listed.stdout, /More: --after \d+/);

      // A call that does not end by itself, canceled while live.
      const long = await r.json('call', 'start', agent, '--phone', LONG);
      const longId = Number(long.workflow_run_id);
      await until(() => r.client.runs.get(longId), (run) => run.state === 'in_progress', 'the long call to be answered');
      const canceled = await r.cli(['run', 'cancel', String(longId)]);
      assert.equal(canceled.code, 0, canceled.stderr);
      assert.match(canceled.stdout, new RegExp(`^id\\s+${longId}$`, 'm'));
      assert.equal((await until(() => r.client.runs.get(longId), (run) => isTerminal(run.state), 'the cancel')).outcome_reason, 'canceled_by_request');
      const conflict = await r.refused(['run', 'cancel', String(longId)]);
      assert.equal(conflict.status, 409);

      const stats = await r.json<{ total: number; by_state: Record<string, number>; routes: { telephony_configuration_id: number }[] }>('stats');
      assert.equal(stats.total, 3);
      assert.deepEqual([stats.by_state.completed, stats.by_state.busy], [2, 1]);
      assert.deepEqual(stats.routes.map((route) => route.telephony_configuration_id), [r.fixture.telephonyId]);
      const statsText = await r.cli(['stats', '--since', '2000-01-01T00:00:00Z']);
      assert.match(statsText.stdout, /^total\s+3$/m);
      assert.match(statsText.stdout, /Routes now:/);

      // An API refusal with its field problems, readable in text; nothing created.
      const invalid = await r.cli(['call', 'start', agent, '--phone', 'not a number']);
      assert.equal(invalid.code, 1);
      assert.match(invalid.stderr, /^Error \(422 [a-z_]+\): /);
      assert.match(invalid.stderr, /\n {2}\/phone_number: /);
      const missing = await r.refused(['run', 'show', '987654']);
      assert.deepEqual([missing.status, missing.code], [404, 'workflow_run_not_found']);
      assert.equal((await r.client.runs.list()).data.length, 3);
    });

    it('creates an agent from a file, saves a draft, shows it, publishes it and archives it, and prints a definition\'s problems with their pointers', async (t) => {
      const r = await remote(t, store.kind);
      const first = r.file('first.json', JSON.stringify(definition({ greeting: 'First' })));
      const made = await r.json<{ workflow_uuid: string; published_version: number; agent_uuids: string[] }>('workflow', 'create', '--name', 'Reminders', '--definition', first);
      assert.equal(made.published_version, 1);
      const uuid = made.workflow_uuid;
      const draft = await r.json<{ version: number; status: string }>('workflow', 'save-draft', uuid, '--definition', r.file('second.json', JSON.stringify(definition({ greeting: 'Second' }))));
      assert.deepEqual([draft.version, draft.status], [2, 'draft']);
      const shownDraft = await r.cli(['workflow', 'show', uuid, '--definition']);
      assert.equal(shownDraft.code, 0, shownDraft.stderr);
      assert.match(shownDraft.stdout, /Second/, 'without --version: the draft');
      const shownFirst = await r.json<{ version: number; definition: unknown }>('workflow', 'show', uuid, '--definition', '--version', '1');
      assert.equal(shownFirst.version, 1);
      assert.match(JSON.stringify(shownFirst.definition), /First/);
      const published = await r.json<{ published_version: number; draft_version: number | null }>('workflow', 'publish', uuid);
      assert.deepEqual([published.published_version, published.draft_version], [2, null]);
      const details = await r.json<{ status: string; versions: { version: number; status: string }[] }>('workflow', 'show', uuid);
      assert.deepEqual(details.versions.map((v) => [v.version, v.status]), [[2, 'published'], [1, 'archived']]);
      const audit = (await r.client.api.GET('/api/v1/public/audit-events', { params: { query: { target_type: 'workflow', target_id: uuid } } })).data;
      assert.deepEqual(audit?.data.map((e) => [e.action, e.actor]), [['workflow.published', 'api_key'], ['workflow.draft_saved', 'api_key'], ['workflow.created', 'api_key']]);

      const problems = await r.refused(['workflow', 'save-draft', uuid, '--definition', r.file('bad.json', JSON.stringify({ nodes: [] }))]);
      assert.deepEqual([problems.status, problems.code], [422, 'validation_failed']);
      assert.ok((problems.errors ?? []).length > 0 && (problems.errors ?? []).every((e) => e.pointer.startsWith('/')), JSON.stringify(problems.errors));
      const withOrg = await r.refused(['workflow', 'create', '--org', '1', '--name', 'x', '--definition', first]);
      assert.equal(withOrg.code, 'invalid_input');

      const archived = await r.cli(['workflow', 'archive', uuid]);
      assert.equal(archived.code, 0, archived.stderr);
      assert.equal((await r.json<{ status: string }>('workflow', 'show', uuid)).status, 'archived');
      const call = await r.refused(['call', 'start', made.agent_uuids[0] ?? '', '--phone', '+12025550123']);
      assert.equal(call.status, 404, 'an archived agent answers no call');
    });

    it('creates a route with settings flags and write-only credentials, updates, disables, enables and makes it the default', async (t) => {
      const r = await remote(t, store.kind);
      const made = await r.json<{ id: number; name: string; provider: string; settings: Record<string, unknown>; is_default: boolean }>(
        'telephony', 'create', '--name', 'Fast sim', '--provider', 'simulator', '--caller-id', '+12025550100', '--simulator-ring-ms', '50', '--cps', '3',
      );
      assert.deepEqual([made.name, made.provider, made.settings.ring_ms, made.is_default], ['Fast sim', 'simulator', 50, false]);
      const token = 'secret-token-0123456789abcdef0123';
      const credentials = r.file('twilio.json', JSON.stringify({ account_sid: `AC${'0'.repeat(32)}`, auth_token: token }));
      const twilio = await r.cli(['--json', 'telephony', 'create', '--name', 'Carrier', '--provider', 'twilio', '--caller-id', '+12025550101', '--credentials', credentials]);
      assert.equal(twilio.code, 0, twilio.stderr);
      assert.ok(!twilio.stdout.includes(token) && !twilio.stderr.includes(token), 'a credential is never printed back');
      assert.deepEqual((JSON.parse(twilio.stdout) as { credentials_set: Record<string, boolean> }).credentials_set.auth_token, true);

      const renamed = await r.json<{ name: string; caller_ids: string[] }>('telephony', 'update', String(made.id), '--name', 'Faster sim', '--caller-id', '+12025550102');
      assert.deepEqual([renamed.name, renamed.caller_ids], ['Faster sim', ['+12025550102']]);
      assert.equal((await r.json<{ status: string }>('telephony', 'disable', String(made.id))).status, 'inactive');
      const disabledDefault = await r.refused(['telephony', 'set-default', String(made.id)]);
      assert.deepEqual([disabledDefault.status, disabledDefault.code], [409, 'telephony_configuration_disabled']);
      assert.equal((await r.json<{ status: string }>('telephony', 'enable', String(made.id))).status, 'active');
      assert.equal((await r.json<{ is_default: boolean }>('telephony', 'set-default', String(made.id))).is_default, true);
      const listed = await r.json<{ id: number; is_default: boolean }[]>('telephony', 'list');
      assert.deepEqual(listed.filter((c) => c.is_default).map((c) => c.id), [made.id]);
      const unknownFlag = await r.refused(['telephony', 'create', '--name', 'x', '--provider', 'simulator', '--pigeon-speed', '3']);
      assert.equal(unknownFlag.code, 'invalid_input');
    });

    it('creates, lists and revokes API keys; a key without the scope gets a readable 403; lists agents, routes and providers; erases a number; never prints the key', async (t) => {
      const r = await remote(t, store.kind);

      const created = await r.json<{ id: number; key: string; scopes: string[]; prefix: string }>('key', 'create', '--name', 'crm', '--scopes', 'calls');
      assert.deepEqual(created.scopes, ['calls']);
      const stored = async () => (await r.client.api.GET('/api/v1/public/api-keys/{id}', { params: { path: { id: created.id } } })).data;
      assert.deepEqual([(await stored())?.name, (await stored())?.scopes, (await stored())?.revoked_at], ['crm', ['calls'], null]);
      const keys = await r.json<{ id: number; name: string; prefix: string }[]>('key', 'list');
      assert.deepEqual(keys.map((k) => k.name).sort(), ['crm', 'test key']);
      assert.ok(!JSON.stringify(keys).includes(created.key), 'list shows no secret');

      // The calls-only key: it may read runs, and is refused suppressions with the scope named.
      const crm = { DIALTONE_API_KEY: created.key };
      assert.equal((await r.cli(['--json', 'run', 'list'], crm)).code, 0);
      const forbidden = await r.cli(['suppression', 'list'], crm);
      assert.equal(forbidden.code, 1);
      assert.match(forbidden.stderr, /^Error \(403 insufficient_scope\): .*campaigns/);
      const forbiddenJson = await r.refused(['key', 'list'], crm);
      assert.deepEqual([forbiddenJson.status, forbiddenJson.code], [403, 'insufficient_scope']);
      assert.match(forbiddenJson.message, /admin/);
      assert.ok(!forbidden.stderr.includes(created.key) && !forbiddenJson.message.includes(created.key), 'the key is never printed');

      const revoked = await r.cli(['key', 'revoke', String(created.id)]);
      assert.equal(revoked.code, 0, revoked.stderr);
      assert.match(revoked.stdout, new RegExp(`Revoked key ${created.id}`));
      assert.notEqual((await stored())?.revoked_at, null);
      // Refused on every node within LOOKUP_CACHE_TTL_MS (docs/api.md, "Management"), not at once:
      // a request that raced the revocation may still find the key in this node's cache.
      await until(() => r.cli(['--json', 'run', 'list'], crm), (result) => result.code !== 0, 'the revoked key to be refused');
      const unauthorized = await r.refused(['run', 'list'], crm);
      assert.equal(unauthorized.status, 401);

      // A key given on the command line works, with a warning; the key is in neither output.
      const flagged = await r.cli(['--api-key', r.key, 'stats'], { DIALTONE_API_KEY: undefined });
      assert.equal(flagged.code, 0, flagged.stderr);
      assert.match(flagged.stderr, /Warning: --api-key puts the key in your shell history/);
      assert.ok(!flagged.stdout.includes(r.key) && !flagged.stderr.includes(r.key));
      const keyFile = r.file('key.txt', `${r.key}\n`);
      const fromFile = await r.cli(['--api-key-file', keyFile, '--json', 'stats'], { DIALTONE_API_KEY: undefined });
      assert.equal(fromFile.code, 0, fromFile.stderr);
      assert.equal(fromFile.stderr, '');
      const noKey = await r.refused(['stats'], { DIALTONE_API_KEY: undefined });
      assert.match(noKey.message, /needs an API key: set DIALTONE_API_KEY/);

      // The catalog the API reads: agents, routes, providers.
      assert.deepEqual((await r.json<{ workflow_uuid: string; agent_uuids: string[] }[]>('workflow', 'list')).map((w) => [w.workflow_uuid, w.agent_uuids]), [[r.fixture.workflowUuid, [r.fixture.agentUuid]]]);
      assert.deepEqual((await r.json<{ id: number }[]>('telephony', 'list')).map((c) => c.id), [r.fixture.telephonyId]);
      assert.ok((await r.json<{ name: string }[]>('telephony', 'providers')).some((p) => p.name === 'simulator'));
      const providersText = await r.cli(['telephony', 'providers']);
      assert.match(providersText.stdout, /^sip: .*\n {2}calls outlive the node: /m);

      // erase-number: the person's run loses the number, and --suppress suppresses it.
      const call = await r.client.calls.start(r.fixture.agentUuid, { phone_number: '+12025550187', initial_context: { name: 'Grace' } });
      await until(() => r.client.runs.get(call.workflow_run_id), (run) => isTerminal(run.state), 'the call to end');
      const erased = await r.json<{ phone_number: string; counts: Record<string, number> }>('erase-number', '+12025550187', '--suppress');
      assert.equal(erased.phone_number, '+12025550187');
      assert.equal((await r.client.runs.get(call.workflow_run_id)).initial_context, null);
      assert.equal((await r.client.suppressions.get('+12025550187')).phone_number, '+12025550187');
      const withOrg = await r.refused(['erase-number', String(r.fixture.orgId), '+12025550187']);
      assert.match(withOrg.message, /without the organization id/);
    });

    it('manages suppressions, webhook endpoints and their deliveries, and campaigns from a CSV to completion', async (t) => {
      const receiver = await startReceiver(t);
      const r = await remote(t, store.kind);

      // Suppressions.
      const added = await r.json('suppression', 'add', '+1 202 555 0188', '--reason', 'asked');
      assert.deepEqual([added.phone_number, added.reason], ['+12025550188', 'asked']);
      const imported = await r.cli(['suppression', 'import', r.file('dnc.csv', 'phone_number,reason\n+12025550189,imported\nnope,bad\n')]);
      assert.equal(imported.code, 0, imported.stderr);
      assert.match(imported.stdout, /^Imported 1 numbers; 1 invalid lines skipped:\n {2}line 3: /);
      const page = await r.json<{ data: { phone_number: string }[]; next_after: string | null }>('suppression', 'list', '--limit', '1');
      assert.deepEqual([page.data.map((s) => s.phone_number), page.next_after], [['+12025550188'], '+12025550188']);
      const rest = await r.json<{ data: { phone_number: string }[] }>('suppression', 'list', '--after', page.next_after ?? '');
      assert.deepEqual(rest.data.map((s) => s.phone_number), ['+12025550189']);
      assert.deepEqual(await r.json('suppression', 'remove', '+12025550188'), { removed: '+12025550188' });
      assert.equal((await r.client.suppressions.list()).data.length, 1);
      const orgGiven = await r.refused(['suppression', 'list', '--org', '1']);
      assert.match(orgGiven.message, /--org is for direct database mode/);

      // Webhook endpoints (the command's own --url after the command; the service's in the environment).
      const endpoint = await r.json<{ id: number; secret: string; url: string }>('webhook', 'create', '--url', receiver.url, '--events', 'webhook.test,campaign.completed', '--description', 'crm');
      assert.match(endpoint.secret, /^whsec_/);
      assert.equal(endpoint.url, receiver.url);
      const id = String(endpoint.id);
      assert.deepEqual((await r.json<{ id: number }[]>('webhook', 'list')).map((e) => e.id), [endpoint.id]);
      const tested = await r.cli(['webhook', 'test', id]);
      assert.equal(tested.code, 0, tested.stderr);
      const deliveryId = Number(/Queued delivery (\d+)/.exec(tested.stdout)?.[1]);
      await receiver.waitFor((all) => all.some((m) => m.json.type === 'webhook.test'), scaledTimeout(10_000));
      const deliveries = await until(
        () => r.json<{ data: { id: number; status: string }[] }>('webhook', 'deliveries', id, '--status', 'succeeded'),
        (p) => p.data.some((d) => d.id === deliveryId),
        'the test delivery to succeed',
      );
      assert.ok(deliveries.data.length >= 1);
      assert.deepEqual(await r.json('webhook', 'retry', id, String(deliveryId)), { delivery_id: deliveryId, status: 'pending' });
      assert.equal((await r.json('webhook', 'disable', id)).enabled, false);
      assert.equal((await r.client.webhookEndpoints.get(endpoint.id)).enabled, false);
      assert.equal((await r.json('webhook', 'enable', id)).enabled, true);
      const rotated = await r.cli(['webhook', 'rotate-secret', id]);
      assert.match(rotated.stdout, /^New secret: whsec_/);
      assert.ok(!rotated.stdout.includes(endpoint.secret));

      // Campaigns: from a CSV, started at creation, followed with status --watch to its end.
      const csv = r.file('contacts.csv', `phone_number,name\n${ANSWERED},Ada\nnope,Bob\n+12025550150,Cy\n`);
      const campaign = await r.json<{ id: number; state: string; contacts: { added: number; invalid_count: number } }>('campaign', 'create', '--name', 'Remote', '--agent', r.fixture.agentUuid, '--contacts', csv, '--max-attempts', '2', '--start');
      assert.equal(campaign.state, 'running');
      assert.deepEqual([campaign.contacts.added, campaign.contacts.invalid_count], [2, 1]);
      const watched = await r.cli(['campaign', 'status', String(campaign.id), '--watch', '--interval', '50'], {});
      assert.equal(watched.code, 0, watched.stderr);
      assert.match(watched.stdout, new RegExp(`campaign ${campaign.id} \\[#{30}\\] 100% 2/2 {2}completed`));
      const attempts = await r.json<{ data: { campaign_id: number }[] }>('run', 'list', '--campaign', String(campaign.id));
      assert.equal(attempts.data.length, 2);
      await receiver.waitFor((all) => all.some((m) => m.json.type === 'campaign.completed'), scaledTimeout(10_000));

      // Another, starting in an hour: contacts added, updated, started, paused, resumed, canceled.
      const later = new Date(Date.now() + 3_600_000).toISOString();
      const other = await r.json<{ id: number; state: string }>('campaign', 'create', '--name', 'Later', '--agent', r.fixture.agentUuid, '--starts-at', later);
      const otherId = String(other.id);
      assert.equal(other.state, 'draft');
      const more = await r.json('campaign', 'add-contacts', otherId, r.file('more.csv', 'phone_number\n+12025550177\n+12025550177\n'));
      assert.deepEqual([more.added, more.duplicates], [1, 1]);
      const machine = r.file('amd.json', JSON.stringify({ detect: 'on', on_machine: 'hangup' }));
      const updated = await r.json<{ answering_machine: { detect: string } | null }>('campaign', 'update', otherId, '--answering-machine', machine);
      assert.equal(updated.answering_machine?.detect, 'on');
      assert.equal((await r.json('campaign', 'update', otherId, '--agent-answering-machine')).answering_machine, null);
      assert.equal((await r.json('campaign', 'start', otherId)).state, 'running');
      const paused = await r.cli(['campaign', 'pause', otherId]);
      assert.match(paused.stdout, /paused \(request\)/);
      assert.equal((await r.json('campaign', 'resume', otherId)).state, 'running');
      assert.equal((await r.json('campaign', 'cancel', otherId)).state, 'canceled');
      assert.equal((await r.client.campaigns.get(other.id)).state, 'canceled');
      const listed = await r.json<{ data: { id: number }[]; next_after: number | null }>('campaign', 'list', '--limit', '1');
      assert.deepEqual([listed.data.map((c) => c.id), listed.next_after], [[other.id], other.id]);
      const status = await r.cli(['campaign', 'status', String(campaign.id)]);
      assert.match(status.stdout, /^state\s+completed$/m);

      assert.deepEqual(await r.json('webhook', 'delete', id), { id: endpoint.id, deleted: true });
      assert.equal((await r.client.webhookEndpoints.list()).data.length, 0);
    });

    it("shows and changes the key's organization settings with org show, set-limits, set-calling-hours and set-retention, lists its audit log with audit list, and prints a 403 for a key without admin and a 422 with its field errors, changing nothing", async (t) => {
      const r = await remote(t, store.kind);
      const settings = async () => (await r.client.api.GET('/api/v1/public/organization')).data;

      // org show: the members direct database mode prints, but created_at (the API has none).
      const shown = await r.json('org', 'show');
      assert.deepEqual(shown, {
        id: r.fixture.orgId,
        name: 'Acme',
        rate_limit_per_second: null,
        key_rate_limit_per_second: null,
        max_queued_runs: null,
        number_max_calls: null,
        number_window_seconds: null,
        calling_hours: null,
        retention_days: null,
      });
      const shownText = await r.cli(['org', 'show']);
      assert.equal(shownText.code, 0, shownText.stderr);
      assert.match(shownText.stdout, /^calling_hours\s+off$/m);
      assert.match(shownText.stdout, /^retention_days\s+default \(RETENTION_DAYS=/m);

      // set-limits: the limits and the per-number cap; one setting of the cap keeps the stored other.
      const limits = await r.json('org', 'set-limits', '--rate-per-second', '50', '--max-queued', '1000', '--number-max-calls', '3', '--number-window', '24h');
      assert.deepEqual(limits, { id: r.fixture.orgId, name: 'Acme', rate_limit_per_second: 50, key_rate_limit_per_second: null, max_queued_runs: 1000, number_max_calls: 3, number_window_seconds: 86_400 });
      const windowOnly = await r.json('org', 'set-limits', '--number-window', '90m');
      assert.deepEqual([windowOnly.number_max_calls, windowOnly.number_window_seconds], [3, 5_400]);
      const reset = await r.json('org', 'set-limits', '--rate-per-second', 'default', '--number-max-calls', 'off');
      assert.deepEqual([reset.rate_limit_per_second, reset.max_queued_runs, reset.number_max_calls, reset.number_window_seconds], [null, 1000, null, null]);
      assert.deepEqual([(await settings())?.max_queued_runs, (await settings())?.number_cap], [1000, null]);

      // set-calling-hours from a file, shown, then off.
      const hours = { timezone: 'America/New_York', outside: 'defer', windows: { mon: ['09:00-12:00', '13:00-20:00'], sat: ['10:00-14:00'] } };
      assert.deepEqual(await r.json('org', 'set-calling-hours', '--file', r.file('hours.json', JSON.stringify(hours))), { id: r.fixture.orgId, calling_hours: hours });
      assert.deepEqual((await r.json('org', 'show')).calling_hours, hours);
      assert.deepEqual((await settings())?.calling_hours, hours);

      // set-retention: days, off, default.
      assert.deepEqual(await r.json('org', 'set-retention', '30'), { id: r.fixture.orgId, retention_days: 30 });
      const off = await r.cli(['org', 'set-retention', 'off']);
      assert.equal(off.stdout, `Retention of organization ${r.fixture.orgId}: off (kept forever).\n`);
      assert.equal((await settings())?.retention_days, 0);
      assert.deepEqual(await r.json('org', 'set-retention', 'default'), { id: r.fixture.orgId, retention_days: null });

      // The service's refusals: a 422 with its field errors, readable in text and in JSON; nothing changes.
      const tooFast = await r.cli(['org', 'set-limits', '--rate-per-second', '2000000']);
      assert.equal(tooFast.code, 1);
      assert.match(tooFast.stderr, /^Error \(422 validation_failed\): /);
      assert.match(tooFast.stderr, /\n {2}\/rate_limit_per_second: /);
      const badHours = await r.refused(['org', 'set-calling-hours', '--file', r.file('bad.json', JSON.stringify({ timezone: 'Nowhere/Land', outside: 'defer', windows: { mon: ['20:00-09:00'], xyz: [] } }))]);
      assert.deepEqual([badHours.status, badHours.code], [422, 'validation_failed']);
      assert.deepEqual((badHours.errors ?? []).map((e) => e.pointer).sort(), ['/calling_hours/timezone', '/calling_hours/windows/mon/0', '/calling_hours/windows/xyz']);
      assert.deepEqual([(await settings())?.rate_limit_per_second, (await settings())?.calling_hours], [null, hours], 'a refused change changes nothing');
      assert.deepEqual(await r.json('org', 'set-calling-hours', '--off'), { id: r.fixture.orgId, calling_hours: null });

      // The CLI's own refusals: an organization id (the key's is used), and the commands with no API form.
      const withId = await r.refused(['org', 'show', String(r.fixture.orgId)]);
      assert.equal(withId.code, 'invalid_input');
      assert.match(withId.message, /In remote mode the API key's organization is used: dialtone org show, without the organization id/);
      assert.match((await r.refused(['org', 'set-retention', String(r.fixture.orgId), '30'])).message, /without the organization id/);
      for (const args of [['org', 'create', '--name', 'Other'], ['org', 'list']]) {
        const refused = await r.refused(args);
        assert.equal(refused.code, 'direct_mode_only', args.join(' '));
        assert.match(refused.message, new RegExp(`^dialtone ${args.slice(0, 2).join(' ')} needs direct database mode: an API key belongs to one organization`));
      }

      // audit list: every change above, newest first, as the API lists it; filters and pages.
      const changes = await r.json<{ data: { id: number; action: string; actor: string; actor_key_id: number | null; before: unknown; after: unknown }[]; next_after: number | null }>(
        'audit', 'list', '--action', 'organization.settings_updated', '--limit', '100',
      );
      assert.equal(changes.data.length, 8, 'three limit changes, two of calling hours, three of retention: the refused ones are not recorded');
      assert.ok(changes.data.every((e) => e.actor === 'api_key' && e.actor_key_id === r.fixture.apiKeyId));
      assert.deepEqual((changes.data[0]?.after as { calling_hours: unknown }).calling_hours, null, 'newest first: calling hours turned off');
      assert.deepEqual((changes.data[0]?.before as { calling_hours: unknown }).calling_hours, hours);
      const viaApi = (await r.client.api.GET('/api/v1/public/audit-events', { params: { query: { action: 'organization.settings_updated', limit: '100' } } })).data;
      assert.deepEqual(changes, viaApi, 'the page as the API answers it');
      const first = await r.json<{ data: { id: number }[]; next_after: number | null }>('audit', 'list', '--action', 'organization.settings_updated', '--limit', '3');
      assert.deepEqual(first.data.map((e) => e.id), changes.data.slice(0, 3).map((e) => e.id));
      assert.equal(first.next_after, changes.data[2]?.id);
      const second = await r.json<{ data: { id: number }[] }>('audit', 'list', '--action', 'organization.settings_updated', '--limit', '3', '--after', String(first.next_after));
      assert.deepEqual(second.data.map((e) => e.id), changes.data.slice(3, 6).map((e) => e.id));
      const byCli = await r.json<{ data: { actor: string }[] }>('audit', 'list', '--actor', 'cli');
      assert.ok(byCli.data.length > 0 && byCli.data.every((e) => e.actor === 'cli'), 'the fixture was made on the database');
      assert.deepEqual((await r.json<{ data: unknown[] }>('audit', 'list', '--since', new Date(Date.now() + 3_600_000).toISOString())).data, []);
      const text = await r.cli(['audit', 'list', '--action', 'organization.settings_updated', '--limit', '2']);
      assert.equal(text.code, 0, text.stderr);
      assert.match(text.stdout, /^id\s+created_at\s+action\s+actor\s+target_type\s+target_id$/m);
      assert.match(text.stdout, new RegExp(`^${changes.data[0]?.id}\\s+\\S+\\s+organization\\.settings_updated\\s+key ${r.fixture.apiKeyId} \\(test key\\)\\s+organization\\s+${r.fixture.orgId}$`, 'm'));
      assert.match(text.stdout, new RegExp(`More: --after ${changes.data[1]?.id}`));
      assert.match((await r.cli(['audit', 'list', '--action', 'nothing.happened'])).stdout, /^No audit events\.$/m);
      assert.match((await r.refused(['audit', 'list', '--org', '1'])).message, /--org is for direct database mode/);

      // A key without the admin scope: a readable 403 naming it, exit 1, nothing changed.
      const calls = await r.json<{ key: string }>('key', 'create', '--name', 'calls only', '--scopes', 'calls');
      const crm = { DIALTONE_API_KEY: calls.key };
      const forbidden = await r.cli(['org', 'show'], crm);
      assert.equal(forbidden.code, 1);
      assert.match(forbidden.stderr, /^Error \(403 insufficient_scope\): .*admin/);
      assert.ok(!forbidden.stderr.includes(calls.key), 'the key is never printed');
      for (const args of [['org', 'set-retention', '5'], ['org', 'set-limits', '--max-queued', '5'], ['audit', 'list']]) {
        const refused = await r.refused(args, crm);
        assert.deepEqual([refused.status, refused.code], [403, 'insufficient_scope'], args.join(' '));
      }
      assert.deepEqual([(await settings())?.retention_days, (await settings())?.max_queued_runs], [null, 1000]);
    });
  });
}

describe('dialtone remote mode refusals', () => {
  before(ensureBuilt);
  const cli = (args: string[], env: Record<string, string | undefined>) => runToCompletion(process.execPath, [BIN, ...args], { ...NO_DATABASE, ...env });

  it('says it cannot reach a URL nothing listens on, and that an answer which is not Dialtone\'s is not the service', async (t) => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const refused = await cli(['run', 'list'], { DIALTONE_URL: `http://127.0.0.1:${port}`, DIALTONE_API_KEY: 'dt_live_whatever' });
    assert.equal(refused.code, 1);
    assert.equal(refused.stderr, `Error: Cannot reach the service at http://127.0.0.1:${port}: ECONNREFUSED\n`);
    const json = await cli(['--json', '--url', `http://127.0.0.1:${port}`, 'run', 'list'], { DIALTONE_API_KEY: 'dt_live_whatever' });
    assert.equal((JSON.parse(json.stderr) as { error: { code: string } }).error.code, 'service_unreachable');

    const other = createServer((_request, response) => response.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not here</h1>'));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => other.close(() => resolve())));
    const notDialtone = await cli(['run', 'list'], { DIALTONE_URL: `http://127.0.0.1:${(other.address() as AddressInfo).port}`, DIALTONE_API_KEY: 'dt_live_whatever' });
    assert.equal(notDialtone.code, 1);
    assert.match(notDialtone.stderr, /^Error \(404 http_404\): .*is --url the service's base URL\?/);

    const notUrl = await cli(['--json', 'run', 'list'], { DIALTONE_URL: 'ftp://example.com', DIALTONE_API_KEY: 'dt_live_whatever' });
    assert.match((JSON.parse(notUrl.stderr) as { error: { message: string } }).error.message, /must be an http or https URL/);
  });

  it('answers org create and org list, which have no API form, with why they need direct database mode before asking any service, and call start without a URL asks for one', async () => {
    const env = { DIALTONE_URL: 'http://127.0.0.1:9', DIALTONE_API_KEY: 'dt_live_whatever' };
    for (const args of [['org', 'list'], ['org', 'create', '--name', 'Acme']]) {
      const result = await cli(['--json', ...args], env);
      assert.equal(result.code, 1, args.join(' '));
      const error = (JSON.parse(result.stderr) as { error: { code: string; message: string } }).error;
      assert.equal(error.code, 'direct_mode_only');
      assert.equal(
        error.message,
        `dialtone ${args.slice(0, 2).join(' ')} needs direct database mode: an API key belongs to one organization, and no API creates or lists organizations. Run it where the service's DATABASE_URL (and DIALTONE_SECRET_KEY) are set, without --url or DIALTONE_URL.`,
      );
    }
    const direct = await cli(['call', 'start', '00000000-0000-4000-8000-000000000000', '--phone', ANSWERED], {});
    assert.equal(direct.code, 1);
    assert.match(direct.stderr, /call start asks a running service: give its --url \(or DIALTONE_URL\)/);
    const keyAlone = await cli(['--api-key-file', '/dev/null', 'run', 'list'], {});
    assert.match(keyAlone.stderr, /An API key is for remote mode: give the service's --url/);
  });

  it('runs from the TypeScript sources when nothing is built (npm ci --omit=dev) and still finds @dialtone/client', async (t) => {
    // A copy of the package without dist/ or the client's dist/, its node_modules linking the
    // installed packages and @dialtone/client to the copy's own packages/client.
    const copy = mkdtempSync(join(tmpdir(), 'dialtone-unbuilt-'));
    t.after(() => rmSync(copy, { recursive: true, force: true }));
    for (const entry of ['bin', 'src', 'scripts', 'tsconfig.json', 'package.json']) cpSync(join(ROOT, entry), join(copy, entry), { recursive: true });
    for (const entry of ['src', 'package.json', 'tsconfig.json']) cpSync(join(ROOT, 'packages', 'client', entry), join(copy, 'packages', 'client', entry), { recursive: true });
    mkdirSync(join(copy, 'node_modules', '@dialtone'), { recursive: true });
    for (const entry of readdirSync(join(ROOT, 'node_modules'))) {
      if (entry !== '@dialtone') symlinkSync(realpathSync(join(ROOT, 'node_modules', entry)), join(copy, 'node_modules', entry));
    }
    symlinkSync('../../packages/client', join(copy, 'node_modules', '@dialtone', 'client'), 'dir');
    const result = await runToCompletion(process.execPath, [join(copy, 'bin', 'dialtone'), '--json', 'stats'], { ...NO_DATABASE, DIALTONE_URL: 'http://127.0.0.1:9', DIALTONE_API_KEY: 'dt_live_whatever' }, scaledTimeout(60_000));
    // The client was loaded (from its sources) and tried the URL: the refusal is its own.
    assert.equal((JSON.parse(result.stderr) as { error: { code: string } }).error.code, 'service_unreachable', result.stderr);
  });
});
