// `dialtone key …`: an organization's API keys (the secret is printed once, at creation).
import type { Command } from 'commander';
import { action, requireOrg, withTimes } from '../action.js';
import { CliError } from '../cli-error.js';
import { formatRecord, formatTable } from '../output.js';
import { positiveInt, scopeList } from '../parsers.js';
import { SCOPES, type Scope } from '../../auth/scopes.js';

// Loaded when one of these commands runs (src/cli/README.md).
const apiKeys = () => import('../../auth/api-keys.js');

export function keyCommands(program: Command): void {
  const key = program.command('key').description('API keys');
  key
    .command('create')
    .description('create an API key; the secret is printed once (recorded in the audit log, without it)')
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .requiredOption('--name <name>', 'key name')
    .option('--scopes <list>', `what the key may do, comma-separated: ${SCOPES.join(', ')} (default: all of them)`, scopeList)
    .action(
      action(async (deps, opts: { org: number; name: string; scopes?: Scope[] }) => {
        const { createApiKey } = await apiKeys();
        await requireOrg(deps, opts.org);
        const created = await createApiKey(deps.store, opts.org, opts.name, deps.clock.now(), { scopes: opts.scopes ?? SCOPES });
        const json = { id: created.id, prefix: created.prefix, scopes: created.scopes, key: created.key };
        return { json, text: `${formatRecord(json)}\n\nStore the key now: it is not shown again.` };
      }),
    );
  key
    .command('list')
    .description("list an organization's API keys (prefixes, never secrets)")
    .requiredOption('--org <id>', 'organization id', positiveInt)
    .action(
      action(async (deps, opts: { org: number }) => {
        const { listApiKeys } = await apiKeys();
        const rows = (await listApiKeys(deps.store, opts.org)).map((r) => withTimes({ ...r }, ['created_at', 'last_used_at', 'revoked_at']));
        return { json: rows, text: formatTable(rows, ['id', 'name', 'prefix', 'scopes', 'created_at', 'last_used_at', 'revoked_at']) };
      }),
    );
  key
    .command('revoke')
    .description('revoke an API key: its requests are refused from now on (recorded in the audit log)')
    .argument('<key_id>', 'API key id', positiveInt)
    .action(
      action(async (deps, keyId: number) => {
        const { revokeApiKey } = await apiKeys();
        if (!(await revokeApiKey(deps.store, keyId, deps.clock.now()))) throw new CliError('not_found', `No API key ${keyId}.`);
        return { json: { id: keyId, revoked: true }, text: `Revoked key ${keyId}.` };
      }),
    );
}
