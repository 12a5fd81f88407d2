// `dialtone erase-number`: erases a phone number from an organization's data, as
// DELETE /api/v1/public/phone-numbers/{phone_number}/data does (erasure/erase-number.ts).
import type { Command } from 'commander';
import { action, requireOrg } from '../action.js';
import { formatRecord } from '../output.js';
import { positiveInt } from '../parsers.js';

export function erasureCommands(program: Command): void {
  program
    .command('erase-number')
    .description("erase a phone number from an organization's runs, events, webhook deliveries, campaign contacts and Idempotency-Key records (refused while a run to it has not ended)")
    .argument('<org>', 'organization id', positiveInt)
    .argument('<phone_number>', 'the number, E.164 (+12025550123)')
    .option('--suppress', 'also add the number to the suppression list for good, in the same transaction')
    .action(
      action(async (deps, orgId: number, phoneNumber: string, opts: { suppress?: boolean }) => {
        // Loaded when the command runs (src/cli/README.md).
        const { CLI_ACTOR, eraseNumber } = await import('../../erasure/erase-number.js');
        await requireOrg(deps, orgId);
        const result = await eraseNumber({ store: deps.store, clock: deps.clock, logger: deps.logger }, orgId, phoneNumber, { suppress: opts.suppress === true, actor: CLI_ACTOR });
        return { json: result, text: `Erased ${result.phone_number}\n${formatRecord({ ...result.counts })}` };
      }),
    );
}
