// The benchmark's floor: the least a server can do for an Initiate Call request. A bare Fastify
// route, no authentication, no validation beyond JSON parsing, no logging, one insert of a run row
// of the same shape as the service's, committed with the same durability, through the same store
// code (its statement compiled once and, on PostgreSQL, prepared once per connection, like the
// service's). `npm run bench` runs it beside the service and reports the service's figures as ratios of
// this one, measured in the same run, so a noisy shared machine weighs on both alike.
//
//   DATABASE_URL   the store (migrated by the benchmark; an organization, workflow, definition and
//                  telephony configuration exist, ids given below)
//   FLOOR_IDS      "orgId,workflowId,definitionId,telephonyConfigurationId"
import Fastify from 'fastify';
import { executeCompiled } from '../src/store/engine/compiled-statements.js';
import { openStore } from '../src/store/engine/store.js';

const store = openStore(process.env.DATABASE_URL ?? '', { poolSize: 10 });
const [orgId = 0, workflowId = 0, definitionId = 0, telephonyConfigurationId = 0] = (process.env.FLOOR_IDS ?? '').split(',').map(Number);

const app = Fastify({ logger: false });
app.post('/floor', async (request) => {
  const body = request.body as { phone_number: string; initial_context?: unknown };
  const now = Date.now();
  // One insert, as durable as the service's: on PostgreSQL a statement outside a transaction
  // commits durably on its own (one round trip); SQLite needs the store's durable transaction to
  // flush its WAL (store/engine/wal-sync.ts).
  // Built once and rerun with new values, and on PostgreSQL prepared once per connection, as the
  // service's own hot statements are (store/engine/compiled-statements.ts, store/engine/prepared-statements.ts):
  // the floor uses what any server would, so the ratio measures what the service adds.
  const values = { phoneNumber: body.phone_number, initialContext: body.initial_context === undefined ? null : JSON.stringify(body.initial_context), at: now };
  const insert = async (db: typeof store.db) =>
    (
      await executeCompiled(db, store.dialect, 'floor:insert-run', values, (p) =>
        db
          .insertInto('workflow_runs')
          .values({
            name: null,
            org_id: orgId,
            workflow_id: workflowId,
            definition_id: definitionId,
            mode: 'published',
            trigger_uuid: null,
            phone_number: p('phoneNumber'),
            caller_id: null,
            telephony_configuration_id: telephonyConfigurationId,
            initial_context: p('initialContext'),
            state: 'queued',
            outcome_reason: null,
            provider_call_id: null,
            created_at: p('at'),
            updated_at: p('at'),
            ended_at: null,
          })
          .returning('id'),
      )
    ).rows[0] as { id: number };
  const { id } = store.dialect === 'postgres' ? await insert(store.db) : await store.transaction('durable', (trx) => insert(trx));
  return { status: 'queued', workflow_run_id: id, workflow_run_name: `WR-API-${id}` };
});

const url = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`Server listening at ${url}\n`);
const stop = () => void app.close().then(() => store.close()).then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
