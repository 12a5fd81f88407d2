// The `dialtone` command as an administrator runs it: a subprocess on a SQLite file, checked through
// its output and, where the output cannot tell, through the database itself.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import pino from 'pino';
import type { Command } from 'commander';
import { initiateCall } from '../src/calls/initiate-call.js';
import { buildCli } from '../src/cli/main.js';
import { buildDeps, type Deps } from '../src/deps.js';
import { createOrganization } from '../src/orgs/organizations.js';
import { askCallingPolicy } from '../src/admission/policy.js';
import { migrateToLatest } from '../src/store/schema/migrate.js';
import { openStore } from '../src/store/engine/store.js';
import { CredentialsCipher } from '../src/shared/credentials-cipher.js';
import { showWorkflow } from '../src/workflows/workflows.js';
import { TEST_SECRET_KEY, testConfig } from './helpers/app.js';
import { ensureBuilt, ROOT, runToCompletion, type Finished } from './helpers/process.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const FIXED_TRIGGER = '5d0f7c2e-1b3a-4c5d-8e9f-0a1b2c3d4e5f';
const BIN = join(ROOT, 'bin', 'dialtone');

interface Workspace {
  dir: string;
  dbPath: string;
  env: { DATABASE_URL: string; DIALTONE_SECRET_KEY: string };
  /** Writes a JSON file into the workspace and returns its path. */
  file(name: string, content: unknown): string;
  /** Runs `dialtone args…`; `env` entries set to undefined are removed. */
  cli(args: string[], env?: Record<string, string | undefined>): Promise<Finished>;
  /** Runs `dialtone --json args…`, requires exit 0, and parses stdout. */
  json<T = Record<string, unknown>>(...args: string[]): Promise<T>;
}

function workspace(t: TestContext): Workspace {
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-cli-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const dbPath = join(dir, 'cli.db');
  const env = { DATABASE_URL: `sqlite:${dbPath}`, DIALTONE_SECRET_KEY: TEST_SECRET_KEY };
  const cli = (args: string[], extra: Record<string, string | undefined> = {}) => runToCompletion(process.execPath, [BIN, ...args], { ...env, ...extra });
  return {
    dir,
    dbPath,
    env,
    file(name, content) {
      const path = join(dir, name);
      writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
      return path;
    },
    cli,
    async json<T>(...args: string[]): Promise<T> {
      const result = await cli(['--json', ...args]);
      assert.equal(result.code, 0, `dialtone ${args.join(' ')} failed:\n${result.stderr}`);
      assert.equal(result.stderr, '', `dialtone ${args.join(' ')} wrote to stderr`);
      return JSON.parse(result.stdout) as T;
    },
  };
}

/** The same database, opened in this process (for what the CLI's output cannot show). */
async function openDeps(t: TestContext, ws: Workspace): Promise<Deps> {
  const store = openStore(ws.env.DATABASE_URL);
  t.after(() => store.close());
  await migrateToLatest(store);
  return buildDeps(testConfig(ws.env.DATABASE_URL), { store, logger: pino({ level: 'silent' }) });
}

function definition(triggers: { id: string; trigger_uuid?: string }[], greeting: string) {
  return {
    nodes: [
      ...triggers.map((t) => ({ id: t.id, type: 'api_trigger', data: { ...(t.trigger_uuid ? { trigger_uuid: t.trigger_uuid } : {}), enabled: true } })),
      { id: 'start', type: 'start', data: { greeting } },
      { id: 'end', type: 'end', data: {} },
    ],
    edges: [...triggers.map((t) => ({ source: t.id, target: 'start' })), { source: 'start', target: 'end' }],
  };
}

interface Summary {
  workflow_uuid: string;
  version: number;
  status: string;
  agent_uuids: string[];
}
interface Details {
  workflow_uuid: string;
  status: string;
  definitions: { version: number; status: string; created_at: string; published_at: string | null; agent_uuids: string[] }[];
}
interface KeyRow {
  id: number;
  prefix: string;
  revoked_at: string | null;
  [other: string]: unknown;
}

