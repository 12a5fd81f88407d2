// `dialtone`: administration from the shell, on the same store and dependencies as the service.
// Every command prints readable text by default and JSON with --json.
import { readFileSync } from 'node:fs';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { createApiKey, listApiKeys, revokeApiKey } from '../auth/api-keys.js';
import { loadConfig } from '../config.js';
import { buildDeps, type Deps } from '../deps.js';
import { establishSecretKey } from '../secret-key.js';
import ms from 'ms';
import { createReadStream } from 'node:fs';
import { createOrganization, listOrganizations, organizationExists, setCallingHours, setOrganizationLimits, showOrganization, type LimitChanges } from '../orgs/organizations.js';
import { getSuppression, importLimitsOf, importSuppressions, listSuppressions, putSuppression, removeSuppression, type SuppressionContext, type SuppressionView } from '../policy/suppressions.js';
import { cancelRun } from '../runs/cancel-run.js';
import { getRun, iso, listRunEvents, listRuns } from '../runs/read-run.js';
import { isTerminal } from '../runs/states.js';
import { migrateToLatest } from '../store/schema/migrate.js';
import {
  createTelephonyConfiguration,
  disableTelephonyConfiguration,
  listTelephonyConfigurations,
  setDefaultTelephonyConfiguration,
} from '../telephony/configurations.js';
import { archiveWorkflow, createWorkflow, getDefinition, listWorkflows, publishDraft, saveDraft, showWorkflow } from '../workflows/workflows.js';
import { isWebhookEventType, WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../webhooks/event-types.js';
import {
  createEndpoint,
  listDeliveries,
  listEndpoints,
  patchEndpoint,
  removeEndpoint,
  retryDelivery,
  rotateSecret,
  sendTestMessage,
  type EndpointView,
  type WebhookContext,
} from '../webhooks/endpoints.js';
import { campaignCommands } from './campaigns.js';
import { CliError, reportFailure } from './errors.js';
import { formatRecord, formatTable, type Printable } from './output.js';

function positiveInt(text: string): number {
  if (!/^[1-9][0-9]{0,14}$/.test(text)) throw new InvalidArgumentError('expected a positive whole number');
  return Number(text);
}

/** A limit: a whole number from `min`, or `default` for the service-wide value. */
function limitValue(min: number) {
  return (text: string): number | 'default' => {
    if (text === 'default') return 'default';
    if (!/^[0-9]{1,15}$/.test(text) || Number(text) < min) throw new InvalidArgumentError(`expected a whole number from ${min}, or "default"`);
    return Number(text);
  };
}

type Limit = number | 'default';
/** "default" is stored as null (commander turns a parser's null into an empty string, hence the word). */
const storedLimit = (limit: Limit): number | null => (limit === 'default' ? null : limit);

/** The per-number cap's window: a duration like 30m, 24h or 7d, in whole seconds, at most a year; or "off". */
function windowValue(text: string): number | 'off' {
  if (text === 'off') return 'off';
  const duration = /^[0-9]+(\.[0-9]+)?\s*[a-z]+$/i.test(text) ? ms(text as ms.StringValue) : Number.NaN;
  if (!Number.isFinite(duration) || duration < 1000 || duration % 1000 !== 0 || duration > 366 * 24 * 3600 * 1000) {
    throw new InvalidArgumentError('expected a duration of whole seconds up to a year, like 90s, 30m, 24h or 7d, or "off"');
  }
  return duration / 1000;
}

function maxCallsValue(text: string): number | 'off' {
  if (text === 'off') return 'off';
  if (!/^[1-9][0-9]{0,8}$/.test(text)) throw new InvalidArgumentError('expected a whole number from 1, or "off"');
  return Number(text);
}

/**
 * The per-number cap after a change: both settings or neither. "off" for either turns it off; a
 * new value keeps the other stored one. Refuses a cap left half set.
 */
function numberCapChanges(
  stored: { number_max_calls: number | null; number_window_seconds: number | null },
  maxCalls: number | 'off' | undefined,
  window: number | 'off' | undefined,
): LimitChanges {
  if (maxCalls === undefined && window === undefined) return {};
  if (maxCalls === 'off' || window === 'off') return { number_max_calls: null, number_window_seconds: null };
  const next = { number_max_calls: maxCalls ?? stored.number_max_calls, number_window_seconds: window ?? stored.number_window_seconds };
  if (next.number_max_calls === null || next.number_window_seconds === null) {
    throw new CliError('invalid_input', 'The per-number cap needs both --number-max-calls and --number-window (or "off" to turn it off).');
  }
  return next;
}

function suppressionContext(deps: Deps): SuppressionContext {
  return { store: deps.store, clock: deps.clock };
}

const suppressionColumns = ['phone_number', 'reason', 'expires_at', 'active', 'created_at'];
const suppressionRecord = (view: SuppressionView): Printable => ({ ...view });

function nonNegativeInt(text: string): number {
  if (!/^[0-9]{1,15}$/.test(text)) throw new InvalidArgumentError('expected a whole number from 0');
  return Number(text);
}

function positiveNumber(text: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) throw new InvalidArgumentError('expected a number above 0');
  return value;
}

