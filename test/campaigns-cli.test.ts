// `dialtone campaign …` as an administrator runs it: a subprocess on a SQLite file prepared in this
// process, checked through its output.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import pino from 'pino';
import { buildDeps } from '../src/deps.js';
import { migrateToLatest } from '../src/store/migrate.js';
import { openStore } from '../src/store/store.js';
import { TEST_SECRET_KEY, testConfig } from './helpers/app.js';
import { createOrgFixture, type OrgFixture } from './helpers/fixtures.js';
import { ROOT, runToCompletion, startProcess } from './helpers/process.js';

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
