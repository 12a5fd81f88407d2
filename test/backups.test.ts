// Backups: `dialtone backup --to FILE` copies the SQLite store online (SQLite's backup API) while
// the service keeps writing, and a service started on the copy sees every run whose creation was
// answered before the backup began; on PostgreSQL it refuses, pointing at pg_dump.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { BackupUnsupportedError } from '../src/store/engine/operator-errors.js';
import { build, createTestEnv, getJson, postJson, TEST_SECRET_KEY } from './helpers/app.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { ROOT, runToCompletion } from './helpers/process.js';
import { storeCases } from './helpers/stores.js';

const BIN = join(ROOT, 'bin', 'dialtone');

for (const { kind, skip } of await storeCases()) {
  describe(`Backups (${kind})`, { skip }, () => {
    if (kind === 'sqlite') {
      it('backs up while runs are being created, and a service restored from the copy sees every run answered before the backup began, in a database that passes its integrity check', async (t) => {
        const env = await build(t, 'sqlite');
        const f = await createOrgFixture(env.deps);
        const dir = mkdtempSync(join(tmpdir(), 'dialtone-backup-'));
        t.after(() => rmSync(dir, { recursive: true, force: true }));
        const copy = join(dir, 'copy.db');

        // A writer creating runs one after another until told to stop, recording each answered 200.
        const answered: number[] = [];
        let writing = true;
        let n = 0;
        const writer = (async () => {
          while (writing) {
            const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: `+1202555${String(1000 + (n++ % 9000)).padStart(4, '0')}` }, { key: f.apiKey });
            assert.equal(response.statusCode, 200, response.body);
            answered.push((response.json() as { workflow_run_id: number }).workflow_run_id);
          }
        })();
        const until = async (condition: () => boolean) => {
          while (!condition()) await new Promise((resolve) => setImmediate(resolve));
        };
        await until(() => answered.length >= 20);

        const before = [...answered];
        // The CLI, in its own process, as an operator runs it beside the service.
        const backup = runToCompletion(process.execPath, [BIN, '--json', 'backup', '--to', copy], { DATABASE_URL: env.deps.config.DATABASE_URL, DIALTONE_SECRET_KEY: TEST_SECRET_KEY });
        const duringFrom = answered.length;
        const finished = await backup;
        const duringBackup = answered.length - duringFrom;
        await until(() => answered.length >= duringFrom + duringBackup + 5);
        writing = false;
        await writer;
        assert.equal(finished.code, 0, finished.stderr);
        assert.equal((JSON.parse(finished.stdout) as { to: string }).to, copy);
        assert.ok(duringBackup > 0, 'the service kept creating runs while the backup ran');
        assert.equal(statSync(copy).mode & 0o777, 0o600, 'the copy is readable by its owner only');

        const check = new Database(copy, { readonly: true });
        try {
          assert.deepEqual(check.pragma('integrity_check'), [{ integrity_check: 'ok' }]);
        } finally {
          check.close();
        }

        const restored = await createTestEnv('sqlite', { database: `sqlite:${copy}` });
        t.after(() => restored.close());
        for (const id of before) {
          const read = await getJson(restored.app, `/api/v1/public/workflow-runs/${id}`, f.apiKey);
          assert.equal(read.statusCode, 200, `run ${id}, answered before the backup, is in the copy`);
        }
      });
    } else {
      it('refuses to back up a PostgreSQL store, pointing at pg_dump', async (t) => {
        const env = await build(t, 'postgres');
        await assert.rejects(env.deps.store.backup(join(tmpdir(), 'never-written.db')), (error: unknown) => {
          assert.ok(error instanceof BackupUnsupportedError);
          assert.match(error.message, /pg_dump/);
          return true;
        });
      });
    }
  });
}
