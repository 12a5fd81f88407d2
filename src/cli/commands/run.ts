// `dialtone run …`: workflow runs: show one and its events, cancel one, list an organization's
// (filtered, paged). Each on the database, or through the service's API in remote mode.
import { InvalidArgumentError, type Command } from 'commander';
import { isTerminal, RUN_STATES, type RunState } from '../../runs/states.js';
import { formatPage, formatRecord, formatTable, type Printable } from '../output.js';
import { nonNegativeInt, positiveInt } from '../parsers.js';
import { dual, orgOf } from '../remote.js';

// Loaded when one of these commands runs (src/cli/README.md).
const readRun = () => import('../../runs/read-run.js');
const cancelling = () => import('../../runs/cancel-run.js');
const listing = () => import('../../runs/list-runs.js');

function runState(text: string): RunState {
  if (!(RUN_STATES as readonly string[]).includes(text)) throw new InvalidArgumentError(`expected one of ${RUN_STATES.join(', ')}`);
  return text as RunState;
}

/** The most events `run events` prints, as in direct mode. */
const EVENTS_SHOWN = 1000;
/** The API's largest page of runs (GET /workflow-runs). */
const RUN_PAGE_MAX = 100;

const eventsText = (events: { seq: number; type: string; at: string; data: Record<string, unknown> }[]) =>
  formatTable(events.map((e) => ({ ...e, data: Object.keys(e.data).length ? e.data : null })), ['seq', 'type', 'at', 'data']);

const runColumns = ['id', 'name', 'state', 'outcome_reason', 'mode', 'phone_number', 'campaign_id', 'created_at'];

interface RunListOptions {
  org?: number;
  state?: RunState;
  outcome?: string;
  campaign?: number;
  phone?: string;
  after?: number;
  limit: number;
}

function pageOutput(page: { data: object[]; next_after: number | null }) {
  return { json: page, text: formatPage({ rows: page.data as Printable[], next_after: page.next_after }, runColumns, 'No runs.') };
}

export function runCommands(program: Command): void {
  const run = program.command('run').description('workflow runs');
  run
    .command('show')
    .description('show a run: state, outcome, timestamps')
    .argument('<run_id>', 'run id', positiveInt)
    .action(
      dual(
        async (deps, runId: number) => {
          const { getRun } = await readRun();
          const view = await getRun(deps.store, undefined, runId);
          return { json: view, text: formatRecord({ ...view }) };
        },
        async (client, runId: number) => {
          const view = await client.runs.get(runId);
          return { json: view, text: formatRecord({ ...view }) };
        },
      ),
    );
  run
    .command('events')
    .description("list a run's events in order")
    .argument('<run_id>', 'run id', positiveInt)
    .option('--after <seq>', 'only events after this seq', nonNegativeInt, 0)
    .action(
      dual(
        async (deps, runId: number, opts: { after: number }) => {
          const { listRunEvents } = await readRun();
          const page = await listRunEvents(deps.store, undefined, runId, opts.after, EVENTS_SHOWN);
          return { json: page.data, text: eventsText(page.data) };
        },
        async (client, runId: number, opts: { after: number }) => {
          const page = await client.runs.events(runId, { after: opts.after, limit: EVENTS_SHOWN });
          return { json: page.data, text: eventsText(page.data) };
        },
      ),
    );
  run
    .command('cancel')
    .description('cancel a run: a queued run at once; a live call is ended by the node holding it')
    .argument('<run_id>', 'run id', positiveInt)
    .action(
      dual(
        async (deps, runId: number) => {
          const { cancelRun } = await cancelling();
          return cancelOutput(await cancelRun(deps, undefined, runId));
        },
        async (client, runId: number) => cancelOutput(await client.runs.cancel(runId)),
      ),
    );
  run
    .command('list')
    .description("list an organization's runs, newest first, filtered by state, outcome, campaign or number; --after pages")
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .option('--state <state>', `only runs in this state: ${RUN_STATES.join(', ')}`, runState)
    .option('--outcome <reason>', 'only runs that ended with this outcome_reason (hangup, ring_timeout, agent_hangup, …)')
    .option('--campaign <id>', "only this campaign's attempts", positiveInt)
    .option('--phone <number>', 'only runs to this number (E.164)')
    .option('--after <id>', 'the page after this run id (the previous page\'s next_after)', positiveInt)
    .option('--limit <n>', `runs per page, 1 to ${RUN_PAGE_MAX}`, positiveInt, 20)
    .action(
      dual(
        async (deps, opts: RunListOptions) => {
          const orgId = orgOf(opts);
          const { listRunPage } = await listing();
          const page = await listRunPage(deps.store, orgId, {
            ...(opts.state !== undefined ? { state: opts.state } : {}),
            ...(opts.outcome !== undefined ? { outcomeReason: opts.outcome } : {}),
            ...(opts.campaign !== undefined ? { campaignId: opts.campaign } : {}),
            ...(opts.phone !== undefined ? { phoneNumber: opts.phone } : {}),
            ...(opts.after !== undefined ? { after: opts.after } : {}),
            limit: Math.min(opts.limit, RUN_PAGE_MAX),
          });
          return pageOutput(page);
        },
        async (client, opts: RunListOptions) =>
          pageOutput(
            await client.runs.list({
              state: opts.state,
              outcome_reason: opts.outcome,
              campaign_id: opts.campaign,
              phone_number: opts.phone,
              after: opts.after,
              limit: Math.min(opts.limit, RUN_PAGE_MAX),
            }),
          ),
      ),
    );
}

function cancelOutput(view: { state: RunState } & object) {
  const note = isTerminal(view.state) ? '' : '\n\nCancel requested: the node holding the call ends it shortly (run show to follow).';
  return { json: view, text: `${formatRecord({ ...view })}${note}` };
}
