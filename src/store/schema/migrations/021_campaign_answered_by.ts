// A campaign's attempts by who answered, for its progress (machines counted apart from people):
// like 013's index by state, the count reads index entries only, and only those of attempts a
// verdict was recorded for (most runs of most campaigns ask nothing, and are not in it).
import { sql } from '../../engine/kysely.js';
import type { Kysely } from 'kysely';
import type { DialectName } from '../../engine/store.js';

export function up021(_dialect: DialectName) {
  return async (db: Kysely<unknown>): Promise<void> => {
    await db.schema
      .createIndex('workflow_runs_campaign_answered_by_idx')
      .on('workflow_runs')
      .columns(['campaign_id', 'answered_by'])
      .where(sql.ref('campaign_id'), 'is not', null)
      .where(sql.ref('answered_by'), 'is not', null)
      .execute();
  };
}
