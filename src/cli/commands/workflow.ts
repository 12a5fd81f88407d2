// `dialtone workflow …`: workflows (agents) and their versions: draft, publish, archive, show.
import type { Command } from 'commander';
import { readJsonFile, readJsonObjectFile, requireOrg, withTimes } from '../action.js';
import { answer, dual, orgOf } from '../remote.js';
import { CliError } from '../cli-error.js';
import { formatRecord, formatTable } from '../output.js';
import { positiveInt } from '../parsers.js';

const WORKFLOW_COLUMNS = ['workflow_uuid', 'name', 'status', 'published_version', 'draft_version', 'agent_uuids', 'updated_at'];

// Loaded when one of these commands runs (src/cli/README.md).
const workflows = () => import('../../workflows/workflows.js');

/** What a definition file holds, for the options that take one. */
const DEFINITION_FIELDS =
  'Its fields: nodes, edges, variables, result_schema, and answering_machine { detect: off|on|message_end, on_machine: hangup|leave_message|connect_agent, message, detection_timeout_ms } (who answered: docs/telephony.md, "Answering-machine detection"); every problem is listed with its JSON Pointer';

export function workflowCommands(program: Command): void {
  const workflow = program.command('workflow').description('workflows (agents) and their versions');
  workflow
    .command('list')
    .description("list an organization's workflows with their published and draft versions")
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .action(
      dual(
        async (deps, opts: { org?: number }) => {
          const { listWorkflows } = await workflows();
          const rows = (await listWorkflows(deps.store, orgOf(opts))).map((r) => withTimes({ ...r }, ['created_at', 'updated_at']));
          return { json: rows, text: formatTable(rows, WORKFLOW_COLUMNS) };
        },
        async (client) => {
          const { data } = await answer(client.api.GET('/api/v1/public/workflows'));
          return { json: data, text: formatTable(data.map((w) => ({ ...w })), WORKFLOW_COLUMNS) };
        },
      ),
    );
  workflow
    .command('create')
    .description('create a workflow (agent) whose definition becomes published version 1')
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .requiredOption('--name <name>', 'workflow name')
    .requiredOption('--definition <file>', `definition JSON file; becomes published version 1. ${DEFINITION_FIELDS}`)
    .action(
      dual(
        async (deps, opts: { org?: number; name: string; definition: string }) => {
          const { createWorkflow } = await workflows();
          const orgId = orgOf(opts);
          await requireOrg(deps, orgId);
          const summary = await createWorkflow(deps.store, { orgId, name: opts.name, definition: readJsonFile(opts.definition) }, deps.clock.now());
          return { json: summary, text: formatRecord({ ...summary }) };
        },
        async (client, opts) => {
          const made = await answer(client.api.POST('/api/v1/public/workflows', { body: { name: opts.name, definition: readJsonObjectFile(opts.definition) } }));
          return { json: made, text: formatRecord(remoteSummary(made)) };
        },
      ),
    );
  workflow
    .command('save-draft')
    .description("save a new draft version; trigger nodes without trigger_uuid keep their agent UUID")
    .argument('<workflow_uuid>', 'workflow UUID')
    .requiredOption('--definition <file>', `definition JSON file. ${DEFINITION_FIELDS}`)
    .action(
      dual(
        async (deps, uuid: string, opts: { definition: string }) => {
          const { saveDraft } = await workflows();
          const summary = await saveDraft(deps.store, uuid, readJsonFile(opts.definition), deps.clock.now());
          return { json: summary, text: formatRecord({ ...summary }) };
        },
        async (client, uuid, opts) => {
          const saved = await answer(client.api.PUT('/api/v1/public/workflows/{workflow_uuid}/draft', { params: { path: { workflow_uuid: uuid } }, body: readJsonObjectFile(opts.definition) }));
          return { json: saved, text: formatRecord({ workflow_uuid: saved.workflow_uuid, version: saved.version, status: saved.status }) };
        },
      ),
    );
  workflow
    .command('publish')
    .description('publish the draft; the previous published version is archived (runs keep theirs)')
    .argument('<workflow_uuid>', 'workflow UUID')
    .action(
      dual(
        async (deps, uuid: string) => {
          const { publishDraft } = await workflows();
          const summary = await publishDraft(deps.store, uuid, deps.clock.now());
          return { json: summary, text: formatRecord({ ...summary }) };
        },
        async (client, uuid) => {
          const published = await answer(client.api.POST('/api/v1/public/workflows/{workflow_uuid}/publish', { params: { path: { workflow_uuid: uuid } }, body: {} }));
          return { json: published, text: formatRecord(remoteSummary(published)) };
        },
      ),
    );
  workflow
    .command('archive')
    .description('archive a workflow: its agent UUIDs stop answering')
    .argument('<workflow_uuid>', 'workflow UUID')
    .action(
      dual(
        async (deps, uuid: string) => {
          const { archiveWorkflow } = await workflows();
          await archiveWorkflow(deps.store, uuid, deps.clock.now());
          return { json: { workflow_uuid: uuid, status: 'archived' }, text: `Archived workflow ${uuid}.` };
        },
        async (client, uuid) => {
          await answer(client.api.POST('/api/v1/public/workflows/{workflow_uuid}/archive', { params: { path: { workflow_uuid: uuid } } }));
          return { json: { workflow_uuid: uuid, status: 'archived' }, text: `Archived workflow ${uuid}.` };
        },
      ),
    );
  workflow
    .command('show')
    .description("show a workflow and its versions, or with --definition one version's definition")
    .argument('<workflow_uuid>', 'workflow UUID')
    .option('--definition', 'print the definition JSON (text mode prints it bare, ready to edit and save-draft)')
    .option('--version <n>', 'with --definition: which version (default: the draft, else the published one)', positiveInt)
    .action(
      dual(async (deps, uuid: string, opts: { definition?: boolean; version?: number }) => {
        const { getDefinition, showWorkflow } = await workflows();
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
      }, async (client, uuid, opts) => {
        const path = { workflow_uuid: uuid };
        if (opts.version !== undefined && !opts.definition) throw new CliError('invalid_input', '--version needs --definition.');
        if (opts.definition) {
          let version = opts.version;
          if (version === undefined) {
            // As in direct mode: the draft, else the published version.
            const current = await answer(client.api.GET('/api/v1/public/workflows/{workflow_uuid}', { params: { path } }));
            version = current.draft_version ?? current.published_version ?? undefined;
            if (version === undefined) throw new CliError('invalid_input', `Workflow ${uuid} has no draft and no published version.`);
          }
          const shown = await answer(client.api.GET('/api/v1/public/workflows/{workflow_uuid}/versions/{version}', { params: { path: { ...path, version } } }));
          return { json: shown, text: JSON.stringify(shown.definition, null, 2) };
        }
        const details = await answer(client.api.GET('/api/v1/public/workflows/{workflow_uuid}', { params: { path } }));
        const versions = await answer(client.api.GET('/api/v1/public/workflows/{workflow_uuid}/versions', { params: { path, query: { limit: '100' } } }));
        return {
          json: { ...details, versions: versions.data },
          text: `${formatRecord({ workflow_uuid: details.workflow_uuid, name: details.name, status: details.status })}\n\n${formatTable(versions.data.map((v) => ({ ...v })), ['version', 'status', 'created_at', 'published_at', 'agent_uuids'])}`,
        };
      }),
    );
}

/** A workflow as the API answers it, in the fields the direct commands print. */
function remoteSummary(workflow: { workflow_uuid: string; name: string; status: string; published_version: number | null; draft_version: number | null; agent_uuids: string[]; draft_agent_uuids: string[] }) {
  const { workflow_uuid, name, status, published_version, draft_version, agent_uuids, draft_agent_uuids } = workflow;
  return { workflow_uuid, name, status, published_version, draft_version, agent_uuids, draft_agent_uuids };
}