describe('dialtone (CLI)', { concurrency: true }, () => {
  // The commands run the compiled code, as after `npm ci` (helpers/process.ts, ensureBuilt).
  before(ensureBuilt);

  it('takes an administrator from an empty database to a published agent, with --json output at every step', async (t) => {
    const ws = workspace(t);

    const org = await ws.json<{ id: number; name: string }>('org', 'create', '--name', 'Acme');
    assert.deepEqual(org, { id: 1, name: 'Acme' });
    const orgId = String(org.id);

    // The key is printed once, in full; listings show its prefix and never the secret.
    const key = await ws.json<{ id: number; prefix: string; key: string }>('key', 'create', '--org', orgId, '--name', 'backend');
    assert.match(key.key, /^dt_live_[A-Za-z0-9]{10}_[A-Za-z0-9]{32}$/);
    assert.ok(key.key.startsWith(`${key.prefix}_`));
    const secret = key.key.slice(key.prefix.length + 1);
    const keysListed = await ws.cli(['--json', 'key', 'list', '--org', orgId]);
    assert.ok(!keysListed.stdout.includes(secret), `key list never shows the secret:\n${keysListed.stdout}`);
    const keys = JSON.parse(keysListed.stdout) as KeyRow[];
    assert.deepEqual(keys.map((k) => [k.id, k.prefix, k.name, k.revoked_at]), [[key.id, key.prefix, 'backend', null]]);
    assert.equal(keys[0]?.hash, undefined, 'nor its hash');
    assert.deepEqual(keys[0]?.scopes, ['calls', 'campaigns', 'webhooks', 'admin'], 'a key created without --scopes holds every scope');
    // A CRM's key: it may place calls and manage campaigns, nothing else.
    const crm = await ws.json<{ id: number; scopes: string[]; key: string }>('key', 'create', '--org', orgId, '--name', 'crm', '--scopes', 'campaigns, calls');
    assert.deepEqual(crm.scopes, ['calls', 'campaigns']);
    assert.deepEqual((await ws.json<KeyRow[]>('key', 'list', '--org', orgId)).map((k) => [k.name, k.scopes]), [['backend', ['calls', 'campaigns', 'webhooks', 'admin']], ['crm', ['calls', 'campaigns']]]);
    await ws.json('key', 'revoke', String(crm.id));

    const telephony = await ws.json(
      'telephony', 'create', '--org', orgId, '--name', 'Simulator', '--provider', 'simulator',
      '--caller-id', '+1 (202) 555-0100', '--caller-id', '+12025550101', '--default', '--cps', '2.5', '--max-concurrent', '7',
    );
    assert.deepEqual(telephony, {
      id: 1,
      org_id: org.id,
      name: 'Simulator',
      provider: 'simulator',
      caller_ids: ['+12025550100', '+12025550101'],
      is_default: true,
      calls_per_second: 2.5,
      max_concurrent_calls: 7,
      status: 'active',
      has_credentials: false,
      settings: {},
    });
    assert.deepEqual(await ws.json('telephony', 'list', '--org', orgId), [telephony]);

    // Version 1: one trigger brings its own UUID, the other gets one minted.
    const v1File = ws.file('v1.json', definition([{ id: 'minted' }, { id: 'fixed', trigger_uuid: FIXED_TRIGGER }], 'Hello v1'));
    const created = await ws.json<Summary>('workflow', 'create', '--org', orgId, '--name', 'Reminder agent', '--definition', v1File);
    assert.equal(created.version, 1);
    assert.equal(created.status, 'published');
    assert.match(created.workflow_uuid, UUID);
    assert.equal(created.agent_uuids.length, 2);
    const [minted, fixed] = created.agent_uuids;
    assert.match(minted ?? '', UUID);
    assert.notEqual(minted, FIXED_TRIGGER);
    assert.equal(fixed, FIXED_TRIGGER, 'a given trigger_uuid is kept');
    const workflowUuid = created.workflow_uuid;

    const v2File = ws.file('v2.json', definition([{ id: 'minted', trigger_uuid: minted ?? '' }, { id: 'fixed', trigger_uuid: FIXED_TRIGGER }], 'Hello v2'));
    const draft = await ws.json<Summary>('workflow', 'save-draft', workflowUuid, '--definition', v2File);
    assert.deepEqual(draft, { workflow_uuid: workflowUuid, version: 2, status: 'draft', agent_uuids: [minted, FIXED_TRIGGER] });

    const beforePublish = await ws.json<Details>('workflow', 'show', workflowUuid);
    assert.equal(beforePublish.status, 'active');
    assert.deepEqual(beforePublish.definitions.map((d) => [d.version, d.status]), [[2, 'draft'], [1, 'published']]);
    assert.equal(beforePublish.definitions[0]?.published_at, null);
    assert.ok(!Number.isNaN(Date.parse(beforePublish.definitions[1]?.published_at ?? '')), 'times are printed as ISO 8601');

    const published = await ws.json<Summary>('workflow', 'publish', workflowUuid);
    assert.deepEqual(published, { workflow_uuid: workflowUuid, version: 2, status: 'published', agent_uuids: [minted, FIXED_TRIGGER] });
    const afterPublish = await ws.json<Details>('workflow', 'show', workflowUuid);
    assert.deepEqual(afterPublish.definitions.map((d) => [d.version, d.status]), [[2, 'published'], [1, 'archived']]);
    assert.ok(afterPublish.definitions[0]?.published_at);

    assert.deepEqual(await ws.json('key', 'revoke', String(key.id)), { id: key.id, revoked: true });
    const revoked = await ws.json<KeyRow[]>('key', 'list', '--org', orgId);
    assert.ok(!Number.isNaN(Date.parse(revoked[0]?.revoked_at ?? '')), `revoked_at is shown: ${JSON.stringify(revoked)}`);

    assert.deepEqual(await ws.json('run', 'list', '--org', orgId), { data: [], next_after: null });

    // A run created by the library, read back by the CLI.
    const deps = await openDeps(t, ws);
    const outcome = await initiateCall(deps, { orgId: org.id, limits: { ratePerSecond: null, keyRatePerSecond: null, maxQueuedRuns: null } }, { kind: 'agent', uuid: minted ?? '' }, 'published', { phone_number: '+1 202 555 0123', initial_context: { name: 'Ada' } });
    assert.equal(outcome.replayed, false);
    const call = outcome.replayed ? assert.fail('not a replay') : outcome.result;
    const shown = await ws.json<Record<string, unknown>>('run', 'show', String(call.workflow_run_id));
    assert.equal(shown.id, call.workflow_run_id);
    assert.equal(shown.name, `WR-API-${call.workflow_run_id}`);
    assert.equal(shown.state, 'queued');
    assert.equal(shown.phone_number, '+12025550123');
    assert.equal(shown.workflow_uuid, workflowUuid);
    assert.equal(shown.agent_uuid, minted);
    assert.equal(shown.definition_version, 2, 'the published version');
    assert.equal(shown.caller_id, '+12025550100', 'the default configuration\'s first caller id');
    assert.deepEqual(shown.initial_context, { name: 'Ada' });

    assert.deepEqual(await ws.json('workflow', 'archive', workflowUuid), { workflow_uuid: workflowUuid, status: 'archived' });
    assert.equal((await showWorkflow(deps.store, workflowUuid)).status, 'archived');
  });

  it('keeps an agent UUID across save-draft and publish when the definition omits trigger_uuid, so the published agent UUID keeps placing calls', async (t) => {
    const ws = workspace(t);
    const org = await ws.json<{ id: number }>('org', 'create', '--name', 'Acme');
    const orgId = String(org.id);
    await ws.json('telephony', 'create', '--org', orgId, '--name', 'Simulator', '--provider', 'simulator', '--caller-id', '+12025550100', '--default');

    // docs/cli.md's own example ("Agent definitions"): the trigger node carries no trigger_uuid, in every version.
    const file = ws.file('agent.json', definition([{ id: 'trigger' }], 'Hello'));
    const created = await ws.json<Summary>('workflow', 'create', '--org', orgId, '--name', 'Reminders', '--definition', file);
    const [agentUuid] = created.agent_uuids;
    assert.match(agentUuid ?? '', UUID);

    const draft = await ws.json<Summary>('workflow', 'save-draft', created.workflow_uuid, '--definition', ws.file('v2.json', definition([{ id: 'trigger' }], 'Hello again')));
    assert.deepEqual(draft.agent_uuids, [agentUuid], 'the draft keeps the trigger node\'s UUID');
    const published = await ws.json<Summary>('workflow', 'publish', created.workflow_uuid);
    assert.deepEqual(published.agent_uuids, [agentUuid], 'and so does the published version');

    const deps = await openDeps(t, ws);
    const outcome = await initiateCall(deps, { orgId: org.id, limits: { ratePerSecond: null, keyRatePerSecond: null, maxQueuedRuns: null } }, { kind: 'agent', uuid: agentUuid ?? '' }, 'published', { phone_number: '+12025550123' });
    assert.equal(outcome.replayed, false, 'the agent UUID printed at create still calls the published version');

    // A new trigger node gets a UUID of its own; the known node keeps its UUID even beside it.
    const v3 = await ws.json<Summary>('workflow', 'save-draft', created.workflow_uuid, '--definition', ws.file('v3.json', definition([{ id: 'trigger' }, { id: 'second' }], 'Hi')));
    assert.equal(v3.agent_uuids[0], agentUuid);
    assert.match(v3.agent_uuids[1] ?? '', UUID);
    assert.notEqual(v3.agent_uuids[1], agentUuid);

    // An explicit trigger_uuid still wins, and agent UUIDs stay globally unique.
    const explicit = await ws.json<Summary>('workflow', 'save-draft', created.workflow_uuid, '--definition', ws.file('v4.json', definition([{ id: 'trigger', trigger_uuid: FIXED_TRIGGER }], 'Hi')));
    assert.deepEqual(explicit.agent_uuids, [FIXED_TRIGGER]);
    const other = await ws.cli(['workflow', 'create', '--org', orgId, '--name', 'Thief', '--definition', ws.file('thief.json', definition([{ id: 'trigger', trigger_uuid: agentUuid ?? '' }], 'Hi'))]);
    assert.notEqual(other.code, 0);
    assert.match(other.stderr, /already belongs to another workflow/);
  });

  it('prints a version\'s definition with workflow show --definition, bare JSON in text mode and with its version in --json mode, ready to save back', async (t) => {
    const ws = workspace(t);
    const org = await ws.json<{ id: number }>('org', 'create', '--name', 'Acme');
    const created = await ws.json<Summary>('workflow', 'create', '--org', String(org.id), '--name', 'Reminders', '--definition', ws.file('v1.json', definition([{ id: 'trigger' }], 'Hello v1')));
    await ws.json('workflow', 'save-draft', created.workflow_uuid, '--definition', ws.file('v2.json', definition([{ id: 'trigger' }], 'Hello v2')));

    const text = await ws.cli(['workflow', 'show', created.workflow_uuid, '--definition']);
    assert.equal(text.code, 0, text.stderr);
    const printed = JSON.parse(text.stdout) as ReturnType<typeof definition>;
    assert.deepEqual(printed, {
      ...definition([{ id: 'trigger', trigger_uuid: created.agent_uuids[0] ?? '' }], 'Hello v2'),
    }, 'the draft, with the trigger UUID it was saved with');

    const json = await ws.json<{ workflow_uuid: string; version: number; status: string; definition: unknown }>('workflow', 'show', created.workflow_uuid, '--definition', '--version', '1');
    assert.deepEqual(json, {
      workflow_uuid: created.workflow_uuid,
      version: 1,
      status: 'published',
      definition: definition([{ id: 'trigger', trigger_uuid: created.agent_uuids[0] ?? '' }], 'Hello v1'),
    });

    const saved = await ws.json<Summary>('workflow', 'save-draft', created.workflow_uuid, '--definition', ws.file('edited.json', text.stdout));
    assert.deepEqual(saved.agent_uuids, created.agent_uuids, 'what show printed saves back unchanged');

    const missing = await ws.cli(['workflow', 'show', created.workflow_uuid, '--definition', '--version', '9']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /no version 9/);
  });

  it('refuses an invalid definition file, listing every problem on stderr with its JSON Pointer, and creates nothing', async (t) => {
    const ws = workspace(t);
    const deps = await openDeps(t, ws);
    const org = await createOrganization(deps.store, 'Acme', Date.now());
    const bad = ws.file('bad.json', {
      nodes: [
        { id: 'a', type: 'telepathy', data: {} },
        { id: 'b', type: 'agent', data: {} },
        { id: 'c', type: 'api_trigger', data: { trigger_uuid: 'nope', enabled: 'yes' } },
      ],
      edges: [{ source: 'a', target: 'zz' }],
    });
    const expected = ['/edges/0/target', '/nodes', '/nodes/0/type', '/nodes/1/data/prompt', '/nodes/2/data/enabled', '/nodes/2/data/trigger_uuid'];
    const result = await ws.cli(['workflow', 'create', '--org', String(org.id), '--name', 'Broken', '--definition', bad]);
    assert.notEqual(result.code, 0);
    assert.equal(result.stdout, '');
    const lines = result.stderr.trimEnd().split('\n');
    assert.match(lines[0] ?? '', /^Error \(validation_failed\): /);
    assert.deepEqual(lines.slice(1).map((line) => line.trim().split(':')[0]).sort(), expected, result.stderr);
    assert.doesNotMatch(result.stderr, /^\s+at /m, 'no stack trace');

    const json = await ws.cli(['--json', 'workflow', 'create', '--org', String(org.id), '--name', 'Broken', '--definition', bad]);
    assert.notEqual(json.code, 0);
    assert.equal(json.stdout, '');
    const failure = JSON.parse(json.stderr) as { error: { code: string; message: string; errors: { pointer: string; detail: string }[] } };
    assert.equal(failure.error.code, 'validation_failed');
    assert.deepEqual(failure.error.errors.map((e) => e.pointer).sort(), expected);
    const workflows = await deps.store.db.selectFrom('workflows').select('id').execute();
    assert.deepEqual(workflows, []);

    const notJson = await ws.cli(['workflow', 'create', '--org', String(org.id), '--name', 'Broken', '--definition', ws.file('not.json', '{ nodes: ')]);
    assert.notEqual(notJson.code, 0);
    assert.match(notJson.stderr, /^Error: .*not\.json is not valid JSON/);
  });

  it('sets an organization\'s own limits with org set-limits, returns one to the default with "default", and refuses bad values', async (t) => {
    const ws = workspace(t);
    const org = await ws.json<{ id: number }>('org', 'create', '--name', 'Limited');
    const set = await ws.json('org', 'set-limits', String(org.id), '--rate-per-second', '5', '--key-rate-per-second', '0', '--max-queued', '100');
    const off = { number_max_calls: null, number_window_seconds: null };
    assert.deepEqual(set, { id: org.id, name: 'Limited', rate_limit_per_second: 5, key_rate_limit_per_second: 0, max_queued_runs: 100, ...off });
    const reset = await ws.json('org', 'set-limits', String(org.id), '--rate-per-second', 'default');
    assert.deepEqual(reset, { id: org.id, name: 'Limited', rate_limit_per_second: null, key_rate_limit_per_second: 0, max_queued_runs: 100, ...off });
    for (const bad of [['--max-queued', '0'], ['--rate-per-second', '-1'], ['--key-rate-per-second', 'lots']]) {
      const result = await ws.cli(['org', 'set-limits', String(org.id), ...bad]);
      assert.notEqual(result.code, 0, bad.join(' '));
      assert.match(result.stderr, /expected a whole number/);
    }
    const missing = await ws.cli(['org', 'set-limits', '999', '--max-queued', '5']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /No organization 999/);
  });

  it('sets calling hours from a file with org set-calling-hours, shows them with org show, refuses an invalid file listing every problem, and turns them off with --off', async (t) => {
    const ws = workspace(t);
    const org = await ws.json<{ id: number }>('org', 'create', '--name', 'Hours');
    const id = String(org.id);
    const hours = { timezone: 'America/New_York', outside: 'defer', windows: { mon: ['09:00-12:00', '13:00-20:00'], sat: ['10:00-14:00'] } };
    assert.deepEqual(await ws.json('org', 'set-calling-hours', id, '--file', ws.file('hours.json', JSON.stringify(hours))), { id: org.id, calling_hours: hours });
    const shown = await ws.json<{ calling_hours: unknown; max_queued_runs: unknown }>('org', 'show', id);
    assert.deepEqual(shown.calling_hours, hours);
    assert.equal(shown.max_queued_runs, null);

    const bad = await ws.cli(['--json', 'org', 'set-calling-hours', id, '--file', ws.file('bad.json', JSON.stringify({ timezone: 'Nowhere/Land', outside: 'defer', windows: { mon: ['20:00-09:00'], xyz: [] } }))]);
    assert.notEqual(bad.code, 0);
    const failure = JSON.parse(bad.stderr) as { error: { code: string; errors: { pointer: string }[] } };
    assert.equal(failure.error.code, 'validation_failed');
    assert.deepEqual(failure.error.errors.map((e) => e.pointer).sort(), ['/calling_hours/timezone', '/calling_hours/windows/mon/0', '/calling_hours/windows/xyz'], 'the pointers the API gives');
    assert.deepEqual((await ws.json<{ calling_hours: unknown }>('org', 'show', id)).calling_hours, hours, 'a refused file changes nothing');

    const both = await ws.cli(['org', 'set-calling-hours', id]);
    assert.notEqual(both.code, 0);
    assert.match(both.stderr, /exactly one of --file <path> and --off/);
    assert.deepEqual(await ws.json('org', 'set-calling-hours', id, '--off'), { id: org.id, calling_hours: null });
    assert.equal((await ws.json<{ calling_hours: unknown }>('org', 'show', id)).calling_hours, null);
    const missing = await ws.cli(['org', 'show', '999']);
    assert.match(missing.stderr, /No organization 999/);

    // Each change made in direct database mode is in the audit log, as the API's are; the refused one is not.
    await ws.json('org', 'set-limits', id, '--max-queued', '7');
    await ws.json('org', 'set-retention', id, '30');
    type Page = { data: { action: string; actor: string; before: Record<string, unknown>; after: Record<string, unknown> }[] };
    const audit = (await ws.json<Page>('audit', 'list', '--org', id)).data.map((e) => [e.action, e.actor, e.before.calling_hours ?? null, e.after.calling_hours ?? null, e.after.max_queued_runs, e.after.retention_days]);
    assert.deepEqual(audit, [
      ['organization.settings_updated', 'cli', null, null, 7, 30],
      ['organization.settings_updated', 'cli', null, null, 7, null],
      ['organization.settings_updated', 'cli', hours, null, null, null],
      ['organization.settings_updated', 'cli', null, hours, null, null],
    ]);
  });

  it('sets an organization\'s own retention window with org set-retention (days, "off" to keep forever, "default" for RETENTION_DAYS), shows it with org show, and refuses a bad window changing nothing', async (t) => {
    const ws = workspace(t);
    const org = await ws.json<{ id: number }>('org', 'create', '--name', 'Retained');
    const id = String(org.id);
    assert.equal((await ws.json<{ retention_days: unknown }>('org', 'show', id)).retention_days, null, 'the configured default until set');
    assert.deepEqual(await ws.json('org', 'set-retention', id, '30'), { id: org.id, retention_days: 30 });
    assert.equal((await ws.json<{ retention_days: unknown }>('org', 'show', id)).retention_days, 30);
    const text = await ws.cli(['org', 'show', id]);
    assert.match(text.stdout, /retention_days\s+30 days/);
    for (const bad of ['0', '-3', '36501', 'soon']) {
      const refused = await ws.cli(['org', 'set-retention', id, bad]);
      assert.notEqual(refused.code, 0, bad);
      assert.match(refused.stderr, /expected whole days from 1 to 36500/);
    }
    assert.equal((await ws.json<{ retention_days: unknown }>('org', 'show', id)).retention_days, 30, 'a refused value changes nothing');
    assert.deepEqual(await ws.json('org', 'set-retention', id, 'off'), { id: org.id, retention_days: 0 });
    assert.match((await ws.cli(['org', 'show', id])).stdout, /retention_days\s+off \(kept forever\)/);
    assert.deepEqual(await ws.json('org', 'set-retention', id, 'default'), { id: org.id, retention_days: null });
    const missing = await ws.cli(['org', 'set-retention', '999', '30']);
    assert.match(missing.stderr, /No organization 999/);
  });

  it("lists an organization's audit log with audit list, newest first, filtered and paged, never with a key's secret", async (t) => {
    const ws = workspace(t);
    const org = await ws.json<{ id: number }>('org', 'create', '--name', 'Audited');
    const id = String(org.id);
    const backend = await ws.json<{ id: number; key: string }>('key', 'create', '--org', id, '--name', 'backend');
    const crm = await ws.json<{ id: number; key: string }>('key', 'create', '--org', id, '--name', 'crm', '--scopes', 'calls');
    await ws.json('key', 'revoke', String(crm.id));

    type Page = { data: { id: number; action: string; actor: string; target_type: string; target_id: string | null; before: unknown; after: unknown }[]; next_after: number | null };
    const page = await ws.json<Page>('audit', 'list', '--org', id);
    assert.deepEqual(
      page.data.map((e) => [e.action, e.actor, e.target_type, e.target_id]),
      [
        ['api_key.revoked', 'cli', 'api_key', String(crm.id)],
        ['api_key.created', 'cli', 'api_key', String(crm.id)],
        ['api_key.created', 'cli', 'api_key', String(backend.id)],
      ],
    );
    assert.equal(page.next_after, null);
    assert.ok(!JSON.stringify(page).includes(backend.key) && !JSON.stringify(page).includes(crm.key), 'no key secret in the log');

    const first = await ws.json<Page>('audit', 'list', '--org', id, '--limit', '1');
    assert.deepEqual([first.data.map((e) => e.id), first.next_after], [[page.data[0]?.id], page.data[0]?.id]);
    const rest = await ws.json<Page>('audit', 'list', '--org', id, '--after', String(first.next_after));
    assert.deepEqual(rest.data.map((e) => e.id), page.data.slice(1).map((e) => e.id));
    assert.equal((await ws.json<Page>('audit', 'list', '--org', id, '--action', 'api_key.created')).data.length, 2);
    assert.equal((await ws.json<Page>('audit', 'list', '--org', id, '--target-type', 'api_key', '--target-id', String(crm.id))).data.length, 2);
    assert.deepEqual((await ws.json<Page>('audit', 'list', '--org', id, '--actor', 'api_key')).data, []);
    assert.deepEqual((await ws.json<Page>('audit', 'list', '--org', id, '--until', '2000-01-01T00:00:00Z')).data, []);
    assert.equal((await ws.json<Page>('audit', 'list', '--org', id, '--since', '2000-01-01T00:00:00Z')).data.length, 3);

    const text = await ws.cli(['audit', 'list', '--org', id, '--limit', '2']);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, new RegExp(`^${page.data[0]?.id}\\s+\\S+Z\\s+api_key\\.revoked\\s+cli\\s+api_key\\s+${crm.id}$`, 'm'));
    assert.match(text.stdout, new RegExp(`More: --after ${page.data[1]?.id}`));

    const missing = await ws.cli(['audit', 'list', '--org', '999']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /No organization 999/);
    assert.match((await ws.cli(['audit', 'list'])).stderr, /--org <id> is required in direct database mode/);
    const badActor = await ws.cli(['audit', 'list', '--org', id, '--actor', 'robot']);
    assert.notEqual(badActor.code, 0);
    assert.match(badActor.stderr, /expected one of api_key, cli, system/);
  });

  it('names the organization in direct database mode for the org settings commands, and refuses a bad organization id (erase-number\'s too) or retention value', async (t) => {
    const ws = workspace(t);
    for (const args of [['org', 'show'], ['org', 'set-limits', '--max-queued', '5'], ['org', 'set-calling-hours', '--off'], ['org', 'set-retention', '30']]) {
      const result = await ws.cli(args);
      assert.equal(result.code, 1, args.join(' '));
      assert.match(result.stderr, new RegExp(`^Error: Direct database mode names the organization: dialtone ${args.slice(0, 2).join(' ')} <org_id>`), args.join(' '));
    }
    const notId = await ws.cli(['org', 'set-retention', 'x', '30']);
    assert.equal(notId.stderr, 'Error: organization id "x": expected a positive whole number\n');
    // erase-number's first argument is the organization in this mode: a bad one is said, not a silent exit 1.
    const erase = await ws.cli(['erase-number', 'abc', '+12025550123']);
    assert.equal(erase.code, 1);
    assert.equal(erase.stderr, 'Error: organization id "abc": expected a positive whole number\n');
  });

  it('sets the per-number frequency cap with org set-limits, shows it with org show, turns it off with "off", and refuses a cap half set or a bad window', async (t) => {
    const ws = workspace(t);
    const org = await ws.json<{ id: number }>('org', 'create', '--name', 'Capped');
    const set = await ws.json('org', 'set-limits', String(org.id), '--number-max-calls', '3', '--number-window', '24h');
    assert.equal(set.number_max_calls, 3);
    assert.equal(set.number_window_seconds, 86_400);
    const shown = await ws.json('org', 'show', String(org.id));
    assert.deepEqual([shown.number_max_calls, shown.number_window_seconds], [3, 86_400]);
    const shorter = await ws.json('org', 'set-limits', String(org.id), '--number-window', '90m');
    assert.deepEqual([shorter.number_max_calls, shorter.number_window_seconds], [3, 5_400], 'one setting changes, the other is kept');
    const text = await ws.cli(['org', 'show', String(org.id)]);
    assert.match(text.stdout, /number_max_calls\s+3/);
    const off = await ws.json('org', 'set-limits', String(org.id), '--number-max-calls', 'off');
    assert.deepEqual([off.number_max_calls, off.number_window_seconds], [null, null]);

    const half = await ws.cli(['--json', 'org', 'set-limits', String(org.id), '--number-max-calls', '2']);
    assert.notEqual(half.code, 0);
    assert.equal(JSON.parse(half.stderr).error.code, 'invalid_input');
    for (const bad of [['--number-window', '1.5s'], ['--number-window', '2y'], ['--number-window', 'soon'], ['--number-max-calls', '0']]) {
      const result = await ws.cli(['org', 'set-limits', String(org.id), '--number-max-calls', '2', ...bad]);
      assert.notEqual(result.code, 0, bad.join(' '));
      assert.match(result.stderr, /expected/, bad.join(' '));
    }
    assert.deepEqual((await ws.json('org', 'show', String(org.id))).number_max_calls, null, 'refused changes changed nothing');
    const missing = await ws.cli(['--json', 'org', 'show', '999']);
    assert.equal(JSON.parse(missing.stderr).error.code, 'not_found');
  });

  it('adds, lists, imports and removes suppressions with dialtone suppression, and a suppressed number is refused', async (t) => {
    const ws = workspace(t);
    const org = await ws.json<{ id: number }>('org', 'create', '--name', 'Acme');
    const other = await ws.json<{ id: number }>('org', 'create', '--name', 'Other');
    const added = await ws.json('suppression', 'add', '+1 202 555 0123', '--org', String(org.id), '--reason', 'asked', '--expires-at', '2099-01-01T00:00:00Z');
    assert.deepEqual([added.phone_number, added.reason, added.expires_at, added.active], ['+12025550123', 'asked', '2099-01-01T00:00:00.000Z', true]);
    const csv = ws.file('numbers.csv', 'phone_number,reason\n+12025550121,imported\nnot a number,bad\n+12025550122,\n');
    const imported = await ws.json<{ imported: number; invalid: { line: number; value: string }[]; invalid_count: number }>('suppression', 'import', csv, '--org', String(org.id));
    assert.equal(imported.imported, 2);
    assert.deepEqual(imported.invalid.map((i) => [i.line, i.value]), [[3, 'not a number']]);
    const importText = await ws.cli(['suppression', 'import', csv, '--org', String(org.id)]);
    assert.match(importText.stdout, /Imported 2 numbers; 1 invalid lines skipped:\n  line 3: /);

    const page = await ws.json<{ data: { phone_number: string }[]; next_after: string | null }>('suppression', 'list', '--org', String(org.id), '--limit', '2');
    assert.deepEqual(page.data.map((s) => s.phone_number), ['+12025550121', '+12025550122']);
    assert.equal(page.next_after, '+12025550122');
    const rest = await ws.json<{ data: { phone_number: string }[]; next_after: string | null }>('suppression', 'list', '--org', String(org.id), '--after', '+12025550122');
    assert.deepEqual(rest.data.map((s) => s.phone_number), ['+12025550123']);
    assert.deepEqual((await ws.json<{ data: unknown[] }>('suppression', 'list', '--org', String(other.id))).data, [], 'per organization');

    const deps = await openDeps(t, ws);
    const ask = () => askCallingPolicy(deps.store, {}, { orgId: org.id, destination: { kind: 'e164', value: '+12025550121' } }, deps.clock.now(), { answeredAtInsert: [] });
    const suppressed = await ask();
    assert.equal(suppressed.admitted ? undefined : suppressed.refusal.code, 'number_suppressed');

    assert.deepEqual(await ws.json('suppression', 'remove', '+12025550121', '--org', String(org.id)), { removed: '+12025550121' });
    assert.equal((await ask()).admitted, true);
    const again = await ws.cli(['--json', 'suppression', 'remove', '+12025550121', '--org', String(org.id)]);
    assert.equal(JSON.parse(again.stderr).error.code, 'suppression_not_found');
    const invalid = await ws.cli(['--json', 'suppression', 'add', '12345', '--org', String(org.id)]);
    assert.equal(JSON.parse(invalid.stderr).error.code, 'invalid_phone_number');
    const absent = await ws.cli(['--json', 'suppression', 'import', join(ws.dir, 'absent.csv'), '--org', String(org.id)]);
    assert.equal(JSON.parse(absent.stderr).error.code, 'not_found');
    const noOrg = await ws.cli(['--json', 'suppression', 'list', '--org', '999']);
    assert.equal(JSON.parse(noOrg.stderr).error.code, 'not_found');
  });

  it('reports every failure in --json mode as one JSON object on stderr with a stable code and a non-zero exit, and in text mode as a readable line without a stack', async (t) => {
    const ws = workspace(t);
    const cases: { args: string[]; env?: Record<string, string>; code: string; message: RegExp; text?: RegExp }[] = [
      { args: ['org', 'set-limits', '9', '--max-queued', '5'], code: 'not_found', message: /No organization 9/ },
      { args: ['run', 'show', '7'], code: 'workflow_run_not_found', message: /No workflow run 7/ },
      { args: ['workflow', 'create', '--org', '1', '--name', 'x', '--definition', join(ws.dir, 'absent.json')], code: 'not_found', message: /No organization 1/ },
      { args: ['org', 'teleport'], code: 'usage_error', message: /unknown command 'teleport'/ },
      { args: ['org', 'set-limits', '1', '--max-queued', '0'], code: 'usage_error', message: /expected a whole number from 1/ },
      { args: ['key', 'create', '--org', '1'], code: 'usage_error', message: /required option '--name <name>'/ },
      { args: ['key', 'create', '--org', '1', '--name', 'x', '--scopes', 'calls,everything'], code: 'usage_error', message: /not a scope: everything \(the scopes: calls, campaigns, webhooks, admin\)/ },
      { args: [], code: 'usage_error', message: /A command is required/, text: /^Usage: dialtone/ },
      { args: ['org', 'list'], env: { DATABASE_URL: 'mysql://db/x' }, code: 'invalid_configuration', message: /DATABASE_URL/ },
      { args: ['org', 'list'], env: { DATABASE_URL: `sqlite:${ws.file('plain-file', 'x')}/sub/x.db` }, code: 'internal_error', message: /plain-file/ },
    ];
    // One at a time: the suite already runs its tests side by side.
    for (const { args, env, code, message, text: textMessage } of cases) {
      const json = await ws.cli(['--json', ...args], env);
      assert.notEqual(json.code, 0, args.join(' '));
      assert.equal(json.stdout, '', args.join(' '));
      let parsed: { error?: { code?: string; message?: string } };
      try {
        parsed = JSON.parse(json.stderr) as typeof parsed;
      } catch {
        assert.fail(`dialtone --json ${args.join(' ')}: stderr is not JSON:\n${json.stderr}`);
      }
      assert.equal(parsed.error?.code, code, args.join(' '));
      assert.match(parsed.error?.message ?? '', message, args.join(' '));

      const text = await ws.cli(args, env);
      assert.notEqual(text.code, 0, args.join(' '));
      assert.match(text.stderr, textMessage ?? message, args.join(' '));
      assert.doesNotMatch(text.stderr, /^\s+at /m, `no stack trace: ${args.join(' ')}`);
      assert.throws(() => JSON.parse(text.stderr), `text mode stays text: ${args.join(' ')}`);
    }
  });

  it('lists organizations with org list, and an organization\'s workflows with their versions with workflow list', async (t) => {
    const ws = workspace(t);
    assert.deepEqual(await ws.json('org', 'list'), []);
    const acme = await ws.json<{ id: number }>('org', 'create', '--name', 'Acme');
    const other = await ws.json<{ id: number }>('org', 'create', '--name', 'Other');
    await ws.json('org', 'set-limits', String(other.id), '--max-queued', '5');
    const orgs = await ws.json<{ id: number; name: string; max_queued_runs: number | null; created_at: string }[]>('org', 'list');
    assert.deepEqual(orgs.map((o) => [o.id, o.name, o.max_queued_runs]), [[acme.id, 'Acme', null], [other.id, 'Other', 5]]);
    assert.ok(!Number.isNaN(Date.parse(orgs[0]?.created_at ?? '')), 'times are ISO 8601');

    const first = await ws.json<Summary>('workflow', 'create', '--org', String(acme.id), '--name', 'First', '--definition', ws.file('a.json', definition([{ id: 'trigger' }], 'Hi')));
    const second = await ws.json<Summary>('workflow', 'create', '--org', String(acme.id), '--name', 'Second', '--definition', ws.file('b.json', definition([{ id: 'trigger' }], 'Hi')));
    await ws.json('workflow', 'save-draft', second.workflow_uuid, '--definition', ws.file('b2.json', definition([{ id: 'trigger' }], 'Hello')));
    await ws.json('workflow', 'archive', first.workflow_uuid);
    const listed = await ws.json<Record<string, unknown>[]>('workflow', 'list', '--org', String(acme.id));
    assert.deepEqual(
      listed.map((w) => [w.workflow_uuid, w.name, w.status, w.published_version, w.draft_version, w.agent_uuids]),
      [
        [first.workflow_uuid, 'First', 'archived', 1, null, first.agent_uuids],
        [second.workflow_uuid, 'Second', 'active', 1, 2, second.agent_uuids],
      ],
    );
    assert.deepEqual(await ws.json('workflow', 'list', '--org', String(other.id)), [], 'another organization\'s workflows are not listed');
    const text = await ws.cli(['workflow', 'list', '--org', String(acme.id)]);
    assert.match(text.stdout, /^workflow_uuid\s+name\s+status/);
  });

  it('makes an active configuration the default with telephony set-default, disables one with telephony disable so that it can be neither used nor the default, enables it again with telephony enable and changes it with telephony update', async (t) => {
    const ws = workspace(t);
    const org = await ws.json<{ id: number }>('org', 'create', '--name', 'Acme');
    const orgId = String(org.id);
    const sim = (name: string, ...extra: string[]) => ws.json<{ id: number }>('telephony', 'create', '--org', orgId, '--name', name, '--provider', 'simulator', '--caller-id', '+12025550100', ...extra);
    const first = await sim('first', '--default');
    const second = await sim('second');
    const created = await ws.json<Summary>('workflow', 'create', '--org', orgId, '--name', 'Agent', '--definition', ws.file('a.json', definition([{ id: 'trigger' }], 'Hi')));

    const made = await ws.json<{ id: number; is_default: boolean }>('telephony', 'set-default', String(second.id));
    assert.deepEqual([made.id, made.is_default], [second.id, true]);
    const defaults = async () => (await ws.json<{ id: number; is_default: boolean; status: string }[]>('telephony', 'list', '--org', orgId)).map((c) => [c.id, c.is_default, c.status]);
    assert.deepEqual(await defaults(), [[first.id, false, 'active'], [second.id, true, 'active']], 'one default per organization');

    const disabled = await ws.json<{ status: string; is_default: boolean }>('telephony', 'disable', String(second.id));
    assert.deepEqual([disabled.status, disabled.is_default], ['inactive', false]);
    assert.deepEqual(await defaults(), [[first.id, false, 'active'], [second.id, false, 'inactive']]);

    const refused = await ws.cli(['--json', 'telephony', 'set-default', String(second.id)]);
    assert.notEqual(refused.code, 0);
    assert.equal((JSON.parse(refused.stderr) as { error: { code: string } }).error.code, 'telephony_configuration_disabled');
    assert.deepEqual(await defaults(), [[first.id, false, 'active'], [second.id, false, 'inactive']], 'a disabled configuration does not become the default');
    const enabled = await ws.json<{ status: string; is_default: boolean }>('telephony', 'enable', String(second.id));
    assert.deepEqual([enabled.status, enabled.is_default], ['active', false], 'enabled, and not the default again by itself');
    const updated = await ws.json<{ name: string; caller_ids: string[]; calls_per_second: number }>('telephony', 'update', String(second.id), '--name', 'renamed', '--caller-id', '+12025550101', '--caller-id', '+12025550102', '--cps', '2');
    assert.deepEqual([updated.name, updated.caller_ids, updated.calls_per_second], ['renamed', ['+12025550101', '+12025550102'], 2]);
    await ws.json('telephony', 'disable', String(second.id));
    const unknown = await ws.cli(['telephony', 'disable', '99']);
    assert.notEqual(unknown.code, 0);
    assert.match(unknown.stderr, /No telephony configuration 99/);

    // What the public API then answers: nothing to default to, and the disabled route is not found.
    const deps = await openDeps(t, ws);
    const call = (telephony_configuration_id?: number) =>
      initiateCall(deps, { orgId: org.id, limits: { ratePerSecond: null, keyRatePerSecond: null, maxQueuedRuns: null } }, { kind: 'agent', uuid: created.agent_uuids[0] ?? '' }, 'published', { phone_number: '+12025550123', ...(telephony_configuration_id ? { telephony_configuration_id } : {}) });
    await assert.rejects(call(), { code: 'telephony_not_configured' });
    await assert.rejects(call(second.id), { code: 'telephony_configuration_not_found' });
    await ws.json('telephony', 'set-default', String(first.id));
    assert.equal((await call()).replayed, false, 'a new default serves again');
  });

  it('cancels a queued run with run cancel, through the run lifecycle, and refuses a run that has ended or does not exist', async (t) => {
    const ws = workspace(t);
    const org = await ws.json<{ id: number }>('org', 'create', '--name', 'Acme');
    await ws.json('telephony', 'create', '--org', String(org.id), '--name', 'sim', '--provider', 'simulator', '--caller-id', '+12025550100', '--default');
    const created = await ws.json<Summary>('workflow', 'create', '--org', String(org.id), '--name', 'Agent', '--definition', ws.file('a.json', definition([{ id: 'trigger' }], 'Hi')));
    const deps = await openDeps(t, ws);
    const outcome = await initiateCall(deps, { orgId: org.id, limits: { ratePerSecond: null, keyRatePerSecond: null, maxQueuedRuns: null } }, { kind: 'agent', uuid: created.agent_uuids[0] ?? '' }, 'published', { phone_number: '+12025550123' });
    const runId = String(outcome.replayed ? assert.fail('not a replay') : outcome.result.workflow_run_id);

    const canceled = await ws.json<{ state: string; outcome_reason: string }>('run', 'cancel', runId);
    assert.deepEqual([canceled.state, canceled.outcome_reason], ['canceled', 'canceled_by_request']);
    const events = await ws.json<{ type: string }[]>('run', 'events', runId);
    assert.deepEqual(events.map((e) => e.type), ['queued', 'canceled'], 'the cancel is an event of the run');

    const again = await ws.cli(['--json', 'run', 'cancel', runId]);
    assert.notEqual(again.code, 0);
    assert.equal((JSON.parse(again.stderr) as { error: { code: string } }).error.code, 'run_already_ended');
    const missing = await ws.cli(['run', 'cancel', '999']);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /^Error \(workflow_run_not_found\): /);
  });

  it('manages webhook endpoints with webhook create, list, disable, enable, rotate-secret, test, deliveries and retry, with --json output', async (t) => {
    const ws = workspace(t);
    const org = await ws.json<{ id: number }>('org', 'create', '--name', 'Hooks');
    const created = await ws.json<{ id: number; secret: string; events: string[]; enabled: boolean }>(
      'webhook', 'create', '--org', String(org.id), '--url', 'https://93.184.216.34/hooks', '--events', 'run.ended,webhook.test',
    );
    assert.match(created.secret, /^whsec_/);
    assert.deepEqual(created.events, ['run.ended', 'webhook.test']);
    assert.equal(created.enabled, true);
    const listed = await ws.json<{ id: number; secret?: string }[]>('webhook', 'list', '--org', String(org.id));
    assert.deepEqual(listed.map((e) => e.id), [created.id]);
    assert.equal(listed[0]?.secret, undefined, 'secrets are never listed');
    assert.equal((await ws.json<{ enabled: boolean; disabled_reason: string }>('webhook', 'disable', String(created.id))).disabled_reason, 'request');
    assert.equal((await ws.json<{ enabled: boolean }>('webhook', 'enable', String(created.id))).enabled, true);
    const rotated = await ws.json<{ secret: string }>('webhook', 'rotate-secret', String(created.id));
    assert.notEqual(rotated.secret, created.secret);
    const queued = await ws.json<{ delivery_id: number }>('webhook', 'test', String(created.id));
    const page = await ws.json<{ data: { id: number; status: string; event_type: string }[] }>('webhook', 'deliveries', String(created.id), '--status', 'pending');
    assert.deepEqual(page.data.map((d) => [d.id, d.status, d.event_type]), [[queued.delivery_id, 'pending', 'webhook.test']]);
    const pending = await ws.cli(['--json', 'webhook', 'retry', String(created.id), String(queued.delivery_id)]);
    assert.notEqual(pending.code, 0);
    assert.equal(JSON.parse(pending.stderr).error.code, 'webhook_delivery_pending');
    const db = new Database(ws.dbPath);
    db.prepare("update webhook_deliveries set status = 'failed', next_attempt_at = null").run();
    db.close();
    assert.deepEqual(await ws.json('webhook', 'retry', String(created.id), String(queued.delivery_id)), { delivery_id: queued.delivery_id, status: 'pending' });
    const refused = await ws.cli(['--json', 'webhook', 'create', '--org', String(org.id), '--url', 'https://127.0.0.1/hooks'], { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' });
    assert.equal(JSON.parse(refused.stderr).error.code, 'webhook_url_not_allowed');
    const badType = await ws.cli(['--json', 'webhook', 'create', '--org', String(org.id), '--url', 'https://93.184.216.34/x', '--events', 'run.exploded']);
    assert.equal(JSON.parse(badType.stderr).error.code, 'usage_error');
    const missing = await ws.cli(['--json', 'webhook', 'deliveries', '999']);
    assert.equal(JSON.parse(missing.stderr).error.code, 'webhook_endpoint_not_found');
  });

  it('describes every command, option and argument in its help', () => {
    const undescribed: string[] = [];
    const visit = (command: Command, path: string) => {
      if (!command.description()) undescribed.push(`${path}: the command`);
      for (const option of command.options) if (!option.description) undescribed.push(`${path}: ${option.flags}`);
      for (const argument of command.registeredArguments) if (!argument.description) undescribed.push(`${path}: <${argument.name()}>`);
      for (const sub of command.commands) visit(sub, `${path} ${sub.name()}`);
    };
    visit(buildCli(), 'dialtone');
    assert.deepEqual(undescribed, []);
  });

  it('has the administration commands an operator needs, each with its help', async (t) => {
    const ws = workspace(t);
    const commands = (command: Command, path: string[]): string[] =>
      command.commands.length === 0 ? [path.join(' ')] : command.commands.flatMap((sub) => commands(sub, [...path, sub.name()]));
    const all = commands(buildCli(), []);
    for (const wanted of ['org list', 'workflow list', 'telephony set-default', 'telephony disable', 'run cancel', 'webhook create', 'webhook list', 'webhook deliveries', 'webhook retry', 'webhook disable', 'webhook enable', 'webhook rotate-secret']) assert.ok(all.includes(wanted), `dialtone ${wanted}`);
    const help = await ws.cli(['telephony', 'disable', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^Usage: dialtone telephony disable \[options\] <configuration_id>\n\ndisable a configuration/);
  });

  it('starts without loading what an administration command does not use: the Twilio SDK, Redis client and HTTP server', async (t) => {
    const ws = workspace(t);
    // Lists, as the command exits, the packages it loaded (CommonJS ones: these four all are).
    const probe = ws.file('probe.mjs', `import { createRequire } from 'node:module';
const cache = createRequire(import.meta.url).cache;
process.on('exit', () => {
  const loaded = new Set(Object.keys(cache).flatMap((path) => path.match(/node_modules\\/((?:@[^/]+\\/)?[^/]+)/)?.[1] ?? []));
  process.stderr.write(JSON.stringify([...loaded]));
});`);
    for (const args of [['--help'], ['org', 'list'], ['telephony', 'list', '--org', '1'], ['workflow', 'list', '--org', '1']]) {
      const result = await runToCompletion(process.execPath, ['--import', probe, BIN, ...args], ws.env);
      assert.equal(result.code, 0, result.stderr);
      const loaded = JSON.parse(result.stderr) as string[];
      if (args[0] !== '--help') assert.ok(loaded.includes('better-sqlite3'), `the probe sees packages: ${result.stderr}`);
      for (const heavy of ['twilio', 'ioredis', 'fastify', '@fastify/swagger']) assert.ok(!loaded.includes(heavy), `dialtone ${args.join(' ')} loads ${heavy}`);
    }
  });

  it('prints readable text, not JSON, without --json', async (t) => {
    const ws = workspace(t);
    const result = await ws.cli(['org', 'create', '--name', 'Readable Org']);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, 'id    1\nname  Readable Org\n');
    assert.throws(() => JSON.parse(result.stdout));
  });

  it('stores Twilio credentials from a file encrypted, and once secrets are stored under a key refuses a command without DIALTONE_SECRET_KEY with a clear message', async (t) => {
    const ws = workspace(t);
    const deps = await openDeps(t, ws);
    const org = await createOrganization(deps.store, 'Acme', Date.now());
    const token = 'tw-auth-token-7f3a9c1e5b';
    const credentials = ws.file('twilio.json', { account_sid: 'AC00112233445566778899aabbccddeeff', auth_token: token });
    const args = ['--json', 'telephony', 'create', '--org', String(org.id), '--name', 'Twilio', '--provider', 'twilio', '--caller-id', '+12025550100', '--credentials', credentials];

    const created = await ws.cli(args);
    assert.equal(created.code, 0, created.stderr);
    assert.ok(!created.stdout.includes(token), 'the credentials are not printed back');
    const view = JSON.parse(created.stdout) as { id: number; provider: string; has_credentials: boolean };
    assert.equal(view.provider, 'twilio');
    assert.equal(view.has_credentials, true);

    const sqlite = new Database(ws.dbPath, { readonly: true });
    const row = sqlite.prepare('select * from telephony_configurations where id = ?').get(view.id) as { credentials_encrypted: string };
    sqlite.close();
    assert.ok(!JSON.stringify(row).includes(token), `the plaintext token is not in the row: ${JSON.stringify(row)}`);
    assert.ok(!JSON.stringify(row).includes('AC00112233445566778899aabbccddeeff'));
    assert.match(row.credentials_encrypted, /^v1\./);
    for (const file of [ws.dbPath, `${ws.dbPath}-wal`]) {
      if (existsSync(file)) assert.ok(!readFileSync(file).includes(token), `${file} does not hold the plaintext token`);
    }
    assert.deepEqual(new CredentialsCipher(TEST_SECRET_KEY).decrypt(org.id, row.credentials_encrypted), {
      account_sid: 'AC00112233445566778899aabbccddeeff',
      auth_token: token,
    });

    // Secrets are stored under the key (no key file was made, the key being given): a command
    // without the key stores nothing more, and the operator is told what to set.
    const refused = await ws.cli(args.slice(1), { DIALTONE_SECRET_KEY: undefined });
    assert.notEqual(refused.code, 0);
    assert.equal(refused.stdout, '');
    assert.match(refused.stderr, /^Error: DIALTONE_SECRET_KEY is not set/);
    assert.doesNotMatch(refused.stderr, /^\s+at /m, 'a configuration mistake is reported without a stack trace');
    const refusedJson = await ws.cli(args, { DIALTONE_SECRET_KEY: undefined });
    assert.notEqual(refusedJson.code, 0);
    assert.equal((JSON.parse(refusedJson.stderr) as { error: { code: string } }).error.code, 'secret_key_missing');
    assert.equal((await deps.store.db.selectFrom('telephony_configurations').select('id').execute()).length, 1);
    assert.equal(existsSync(`${ws.dbPath}.key`), false, 'no key is generated over stored secrets');
  });
});
