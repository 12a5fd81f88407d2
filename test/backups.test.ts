// Backups: `dialtone backup --to FILE` copies the SQLite store online (SQLite's backup API) while
// the service keeps writing, and a service started on the copy sees every run whose creation was
// answered before the backup began; on PostgreSQL it refuses, pointing at pg_dump.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { BackupUnsupportedError } from '../src/store/engine/operator-errors.js';
import { build, createTestEnv, getJson, postJson, TEST_SECRET_KEY } from './helpers/app.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { buildWithDispatcher } from './helpers/dispatch.js';
import { ROOT, runToCompletion } from './helpers/process.js';
import { storeCases } from './helpers/stores.js';

const BIN = join(ROOT, 'bin', 'dialtone');

/** `dialtone --json backup …` in its own process, as an operator runs it beside the service. */
const backupCli = (databaseUrl: string, args: string[]) => runToCompletion(process.execPath, [BIN, '--json', 'backup', ...args], { DATABASE_URL: databaseUrl, DIALTONE_SECRET_KEY: TEST_SECRET_KEY });
const errorCode = (stderr: string): string => (JSON.parse(stderr) as { error: { code: string } }).error.code;

function integrity(file: string): unknown {
  const check = new Database(file, { readonly: true });
  try {
    return check.pragma('integrity_check');
  } finally {
    check.close();
  }
}

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

      it('backs up while calls are placed concurrently over HTTP and dialed, and a service restored from the copy sees every run answered before the backup started', async (t) => {
        const env = await buildWithDispatcher(t, 'sqlite');
        const f = await createOrgFixture(env.deps);
        const base = await env.app.listen({ host: '127.0.0.1', port: 0 });
        const dir = mkdtempSync(join(tmpdir(), 'dialtone-backup-'));
        t.after(() => rmSync(dir, { recursive: true, force: true }));
        const copy = join(dir, 'copy.db');

        // Four clients, each placing calls over a real socket one after another until told to stop.
        const answered: number[] = [];
        let placing = true;
        const client = async (c: number) => {
          for (let n = 0; placing; n++) {
            const response = await fetch(`${base}${PATHS.initiateCall(f.agentUuid)}`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-api-key': f.apiKey },
              body: JSON.stringify({ phone_number: `+1202555${String(1000 + ((c * 2000 + n) % 8000)).padStart(4, '0')}`, initial_context: { client: c, n } }),
            });
            const body = await response.text();
            assert.equal(response.status, 200, body);
            answered.push((JSON.parse(body) as { workflow_run_id: number }).workflow_run_id);
          }
        };
        const clients = [0, 1, 2, 3].map(client);
        const until = async (condition: () => boolean) => {
          while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
        };
        await until(() => answered.length >= 40);

        const before = [...answered];
        const backup = backupCli(env.deps.config.DATABASE_URL, ['--to', copy]);
        const duringFrom = answered.length;
        const finished = await backup;
        const duringBackup = answered.length - duringFrom;
        placing = false;
        await Promise.all(clients);
        assert.equal(finished.code, 0, finished.stderr);
        assert.ok(duringBackup > 0, 'calls kept being placed while the backup ran');
        const dialed = await env.deps.store.db.selectFrom('workflow_runs').select('id').where('state', '!=', 'queued').execute();
        assert.ok(dialed.length > 0, 'the dispatcher was dialing the calls meanwhile');
        assert.deepEqual(integrity(copy), [{ integrity_check: 'ok' }]);

        const restored = await createTestEnv('sqlite', { database: `sqlite:${copy}` });
        t.after(() => restored.close());
        for (const id of before) {
          const read = await getJson(restored.app, `/api/v1/public/workflow-runs/${id}`, f.apiKey);
          assert.equal(read.statusCode, 200, `run ${id}, answered before the backup started, is in the copy`);
        }
      });

      it('refuses to overwrite an existing file unless --force, leaving it as it was', async (t) => {
        const env = await build(t, 'sqlite');
        await createOrgFixture(env.deps);
        const dir = mkdtempSync(join(tmpdir(), 'dialtone-backup-'));
        t.after(() => rmSync(dir, { recursive: true, force: true }));
        const target = join(dir, 'earlier.db');
        writeFileSync(target, 'an earlier backup');

        const refused = await backupCli(env.deps.config.DATABASE_URL, ['--to', target]);
        assert.notEqual(refused.code, 0);
        assert.equal(errorCode(refused.stderr), 'backup_target_exists');
        assert.match(refused.stderr, /already exists.*--force/);
        assert.equal(readFileSync(target, 'utf8'), 'an earlier backup', 'the file is untouched');

        const forced = await backupCli(env.deps.config.DATABASE_URL, ['--to', target, '--force']);
        assert.equal(forced.code, 0, forced.stderr);
        assert.deepEqual(integrity(target), [{ integrity_check: 'ok' }]);
      });

      it('refuses a missing source database, and one that is not SQLite, with a clear message, creating nothing', async (t) => {
        const dir = mkdtempSync(join(tmpdir(), 'dialtone-backup-'));
        t.after(() => rmSync(dir, { recursive: true, force: true }));
        const missing = join(dir, 'mistyped.db');
        const copy = join(dir, 'copy.db');
        const refusedMissing = await backupCli(`sqlite:${missing}`, ['--to', copy]);
        assert.notEqual(refusedMissing.code, 0);
        assert.equal(errorCode(refusedMissing.stderr), 'backup_source_missing');
        assert.match(refusedMissing.stderr, /no database at/);
        assert.equal(existsSync(missing), false, 'no empty database was created in its place');
        assert.equal(existsSync(copy), false);

        const notSqlite = join(dir, 'notes.txt');
        writeFileSync(notSqlite, 'not a database, but long enough to have a header');
        const refusedText = await backupCli(`sqlite:${notSqlite}`, ['--to', copy]);
        assert.notEqual(refusedText.code, 0);
        assert.equal(errorCode(refusedText.stderr), 'backup_source_not_sqlite');
        assert.match(refusedText.stderr, /is not a SQLite database/);
        assert.equal(readFileSync(notSqlite, 'utf8'), 'not a database, but long enough to have a header');
        assert.equal(existsSync(copy), false);
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
