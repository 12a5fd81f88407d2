// `dialtone telephony …`: telephony configurations, an organization's routes to the phone network.
import type { Command } from 'commander';
import { action, readJsonFile, requireOrg } from '../action.js';
import { formatRecord, formatTable, type Printable } from '../output.js';
import { collect, positiveInt, positiveNumber } from '../parsers.js';

// Loaded when one of these commands runs (src/cli/README.md).
const configurations = () => import('../../telephony/configurations.js');

export function telephonyCommands(program: Command): void {
  const telephony = program.command('telephony').description('telephony configurations');
  telephony
    .command('create')
    .description('create a telephony configuration (a route to the phone network)')
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .requiredOption('--name <name>', 'configuration name')
    .requiredOption('--provider <provider>', 'simulator, twilio or sip')
    .option('--caller-id <e164>', 'caller ID (repeatable)', collect, [])
    .option('--default', 'make this the organization\'s default configuration')
    .option('--cps <n>', 'calls per second', positiveNumber)
    .option('--max-concurrent <n>', 'maximum concurrent calls', positiveInt)
    .option('--credentials <file>', 'JSON file with the provider credentials (stored encrypted)')
    .option('--settings <file>', 'JSON file with non-secret provider settings (for example the SIP trunk host)')
    .action(
      action(
        async (
          deps,
          opts: { org: number; name: string; provider: string; callerId: string[]; default?: boolean; cps?: number; maxConcurrent?: number; credentials?: string; settings?: string },
        ) => {
          const { createTelephonyConfiguration } = await configurations();
          await requireOrg(deps, opts.org);
          const view = await createTelephonyConfiguration(
            deps.store,
            deps.cipher,
            {
              orgId: opts.org,
              name: opts.name,
              provider: opts.provider,
              callerIds: opts.callerId,
              isDefault: Boolean(opts.default),
              callsPerSecond: opts.cps,
              maxConcurrentCalls: opts.maxConcurrent,
              credentials: opts.credentials ? (readJsonFile(opts.credentials) as Record<string, unknown>) : undefined,
              settings: opts.settings ? (readJsonFile(opts.settings) as Record<string, unknown>) : undefined,
            },
            deps.clock.now(),
          );
          return { json: view, text: formatRecord({ ...view }) };
        },
      ),
    );
  telephony
    .command('list')
    .description("list an organization's telephony configurations")
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .action(
      action(async (deps, opts: { org: number }) => {
        const { listTelephonyConfigurations } = await configurations();
        const rows = await listTelephonyConfigurations(deps.store, opts.org);
        return {
          json: rows,
          text: formatTable(rows as unknown as Printable[], ['id', 'name', 'provider', 'status', 'is_default', 'caller_ids', 'calls_per_second', 'max_concurrent_calls']),
        };
      }),
    );
  telephony
    .command('set-default')
    .description("make an active configuration its organization's default (used when a request names none)")
    .argument('<configuration_id>', 'telephony configuration id', positiveInt)
    .action(
      action(async (deps, id: number) => {
        const { setDefaultTelephonyConfiguration } = await configurations();
        const view = await setDefaultTelephonyConfiguration(deps.store, id, deps.clock.now());
        return { json: view, text: formatRecord({ ...view }) };
      }),
    );
  telephony
    .command('disable')
    .description('disable a configuration: new requests can no longer use it, and it stops being the default')
    .argument('<configuration_id>', 'telephony configuration id', positiveInt)
    .action(
      action(async (deps, id: number) => {
        const { disableTelephonyConfiguration } = await configurations();
        const view = await disableTelephonyConfiguration(deps.store, id, deps.clock.now());
        return { json: view, text: formatRecord({ ...view }) };
      }),
    );
}
