// `dialtone serve` and `dialtone migrate`: the service itself, started or brought up to date.
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
    .description('apply database migrations')
    .action(async (_opts: unknown, command: Command) => {
      const [{ loadConfig }, { buildDeps }, { migrateToLatest }] = await Promise.all([import('../../config.js'), import('../../deps.js'), import('../../store/schema/migrate.js')]);
      const deps = buildDeps(loadConfig());
      try {
        const applied = await migrateToLatest(deps.store);
        const json = wantsJson(command);
        process.stdout.write(json ? `${JSON.stringify({ applied })}\n` : `${applied.length ? `Applied ${applied.join(', ')}` : 'Already up to date'}\n`);
      } finally {
        await deps.store.close();
      }
    });
}
