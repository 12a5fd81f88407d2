// `dialtone call start`: places a call through a running service's Initiate Call operation (remote
// mode only: dialing is the service's work, which the CLI never does from the database).
import type { Command } from 'commander';
import { CliError } from '../cli-error.js';
import { formatRecord } from '../output.js';
import { positiveInt } from '../parsers.js';
import { remoteOnly } from '../remote.js';

interface CallOptions {
  phone: string;
  context?: string;
  route?: number;
  test?: boolean;
  idempotencyKey?: string;
  dryRun?: boolean;
}

function contextOf(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new CliError('invalid_input', `--context is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new CliError('invalid_input', '--context must be a JSON object, e.g. \'{"name":"Ada"}\'.');
  return value as Record<string, unknown>;
}

export function callCommands(program: Command): void {
  const call = program.command('call').description('place calls through a running service (remote mode: --url or DIALTONE_URL, and an API key with the calls scope)');
  call
    .command('start')
    .description("place a call with an agent's published definition (--test: its draft, else the published one); prints the run queued, or with --dry-run what would be dialed")
    .argument('<agent_uuid>', "the agent's (API trigger's) UUID")
    .requiredOption('--phone <number>', 'the number to call, E.164 (+12025550123), or a SIP URI on a SIP route')
    .option('--context <json>', 'initial_context: a JSON object of the agent\'s template variables, e.g. \'{"name":"Ada"}\'')
    .option('--route <id>', 'the telephony configuration to dial through (default: the organization\'s default)', positiveInt)
    .option('--test', 'a test call: the latest draft, else the published definition')
    .option('--idempotency-key <key>', 'makes a retry safe: the same key and call within 24 h answer the first run, never a second call')
    .option('--dry-run', 'run every check and create nothing: prints the version, route and time it would be dialed')
    .action(
      remoteOnly(async (client, agent: string, opts: CallOptions) => {
        const context = contextOf(opts.context);
        const body = {
          phone_number: opts.phone,
          ...(context !== undefined ? { initial_context: context } : {}),
          ...(opts.route !== undefined ? { telephony_configuration_id: opts.route } : {}),
        };
        if (opts.dryRun) {
          if (opts.idempotencyKey !== undefined) throw new CliError('invalid_input', '--dry-run creates nothing: it takes no --idempotency-key.');
          const dry = await client.calls.validate(agent, body, { test: opts.test === true });
          return { json: dry, text: `${formatRecord({ ...dry })}\n\nValid: nothing was created (--dry-run).` };
        }
        const options = opts.idempotencyKey !== undefined ? { idempotencyKey: opts.idempotencyKey } : {};
        const queued = opts.test ? await client.calls.startTest(agent, body, options) : await client.calls.start(agent, body, options);
        return { json: queued, text: `${formatRecord({ ...queued })}\n\nFollow it: dialtone run show ${queued.workflow_run_id}` };
      }),
    );
}
