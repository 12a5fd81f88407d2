// `dialtone suppression …`: an organization's suppression (do-not-call) list, one number or a CSV file at a time.
import { createReadStream, readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { SuppressionContext, SuppressionView } from '../../policy/suppressions.js';
import type { Deps } from '../../deps.js';
import { requireOrg } from '../action.js';
import { CliError } from '../cli-error.js';
import { formatPage, formatRecord, type Printable } from '../output.js';
import { limitValue, positiveInt, type Limit } from '../parsers.js';
import { dual, orgOf } from '../remote.js';

// Loaded when one of these commands runs (src/cli/README.md).
const suppressions = () => import('../../policy/suppressions.js');

function suppressionContext(deps: Deps): SuppressionContext {
  return { store: deps.store, clock: deps.clock };
}

const suppressionColumns = ['phone_number', 'reason', 'expires_at', 'active', 'created_at'];
const suppressionRecord = (view: SuppressionView | object): Printable => ({ ...view });

function listOutput(page: { data: object[]; next_after: string | null }) {
  return { json: page, text: formatPage({ rows: page.data.map(suppressionRecord), next_after: page.next_after }, suppressionColumns, 'No suppressions.') };
}

function importOutput(result: { imported: number; invalid_count: number; invalid: { line: number; detail: string }[] }) {
  const invalid = result.invalid.map((i) => `  line ${i.line}: ${i.detail}`).join('\n');
  return { json: result, text: `Imported ${result.imported} numbers; ${result.invalid_count} invalid lines skipped${invalid ? `:\n${invalid}` : ''}` };
}

function readCsv(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new CliError('not_found', `Cannot read ${file}: ${(error as Error).message}`);
  }
}

export function suppressionCommands(program: Command): void {
  const suppression = program.command('suppression').description("an organization's suppression (do-not-call) list");
  suppression
    .command('add')
    .description('suppress a number (or replace its reason and expiry): calls to it are refused, and queued runs to it end canceled')
    .argument('<phone_number>', 'the number, E.164 (+12025550123)')
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .option('--reason <text>', 'free text for your own reference')
    .option('--expires-at <time>', 'when it may be called again (RFC 3339, e.g. 2027-01-31T00:00:00Z); default: never')
    .action(
      dual(
        async (deps, phoneNumber: string, opts: { org?: number; reason?: string; expiresAt?: string }) => {
          const orgId = orgOf(opts);
          const { putSuppression } = await suppressions();
          await requireOrg(deps, orgId);
          const view = await putSuppression(suppressionContext(deps), orgId, phoneNumber, { reason: opts.reason ?? null, expires_at: opts.expiresAt ?? null });
          return { json: view, text: formatRecord(suppressionRecord(view)) };
        },
        async (client, phoneNumber: string, opts: { reason?: string; expiresAt?: string }) => {
          const view = await client.suppressions.put(phoneNumber, { reason: opts.reason ?? null, expires_at: opts.expiresAt ?? null });
          return { json: view, text: formatRecord(suppressionRecord(view)) };
        },
      ),
    );
  suppression
    .command('remove')
    .description('remove a number from the suppression list')
    .argument('<phone_number>', 'the number, E.164')
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .action(
      dual(
        async (deps, phoneNumber: string, opts: { org?: number }) => {
          const orgId = orgOf(opts);
          const { getSuppression, removeSuppression } = await suppressions();
          await requireOrg(deps, orgId);
          const ctx = suppressionContext(deps);
          const view = await getSuppression(ctx, orgId, phoneNumber);
          await removeSuppression(ctx, orgId, phoneNumber);
          return { json: { removed: view.phone_number }, text: `Removed ${view.phone_number}` };
        },
        async (client, phoneNumber: string) => {
          // Read first: the answer names the number as stored (E.164), however it was written here.
          const view = await client.suppressions.get(phoneNumber);
          await client.suppressions.delete(view.phone_number);
          return { json: { removed: view.phone_number }, text: `Removed ${view.phone_number}` };
        },
      ),
    );
  suppression
    .command('list')
    .description("list an organization's suppressions in number order (expired ones too)")
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .option('--after <phone_number>', 'start after this number (the previous page\'s next_after)')
    .option('--limit <n>', 'page size, 1 to 1000', limitValue(1), 100)
    .action(
      dual(
        async (deps, opts: { org?: number; after?: string; limit: Limit }) => {
          const orgId = orgOf(opts);
          const { listSuppressions } = await suppressions();
          await requireOrg(deps, orgId);
          const limit = opts.limit === 'default' ? 100 : Math.min(1000, opts.limit);
          return listOutput(await listSuppressions(suppressionContext(deps), orgId, { after: opts.after, limit }));
        },
        async (client, opts: { after?: string; limit: Limit }) => {
          const limit = opts.limit === 'default' ? 100 : Math.min(1000, opts.limit);
          return listOutput(await client.suppressions.list({ after: opts.after, limit }));
        },
      ),
    );
  suppression
    .command('import')
    .description('suppress every number of a CSV file (header row with a phone_number column; optional reason, expires_at)')
    .argument('<file>', 'the CSV file')
    .option('--org <id>', 'organization id (direct database mode)', positiveInt)
    .action(
      dual(
        async (deps, file: string, opts: { org?: number }) => {
          const orgId = orgOf(opts);
          const { importLimitsOf, importSuppressions } = await suppressions();
          await requireOrg(deps, orgId);
          const input = createReadStream(file);
          const opened = new Promise<void>((resolve, reject) => {
            input.once('open', () => resolve());
            input.once('error', (error) => reject(new CliError('not_found', `Cannot read ${file}: ${error.message}`)));
          });
          await opened;
          return importOutput(await importSuppressions(suppressionContext(deps), orgId, input, importLimitsOf(deps.config)));
        },
        async (client, file: string) => importOutput((await client.suppressions.import(readCsv(file))) as Parameters<typeof importOutput>[0]),
      ),
    );
}
