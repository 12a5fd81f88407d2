// Who answered a run's call (answering-machine detection): the normalized verdict (`human`,
// `machine`, `fax`, `unknown`; null until a provider decides) and the provider's own words for it
// (Twilio's `machine_end_beep`, the simulator's `voicemail_greeting`), kept side by side as
// outcome_reason and raw_provider_status are. Both nullable, so adding them rewrites no row.
// A campaign's own answering_machine settings (JSON text; null: its agent's) replace its agent's.
import type { Kysely } from 'kysely';
import type { DialectName } from '../../engine/store.js';

export function up018(_dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema.alterTable('workflow_runs').addColumn('answered_by', 'text').execute();
    await db.schema.alterTable('workflow_runs').addColumn('raw_answered_by', 'text').execute();
    await db.schema.alterTable('campaigns').addColumn('answering_machine', 'text').execute();
  };
}
