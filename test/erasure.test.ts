// Erasure of a person (DELETE /api/v1/public/phone-numbers/{phone_number}/data, `dialtone
// erase-number`): the number, initial_context and result leave every run, event, webhook delivery,
// recorded response, campaign contact and Idempotency-Key record of the calling organization, and
// afterwards cannot be found anywhere in the database: in the file's bytes on SQLite (after a
// checkpoint), in every text and JSON column on PostgreSQL. Live runs refuse it; other
// organizations keep theirs (docs/operations.md, "Erasure").
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { isTerminal } from '../src/runs/states.js';
import { sql } from '../src/store/engine/kysely.js';
import type { Store } from '../src/store/engine/store.js';
import { getJson, postJson, TEST_SECRET_KEY, type TestEnv } from './helpers/app.js';
import { addContacts, CAMPAIGNS, createCampaign } from './helpers/campaigns.js';
import { buildWithDispatcher, waitForRun } from './helpers/dispatch.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { ROOT, runToCompletion } from './helpers/process.js';
import { storeCases } from './helpers/stores.js';
import { scaledTimeout } from './helpers/timeouts.js';
import { startReceiver, WEBHOOK_TEST_ENV } from './helpers/webhooks.js';

const API = '/api/v1/public';
const BIN = join(ROOT, 'bin', 'dialtone');
/** The person erased: a number no other test data uses, and every form it could be written in. */
const NUMBER = '+12025550187';
const FORMS = ['+12025550187', '12025550187', '2025550187', '(202) 555-0187', '202-555-0187', '%2B12025550187'];
/** Something of the person's initial_context that is not the number. */
const NAME = 'Zebulon Quartermaine';

const erase = (env: TestEnv, f: OrgFixture, number: string, query = '') =>
  env.app.inject({ method: 'DELETE', url: `${API}/phone-numbers/${encodeURIComponent(number)}/data${query}`, headers: { 'x-api-key': f.apiKey } });

async function call(env: TestEnv, f: OrgFixture, number: string, extra: { idempotencyKey?: string; context?: Record<string, unknown> } = {}): Promise<number> {
  const context = extra.context ?? { name: NAME, callback: '(202) 555-0187', alt: '12025550187' };
  const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: number, initial_context: context }, {
    key: f.apiKey,
    ...(extra.idempotencyKey ? { headers: { 'idempotency-key': extra.idempotencyKey } } : {}),
  });
  assert.equal(response.statusCode, 200, response.body);
  return (response.json() as { workflow_run_id: number }).workflow_run_id;
}

/** Which of the forms (and the name) a byte buffer holds. */
function formsIn(bytes: Buffer): string[] {
  return [...FORMS, NAME].filter((form) => bytes.includes(Buffer.from(form, 'utf8')));
}

/**
 * Where the number (or the name) can still be found: on SQLite, in the bytes of the database file
 * and its -wal after a checkpoint from a connection of the test's own; on PostgreSQL, in any text,
 * varchar, json or jsonb column of any table (live rows, as any query sees them).
 */
async function traces(store: Store, databaseUrl: string): Promise<string[]> {
  if (store.dialect === 'sqlite') {
    const path = databaseUrl.slice('sqlite:'.length);
    const own = new Database(path);
    try {
      own.pragma('busy_timeout = 5000');
      own.pragma('wal_checkpoint(TRUNCATE)');
    } finally {
      own.close();
    }
    const found = formsIn(readFileSync(path)).map((form) => `${form} in the database file`);
    if (existsSync(`${path}-wal`)) found.push(...formsIn(readFileSync(`${path}-wal`)).map((form) => `${form} in the -wal`));
    return found;
  }
  const { rows: columns } = await sql<{ table_name: string; column_name: string }>`
    select table_name, column_name from information_schema.columns
    where table_schema = 'public' and data_type in ('text', 'character varying', 'json', 'jsonb') order by 1, 2`.execute(store.db);
  const found: string[] = [];
  for (const { table_name: table, column_name: column } of columns) {
    for (const form of [...FORMS, NAME]) {
      const { rows } = await sql<{ n: number }>`select count(*) as n from ${sql.table(table)} where strpos(${sql.ref(column)}::text, ${form}) > 0`.execute(store.db);
      if (Number(rows[0]?.n ?? 0) > 0) found.push(`${form} in ${table}.${column}`);
    }
  }
  return found;
}

