// `dialtone org …`: organizations (tenants), their own limits, per-number cap, calling hours and
// retention window. Creating and listing organizations is direct database mode only (an API key
// belongs to one organization); the settings commands also work in remote mode, on the key's own
// organization through GET and PATCH /api/v1/public/organization (scope admin), which records each
// change in the audit log. Values and output: org-settings.ts.
import type { Command } from 'commander';
import type { Dialtone } from '@dialtone/client';
import { readJsonFile, withTimes } from '../action.js';
import { CliError } from '../cli-error.js';
import { formatRecord, formatTable } from '../output.js';
import { limitValue, parsedArgument, positiveInt, type Limit } from '../parsers.js';
import { answer, directOnly, dual } from '../remote.js';
import {
  callingHoursText,
  capColumns,
  directOrgId,
  limitsOf,
  maxCallsValue,
  numberCapChange,
  refuseRemoteOrgId,
  retentionText,
  retentionValue,
  showText,
  storedLimit,
  storedRetention,
  windowValue,
  type ApiSettings,
  type ApiSettingsChange,
  type NumberCapColumns,
} from './org-settings.js';

// Loaded when one of these commands runs (src/cli/README.md).
const organizations = () => import('../../orgs/organizations.js');
// Direct database mode changes settings as the API does (orgs/settings.ts): one transaction that also
// writes the audit log's organization.settings_updated, with the CLI as its actor.
const settingsModule = () => import('../../orgs/settings.js');

const ONE_ORGANIZATION = 'an API key belongs to one organization, and no API creates or lists organizations';
const SETTINGS = '/api/v1/public/organization';

const getSettings = (client: Dialtone): Promise<ApiSettings> => answer(client.api.GET(SETTINGS));
const patchSettings = (client: Dialtone, body: ApiSettingsChange): Promise<ApiSettings> => answer(client.api.PATCH(SETTINGS, { body }));

interface LimitOptions {
  ratePerSecond?: Limit;
  keyRatePerSecond?: Limit;
  maxQueued?: Limit;
  numberMaxCalls?: number | 'off';
  numberWindow?: number | 'off';
}

const limitChanges = (opts: LimitOptions) => ({
  ...(opts.ratePerSecond !== undefined ? { rate_limit_per_second: storedLimit(opts.ratePerSecond) } : {}),
  ...(opts.keyRatePerSecond !== undefined ? { key_rate_limit_per_second: storedLimit(opts.keyRatePerSecond) } : {}),
  ...(opts.maxQueued !== undefined ? { max_queued_runs: storedLimit(opts.maxQueued) } : {}),
});

