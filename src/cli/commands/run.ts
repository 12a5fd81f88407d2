// `dialtone run …`: workflow runs: show one and its events, cancel one, list an organization's.
import type { Command } from 'commander';
import { isTerminal } from '../../runs/states.js';
import { action } from '../action.js';
import { formatRecord, formatTable, type Printable } from '../output.js';
import { nonNegativeInt, positiveInt } from '../parsers.js';

// Loaded when one of these commands runs (src/cli/README.md).
const readRun = () => import('../../runs/read-run.js');
const cancelling = () => import('../../runs/cancel-run.js');

export function runCommands(program: Command): void {
  const run = program.command('run').description('workflow runs');
  run
    .command('show')
    .description('show a run: state, outcome, timestamps')
    .argument('<run_id>', 'run id', positiveInt)
    .action(
      action(async (deps, runId: number) => {
        const { getRun } = await readRun();
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
        const { listRunEvents } = await readRun();
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
        const { cancelRun } = await cancelling();
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
        const { listRuns } = await readRun();
        const rows = await listRuns(deps.store, opts.org, Math.min(opts.limit, 1000));
        return { json: rows, text: formatTable(rows as unknown as Printable[], ['id', 'name', 'state', 'mode', 'phone_number', 'definition_version', 'created_at']) };
      }),
    );
}
