// `dialtone campaign …`: create a campaign (with its contacts from a CSV file), start, pause,
// resume, cancel, and follow it (`status --watch` redraws a progress bar until it ends). The
// campaign modules are loaded when a campaign command runs, so other commands start as fast.
import { createReadStream, readFileSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import type { Dialtone } from '@dialtone/client';
import type { Deps } from '../../deps.js';
import type { CampaignView } from '../../campaigns/campaigns.js';
import { RETRY_CONDITIONS } from '../../campaigns/settings.js';
import { readJsonFile, requireOrg, wantsJson, type Output } from '../action.js';
import { CliError } from '../cli-error.js';
import { formatPage, formatRecord, type Printable } from '../output.js';
import { positiveInt, positiveNumber } from '../parsers.js';
import { answer, dual, orgOf } from '../remote.js';

function commaList(text: string): string[] {
  return text.split(',').map((item) => item.trim()).filter((item) => item !== '');
}

function mode(text: string): 'published' | 'test' {
  if (text !== 'published' && text !== 'test') throw new InvalidArgumentError('expected published or test');
  return text;
}

const BAR_WIDTH = 30;

/** One line: a bar of the contacts that are done (neither pending nor in progress), then the counts. */
export function progressLine(view: Pick<CampaignView, 'id' | 'state' | 'paused_reason' | 'progress'>): string {
  const { total, pending, in_progress: inProgress, reached, exhausted, suppressed, invalid, canceled, attempts, answered_by: answeredBy } = view.progress;
  const done = total - pending - inProgress;
  const share = total === 0 ? 1 : done / total;
  const filled = Math.round(share * BAR_WIDTH);
  const state = view.state === 'paused' && view.paused_reason ? `paused (${view.paused_reason})` : view.state;
  return (
    `campaign ${view.id} [${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] ${String(Math.floor(share * 100)).padStart(3)}% ` +
    `${done}/${total}  ${state}  pending ${pending}  in progress ${inProgress}  reached ${reached}  exhausted ${exhausted}  ` +
    `suppressed ${suppressed}  invalid ${invalid}  canceled ${canceled}  attempts ${attempts}` +
    // Who answered, once detection said so of an attempt: machines apart from people.
    (Object.values(answeredBy).some((n) => n > 0) ? `  (answered by: human ${answeredBy.human}, machine ${answeredBy.machine}, fax ${answeredBy.fax}, unknown ${answeredBy.unknown})` : '')
  );
}

/** A campaign as both modes read it: the store's view, or the API's `Campaign` (the same fields). */
type View = Pick<CampaignView, 'id' | 'name' | 'state' | 'paused_reason' | 'progress' | 'answering_machine'>;

function record(view: View): Printable {
  return { ...view, answering_machine: view.answering_machine === null ? "(the agent's)" : JSON.stringify(view.answering_machine), progress: progressLine(view) };
}

const ANSWERING_MACHINE_HELP = 'JSON file: the campaign\'s own answering_machine, in place of its agent\'s: { "detect": "off"|"on"|"message_end", "on_machine"?: "hangup"|"leave_message"|"connect_agent", "message"?, "detection_timeout_ms"? } (docs/telephony.md, "Answering-machine detection")';

/**
 * True once a campaign will not change any more. A cancel commits the move before it ends the
 * pending contacts (and a tick finishes that if the node died between): wait for both.
 */
const ended = (view: View) => view.state === 'completed' || (view.state === 'canceled' && view.progress.in_progress === 0 && view.progress.pending === 0);

async function importFile(deps: Deps, campaignId: number, file: string) {
  const { importContactCsv } = await import('../../campaigns/contacts.js');
  const input = createReadStream(file);
  await new Promise<void>((resolve, reject) => {
    input.once('open', () => resolve());
    input.once('error', (error) => reject(new CliError('not_found', `Cannot read ${file}: ${error.message}`)));
  });
  const answer = await importContactCsv(deps, undefined, campaignId, input, { idempotencyKey: undefined, path: '' });
  return JSON.parse(answer.json) as ImportResult;
}

interface ImportResult {
  added: number;
  duplicates: number;
  invalid: { line?: number; detail: string }[];
  invalid_count: number;
}

/** Uploads a CSV file's contacts as the API takes them (text/csv), read whole: at most CAMPAIGN_CONTACTS_MAX_BYTES anyway. */
async function uploadFile(client: Dialtone, campaignId: number, file: string): Promise<ImportResult> {
  let csv: string;
  try {
    csv = readFileSync(file, 'utf8');
  } catch (error) {
    throw new CliError('not_found', `Cannot read ${file}: ${(error as Error).message}`);
  }
  const post = client.api.POST as unknown as (url: string, init: object) => Promise<{ data?: ImportResult; error?: unknown; response: Response }>;
  return answer(post('/api/v1/public/campaigns/{id}/contacts', { params: { path: { id: campaignId } }, body: csv, bodySerializer: (body: string) => body, headers: { 'content-type': 'text/csv' } }));
}

function importText(result: ImportResult): string {
  const invalid = result.invalid.map((i) => `  line ${i.line ?? '?'}: ${i.detail}`).join('\n');
  return `${result.added} added, ${result.duplicates} duplicates, ${result.invalid_count} invalid${invalid ? `:\n${invalid}` : ''}`;
}

interface CreateOptions {
  org?: number;
  name: string;
  agent?: string;
  workflow?: string;
  mode: 'published' | 'test';
  contacts?: string;
  telephony?: number;
  maxConcurrent?: number;
  callsPerSecond?: number;
  startsAt?: string;
  endsAt?: string;
  maxAttempts?: number;
  retryDelay?: number;
  retryOn?: string[];
  failureRatio?: number;
  breakerWindow?: number;
  breakerMinCalls?: number;
  schedule?: string;
  answeringMachine?: string;
  start?: boolean;
}

/** The campaign the options describe, as the API's Create Campaign body (and createCampaign's input). */
function campaignBody(opts: CreateOptions) {
  const retry = {
    ...(opts.maxAttempts !== undefined ? { max_attempts: opts.maxAttempts } : {}),
    ...(opts.retryDelay !== undefined ? { delay_seconds: opts.retryDelay } : {}),
    ...(opts.retryOn !== undefined ? { on: opts.retryOn } : {}),
  };
  const breaker = {
    ...(opts.failureRatio !== undefined ? { failure_ratio: opts.failureRatio } : {}),
    ...(opts.breakerWindow !== undefined ? { window_seconds: opts.breakerWindow } : {}),
    ...(opts.breakerMinCalls !== undefined ? { min_calls: opts.breakerMinCalls } : {}),
  };
  return {
    name: opts.name,
    ...(opts.agent !== undefined ? { agent_uuid: opts.agent } : {}),
    ...(opts.workflow !== undefined ? { workflow_uuid: opts.workflow } : {}),
    mode: opts.mode,
    ...(opts.telephony !== undefined ? { telephony_configuration_id: opts.telephony } : {}),
    ...(opts.maxConcurrent !== undefined ? { max_concurrent_calls: opts.maxConcurrent } : {}),
    ...(opts.callsPerSecond !== undefined ? { calls_per_second: opts.callsPerSecond } : {}),
    ...(opts.startsAt !== undefined ? { starts_at: opts.startsAt } : {}),
    ...(opts.endsAt !== undefined ? { ends_at: opts.endsAt } : {}),
    ...(Object.keys(retry).length > 0 ? { retry } : {}),
    ...(Object.keys(breaker).length > 0 ? { circuit_breaker: breaker } : {}),
    ...(opts.schedule !== undefined ? { schedule: readJsonFile(opts.schedule) as { timezone: string; windows: Record<string, unknown> } } : {}),
    ...(opts.answeringMachine !== undefined ? { answering_machine: readJsonFile(opts.answeringMachine) } : {}),
  };
}

function createdOutput(view: View, contacts: ImportResult | undefined): Output {
  const imported = contacts ? `\n\nContacts: ${importText(contacts)}` : '';
  return { json: { ...view, ...(contacts ? { contacts } : {}) }, text: `${formatRecord(record(view))}${imported}` };
}

function listOutput(page: { data: View[]; next_after: number | null }): Output {
  const rows = page.data.map((view) => ({ id: view.id, name: view.name, state: view.state, progress: progressLine(view).replace(/^campaign \d+ /, '') }));
  return { json: page, text: formatPage({ rows, next_after: page.next_after }, ['id', 'name', 'state', 'progress'], 'No campaigns.') };
}

/** `status --watch`: redraws the progress until the campaign ended, reading it with `read`. */
async function watch(first: View, read: () => Promise<View>, interval: number, json: boolean): Promise<Output> {
  let view = first;
  const tty = process.stdout.isTTY === true;
  let last = '';
  for (;;) {
    const line = progressLine(view);
    if (json) {
      // One JSON object per read, a line each (NDJSON); the last is printed by the caller.
      if (!ended(view)) process.stdout.write(`${JSON.stringify(view)}\n`);
    } else if (line !== last && !ended(view)) {
      // A terminal gets the line redrawn in place; a pipe, a line per change.
      process.stdout.write(tty ? `\r\x1b[2K${line}` : `${line}\n`);
    }
    last = line;
    if (ended(view)) break;
    await new Promise((resolve) => setTimeout(resolve, interval));
    view = await read();
  }
  if (!json && tty) process.stdout.write('\r\x1b[2K');
  return { json: view, text: progressLine(view), compact: json };
}

export function campaignCommands(program: Command): void {
  const campaign = program.command('campaign').description('campaigns: call a list of contacts with a schedule, retries and a circuit breaker (docs/campaigns.md)');

  campaign
    .command('create')
    .description('create a campaign (draft), optionally with its contacts from a CSV file')
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .requiredOption('--name <name>', 'campaign name')
    .option('--agent <uuid>', 'the agent (trigger) UUID to call with')
    .option('--workflow <uuid>', 'or the workflow UUID')
    .option('--mode <mode>', 'published (default) or test', mode, 'published' as const)
    .option('--contacts <file.csv>', 'CSV with a phone_number column (optional timezone; other columns become initial_context)')
    .option('--telephony <id>', 'telephony configuration id (default: the organization\'s default)', positiveInt)
    .option('--max-concurrent <n>', 'attempts queued or live at once', positiveInt)
    .option('--calls-per-second <n>', 'the campaign\'s dials per second at most (the route\'s pacing also applies)', positiveNumber)
    .option('--starts-at <time>', 'no attempt before this ISO 8601 time, e.g. 2026-12-01T09:00:00Z')
    .option('--ends-at <time>', 'the campaign pauses (ends_at) at this ISO 8601 time')
    .option('--max-attempts <n>', 'attempts per contact (1 to 10, default 1)', positiveInt)
    .option('--retry-delay <seconds>', 'seconds between attempts (at least 30, default 600)', positiveInt)
    .option('--retry-on <states>', `comma-separated states that earn another attempt (of ${RETRY_CONDITIONS.join(', ')}: machine is an attempt a machine answered and Dialtone hung up on or left a message; default busy,no_answer,failed)`, commaList)
    .option('--failure-ratio <ratio>', 'circuit breaker: share of ended attempts ending failed that pauses the campaign (default 0.5)', positiveNumber)
    .option('--breaker-window <seconds>', 'circuit breaker: window the attempts are counted over (default 120)', positiveInt)
    .option('--breaker-min-calls <n>', 'circuit breaker: ended attempts needed in the window before it can trip (default 10)', positiveInt)
    .option('--schedule <file.json>', 'JSON file: { "timezone", "windows": { "mon": ["09:00-17:00"], … } }')
    .option('--answering-machine <file.json>', ANSWERING_MACHINE_HELP)
    .option('--start', 'start it once created')
    .action(
      dual(
        async (deps, opts: CreateOptions) => {
          const orgId = orgOf(opts);
          await requireOrg(deps, orgId);
          const { actOnCampaign, createCampaign, getCampaign } = await import('../../campaigns/campaigns.js');
          const created = await createCampaign(deps, orgId, campaignBody(opts));
          const contacts = opts.contacts !== undefined ? await importFile(deps, created.id, opts.contacts) : undefined;
          const view = opts.start ? await actOnCampaign(deps, undefined, created.id, 'start') : await getCampaign(deps, undefined, created.id);
          return createdOutput(view, contacts);
        },
        async (client, opts: CreateOptions) => {
          const created = await client.campaigns.create(campaignBody(opts) as Parameters<Dialtone['campaigns']['create']>[0]);
          const contacts = opts.contacts !== undefined ? await uploadFile(client, created.id, opts.contacts) : undefined;
          const view = opts.start ? await client.campaigns.start(created.id) : await client.campaigns.get(created.id);
          return createdOutput(view as View, contacts);
        },
      ),
    );

  campaign
    .command('update')
    .description("change a campaign's own answering_machine (until it ends); the attempts dialed after use it")
    .argument('<campaign_id>', 'campaign id', positiveInt)
    .option('--answering-machine <file.json>', ANSWERING_MACHINE_HELP)
    .option('--agent-answering-machine', "drop the campaign's own answering_machine: its agent's applies again")
    .action(
      dual(
        async (deps, id: number, opts: { answeringMachine?: string; agentAnsweringMachine?: boolean }) => {
          const change = answeringMachineChange(opts);
          const { updateCampaign } = await import('../../campaigns/campaigns.js');
          const view = await updateCampaign(deps, undefined, id, change);
          return { json: view, text: formatRecord(record(view)) };
        },
        async (client, id: number, opts: { answeringMachine?: string; agentAnsweringMachine?: boolean }) => {
          const change = answeringMachineChange(opts);
          const patch = client.api.PATCH as unknown as (url: string, init: object) => Promise<{ data?: View; error?: unknown; response: Response }>;
          const view = await answer(patch('/api/v1/public/campaigns/{id}', { params: { path: { id } }, body: change }));
          return { json: view, text: formatRecord(record(view)) };
        },
      ),
    );

  campaign
    .command('add-contacts')
    .description('add the contacts of a CSV file to a campaign')
    .argument('<campaign_id>', 'campaign id', positiveInt)
    .argument('<file>', 'CSV with a phone_number column (optional timezone; other columns become initial_context)')
    .action(
      dual(
        async (deps, id: number, file: string) => {
          const result = await importFile(deps, id, file);
          return { json: result, text: importText(result) };
        },
        async (client, id: number, file: string) => {
          const result = await uploadFile(client, id, file);
          return { json: result, text: importText(result) };
        },
      ),
    );

  for (const verb of ['start', 'pause', 'resume', 'cancel'] as const) {
    campaign
      .command(verb)
      .description(`${verb} a campaign (docs/campaigns.md)`)
      .argument('<campaign_id>', 'campaign id', positiveInt)
      .action(
        dual(
          async (deps, id: number) => {
            const { actOnCampaign } = await import('../../campaigns/campaigns.js');
            const view = await actOnCampaign(deps, undefined, id, verb);
            return { json: view, text: formatRecord(record(view)) };
          },
          async (client, id: number) => {
            const view = (await client.campaigns[verb](id)) as View;
            return { json: view, text: formatRecord(record(view)) };
          },
        ),
      );
  }

  campaign
    .command('list')
    .description('list an organization\'s campaigns, newest first, with their progress')
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .option('--after <id>', 'the page after this campaign id (next_after of the previous page)', positiveInt)
    .option('--limit <n>', 'campaigns per page (default 50, at most 200; at most 100 in remote mode)', positiveInt, 50)
    .action(
      dual(
        async (deps, opts: { org?: number; after?: number; limit: number }) => {
          const orgId = orgOf(opts);
          await requireOrg(deps, orgId);
          if (opts.limit > 200) throw new CliError('invalid_input', '--limit is at most 200.');
          const { listCampaigns } = await import('../../campaigns/campaigns.js');
          return listOutput(await listCampaigns(deps, orgId, { after: opts.after, limit: opts.limit }));
        },
        async (client, opts: { after?: number; limit: number }) => {
          if (opts.limit > 100) throw new CliError('invalid_input', '--limit is at most 100 in remote mode (the API\'s page).');
          const page = await client.campaigns.list({ after: opts.after, limit: opts.limit });
          return listOutput(page as { data: View[]; next_after: number | null });
        },
      ),
    );

  campaign
    .command('status')
    .description('show a campaign and its progress; --watch redraws it until the campaign ends')
    .argument('<campaign_id>', 'campaign id', positiveInt)
    .option('--watch', 'keep redrawing the progress until the campaign is completed or canceled')
    .option('--interval <ms>', 'how often --watch reads the campaign (default 1000)', positiveInt, 1000)
    .action(
      dual(
        async (deps, id: number, opts: { watch?: boolean; interval: number }, command: Command) => {
          const { getCampaign } = await import('../../campaigns/campaigns.js');
          const view = await getCampaign(deps, undefined, id, 'fresh');
          if (!opts.watch) return { json: view, text: formatRecord(record(view)) };
          return watch(view, () => getCampaign(deps, undefined, id, 'fresh'), opts.interval, wantsJson(command));
        },
        async (client, id: number, opts: { watch?: boolean; interval: number }, command: Command) => {
          const view = (await client.campaigns.get(id)) as View;
          if (!opts.watch) return { json: view, text: formatRecord(record(view)) };
          return watch(view, async () => (await client.campaigns.get(id)) as View, opts.interval, wantsJson(command));
        },
      ),
    );
}

function answeringMachineChange(opts: { answeringMachine?: string; agentAnsweringMachine?: boolean }): { answering_machine: unknown } {
  if ((opts.answeringMachine === undefined) === (opts.agentAnsweringMachine !== true)) {
    throw new CliError('invalid_input', 'Give exactly one of --answering-machine <file.json> and --agent-answering-machine.');
  }
  return { answering_machine: opts.answeringMachine !== undefined ? readJsonFile(opts.answeringMachine) : null };
}