export function orgCommands(program: Command): void {
  const org = program
    .command('org')
    .description(
      "organizations: their settings (show, set-limits, set-calling-hours, set-retention) in either mode, the API key's own in remote mode; create and list in direct database mode only (org create, then key create --org, bootstraps an installation)",
    );
  org
    .command('create')
    .description('create an organization (a tenant; direct database mode only)')
    .requiredOption('--name <name>', 'organization name')
    .action(
      directOnly(ONE_ORGANIZATION, async (deps, opts: { name: string }) => {
        const { createOrganization } = await organizations();
        const row = await createOrganization(deps.store, opts.name, deps.clock.now());
        return { json: row, text: formatRecord(row) };
      }),
    );

  org
    .command('list')
    .description('list organizations with their own limits (- means the configured default; direct database mode only)')
    .action(
      directOnly(ONE_ORGANIZATION, async (deps) => {
        const { listOrganizations } = await organizations();
        const rows = (await listOrganizations(deps.store)).map((r) => withTimes(r, ['created_at']));
        return { json: rows, text: formatTable(rows, ['id', 'name', 'created_at', 'rate_limit_per_second', 'key_rate_limit_per_second', 'max_queued_runs']) };
      }),
    );

  org
    .command('set-limits')
    .description("set an organization's own limits (docs/api.md, \"Limits\"); \"default\" returns one to the configured value. Direct database mode: set-limits <org_id> [options]; remote mode: set-limits [options]")
    .argument('[org_id]', 'organization id (direct database mode)', positiveInt)
    .option('--rate-per-second <n>', 'requests per second for all its keys together (0: no limit)', limitValue(0))
    .option('--key-rate-per-second <n>', 'requests per second per API key (0: no limit)', limitValue(0))
    .option('--max-queued <n>', 'most runs queued at once', limitValue(1))
    .option('--number-max-calls <n>', 'per-number cap: most runs to one number within --number-window ("off": no cap, the default)', maxCallsValue)
    .option('--number-window <duration>', 'per-number cap: the sliding window, like 30m, 24h or 7d ("off": no cap)', windowValue)
    .action(
      dual(
        async (deps, orgId: number | undefined, opts: LimitOptions) => {
          const id = directOrgId(orgId, 'org set-limits <org_id> [options]');
          const { setOrganizationLimits, showOrganization } = await organizations();
          const stored = await showOrganization(deps.store, id);
          if (!stored) throw new CliError('not_found', `No organization ${id}.`);
          const cap = numberCapChange(stored, opts.numberMaxCalls, opts.numberWindow);
          const { updateOrganizationSettings } = await settingsModule();
          await updateOrganizationSettings(deps.store, id, { ...limitChanges(opts), ...(cap !== undefined ? { number_cap: capSetting(cap) } : {}) }, Date.now());
          const row = await setOrganizationLimits(deps.store, id, {});
          if (!row) throw new CliError('not_found', `No organization ${id}.`);
          return { json: row, text: formatRecord({ ...row }) };
        },
        async (client, orgId: number | undefined, opts: LimitOptions) => {
          refuseRemoteOrgId(orgId, 'org set-limits [options]');
          // A new value of one of the cap's two settings keeps the other: the stored one is read first.
          const touchesCap = opts.numberMaxCalls !== undefined || opts.numberWindow !== undefined;
          const cap = touchesCap ? numberCapChange(capColumns(await getSettings(client)), opts.numberMaxCalls, opts.numberWindow) : undefined;
          const settings = await patchSettings(client, {
            ...limitChanges(opts),
            ...(cap !== undefined ? { number_cap: capSetting(cap) } : {}),
          });
          const row = limitsOf(settings);
          return { json: row, text: formatRecord(row) };
        },
      ),
    );

  org
    .command('show')
    .description(
      'show an organization: its own limits (null: the configured default), per-number cap, calling hours (null: off) and retention window (null: RETENTION_DAYS; 0: kept forever). Direct database mode: show <org_id>; remote mode: show',
    )
    .argument('[org_id]', 'organization id (direct database mode)', positiveInt)
    .action(
      dual(
        async (deps, orgId: number | undefined) => {
          const id = directOrgId(orgId, 'org show <org_id>');
          const { showOrganization } = await organizations();
          const row = await showOrganization(deps.store, id);
          if (!row) throw new CliError('not_found', `No organization ${id}.`);
          const shown = withTimes(row, ['created_at']);
          return { json: shown, text: formatRecord(showText({ ...shown, calling_hours: row.calling_hours, retention_days: row.retention_days }, deps.config.RETENTION_DAYS)) };
        },
        async (client, orgId: number | undefined) => {
          refuseRemoteOrgId(orgId, 'org show');
          const settings = await getSettings(client);
          // The members direct database mode prints, but created_at, which the API does not give.
          const row = { ...limitsOf(settings), calling_hours: settings.calling_hours, retention_days: settings.retention_days };
          return { json: row, text: formatRecord(showText(row, settings.defaults.retention_days)) };
        },
      ),
    );

  org
    .command('set-retention')
    .description(
      "set how long an organization's ended runs are kept (docs/operations.md, \"Retention\"): days, \"off\" to keep them forever, or \"default\" for RETENTION_DAYS. Direct database mode: set-retention <org_id> <days>; remote mode: set-retention <days>",
    )
    .argument('<org_id_or_days>', 'organization id (direct database mode), else the days')
    .argument('[days]', 'whole days from 1 to 36500, "off" or "default", after the organization id in direct database mode')
    .action(
      dual(
        async (deps, first: string, second: string | undefined) => {
          if (second === undefined) throw new CliError('invalid_input', 'Direct database mode names the organization: dialtone org set-retention <org_id> <days>.');
          const id = parsedArgument(positiveInt, first, 'organization id');
          const days = parsedArgument(retentionValue, second, 'days');
          const { showOrganization } = await organizations();
          const { updateOrganizationSettings } = await settingsModule();
          await updateOrganizationSettings(deps.store, id, { retention_days: storedRetention(days) }, Date.now());
          const retention = (await showOrganization(deps.store, id))?.retention_days ?? null;
          return { json: { id, retention_days: retention }, text: `Retention of organization ${id}: ${retentionText(retention, deps.config.RETENTION_DAYS)}.` };
        },
        async (client, first: string, second: string | undefined) => {
          refuseRemoteOrgId(second, 'org set-retention <days>');
          const days = parsedArgument(retentionValue, first, 'days');
          const settings = await patchSettings(client, { retention_days: storedRetention(days) });
          return {
            json: { id: settings.id, retention_days: settings.retention_days },
            text: `Retention of organization ${settings.id}: ${retentionText(settings.retention_days, settings.defaults.retention_days)}.`,
          };
        },
      ),
    );

  org
    .command('set-calling-hours')
    .description(
      "set an organization's calling hours in the callee's local time from a JSON file (docs/calling-policy.md, \"Calling hours\"), or turn them off. Direct database mode: set-calling-hours <org_id> --file|--off; remote mode: set-calling-hours --file|--off",
    )
    .argument('[org_id]', 'organization id (direct database mode)', positiveInt)
    .option('--file <path>', 'JSON file: { "timezone", "outside": "defer" | "refuse", "windows": { "mon": ["09:00-17:00"], … } }')
    .option('--off', 'turn calling hours off')
    .action(
      dual(
        async (deps, orgId: number | undefined, opts: { file?: string; off?: boolean }) => {
          const id = directOrgId(orgId, 'org set-calling-hours <org_id> --file <path> | --off');
          const setting = callingHoursSetting(opts);
          const { showOrganization } = await organizations();
          const { updateOrganizationSettings } = await settingsModule();
          // Checked there: every problem listed under /calling_hours, as the API lists them.
          await updateOrganizationSettings(deps.store, id, { calling_hours: setting }, Date.now());
          const hours = (await showOrganization(deps.store, id))?.calling_hours ?? null;
          return { json: { id, calling_hours: hours }, text: callingHoursText(id, hours) };
        },
        async (client, orgId: number | undefined, opts: { file?: string; off?: boolean }) => {
          refuseRemoteOrgId(orgId, 'org set-calling-hours --file <path> | --off');
          // The file as it is: the service checks it and lists every problem (under /calling_hours).
          const setting = callingHoursSetting(opts) as ApiSettings['calling_hours'];
          const settings = await patchSettings(client, { calling_hours: setting });
          return { json: { id: settings.id, calling_hours: settings.calling_hours }, text: callingHoursText(settings.id, settings.calling_hours) };
        },
      ),
    );
}

/** The per-number cap's two columns as the settings' number_cap (null: off). */
function capSetting(cap: NumberCapColumns): { max_calls: number; window_seconds: number } | null {
  return cap.number_max_calls === null || cap.number_window_seconds === null ? null : { max_calls: cap.number_max_calls, window_seconds: cap.number_window_seconds };
}

/** The calling hours `--file` holds, or null for `--off`: exactly one of the two. */
function callingHoursSetting(opts: { file?: string; off?: boolean }): unknown {
  if ((opts.file === undefined) === (opts.off === undefined)) throw new CliError('invalid_input', 'Give exactly one of --file <path> and --off.');
  return opts.file !== undefined ? readJsonFile(opts.file) : null;
}
