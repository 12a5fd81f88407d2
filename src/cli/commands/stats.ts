// `dialtone stats`: an organization's runs since a time by state, outcome and who answered, and
// what is queued and live on each route now (what GET /api/v1/public/stats answers and the
// console's overview shows).
import type { Command } from 'commander';
import { requireOrg } from '../action.js';
import { formatRecord, formatTable } from '../output.js';
import { positiveInt, rfc3339Time } from '../parsers.js';
import { answer, dual, orgOf } from '../remote.js';

const HOUR_MS = 3_600_000;

interface Stats {
  since: string;
  total: number;
  by_state: Record<string, number>;
  by_outcome: { state: string; outcome_reason: string | null; count: number }[];
  answered_by: Record<string, number>;
  answer_rates: Record<string, number | null>;
  routes: { telephony_configuration_id: number; name: string; provider: string; status: string; queued: number; live: number }[];
}

const percent = (rate: number | null) => (rate === null ? '-' : `${(rate * 100).toFixed(1)}%`);

function statsText(stats: Stats): string {
  const states = Object.fromEntries(Object.entries(stats.by_state).filter(([, n]) => n > 0));
  return [
    formatRecord({ since: stats.since, total: stats.total, ...states }),
    '',
    'Outcomes:',
    formatTable(stats.by_outcome, ['state', 'outcome_reason', 'count']),
    '',
    `Answered by: ${Object.entries(stats.answered_by).map(([who, n]) => `${who} ${n}`).join(', ')}`,
    `Answer rates: ${Object.entries(stats.answer_rates).map(([who, rate]) => `${who} ${percent(rate)}`).join(', ')}`,
    '',
    'Routes now:',
    formatTable(stats.routes, ['telephony_configuration_id', 'name', 'provider', 'status', 'queued', 'live']),
  ].join('\n');
}

export function statsCommands(program: Command): void {
  program
    .command('stats')
    .description('runs created since a time (default: the last hour) by state, outcome and who answered, and the queued and live calls of each route now')
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .option('--since <time>', 'count runs created at or after this RFC 3339 time (default: one hour ago)', rfc3339Time)
    .action(
      dual(
        async (deps, opts: { org?: number; since?: string }) => {
          const orgId = orgOf(opts);
          await requireOrg(deps, orgId);
          const { runStats } = await import('../../runs/list-runs.js');
          const stats = await runStats(deps.store, orgId, opts.since !== undefined ? Date.parse(opts.since) : deps.clock.now() - HOUR_MS);
          return { json: stats, text: statsText(stats) };
        },
        async (client, opts: { since?: string }) => {
          const stats = await answer(client.api.GET('/api/v1/public/stats', { params: { query: opts.since !== undefined ? { since: opts.since } : {} } }));
          return { json: stats, text: statsText(stats as Stats) };
        },
      ),
    );
}
