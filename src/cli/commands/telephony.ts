// `dialtone telephony …`: telephony configurations (an organization's routes to the phone network)
// and the providers they go through. The providers, what they can do and the settings flags of
// `create` (`--<provider>-<setting>`) come from the provider registry (telephony/registry.ts), read
// when a command runs: the CLI's start loads none of the providers, and a provider added to the
// registry is offered here with no change to this file.
import type { Command } from 'commander';
import type { RouteFieldDescription } from '../../telephony/definition.js';
import type { ProviderRegistry } from '../../telephony/registry.js';
import { readJsonObjectFile, requireOrg } from '../action.js';
import { answer, dual, orgOf } from '../remote.js';
import { CliError } from '../cli-error.js';
import { formatRecord, formatTable, type Printable } from '../output.js';
import { collect, positiveInt, positiveNumber } from '../parsers.js';

// Loaded when one of these commands runs (src/cli/README.md).
const configurations = () => import('../../telephony/configurations.js');
const builtIn = async () => (await import('../../telephony/registry.js')).builtInProviders;

/** A setting's flag: `--sip-host`, `--simulator-ring-ms`. */
const flagOf = (provider: string, field: RouteFieldDescription): string => `--${provider}-${field.name}`.replace(/_/g, '-');

const yesNo = (value: boolean) => (value ? 'yes' : 'no');

const CONFIGURATION_COLUMNS = ['id', 'name', 'provider', 'status', 'is_default', 'caller_ids', 'calls_per_second', 'max_concurrent_calls'];

interface ProviderRow {
  name: string;
  summary: string;
  capabilities: { callsOutliveNode: boolean; dialsSipUris: boolean; supportsMachineDetection: boolean; supportsTransfer: boolean; sendsDtmf: boolean };
  settings: { name: string; description: string; required?: boolean; flag: string }[];
  credentials: { name: string; description: string; required?: boolean }[];
  config_keys: string[];
}

function providersText(rows: ProviderRow[]): string {
  return rows
    .map((r) =>
      [
        `${r.name}: ${r.summary}`,
        `  calls outlive the node: ${yesNo(r.capabilities.callsOutliveNode)}; dials SIP URIs: ${yesNo(r.capabilities.dialsSipUris)}; machine detection: ${yesNo(r.capabilities.supportsMachineDetection)}; transfer: ${yesNo(r.capabilities.supportsTransfer)}; sends DTMF: ${yesNo(r.capabilities.sendsDtmf)}`,
        ...r.settings.map((f) => `  setting ${f.name}${f.required ? ' (required)' : ''} [${f.flag}]: ${f.description}`),
        ...r.credentials.map((f) => `  credential ${f.name}${f.required ? ' (required)' : ''}: ${f.description}`),
        ...(r.config_keys.length > 0 ? [`  environment: ${r.config_keys.join(', ')}`] : []),
      ].join('\n'),
    )
    .join('\n\n');
}

/**
 * The settings given as provider flags (left among the command's operands, since commander does
 * not know them): each must be a setting of the route's own provider, with a value of its type.
 */
function settingsFromFlags(registry: ProviderRegistry, provider: string, words: readonly string[]): Record<string, unknown> {
  const flags = new Map(registry.definitions.flatMap((d) => d.settings.map((field) => [flagOf(d.name, field), { provider: d.name, field }] as const)));
  const settings: Record<string, unknown> = {};
  for (let i = 0; i < words.length; i++) {
    const word = words[i] ?? '';
    const [flag, inline] = word.includes('=') ? [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)] : [word, undefined];
    const known = flags.get(flag);
    if (!known) throw new CliError('invalid_input', `Unknown option ${flag} (each provider's settings flags: npx dialtone telephony providers).`);
    if (known.provider !== provider) throw new CliError('invalid_input', `${flag} is a ${known.provider} setting; this configuration's provider is ${provider}.`);
    const text = inline ?? words[++i];
    if (text === undefined) throw new CliError('invalid_input', `${flag} needs a value.`);
    if (known.field.type === 'integer' && !/^-?[0-9]{1,15}$/.test(text)) throw new CliError('invalid_input', `${flag} expects a whole number.`);
    settings[known.field.name] = known.field.type === 'integer' ? Number(text) : text;
  }
  return settings;
}

