// `dialtone`: administration from the shell, on the same store and dependencies as the service
// (direct database mode), or through a running service's API with --url or DIALTONE_URL and an API
// key (remote mode, remote.ts). Every command prints readable text by default and JSON with --json.
// This file builds the program from the command groups (commands/, one file each) and runs it; a
// group declares its commands with light imports only and loads the modules that do the work when
// one of them runs.
import { Command, CommanderError, Option } from 'commander';
import type { ProviderRegistry } from '../telephony/registry.js';
import { auditCommands } from './commands/audit.js';
import { callCommands } from './commands/call.js';
import { campaignCommands } from './commands/campaign.js';
import { erasureCommands } from './commands/erasure.js';
import { keyCommands } from './commands/key.js';
import { orgCommands } from './commands/org.js';
import { runCommands } from './commands/run.js';
import { serviceCommands } from './commands/service.js';
import { statsCommands } from './commands/stats.js';
import { suppressionCommands } from './commands/suppression.js';
import { telephonyCommands } from './commands/telephony.js';
import { webhookCommands } from './commands/webhook.js';
import { workflowCommands } from './commands/workflow.js';

/** `registry`: the providers known, in place of the built-in ones (a test's fake provider added). */
export function buildCli(options: { json?: boolean; registry?: ProviderRegistry } = {}): Command {
  const program = new Command('dialtone')
    .description(
      'Dialtone: outbound call initiation service.\n\n' +
        'Remote mode: with --url (or DIALTONE_URL) and an API key (DIALTONE_API_KEY, or --api-key-file), a command asks that service\'s API; the key\'s organization is the one acted on.\n' +
        'Direct database mode (no URL): a command opens the database DATABASE_URL names, as the service does; it is how the first organization and its admin key are created (org create, key create), and what org list, serve, migrate and backup need.',
    )
    .option('--json', 'print machine-readable JSON (errors too, as {"error":{"code","message"}} on stderr)')
    .option('--url <base>', "remote mode: the service's base URL, e.g. https://dialtone.example.com (default: DIALTONE_URL)")
    .option('--api-key-file <file>', 'remote mode: a file holding the API key (default: DIALTONE_API_KEY)')
    .option('--api-key <key>', 'remote mode: the API key itself (warned against: it lands in shell history; prefer DIALTONE_API_KEY)')
    // Program options go before the command (`dialtone --url … webhook list`), so a command's own
    // option of the same name (`webhook create --url`) stays its own.
    .enablePositionalOptions()
    // Usage errors are thrown, not exited on, so runCli reports every failure one way. With --json
    // commander stays silent and runCli prints the JSON; subcommands inherit both settings.
    .exitOverride()
    .configureOutput(options.json ? { writeErr: () => undefined, outputError: () => undefined } : {});
  if (!options.json) program.showHelpAfterError();

  // In the order `dialtone --help` lists them.
  serviceCommands(program);
  orgCommands(program);
  keyCommands(program);
  telephonyCommands(program, options.registry);
  workflowCommands(program);
  runCommands(program);
  suppressionCommands(program);
  webhookCommands(program);
  campaignCommands(program);
  erasureCommands(program);
  callCommands(program);
  statsCommands(program);
  auditCommands(program);
  // --json is also taken after the command (`dialtone run list --json`), as before positional options.
  const leaves = (command: Command): Command[] => (command.commands.length === 0 ? [command] : command.commands.flatMap(leaves));
  for (const command of program.commands.flatMap(leaves)) command.addOption(new Option('--json', 'print machine-readable JSON (as the program\'s --json)').hideHelp());
  return program;
}

/** Whether this invocation asked for JSON: decided from argv so usage errors, found before any action runs, honour it too. */
function wantsJson(argv: string[]): boolean {
  const args = argv.slice(2);
  const end = args.indexOf('--');
  return (end === -1 ? args : args.slice(0, end)).includes('--json');
}

export async function runCli(argv: string[]): Promise<number> {
  const json = wantsJson(argv);
  try {
    await buildCli({ json }).parseAsync(argv);
    return 0;
  } catch (error) {
    if (error instanceof CommanderError && error.exitCode === 0) return 0; // --help
    // Loaded only on failure: it imports the service's error types (and with them its configuration schema).
    const { reportFailure } = await import('./errors.js');
    return reportFailure(error, json);
  }
}