for (const { kind, skip } of await storeCases()) {
  describe(`Erasure of a phone number (${kind})`, { skip }, () => {
    it('erases the number, initial_context and result from every run, event, webhook delivery, recorded response, campaign contact and Idempotency-Key record, answers counts per table, answers zero counts the second time, and leaves the number nowhere in the database', async (t) => {
      const env = await buildWithDispatcher(t, kind, { env: WEBHOOK_TEST_ENV });
      const f = await createOrgFixture(env.deps);
      // The receiver answers with the message it got: its recorded response bodies hold the number too.
      const receiver = await startReceiver(t);
      receiver.answer = (message) => ({ status: 200, body: message.body.slice(0, 2000) });
      const endpoint = await postJson(env.app, `${API}/webhook-endpoints`, { url: receiver.url }, { key: f.apiKey });
      assert.equal(endpoint.statusCode, 201, endpoint.body);

      const runIds = [await call(env, f, NUMBER, { idempotencyKey: randomUUID() }), await call(env, f, NUMBER)];
      const other = await call(env, f, '+12025550123', { context: { name: 'Ada' } });
      for (const id of [...runIds, other]) await waitForRun(env, id, (run) => isTerminal(run.state), scaledTimeout(10_000));
      // What the agent runtime reported (runs/runtime-actions.ts writes the column and an event): the number in both.
      await env.deps.store.db.updateTable('workflow_runs').set({ result: JSON.stringify({ callback_number: NUMBER }) }).where('id', '=', runIds[0] ?? 0).execute();
      await env.deps.store.db.insertInto('run_events').values({ run_id: runIds[0] ?? 0, seq: 1000, type: 'agent.note', at: Date.now(), data: JSON.stringify({ heard: '202-555-0187' }) }).execute();
      // A campaign contact with the number, still due, and one without.
      const campaign = await createCampaign(env.app, f);
      await addContacts(env.app, f, campaign.id, [{ phone_number: NUMBER, initial_context: { name: NAME } }, { phone_number: '+12025550151', initial_context: { name: 'Ada' } }]);
      // Every message of the runs has been sent and answered (its response recorded).
      await receiver.waitFor((received) => received.filter((m) => m.json.data.run?.phone_number === NUMBER).length >= 8, scaledTimeout(10_000));
      const until = Date.now() + scaledTimeout(10_000);
      while ((await env.deps.store.db.selectFrom('webhook_deliveries').select('id').where('status', '=', 'pending').execute()).length > 0) {
        assert.ok(Date.now() < until, 'every delivery was sent');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      env.webhooks.stop();
      await env.dispatcher.stop();

      // The check can fail: before the erasure, the number and the name are there.
      const before = await traces(env.deps.store, env.deps.config.DATABASE_URL);
      assert.ok(before.some((trace) => trace.startsWith(NUMBER)) && before.some((trace) => trace.startsWith(NAME)), `before the erasure the number is found: ${before.join('; ')}`);

      const erased = await erase(env, f, NUMBER);
      assert.equal(erased.statusCode, 200, erased.body);
      const { phone_number: phoneNumber, counts } = erased.json() as { phone_number: string; counts: Record<string, number> };
      assert.equal(phoneNumber, NUMBER);
      assert.equal(counts.workflow_runs, 2);
      assert.equal(counts.campaign_contacts, 1);
      assert.equal(counts.idempotency_keys, 1);
      assert.equal(counts.suppressions, 0);
      const events = await env.deps.store.db.selectFrom('run_events').select('id').where('run_id', 'in', runIds).execute();
      assert.equal(counts.run_events, events.length);
      const deliveries = await env.deps.store.db.selectFrom('webhook_deliveries').select('id').where('run_id', 'in', runIds).execute();
      assert.equal(counts.webhook_deliveries, deliveries.length);
      assert.ok((counts.webhook_attempts ?? 0) >= deliveries.length, `every delivery's recorded response was erased (${counts.webhook_attempts})`);

      const left = await traces(env.deps.store, env.deps.config.DATABASE_URL);
      assert.deepEqual(left, [], 'nothing of the number or of its initial_context is left');

      // The runs are still there, ended, with their number erased; the other run is untouched.
      const run = await getJson(env.app, `${API}/workflow-runs/${runIds[0]}`, f.apiKey);
      assert.equal(run.statusCode, 200, run.body);
      const view = run.json() as { phone_number: string; initial_context: unknown; state: string };
      assert.equal(view.phone_number, 'erased');
      assert.ok(isTerminal(view.state as never));
      const kept = (await getJson(env.app, `${API}/workflow-runs/${other}`, f.apiKey)).json() as { phone_number: string; initial_context: { name: string } };
      assert.equal(kept.phone_number, '+12025550123');
      assert.equal(kept.initial_context.name, 'Ada', "another number's run keeps its initial_context");
      const contacts = (await getJson(env.app, `${CAMPAIGNS}/${campaign.id}/contacts`, f.apiKey)).json() as { data: { phone_number: string; status: string }[] };
      assert.deepEqual(contacts.data.map((c) => c.status).sort(), ['canceled', 'pending'], 'the erased contact, still due, is canceled; the other is not');
      assert.ok(contacts.data.some((c) => c.phone_number === '+12025550151'));

      // The audit log has the erasure, by the key, with the number masked.
      const audit = await env.deps.store.db.selectFrom('audit_events').selectAll().where('org_id', '=', f.orgId).where('action', '=', 'phone_number.erased').execute();
      assert.equal(audit.length, 1);
      assert.equal(audit[0]?.actor_key_id, f.apiKeyId);
      assert.equal(audit[0]?.target_id, '+1202555****');

      const again = await erase(env, f, NUMBER);
      assert.equal(again.statusCode, 200, again.body);
      assert.deepEqual(Object.values((again.json() as { counts: Record<string, number> }).counts), [0, 0, 0, 0, 0, 0, 0], 'a second erasure finds nothing');
    });

    it('refuses with 409 runs_not_ended, listing them, while a run to the number has not ended, and changes nothing', async (t) => {
      const env = await buildWithDispatcher(t, kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const queued = await call(env, f, NUMBER);
      const refused = assertProblem(await erase(env, f, NUMBER, '?suppress=true'), 409, 'runs_not_ended');
      assert.equal((await env.deps.store.db.selectFrom('audit_events').select('id').where('action', '=', 'phone_number.erased').execute()).length, 0, 'no audit entry for an erasure refused');
      assert.deepEqual(refused.runs, [{ id: queued, name: `WR-API-${queued}`, state: 'queued' }]);
      const run = (await getJson(env.app, `${API}/workflow-runs/${queued}`, f.apiKey)).json() as { phone_number: string; initial_context: { name: string } };
      assert.equal(run.phone_number, NUMBER);
      assert.equal(run.initial_context.name, NAME);
      assert.equal((await getJson(env.app, `${API}/suppressions/${encodeURIComponent(NUMBER)}`, f.apiKey)).statusCode, 404, 'the suppression asked for was not added either');
    });

    it("leaves another organization's runs to the same number untouched, and with ?suppress=true suppresses the number in the same transaction", async (t) => {
      const env = await buildWithDispatcher(t, kind);
      const a = await createOrgFixture(env.deps, 'A');
      const b = await createOrgFixture(env.deps, 'B');
      const ofA = await call(env, a, NUMBER);
      const ofB = await call(env, b, NUMBER);
      for (const id of [ofA, ofB]) await waitForRun(env, id, (run) => isTerminal(run.state), scaledTimeout(10_000));

      const erased = await erase(env, a, NUMBER, '?suppress=true');
      assert.equal(erased.statusCode, 200, erased.body);
      assert.equal((erased.json() as { counts: { workflow_runs: number; suppressions: number } }).counts.workflow_runs, 1);
      assert.equal((erased.json() as { counts: { suppressions: number } }).counts.suppressions, 1);
      const suppression = await getJson(env.app, `${API}/suppressions/${encodeURIComponent(NUMBER)}`, a.apiKey);
      assert.equal(suppression.statusCode, 200, suppression.body);
      assert.equal((suppression.json() as { expires_at: string | null }).expires_at, null);
      assertProblem(await postJson(env.app, PATHS.initiateCall(a.agentUuid), { phone_number: NUMBER }, { key: a.apiKey }), 422, 'number_suppressed');

      const runOfB = (await getJson(env.app, `${API}/workflow-runs/${ofB}`, b.apiKey)).json() as { phone_number: string; initial_context: { name: string } };
      assert.equal(runOfB.phone_number, NUMBER);
      assert.equal(runOfB.initial_context.name, NAME);
      const eventsOfB = await env.deps.store.db.selectFrom('run_events').select('data').where('run_id', '=', ofB).execute();
      assert.ok(eventsOfB.every((e) => !JSON.stringify(e.data).includes('"erased"')));
      assert.equal((await getJson(env.app, `${API}/suppressions/${encodeURIComponent(NUMBER)}`, b.apiKey)).statusCode, 404, "B's suppression list is its own");
      const again = await erase(env, a, NUMBER, '?suppress=true');
      assert.equal((again.json() as { counts: { suppressions: number } }).counts.suppressions, 0, 'already suppressed for good');
    });

    it('refuses a number that is not E.164 with 422 invalid_phone_number, and a SIP URI likewise', async (t) => {
      const env = await buildWithDispatcher(t, kind, { start: false });
      const f = await createOrgFixture(env.deps);
      assertProblem(await erase(env, f, '2025550187'), 422, 'invalid_phone_number');
      assertProblem(await erase(env, f, 'sip:alice@example.com'), 422, 'invalid_phone_number');
      assertProblem(await erase(env, f, NUMBER, '?suppress=yes'), 422, 'validation_failed');
    });

    it('`dialtone erase-number <org> <number> --suppress` erases and suppresses as the API does, printing the counts', async (t) => {
      const env = await buildWithDispatcher(t, kind);
      const f = await createOrgFixture(env.deps);
      const id = await call(env, f, NUMBER);
      await waitForRun(env, id, (run) => isTerminal(run.state), scaledTimeout(10_000));
      const cli = await runToCompletion(process.execPath, [BIN, '--json', 'erase-number', String(f.orgId), NUMBER, '--suppress'], { DATABASE_URL: env.deps.config.DATABASE_URL, DIALTONE_SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'silent' });
      assert.equal(cli.code, 0, cli.stderr);
      const out = JSON.parse(cli.stdout) as { phone_number: string; counts: { workflow_runs: number; suppressions: number } };
      assert.equal(out.phone_number, NUMBER);
      assert.equal(out.counts.workflow_runs, 1);
      assert.equal(out.counts.suppressions, 1);
      assert.equal(((await getJson(env.app, `${API}/workflow-runs/${id}`, f.apiKey)).json() as { phone_number: string }).phone_number, 'erased');
      const audit = await env.deps.store.db.selectFrom('audit_events').selectAll().where('action', '=', 'phone_number.erased').execute();
      assert.deepEqual(audit.map((a) => [a.actor, a.target_id]), [['cli', '+1202555****']]);
    });
  });
}
