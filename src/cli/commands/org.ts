// `dialtone org …`: organizations (tenants), their own limits, per-number cap and calling hours.
import { InvalidArgumentError, type Command } from 'commander';
import ms from 'ms';
import type { LimitChanges } from '../../orgs/organizations.js';
import { readJsonFile, withTimes } from '../action.js';
import { directOnly } from '../remote.js';
import { CliError } from '../cli-error.js';
import { formatRecord, formatTable } from '../output.js';
import { limitValue, positiveInt, type Limit } from '../parsers.js';

// Loaded when one of these commands runs (src/cli/README.md).
const organizations = () => import('../../orgs/organizations.js');

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

/** A retention window: whole days from 1 to 36500, "off" (keep forever) or "default" (RETENTION_DAYS). */
function retentionValue(text: string): number | 'off' | 'default' {
  if (text === 'off' || text === 'default') return text;
  if (!/^[1-9][0-9]{0,4}$/.test(text) || Number(text) > 36_500) throw new InvalidArgumentError('expected whole days from 1 to 36500, "off" (keep forever) or "default" (RETENTION_DAYS)');
  return Number(text);
}

/** How an organization's own retention column reads: its days, off (kept forever), or the configured default. */
function retentionText(days: number | null, configured: number): string {
  if (days === null) return configured === 0 ? 'default (RETENTION_DAYS=0: kept forever)' : `default (RETENTION_DAYS=${configured} days)`;
  return days === 0 ? 'off (kept forever)' : `${days} days`;
}

export function orgCommands(program: Command): void {
  const org = program.command('org').description('organizations (direct database mode: org create, then key create --org, bootstraps an installation)');
  org
    .command('create')
    .description('create an organization (a tenant)')
    .requiredOption('--name <name>', 'organization name')
    .action(
      directOnly(async (deps, opts: { name: string }) => {
        const { createOrganization } = await organizations();
        const row = await createOrganization(deps.store, opts.name, deps.clock.now());
        return { json: row, text: formatRecord(row) };
      }),
    );

  org
    .command('list')
    .description('list organizations with their own limits (- means the configured default)')
    .action(
      directOnly(async (deps) => {
        const { listOrganizations } = await organizations();
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
      directOnly(
        async (
          deps,
          id: number,
          opts: { ratePerSecond?: Limit; keyRatePerSecond?: Limit; maxQueued?: Limit; numberMaxCalls?: number | 'off'; numberWindow?: number | 'off' },
        ) => {
          const { setOrganizationLimits, showOrganization } = await organizations();
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
    .description('show an organization: its own limits (null: the configured default), per-number cap, calling hours (null: off) and retention window (null: RETENTION_DAYS; 0: kept forever)')
    .argument('<org_id>', 'organization id', positiveInt)
    .action(
      directOnly(async (deps, id: number) => {
        const { showOrganization } = await organizations();
        const row = await showOrganization(deps.store, id);
        if (!row) throw new CliError('not_found', `No organization ${id}.`);
        const shown = withTimes(row, ['created_at']);
        return {
          json: shown,
          text: formatRecord({
            ...shown,
            calling_hours: row.calling_hours === null ? 'off' : JSON.stringify(row.calling_hours),
            retention_days: retentionText(row.retention_days, deps.config.RETENTION_DAYS),
          }),
        };
      }),
    );

  org
    .command('set-retention')
    .description("set how long an organization's ended runs are kept (docs/operations.md, \"Retention\"): days, \"off\" to keep them forever, or \"default\" for RETENTION_DAYS")
    .argument('<org_id>', 'organization id', positiveInt)
    .argument('<days>', 'whole days from 1 to 36500, "off" or "default"', retentionValue)
    .action(
      directOnly(async (deps, id: number, days: number | 'off' | 'default') => {
        const { setRetention, showOrganization } = await organizations();
        if (!(await setRetention(deps.store, id, days))) throw new CliError('not_found', `No organization ${id}.`);
        const row = await showOrganization(deps.store, id);
        const retention = row?.retention_days ?? null;
        return { json: { id, retention_days: retention }, text: `Retention of organization ${id}: ${retentionText(retention, deps.config.RETENTION_DAYS)}.` };
      }),
    );

  org
    .command('set-calling-hours')
    .description("set an organization's calling hours in the callee's local time from a JSON file (docs/calling-policy.md, \"Calling hours\"), or turn them off")
    .argument('<org_id>', 'organization id', positiveInt)
    .option('--file <path>', 'JSON file: { "timezone", "outside": "defer" | "refuse", "windows": { "mon": ["09:00-17:00"], … } }')
    .option('--off', 'turn calling hours off')
    .action(
      directOnly(async (deps, id: number, opts: { file?: string; off?: boolean }) => {
        const { setCallingHours, showOrganization } = await organizations();
        if ((opts.file === undefined) === (opts.off === undefined)) throw new CliError('invalid_input', 'Give exactly one of --file <path> and --off.');
        const setting = opts.file !== undefined ? readJsonFile(opts.file) : null;
        if (!(await setCallingHours(deps.store, id, setting))) throw new CliError('not_found', `No organization ${id}.`);
        const row = await showOrganization(deps.store, id);
        const json = { id, calling_hours: row?.calling_hours ?? null };
        return { json, text: row?.calling_hours ? `Calling hours of organization ${id} set: ${JSON.stringify(row.calling_hours)}` : `Calling hours of organization ${id} are off.` };
      }),
    );
}
