// `dialtone campaign …` as an administrator runs it: a subprocess on a SQLite file prepared in this
// process, checked through its output.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it, type TestContext } from 'node:test';
import pino from 'pino';
import { buildDeps } from '../src/deps.js';
import { migrateToLatest } from '../src/store/schema/migrate.js';
import { openStore } from '../src/store/engine/store.js';
import { TEST_SECRET_KEY, testConfig } from './helpers/app.js';
import { createOrgFixture, type OrgFixture } from './helpers/fixtures.js';
import { ensureBuilt, ROOT, runToCompletion, startProcess } from './helpers/process.js';

const BIN = join(ROOT, 'bin', 'dialtone');

async function workspace(t: TestContext): Promise<{ dir: string; env: Record<string, string>; f: OrgFixture }> {
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-campaign-cli-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const env = { DATABASE_URL: `sqlite:${join(dir, 'cli.db')}`, DIALTONE_SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'silent' };
  const store = openStore(env.DATABASE_URL);
  try {
    await migrateToLatest(store);
    const f = await createOrgFixture(buildDeps(testConfig(env.DATABASE_URL), { store, logger: pino({ level: 'silent' }) }));
    return { dir, env, f };
  } finally {
    await store.close();
  }
}

describe('dialtone campaign (CLI)', { concurrency: true }, () => {
  // The commands run the compiled code, as after `npm ci` (helpers/process.ts, ensureBuilt).
  before(ensureBuilt);

  it('creates a campaign with its CSV contacts, starts, pauses and cancels it, with --json and text output', async (t) => {
    const { dir, env, f } = await workspace(t);
    const cli = (...args: string[]) => runToCompletion(process.execPath, [BIN, ...args], env);
    const json = async (...args: string[]) => {
      const result = await cli('--json', ...args);
      assert.equal(result.code, 0, `dialtone ${args.join(' ')} failed:\n${result.stderr}`);
      return JSON.parse(result.stdout) as { id: number; state: string; paused_reason: string | null; progress: Record<string, number>; contacts?: { added: number; duplicates: number; invalid: { line: number }[] } };
    };
    const csv = join(dir, 'contacts.csv');
    writeFileSync(csv, 'phone_number,name\n+12025550123,Ada\nnope,Bob\n+12025550124,Cy\n+12025550123,Ada\n');
    const created = await json('campaign', 'create', '--org', String(f.orgId), '--name', 'Drive', '--agent', f.agentUuid, '--contacts', csv, '--max-attempts', '3', '--retry-delay', '120');
    assert.equal(created.state, 'draft');
    assert.deepEqual([created.contacts?.added, created.contacts?.duplicates, created.contacts?.invalid.map((i) => i.line)], [2, 1, [3]]);
    assert.equal(created.progress.total, 2);
    const id = String(created.id);

    assert.equal((await json('campaign', 'start', id)).state, 'running');
    const paused = await cli('campaign', 'pause', id);
    assert.equal(paused.code, 0, paused.stderr);
    assert.match(paused.stdout, /paused \(request\)/);
    const again = await cli('--json', 'campaign', 'pause', id);
    assert.notEqual(again.code, 0);
    assert.equal(JSON.parse(again.stderr).error.code, 'campaign_state_conflict');
    const missing = await cli('--json', 'campaign', 'status', '999');
    assert.equal(JSON.parse(missing.stderr).error.code, 'campaign_not_found');
    assert.equal((await json('campaign', 'status', id)).state, 'paused');
    assert.equal((await json('campaign', 'cancel', id)).state, 'canceled');
  });

  it('creates a campaign with its window, retry states and circuit breaker from flags, lists campaigns, and refuses out-of-range values like the API', async (t) => {
    const { env, f } = await workspace(t);
    const cli = (...args: string[]) => runToCompletion(process.execPath, [BIN, ...args], env);
    const created = await cli(
      '--json', 'campaign', 'create', '--org', String(f.orgId), '--name', 'Window', '--agent', f.agentUuid,
      '--starts-at', '2030-01-06T09:00:00Z', '--ends-at', '2030-01-10T17:00:00Z', '--calls-per-second', '2',
      '--retry-on', 'busy,no_answer', '--failure-ratio', '0.3', '--breaker-window', '300', '--breaker-min-calls', '5',
    );
    assert.equal(created.code, 0, created.stderr);
    const view = JSON.parse(created.stdout) as { id: number; starts_at: string; ends_at: string; calls_per_second: number; retry: { on: string[] }; circuit_breaker: Record<string, number> };
    assert.deepEqual(
      [view.starts_at, view.ends_at, view.calls_per_second, view.retry.on, view.circuit_breaker],
      ['2030-01-06T09:00:00.000Z', '2030-01-10T17:00:00.000Z', 2, ['busy', 'no_answer'], { failure_ratio: 0.3, window_seconds: 300, min_calls: 5 }],
    );

    const refused = await cli('--json', 'campaign', 'create', '--org', String(f.orgId), '--name', 'Bad', '--agent', f.agentUuid, '--failure-ratio', '2', '--max-attempts', '11', '--retry-on', 'completed');
    assert.notEqual(refused.code, 0);
    const error = JSON.parse(refused.stderr).error as { code: string; errors: { pointer: string }[] };
    assert.equal(error.code, 'validation_failed');
    assert.deepEqual(error.errors.map((e) => e.pointer).sort(), ['/circuit_breaker/failure_ratio', '/retry/max_attempts', '/retry/on/0']);

    const second = await cli('--json', 'campaign', 'create', '--org', String(f.orgId), '--name', 'Second', '--agent', f.agentUuid);
    assert.equal(second.code, 0, second.stderr);
    const page = JSON.parse((await cli('--json', 'campaign', 'list', '--org', String(f.orgId), '--limit', '1')).stdout) as { data: { id: number; name: string }[]; next_after: number | null };
    assert.deepEqual(page.data.map((c) => c.name), ['Second'], 'newest first, one per page, the refused one never created');
    const rest = JSON.parse((await cli('--json', 'campaign', 'list', '--org', String(f.orgId), '--after', String(page.next_after))).stdout) as { data: { name: string }[]; next_after: number | null };
    assert.deepEqual([rest.data.map((c) => c.name), rest.next_after], [['Window'], null]);
    const text = await cli('campaign', 'list', '--org', String(f.orgId));
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /Window\s+draft\s+\[/);
  });

  it('redraws the progress with status --watch until the campaign ends, as text lines or one JSON object per line', async (t) => {
    const { env, f } = await workspace(t);
    const cli = (...args: string[]) => runToCompletion(process.execPath, [BIN, ...args], env);
    const contacts = join(mkdtempSync(join(tmpdir(), 'dialtone-contacts-')), 'c.csv');
    writeFileSync(contacts, 'phone_number\n+12025550123\n+12025550124\n');
    const created = JSON.parse((await cli('--json', 'campaign', 'create', '--org', String(f.orgId), '--name', 'Drive', '--agent', f.agentUuid, '--contacts', contacts, '--start')).stdout) as { id: number; state: string };
    assert.equal(created.state, 'running');
    const id = String(created.id);

    const text = startProcess(t, process.execPath, [BIN, 'campaign', 'status', id, '--watch', '--interval', '50'], env);
    const ndjson = startProcess(t, process.execPath, [BIN, '--json', 'campaign', 'status', id, '--watch', '--interval', '50'], env);
    await text.waitForStdout(/\[\.+\]\s+0% 0\/2\s+running/);
    await ndjson.waitForStdout(/\n/);
    assert.equal((await cli('campaign', 'cancel', id)).code, 0);
    assert.deepEqual(await text.exited, { code: 0, signal: null }, text.stderr());
    assert.deepEqual(await ndjson.exited, { code: 0, signal: null }, ndjson.stderr());

    const lines = text.stdout().trim().split('\n');
    assert.match(lines[0] ?? '', /^campaign \d+ \[\.{30}\]\s+0% 0\/2\s+running/);
    assert.match(lines.at(-1) ?? '', /^campaign \d+ \[#{30}\] 100% 2\/2\s+canceled .*canceled 2/);
    const objects = ndjson.stdout().trim().split('\n').map((line) => JSON.parse(line) as { state: string });
    assert.equal(objects[0]?.state, 'running');
    assert.equal(objects.at(-1)?.state, 'canceled');
  });
});
