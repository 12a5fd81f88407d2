// `dialtone key …`: an organization's API keys (the secret is printed once, at creation).
import type { Command } from 'commander';
import { requireOrg, withTimes } from '../action.js';
import { CliError } from '../cli-error.js';
import { formatRecord, formatTable, type Printable } from '../output.js';
import { positiveInt, scopeList } from '../parsers.js';
import { answer, dual, orgOf } from '../remote.js';
import { SCOPES, type Scope } from '../../auth/scopes.js';

// Loaded when one of these commands runs (src/cli/README.md).
const apiKeys = () => import('../../auth/api-keys.js');

const keyColumns = ['id', 'name', 'prefix', 'scopes', 'created_at', 'last_used_at', 'revoked_at'];
/** The API's largest page of keys (GET /api-keys). */
const KEY_PAGE_MAX = 100;

function createdOutput(json: { id: number; prefix: string; scopes: readonly string[]; key: string | null }) {
  return { json, text: `${formatRecord(json)}\n\nStore the key now: it is not shown again.` };
}

export function keyCommands(program: Command): void {
  const key = program
    .command('key')
    .description("API keys. In direct database mode, `key create --org` makes an organization's first (admin) key: remote mode then works with it.");
  key
    .command('create')
    .description('create an API key; the secret is printed once (recorded in the audit log, without it)')
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .requiredOption('--name <name>', 'key name')
    .option('--scopes <list>', `what the key may do, comma-separated: ${SCOPES.join(', ')} (default: all of them)`, scopeList)
    .action(
      dual(
        async (deps, opts: { org?: number; name: string; scopes?: Scope[] }) => {
          const orgId = orgOf(opts);
          const { createApiKey } = await apiKeys();
          await requireOrg(deps, orgId);
          const created = await createApiKey(deps.store, orgId, opts.name, deps.clock.now(), { scopes: opts.scopes ?? SCOPES });
          return createdOutput({ id: created.id, prefix: created.prefix, scopes: created.scopes, key: created.key });
        },
        async (client, opts: { name: string; scopes?: Scope[] }) => {
          const created = await answer(client.api.POST('/api/v1/public/api-keys', { body: { name: opts.name, scopes: [...(opts.scopes ?? SCOPES)] } }));
          return createdOutput({ id: created.id, prefix: created.prefix, scopes: created.scopes, key: created.key });
        },
      ),
    );
  key
    .command('list')
    .description("list an organization's API keys (prefixes, never secrets)")
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .action(
      dual(
        async (deps, opts: { org?: number }) => {
          const { listApiKeys } = await apiKeys();
          const rows = (await listApiKeys(deps.store, orgOf(opts))).map((r) => withTimes({ ...r }, ['created_at', 'last_used_at', 'revoked_at']));
          return { json: rows, text: formatTable(rows, keyColumns) };
        },
        async (client) => {
          // Every page, so both modes print every key.
          const rows: Printable[] = [];
          for (let after: number | undefined; ; ) {
            const page = await answer(client.api.GET('/api/v1/public/api-keys', { params: { query: { limit: String(KEY_PAGE_MAX), ...(after !== undefined ? { after: String(after) } : {}) } } }));
            rows.push(...page.data.map((k) => ({ ...k })));
            if (page.next_after === null) break;
            after = page.next_after;
          }
          return { json: rows, text: formatTable(rows, keyColumns) };
        },
      ),
    );
  key
    .command('revoke')
    .description('revoke an API key: its requests are refused from now on (recorded in the audit log)')
    .argument('<key_id>', 'API key id', positiveInt)
    .action(
      dual(
        async (deps, keyId: number) => {
          const { revokeApiKey } = await apiKeys();
          if (!(await revokeApiKey(deps.store, keyId, deps.clock.now()))) throw new CliError('not_found', `No API key ${keyId}.`);
          return { json: { id: keyId, revoked: true }, text: `Revoked key ${keyId}.` };
        },
        async (client, keyId: number) => {
          await answer(client.api.POST('/api/v1/public/api-keys/{id}/revoke', { params: { path: { id: keyId } } }));
          return { json: { id: keyId, revoked: true }, text: `Revoked key ${keyId}.` };
        },
      ),
    );
}