function eventTypes(text: string): WebhookEventType[] {
  const types = text.split(',').map((t) => t.trim()).filter((t) => t !== '');
  const unknown = types.filter((t) => !isWebhookEventType(t));
  if (unknown.length > 0) throw new InvalidArgumentError(`unknown event type ${unknown.join(', ')}; expected some of ${WEBHOOK_EVENT_TYPES.join(', ')}`);
  return types as WebhookEventType[];
}

function deliveryStatus(text: string): 'pending' | 'succeeded' | 'failed' {
  if (text !== 'pending' && text !== 'succeeded' && text !== 'failed') throw new InvalidArgumentError('expected pending, succeeded or failed');
  return text;
}

/** An endpoint as one record, its subscribed types on one line. */
function endpointRecord(view: EndpointView): Printable {
  return { ...view, events: view.events.join(',') || '(all)' };
}

/** The CLI's view of webhooks: a running service's delivery worker finds what it queues by polling. */
function webhookContext(deps: Deps): WebhookContext {
  return { store: deps.store, cipher: deps.cipher, clock: deps.clock, config: deps.config, wake: () => undefined };
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function readJsonFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new CliError('invalid_input', `Cannot read ${path}: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new CliError('invalid_input', `${path} is not valid JSON: ${(error as Error).message}`);
  }
}

interface Output {
  json: unknown;
  text: string;
  /** Print the JSON on one line (after NDJSON lines already printed: `campaign status --watch`). */
  compact?: boolean;
}

/** Opens the store (migrating it), runs one command, prints its result, closes the store. */
function action<A extends unknown[]>(run: (deps: Deps, ...args: A) => Promise<Output>) {
  return async (...args: A) => {
    const command = args[args.length - 1] as Command;
    const json = Boolean(command.optsWithGlobals().json);
    const deps = buildDeps(loadConfig(), {});
    try {
      await migrateToLatest(deps.store);
      // As the service does at start-up: a key generated here is the one it reads later.
      await establishSecretKey(deps);
      const out = await run(deps, ...args);
      process.stdout.write(`${json ? JSON.stringify(out.json, null, out.compact ? undefined : 2) : out.text}\n`);
    } finally {
      await deps.store.close();
    }
  };
}

async function requireOrg(deps: Deps, orgId: number): Promise<void> {
  if (!(await organizationExists(deps.store, orgId))) throw new CliError('not_found', `No organization ${orgId}.`);
}

const withTimes = <T extends Record<string, unknown>>(row: T, keys: string[]): Printable => {
  const out: Printable = { ...row };
  for (const key of keys) if (typeof out[key] === 'number') out[key] = iso(out[key] as number);
  return out;
};

export function buildCli(options: { json?: boolean } = {}): Command {
  const program = new Command('dialtone')
    .description('Dialtone: outbound call initiation service')
    .option('--json', 'print machine-readable JSON (errors too, as {"error":{"code","message"}} on stderr)')
    // Usage errors are thrown, not exited on, so runCli reports every failure one way. With --json
    // commander stays silent and runCli prints the JSON; subcommands inherit both settings.
    .exitOverride()
    .configureOutput(options.json ? { writeErr: () => undefined, outputError: () => undefined } : {});
  if (!options.json) program.showHelpAfterError();

  program
    .command('serve')
    .description('start the service (what `npm start` runs)')
    .action(async () => {
      const { main } = await import('../server.js');
      await main();
    });

  program
    .command('migrate')
    .description('apply database migrations')
    .action(async (_opts: unknown, command: Command) => {
      const deps = buildDeps(loadConfig());
      try {
        const applied = await migrateToLatest(deps.store);
        const json = Boolean(command.optsWithGlobals().json);
        process.stdout.write(json ? `${JSON.stringify({ applied })}\n` : `${applied.length ? `Applied ${applied.join(', ')}` : 'Already up to date'}\n`);
      } finally {
        await deps.store.close();
      }
    });

  const org = program.command('org').description('organizations');
  org
    .command('create')
    .description('create an organization (a tenant)')
    .requiredOption('--name <name>', 'organization name')
    .action(
      action(async (deps, opts: { name: string }) => {
        const row = await createOrganization(deps.store, opts.name, deps.clock.now());
        return { json: row, text: formatRecord(row) };
      }),
    );

  org
    .command('list')
    .description('list organizations with their own limits (- means the configured default)')
    .action(
      action(async (deps) => {
        const rows = (await listOrganizations(deps.store)).map((r) => withTimes(r, ['created_at']));
        return { json: rows, text: formatTable(rows, ['id', 'name', 'created_at', 'rate_limit_per_second', 'key_rate_limit_per_second', 'max_queued_runs']) };
      }),
    );

  org
    .command('set-limits')
    .description("set an organization's own limits (docs/api.md, \"Limits\"); \"default\" returns one to the configured value")
    .argument('<org_id>', 'organization id', positiveInt)
    .option('--rate-per-second <n>', 'requests per second for all its keys together (0: no limit)', limitValue(0))
    .option('--key-rate-per-second <n>', 'requests per second per API key (0: no limit)', limitValue(0))
    .option('--max-queued <n>', 'most runs queued at once', limitValue(1))
    .option('--number-max-calls <n>', 'per-number cap: most runs to one number within --number-window ("off": no cap, the default)', maxCallsValue)
    .option('--number-window <duration>', 'per-number cap: the sliding window, like 30m, 24h or 7d ("off": no cap)', windowValue)
    .action(
      action(
        async (
          deps,
          id: number,
          opts: { ratePerSecond?: Limit; keyRatePerSecond?: Limit; maxQueued?: Limit; numberMaxCalls?: number | 'off'; numberWindow?: number | 'off' },
        ) => {
          const stored = await showOrganization(deps.store, id);
          if (!stored) throw new CliError('not_found', `No organization ${id}.`);
          const row = await setOrganizationLimits(deps.store, id, {
            ...(opts.ratePerSecond !== undefined ? { rate_limit_per_second: storedLimit(opts.ratePerSecond) } : {}),
            ...(opts.keyRatePerSecond !== undefined ? { key_rate_limit_per_second: storedLimit(opts.keyRatePerSecond) } : {}),
            ...(opts.maxQueued !== undefined ? { max_queued_runs: storedLimit(opts.maxQueued) } : {}),
            ...numberCapChanges(stored, opts.numberMaxCalls, opts.numberWindow),
          });
          if (!row) throw new CliError('not_found', `No organization ${id}.`);
          return { json: row, text: formatRecord({ ...row }) };
        },
      ),
    );

  org
    .command('show')
    .description('show an organization: its own limits (null: the configured default), per-number cap and calling hours (null: off)')
    .argument('<org_id>', 'organization id', positiveInt)
    .action(
      action(async (deps, id: number) => {
        const row = await showOrganization(deps.store, id);
        if (!row) throw new CliError('not_found', `No organization ${id}.`);
        const shown = withTimes(row, ['created_at']);
        return { json: shown, text: formatRecord({ ...shown, calling_hours: row.calling_hours === null ? 'off' : JSON.stringify(row.calling_hours) }) };
      }),
    );

  org
    .command('set-calling-hours')
    .description("set an organization's calling hours in the callee's local time from a JSON file (docs/calling-policy.md, \"Calling hours\"), or turn them off")
    .argument('<org_id>', 'organization id', positiveInt)
    .option('--file <path>', 'JSON file: { "timezone", "outside": "defer" | "refuse", "windows": { "mon": ["09:00-17:00"], … } }')
    .option('--off', 'turn calling hours off')
    .action(
      action(async (deps, id: number, opts: { file?: string; off?: boolean }) => {
        if ((opts.file === undefined) === (opts.off === undefined)) throw new CliError('invalid_input', 'Give exactly one of --file <path> and --off.');
        const setting = opts.file !== undefined ? readJsonFile(opts.file) : null;
        if (!(await setCallingHours(deps.store, id, setting))) throw new CliError('not_found', `No organization ${id}.`);
        const row = await showOrganization(deps.store, id);
        const json = { id, calling_hours: row?.calling_hours ?? null };
        return { json, text: row?.calling_hours ? `Calling hours of organization ${id} set: ${JSON.stringify(row.calling_hours)}` : `Calling hours of organization ${id} are off.` };
      }),
    );

  const key = program.command('key').description('API keys');
  key
    .command('create')
    .description('create an API key; the secret is printed once')
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .requiredOption('--name <name>', 'key name')
    .action(
      action(async (deps, opts: { org: number; name: string }) => {
        await requireOrg(deps, opts.org);
        const created = await createApiKey(deps.store, opts.org, opts.name, deps.clock.now());
        const json = { id: created.id, prefix: created.prefix, key: created.key };
        return { json, text: `${formatRecord(json)}\n\nStore the key now: it is not shown again.` };
      }),
    );
  key
    .command('list')
    .description("list an organization's API keys (prefixes, never secrets)")
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .action(
      action(async (deps, opts: { org: number }) => {
        const rows = (await listApiKeys(deps.store, opts.org)).map((r) => withTimes(r, ['created_at', 'last_used_at', 'revoked_at']));
        return { json: rows, text: formatTable(rows, ['id', 'name', 'prefix', 'created_at', 'last_used_at', 'revoked_at']) };
      }),
    );
  key
    .command('revoke')
    .description('revoke an API key: its requests are refused from now on')
    .argument('<key_id>', 'API key id', positiveInt)
    .action(
      action(async (deps, keyId: number) => {
        if (!(await revokeApiKey(deps.store, keyId, deps.clock.now()))) throw new CliError('not_found', `No API key ${keyId}.`);
        return { json: { id: keyId, revoked: true }, text: `Revoked key ${keyId}.` };
      }),
    );

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
        const view = await disableTelephonyConfiguration(deps.store, id, deps.clock.now());
        return { json: view, text: formatRecord({ ...view }) };
      }),
    );

  const workflow = program.command('workflow').description('workflows (agents) and their versions');
  workflow
    .command('list')
    .description("list an organization's workflows with their published and draft versions")
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .action(
      action(async (deps, opts: { org: number }) => {
        const rows = (await listWorkflows(deps.store, opts.org)).map((r) => withTimes({ ...r }, ['created_at', 'updated_at']));
        return { json: rows, text: formatTable(rows, ['workflow_uuid', 'name', 'status', 'published_version', 'draft_version', 'agent_uuids', 'updated_at']) };
      }),
    );
  workflow
    .command('create')
    .description('create a workflow (agent) whose definition becomes published version 1')
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .requiredOption('--name <name>', 'workflow name')
    .requiredOption('--definition <file>', 'definition JSON file; becomes published version 1')
    .action(
      action(async (deps, opts: { org: number; name: string; definition: string }) => {
        await requireOrg(deps, opts.org);
        const summary = await createWorkflow(deps.store, { orgId: opts.org, name: opts.name, definition: readJsonFile(opts.definition) }, deps.clock.now());
        return { json: summary, text: formatRecord({ ...summary }) };
      }),
    );
  workflow
    .command('save-draft')
    .description("save a new draft version; trigger nodes without trigger_uuid keep their agent UUID")
    .argument('<workflow_uuid>', 'workflow UUID')
    .requiredOption('--definition <file>', 'definition JSON file')
    .action(
      action(async (deps, uuid: string, opts: { definition: string }) => {
        const summary = await saveDraft(deps.store, uuid, readJsonFile(opts.definition), deps.clock.now());
        return { json: summary, text: formatRecord({ ...summary }) };
      }),
    );
  workflow
    .command('publish')
    .description('publish the draft; the previous published version is archived (runs keep theirs)')
    .argument('<workflow_uuid>', 'workflow UUID')
    .action(
      action(async (deps, uuid: string) => {
        const summary = await publishDraft(deps.store, uuid, deps.clock.now());
        return { json: summary, text: formatRecord({ ...summary }) };
      }),
    );
  workflow
    .command('archive')
    .description('archive a workflow: its agent UUIDs stop answering')
    .argument('<workflow_uuid>', 'workflow UUID')
    .action(
      action(async (deps, uuid: string) => {
        await archiveWorkflow(deps.store, uuid, deps.clock.now());
        return { json: { workflow_uuid: uuid, status: 'archived' }, text: `Archived workflow ${uuid}.` };
      }),
    );
  workflow
    .command('show')
    .description("show a workflow and its versions, or with --definition one version's definition")
    .argument('<workflow_uuid>', 'workflow UUID')
    .option('--definition', 'print the definition JSON (text mode prints it bare, ready to edit and save-draft)')
    .option('--version <n>', 'with --definition: which version (default: the draft, else the published one)', positiveInt)
    .action(
      action(async (deps, uuid: string, opts: { definition?: boolean; version?: number }) => {
        if (opts.definition) {
          const shown = await getDefinition(deps.store, uuid, opts.version);
          return { json: shown, text: JSON.stringify(shown.definition, null, 2) };
        }
        if (opts.version !== undefined) throw new CliError('invalid_input', '--version needs --definition.');
        const details = await showWorkflow(deps.store, uuid);
        const versions = details.definitions.map((d) => withTimes(d, ['created_at', 'published_at']));
        return {
          json: { ...details, definitions: versions },
          text: `${formatRecord({ workflow_uuid: details.workflow_uuid, org_id: details.org_id, name: details.name, status: details.status })}\n\n${formatTable(versions, ['version', 'status', 'created_at', 'published_at', 'agent_uuids'])}`,
        };
      }),
    );

  const run = program.command('run').description('workflow runs');
  run
    .command('show')
    .description('show a run: state, outcome, timestamps')
    .argument('<run_id>', 'run id', positiveInt)
    .action(
      action(async (deps, runId: number) => {
        const view = await getRun(deps.store, undefined, runId);
        return { json: view, text: formatRecord({ ...view }) };
      }),
    );
  run
    .command('events')
    .description("list a run's events in order")
    .argument('<run_id>', 'run id', positiveInt)
    .option('--after <seq>', 'only events after this seq', nonNegativeInt, 0)
    .action(
      action(async (deps, runId: number, opts: { after: number }) => {
        const page = await listRunEvents(deps.store, undefined, runId, opts.after, 1000);
        return {
          json: page.data,
          text: formatTable(page.data.map((e) => ({ ...e, data: Object.keys(e.data).length ? e.data : null })), ['seq', 'type', 'at', 'data']),
        };
      }),
    );
  run
    .command('cancel')
    .description('cancel a run: a queued run at once; a live call is ended by the node holding it')
    .argument('<run_id>', 'run id', positiveInt)
    .action(
      action(async (deps, runId: number) => {
        const view = await cancelRun(deps, undefined, runId);
        const note = isTerminal(view.state) ? '' : '\n\nCancel requested: the node holding the call ends it shortly (run show to follow).';
        return { json: view, text: `${formatRecord({ ...view })}${note}` };
      }),
    );
  run
    .command('list')
    .description("list an organization's runs, newest first")
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .option('--limit <n>', 'how many, newest first', positiveInt, 20)
    .action(
      action(async (deps, opts: { org: number; limit: number }) => {
        const rows = await listRuns(deps.store, opts.org, Math.min(opts.limit, 1000));
        return { json: rows, text: formatTable(rows as unknown as Printable[], ['id', 'name', 'state', 'mode', 'phone_number', 'definition_version', 'created_at']) };
      }),
    );

  const suppression = program.command('suppression').description("an organization's suppression (do-not-call) list");
  suppression
    .command('add')
    .description('suppress a number (or replace its reason and expiry): calls to it are refused, and queued runs to it end canceled')
    .argument('<phone_number>', 'the number, E.164 (+12025550123)')
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .option('--reason <text>', 'free text for your own reference')
    .option('--expires-at <time>', 'when it may be called again (RFC 3339, e.g. 2027-01-31T00:00:00Z); default: never')
    .action(
      action(async (deps, phoneNumber: string, opts: { org: number; reason?: string; expiresAt?: string }) => {
        await requireOrg(deps, opts.org);
        const view = await putSuppression(suppressionContext(deps), opts.org, phoneNumber, { reason: opts.reason ?? null, expires_at: opts.expiresAt ?? null });
        return { json: view, text: formatRecord(suppressionRecord(view)) };
      }),
    );
  suppression
    .command('remove')
    .description('remove a number from the suppression list')
    .argument('<phone_number>', 'the number, E.164')
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .action(
      action(async (deps, phoneNumber: string, opts: { org: number }) => {
        await requireOrg(deps, opts.org);
        const ctx = suppressionContext(deps);
        const view = await getSuppression(ctx, opts.org, phoneNumber);
        await removeSuppression(ctx, opts.org, phoneNumber);
        return { json: { removed: view.phone_number }, text: `Removed ${view.phone_number}` };
      }),
    );
  suppression
    .command('list')
    .description("list an organization's suppressions in number order (expired ones too)")
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .option('--after <phone_number>', 'start after this number (the previous page\'s next_after)')
    .option('--limit <n>', 'page size, 1 to 1000', limitValue(1), 100)
    .action(
      action(async (deps, opts: { org: number; after?: string; limit: Limit }) => {
        await requireOrg(deps, opts.org);
        const limit = opts.limit === 'default' ? 100 : Math.min(1000, opts.limit);
        const page = await listSuppressions(suppressionContext(deps), opts.org, { after: opts.after, limit });
        const more = page.next_after === null ? '' : `\n(more: --after ${page.next_after})`;
        return { json: page, text: `${formatTable(page.data.map(suppressionRecord), suppressionColumns)}${more}` };
      }),
    );
  suppression
    .command('import')
    .description('suppress every number of a CSV file (header row with a phone_number column; optional reason, expires_at)')
    .argument('<file>', 'the CSV file')
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .action(
      action(async (deps, file: string, opts: { org: number }) => {
        await requireOrg(deps, opts.org);
        const input = createReadStream(file);
        const opened = new Promise<void>((resolve, reject) => {
          input.once('open', () => resolve());
          input.once('error', (error) => reject(new CliError('not_found', `Cannot read ${file}: ${error.message}`)));
        });
        await opened;
        const result = await importSuppressions(suppressionContext(deps), opts.org, input, importLimitsOf(deps.config));
        const invalid = result.invalid.map((i) => `  line ${i.line}: ${i.detail}`).join('\n');
        return {
          json: result,
          text: `Imported ${result.imported} numbers; ${result.invalid_count} invalid lines skipped${invalid ? `:\n${invalid}` : ''}`,
        };
      }),
    );

  const webhook = program.command('webhook').description('webhook endpoints and their deliveries');
  const endpointColumns = ['id', 'url', 'events', 'enabled', 'disabled_reason', 'description', 'created_at'];
  webhook
    .command('create')
    .description('register a webhook endpoint; prints its signing secret (shown only here and on rotation)')
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .requiredOption('--url <url>', 'where messages are POSTed (https, public addresses only unless WEBHOOK_ALLOW_PRIVATE_NETWORKS)')
    .option('--events <types>', `comma-separated types (default: all): ${WEBHOOK_EVENT_TYPES.join(', ')}`, eventTypes)
    .option('--description <text>', 'free text for your own reference')
    .action(
      action(async (deps, opts: { org: number; url: string; events?: WebhookEventType[]; description?: string }) => {
        await requireOrg(deps, opts.org);
        const created = await createEndpoint(webhookContext(deps), opts.org, { url: opts.url, events: opts.events, description: opts.description ?? null });
        return { json: created, text: `${formatRecord(endpointRecord(created))}\n\nKeep the secret: it is not shown again (rotate-secret makes a new one).` };
      }),
    );
  webhook
    .command('list')
    .description("list an organization's webhook endpoints")
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .action(
      action(async (deps, opts: { org: number }) => {
        await requireOrg(deps, opts.org);
        const rows = await listEndpoints(webhookContext(deps), opts.org);
        return { json: rows, text: formatTable(rows.map(endpointRecord), endpointColumns) };
      }),
    );
  webhook
    .command('deliveries')
    .description("list an endpoint's deliveries, newest first, with their attempts")
    .argument('<endpoint_id>', 'webhook endpoint id', positiveInt)
    .option('--status <status>', 'pending, succeeded or failed', deliveryStatus)
    .option('--limit <n>', 'how many (at most 100)', positiveInt, 20)
    .option('--after <id>', 'deliveries older than this id (the next_after of the previous page)', positiveInt)
    .action(
      action(async (deps, endpointId: number, opts: { status?: 'pending' | 'succeeded' | 'failed'; limit: number; after?: number }) => {
        const page = await listDeliveries(webhookContext(deps), undefined, endpointId, { status: opts.status, after: opts.after, limit: Math.min(opts.limit, 100) });
        const rows = page.data.map((d) => {
          const last = d.attempts[d.attempts.length - 1];
          return { id: d.id, event_type: d.event_type, run_id: d.run_id, status: d.status, attempts: d.attempts.length, last_result: last ? (last.http_status ?? last.error) : null, next_attempt_at: d.next_attempt_at };
        });
        return { json: page, text: formatTable(rows, ['id', 'event_type', 'run_id', 'status', 'attempts', 'last_result', 'next_attempt_at']) };
      }),
    );
  webhook
    .command('retry')
    .description('queue a succeeded or failed delivery again, now')
    .argument('<endpoint_id>', 'webhook endpoint id', positiveInt)
    .argument('<delivery_id>', 'delivery id', positiveInt)
    .action(
      action(async (deps, endpointId: number, deliveryId: number) => {
        const result = await retryDelivery(webhookContext(deps), undefined, endpointId, deliveryId);
        return { json: result, text: `Delivery ${deliveryId} queued again; a running service sends it within WEBHOOK_POLL_INTERVAL_MS.` };
      }),
    );
  for (const [name, enabled] of [['enable', true], ['disable', false]] as const) {
    webhook
      .command(name)
      .description(enabled ? 'enable an endpoint (its pending deliveries go out again)' : 'disable an endpoint (nothing is sent to it until it is enabled)')
      .argument('<endpoint_id>', 'webhook endpoint id', positiveInt)
      .action(
        action(async (deps, endpointId: number) => {
          const view = await patchEndpoint(webhookContext(deps), undefined, endpointId, { enabled });
          return { json: view, text: formatRecord(endpointRecord(view)) };
        }),
      );
  }
  webhook
    .command('rotate-secret')
    .description('make a new signing secret; the old one keeps signing beside it for WEBHOOK_SECRET_OVERLAP_MS')
    .argument('<endpoint_id>', 'webhook endpoint id', positiveInt)
    .action(
      action(async (deps, endpointId: number) => {
        const result = await rotateSecret(webhookContext(deps), undefined, endpointId);
        return { json: result, text: `New secret: ${result.secret}\nKeep it: it is not shown again.` };
      }),
    );
  webhook
    .command('test')
    .description('send a webhook.test message to an endpoint')
    .argument('<endpoint_id>', 'webhook endpoint id', positiveInt)
    .action(
      action(async (deps, endpointId: number) => {
        const result = await sendTestMessage(webhookContext(deps), undefined, endpointId);
        return { json: result, text: `Queued delivery ${result.delivery_id} (${result.message_id}).` };
      }),
    );
  webhook
    .command('delete')
    .description('delete an endpoint with its deliveries (pending ones are never sent)')
    .argument('<endpoint_id>', 'webhook endpoint id', positiveInt)
    .action(
      action(async (deps, endpointId: number) => {
        await removeEndpoint(webhookContext(deps), undefined, endpointId);
        return { json: { id: endpointId, deleted: true }, text: `Deleted webhook endpoint ${endpointId}.` };
      }),
    );

  campaignCommands(program, {
    action,
    positiveInt,
    positiveNumber,
    readJsonFile,
    requireOrg,
    wantsJson: (command) => Boolean(command.optsWithGlobals().json),
  });

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
    return reportFailure(error, json);
  }
}
