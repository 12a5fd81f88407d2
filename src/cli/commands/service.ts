// `dialtone serve`, `dialtone migrate` and `dialtone backup`: the service itself, started, brought
// up to date, or its SQLite database copied while it serves.
import type { Command } from 'commander';
import { wantsJson } from '../action.js';

export function serviceCommands(program: Command): void {
  program
    .command('serve')
    .description('start the service (what `npm start` runs)')
    .action(async () => {
      const { main } = await import('../../server.js');
      await main();
    });

  program
    .command('migrate')
    .description('apply database migrations (with --status, list applied and pending ones instead)')
    .option('--status', 'list applied and pending migrations; apply nothing')
    .action(async (opts: { status?: boolean }, command: Command) => {
      const [{ loadConfig }, { buildDeps }, { migrateToLatest, migrationStatus }] = await Promise.all([import('../../config.js'), import('../../deps.js'), import('../../store/schema/migrate.js')]);
      const deps = buildDeps(loadConfig());
      const json = wantsJson(command);
      try {
        if (opts.status) {
          const status = await migrationStatus(deps.store);
          process.stdout.write(json ? `${JSON.stringify(status, null, 2)}\n` : `${statusText(status)}\n`);
          return;
        }
        const applied = await migrateToLatest(deps.store);
        process.stdout.write(json ? `${JSON.stringify({ applied })}\n` : `${applied.length ? `Applied ${applied.join(', ')}` : 'Already up to date'}\n`);
      } finally {
        await deps.store.close();
      }
    });

  program
    .command('backup')
    .description('copy the SQLite database, consistently, while the service keeps serving (PostgreSQL: use pg_dump)')
    .requiredOption('--to <file>', 'where to write the copy (refused if it exists, unless --force)')
    .option('--force', 'replace the file if it exists')
    .action(async (opts: { to: string; force?: boolean }, command: Command) => {
      const [{ loadConfig }, { buildDeps }, { assertBackupSource }] = await Promise.all([import('../../config.js'), import('../../deps.js'), import('../../store/engine/operator-errors.js')]);
      // Neither migrates the database nor needs the secret key: a copy changes nothing. PostgreSQL's
      // store refuses (BackupUnsupportedError, reported with its code by errors.ts). A SQLite source
      // that is missing or no database is refused before the store is opened, which would create it.
      const config = loadConfig();
      assertBackupSource(config.DATABASE_URL);
      const deps = buildDeps(config);
      try {
        const started = Date.now();
        await deps.store.backup(opts.to, { overwrite: opts.force === true });
        const ms = Date.now() - started;
        process.stdout.write(wantsJson(command) ? `${JSON.stringify({ to: opts.to, ms })}\n` : `Backed up to ${opts.to} in ${ms} ms\n`);
      } finally {
        await deps.store.close();
      }
    });
}

interface StatusLines {
  applied: { name: string; appliedAt: Date }[];
  pending: string[];
  unknown: { name: string; appliedAt: Date }[];
}

function statusText({ applied, pending, unknown }: StatusLines): string {
  const lines = [
    ...applied.map((m) => `applied  ${m.name}  ${m.appliedAt.toISOString()}`),
    ...pending.map((name) => `pending  ${name}`),
    // A newer version's: this one refuses to start on the database (docs/operations.md).
    ...unknown.map((m) => `unknown  ${m.name}  ${m.appliedAt.toISOString()}  (applied by a newer version)`),
  ];
  const summary = `${applied.length} applied, ${pending.length} pending${unknown.length ? `, ${unknown.length} unknown to this version: it will not start on this database` : ''}`;
  return [...lines, summary].join('\n');
}
