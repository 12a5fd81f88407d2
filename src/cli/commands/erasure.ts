// `dialtone erase-number`: erases a phone number from an organization's data, as
// DELETE /api/v1/public/phone-numbers/{phone_number}/data does (erasure/erase-number.ts); in
// remote mode through that operation, for the key's organization.
import type { Command } from 'commander';
import { requireOrg } from '../action.js';
import { CliError } from '../cli-error.js';
import { formatRecord } from '../output.js';
import { parsedArgument, positiveInt } from '../parsers.js';
import { dual } from '../remote.js';

const erasedText = (result: { phone_number: string; counts: object }) => `Erased ${result.phone_number}\n${formatRecord({ ...result.counts })}`;

export function erasureCommands(program: Command): void {
  program
    .command('erase-number')
    .description(
      "erase a phone number from an organization's runs, events, webhook deliveries, campaign contacts and Idempotency-Key records (refused while a run to it has not ended). Direct database mode: erase-number <org> <phone_number>; remote mode: erase-number <phone_number>",
    )
    .argument('<org_or_phone_number>', 'organization id (direct database mode), else the number')
    .argument('[phone_number]', 'the number, E.164 (+12025550123), after the organization id in direct database mode')
    .option('--suppress', 'also add the number to the suppression list for good, in the same transaction')
    .action(
      dual(
        async (deps, org: string, phoneNumber: string | undefined, opts: { suppress?: boolean }) => {
          if (phoneNumber === undefined) throw new CliError('invalid_input', 'Direct database mode names the organization first: erase-number <org> <phone_number>.');
          const orgId = parsedArgument(positiveInt, org, 'organization id');
          // Loaded when the command runs (src/cli/README.md).
          const { CLI_ACTOR, eraseNumber } = await import('../../erasure/erase-number.js');
          await requireOrg(deps, orgId);
          const result = await eraseNumber({ store: deps.store, clock: deps.clock, logger: deps.logger }, orgId, phoneNumber, { suppress: opts.suppress === true, actor: CLI_ACTOR });
          return { json: result, text: erasedText(result) };
        },
        async (client, first: string, second: string | undefined, opts: { suppress?: boolean }) => {
          if (second !== undefined) throw new CliError('invalid_input', "In remote mode the API key's organization is used: erase-number <phone_number>, without the organization id.");
          const result = await client.phoneNumbers.erase(first, { suppress: opts.suppress === true });
          return { json: result, text: erasedText(result) };
        },
      ),
    );
}