export function telephonyCommands(program: Command, registryOverride?: ProviderRegistry): void {
  const registryOf = async () => registryOverride ?? (await builtIn());
  const overrides = registryOverride ? { registry: registryOverride } : {};
  const telephony = program.command('telephony').description('telephony configurations and the providers they go through');

  telephony
    .command('providers')
    .description('list the providers this service can dial through: what each can do, the settings (and their flags) and credentials its routes take, the environment variables it reads')
    .action(
      dual(
        async () => {
          const registry = await registryOf();
          const rows = registry.definitions.map((d) => ({
            name: d.name,
            summary: d.summary,
            capabilities: { ...d.capabilities },
            settings: d.settings.map((f) => ({ ...f, flag: flagOf(d.name, f) })),
            credentials: d.credentials.map((f) => ({ ...f })),
            config_keys: Object.keys(d.configKeys),
          }));
          return { json: rows, text: providersText(rows) };
        },
        async (client) => {
          // The service's own list (what it can dial through), in the API's words (snake_case capabilities, no environment).
          const { data } = await answer(client.api.GET('/api/v1/public/telephony-providers'));
          const rows = data.map((d) => ({
            name: d.name,
            summary: d.summary,
            capabilities: {
              callsOutliveNode: d.capabilities.calls_outlive_node,
              dialsSipUris: d.capabilities.dials_sip_uris,
              supportsMachineDetection: d.capabilities.supports_machine_detection,
              supportsTransfer: d.capabilities.supports_transfer,
              sendsDtmf: d.capabilities.sends_dtmf,
            },
            settings: d.settings.map((f) => ({ ...f, flag: flagOf(d.name, f) })),
            credentials: d.credentials,
            config_keys: [],
          }));
          return { json: data, text: providersText(rows) };
        },
        overrides,
      ),
    );
  telephony
    .command('create')
    .description('create a telephony configuration (a route to the phone network)')
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .requiredOption('--name <name>', 'configuration name')
    .requiredOption('--provider <provider>', 'the provider (npx dialtone telephony providers lists them)')
    .option('--caller-id <e164>', 'caller ID (repeatable)', collect, [])
    .option('--default', 'make this the organization\'s default configuration')
    .option('--cps <n>', 'calls per second', positiveNumber)
    .option('--max-concurrent <n>', 'maximum concurrent calls', positiveInt)
    .option('--credentials <file>', 'JSON file with the provider credentials (stored encrypted; never taken from flags, which other users can see)')
    .option('--settings <file>', 'JSON file with non-secret provider settings; each may also be given as --<provider>-<setting> (telephony providers lists them), which wins')
    // The provider's settings flags are the registry's, read when the command runs.
    .allowUnknownOption()
    .allowExcessArguments()
    .action(
      dual(
        async (
          deps,
          opts: { org?: number; name: string; provider: string; callerId: string[]; default?: boolean; cps?: number; maxConcurrent?: number; credentials?: string; settings?: string },
          command: Command,
        ) => {
          const { createTelephonyConfiguration } = await configurations();
          const orgId = orgOf(opts);
          await requireOrg(deps, orgId);
          const fromFile = opts.settings ? readJsonObjectFile(opts.settings) : undefined;
          const fromFlags = settingsFromFlags(deps.registry, opts.provider, command.args);
          const view = await createTelephonyConfiguration(
            deps.store,
            deps.cipher,
            {
              orgId,
              name: opts.name,
              provider: opts.provider,
              callerIds: opts.callerId,
              isDefault: Boolean(opts.default),
              callsPerSecond: opts.cps,
              maxConcurrentCalls: opts.maxConcurrent,
              credentials: opts.credentials ? readJsonObjectFile(opts.credentials) : undefined,
              settings: fromFile || Object.keys(fromFlags).length > 0 ? { ...fromFile, ...fromFlags } : undefined,
            },
            deps.clock.now(),
            deps.registry,
          );
          return { json: view, text: formatRecord({ ...view }) };
        },
        async (client, opts, command) => {
          const fromFile = opts.settings ? readJsonObjectFile(opts.settings) : undefined;
          const fromFlags = settingsFromFlags(await registryOf(), opts.provider, command.args);
          const settings = fromFile || Object.keys(fromFlags).length > 0 ? { ...fromFile, ...fromFlags } : undefined;
          const made = await answer(
            client.api.POST('/api/v1/public/telephony-configurations', {
              body: {
                name: opts.name,
                // The service names the providers it knows; one it does not is its 422 to give.
                provider: opts.provider as 'simulator',
                caller_ids: opts.callerId,
                is_default: Boolean(opts.default),
                ...(opts.cps !== undefined ? { calls_per_second: opts.cps } : {}),
                ...(opts.maxConcurrent !== undefined ? { max_concurrent_calls: opts.maxConcurrent } : {}),
                ...(settings ? { settings } : {}),
                ...(opts.credentials ? { credentials: readJsonObjectFile(opts.credentials) } : {}),
              },
            }),
          );
          return { json: made, text: formatRecord(printable(made)) };
        },
        overrides,
      ),
    );
  telephony
    .command('list')
    .description("list an organization's telephony configurations")
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .action(
      dual(
        async (deps, opts: { org?: number }) => {
          const { listTelephonyConfigurations } = await configurations();
          const rows = await listTelephonyConfigurations(deps.store, orgOf(opts));
          return { json: rows, text: formatTable(rows as unknown as Printable[], CONFIGURATION_COLUMNS) };
        },
        async (client) => {
          const { data } = await answer(client.api.GET('/api/v1/public/telephony-configurations'));
          return { json: data, text: formatTable(data as unknown as Printable[], CONFIGURATION_COLUMNS) };
        },
        overrides,
      ),
    );
  telephony
    .command('set-default')
    .description("make an active configuration its organization's default (used when a request names none)")
    .argument('<configuration_id>', 'telephony configuration id', positiveInt)
    .action(
      dual(
        async (deps, id: number) => {
          const { setDefaultTelephonyConfiguration } = await configurations();
          const view = await setDefaultTelephonyConfiguration(deps.store, id, deps.clock.now(), { cipher: deps.cipher, registry: deps.registry });
          return { json: view, text: formatRecord({ ...view }) };
        },
        async (client, id) => {
          const view = await answer(client.api.POST('/api/v1/public/telephony-configurations/{id}/set-default', { params: { path: { id } } }));
          return { json: view, text: formatRecord(printable(view)) };
        },
        overrides,
      ),
    );
  telephony
    .command('disable')
    .description('disable a configuration: new requests can no longer use it, and it stops being the default')
    .argument('<configuration_id>', 'telephony configuration id', positiveInt)
    .action(
      dual(
        async (deps, id: number) => {
          const { disableTelephonyConfiguration } = await configurations();
          const view = await disableTelephonyConfiguration(deps.store, id, deps.clock.now(), { cipher: deps.cipher, registry: deps.registry });
          return { json: view, text: formatRecord({ ...view }) };
        },
        async (client, id) => {
          const view = await answer(client.api.POST('/api/v1/public/telephony-configurations/{id}/disable', { params: { path: { id } } }));
          return { json: view, text: formatRecord(printable(view)) };
        },
        overrides,
      ),
    );
  telephony
    .command('enable')
    .description('enable a disabled configuration: new requests may name it again (it does not become the default)')
    .argument('<configuration_id>', 'telephony configuration id', positiveInt)
    .action(
      dual(
        async (deps, id: number) => {
          const { enableTelephonyConfiguration } = await configurations();
          const view = await enableTelephonyConfiguration(deps.store, id, deps.clock.now(), { cipher: deps.cipher, registry: deps.registry });
          return { json: view, text: formatRecord({ ...view }) };
        },
        async (client, id) => {
          const view = await answer(client.api.POST('/api/v1/public/telephony-configurations/{id}/enable', { params: { path: { id } } }));
          return { json: view, text: formatRecord(printable(view)) };
        },
        overrides,
      ),
    );
  telephony
    .command('update')
    .description('change a configuration: what the options name changes, the rest stays; settings and credentials files are merged into the stored ones (a member set to null is removed)')
    .argument('<configuration_id>', 'telephony configuration id', positiveInt)
    .option('--name <name>', 'configuration name')
    .option('--caller-id <e164>', 'caller ID (repeatable; replaces the stored list)', (value: string, previous: string[] | undefined) => [...(previous ?? []), value])
    .option('--cps <n>', 'calls per second', positiveNumber)
    .option('--max-concurrent <n>', 'maximum concurrent calls', positiveInt)
    .option('--credentials <file>', 'JSON file with the credentials to change (stored encrypted; never taken from flags, which other users can see)')
    .option('--settings <file>', 'JSON file with the settings to change')
    .action(
      dual(
        async (deps, id: number, opts: { name?: string; callerId?: string[]; cps?: number; maxConcurrent?: number; credentials?: string; settings?: string }) => {
          const { updateTelephonyConfiguration } = await configurations();
          const view = await updateTelephonyConfiguration(
            deps.store,
            deps.cipher,
            id,
            {
              ...(opts.name !== undefined ? { name: opts.name } : {}),
              ...(opts.callerId !== undefined ? { callerIds: opts.callerId } : {}),
              ...(opts.cps !== undefined ? { callsPerSecond: opts.cps } : {}),
              ...(opts.maxConcurrent !== undefined ? { maxConcurrentCalls: opts.maxConcurrent } : {}),
              ...(opts.credentials !== undefined ? { credentials: readJsonObjectFile(opts.credentials) } : {}),
              ...(opts.settings !== undefined ? { settings: readJsonObjectFile(opts.settings) } : {}),
            },
            deps.clock.now(),
            { registry: deps.registry },
          );
          return { json: view, text: formatRecord({ ...view }) };
        },
        async (client, id, opts) => {
          const view = await answer(
            client.api.PATCH('/api/v1/public/telephony-configurations/{id}', {
              params: { path: { id } },
              body: {
                ...(opts.name !== undefined ? { name: opts.name } : {}),
                ...(opts.callerId !== undefined ? { caller_ids: opts.callerId } : {}),
                ...(opts.cps !== undefined ? { calls_per_second: opts.cps } : {}),
                ...(opts.maxConcurrent !== undefined ? { max_concurrent_calls: opts.maxConcurrent } : {}),
                ...(opts.credentials !== undefined ? { credentials: readJsonObjectFile(opts.credentials) } : {}),
                ...(opts.settings !== undefined ? { settings: readJsonObjectFile(opts.settings) } : {}),
              },
            }),
          );
          return { json: view, text: formatRecord(printable(view)) };
        },
        overrides,
      ),
    );
}

/** A configuration as the API answers it, printable (its settings and which credentials are set as JSON text). */
function printable(view: Record<string, unknown>): Printable {
  return Object.fromEntries(Object.entries(view).map(([key, value]) => [key, typeof value === 'object' && value !== null && !Array.isArray(value) ? JSON.stringify(value) : value])) as Printable;
}
