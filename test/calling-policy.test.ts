// The calling policy (issue 14, part A): each organization's suppression (do-not-call) list, over
// HTTP and at claim time, and the per-number frequency cap, exact under concurrency.
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { setOrganizationLimits } from '../src/orgs/organizations.js';
import { createRun } from '../src/runs/create-run.js';
import { getRun } from '../src/runs/read-run.js';
import { explainCapOpening } from '../src/store/statements/suppression-statements.js';
import { build, getJson, postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, eventTypes, waitForRun } from './helpers/dispatch.js';
import { countRuns, createOrgFixture, PATHS, type OperationName, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const NUMBER = '+12025550123';
const E164 = { kind: 'e164', value: NUMBER } as const;
const ENCODED = encodeURIComponent(NUMBER);

function suppressionUrl(number: string): string {
  return `/api/v1/public/suppressions/${encodeURIComponent(number)}`;
}

function put(app: FastifyInstance, key: string, number: string, body?: unknown) {
  return app.inject({
    method: 'PUT',
    url: suppressionUrl(number),
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
}

function remove(app: FastifyInstance, key: string, number: string) {
  return app.inject({ method: 'DELETE', url: suppressionUrl(number), headers: { 'x-api-key': key } });
}

function importCsv(app: FastifyInstance, key: string, csv: string, contentType = 'text/csv') {
  return app.inject({ method: 'POST', url: '/api/v1/public/suppressions/import', headers: { 'x-api-key': key, 'content-type': contentType }, payload: csv });
}

function call(app: FastifyInstance, f: OrgFixture, phone = NUMBER, operation: OperationName = 'initiateCall') {
  const target = operation.endsWith('WorkflowUuid') ? f.workflowUuid : f.agentUuid;
  return postJson(app, PATHS[operation](target), { phone_number: phone }, { key: f.apiKey });
}

/** A clock the test moves by hand: the cap's window and Retry-After depend only on it. */
function manualClock(start = Date.parse('2026-03-02T15:00:00Z')) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

for (const store of await storeCases()) {
  describe(`Suppression list (${store.kind})`, { skip: store.skip }, () => {
    it('suppresses a number given in any valid form, stores it in E.164, reads, lists and removes it', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const added = await put(app, f.apiKey, '+1 (202) 555-0123', { reason: 'asked not to be called' });
      assert.equal(added.statusCode, 200, added.body);
      assert.equal(added.json().phone_number, NUMBER);
      assert.equal(added.json().reason, 'asked not to be called');
      assert.equal(added.json().expires_at, null);
      assert.equal(added.json().active, true);

      const again = await put(app, f.apiKey, NUMBER, { reason: 'updated' });
      assert.equal(again.statusCode, 200, 'PUT is an idempotent upsert');
      assert.equal(again.json().reason, 'updated');

      const read = await getJson(app, `/api/v1/public/suppressions/${ENCODED}`, f.apiKey);
      assert.equal(read.statusCode, 200);
      assert.equal(read.json().reason, 'updated');
      const listed = await getJson(app, '/api/v1/public/suppressions', f.apiKey);
      assert.deepEqual(listed.json().data.map((s: { phone_number: string }) => s.phone_number), [NUMBER]);
      assert.equal(listed.json().next_after, null);

      assert.equal((await remove(app, f.apiKey, NUMBER)).statusCode, 204);
      assertProblem(await getJson(app, `/api/v1/public/suppressions/${ENCODED}`, f.apiKey), 404, 'suppression_not_found');
      assertProblem(await remove(app, f.apiKey, NUMBER), 404, 'suppression_not_found');
      assert.equal((await call(app, f)).statusCode, 200, 'a removed suppression no longer refuses calls');
    });

    it('refuses an invalid number with 422 invalid_phone_number and an expiry in the past with 422 validation_failed, storing nothing', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const invalid = assertProblem(await put(app, f.apiKey, '2025550123'), 422, 'invalid_phone_number');
      assert.equal(invalid.errors?.[0]?.pointer, '/phone_number');
      const past = assertProblem(await put(app, f.apiKey, NUMBER, { expires_at: '2001-01-01T00:00:00Z' }), 422, 'validation_failed');
      assert.equal(past.errors?.[0]?.pointer, '/expires_at');
      assertProblem(await put(app, f.apiKey, NUMBER, { expires_at: 'tomorrow' }), 422, 'validation_failed');
      assertProblem(await put(app, f.apiKey, NUMBER, { reason: 'x', colour: 'red' }), 422, 'validation_failed');
      assertProblem(await getJson(app, `/api/v1/public/suppressions/not-a-number`, f.apiKey), 404, 'suppression_not_found');
      assert.deepEqual((await getJson(app, '/api/v1/public/suppressions', f.apiKey)).json().data, []);
    });

    it('refuses each of the four operations to a suppressed number with 422 number_suppressed, creating no run', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      assert.equal((await put(app, f.apiKey, NUMBER)).statusCode, 200);
      for (const operation of Object.keys(PATHS) as OperationName[]) {
        const problem = assertProblem(await call(app, f, '+1 202-555-0123', operation), 422, 'number_suppressed');
        assert.equal(problem.suppression_expires_at, null, operation);
      }
      assert.equal(await countRuns(deps), 0);
      assert.equal((await call(app, f, '+12025550124')).statusCode, 200, 'other numbers are still called');
    });

    it('stops suppressing a number once its expires_at has passed', async (t) => {
      const clock = manualClock();
      const { app, deps } = await build(t, store.kind, { clock });
      const f = await createOrgFixture(deps);
      const expiresAt = new Date(clock.now() + 60_000).toISOString();
      const added = await put(app, f.apiKey, NUMBER, { expires_at: expiresAt });
      assert.equal(added.json().expires_at, expiresAt);
      const refused = assertProblem(await call(app, f), 422, 'number_suppressed');
      assert.equal(refused.suppression_expires_at, expiresAt);
      clock.advance(60_000);
      assert.equal((await call(app, f)).statusCode, 200, 'expired at its expires_at');
      const read = await getJson(app, `/api/v1/public/suppressions/${ENCODED}`, f.apiKey);
      assert.equal(read.json().active, false, 'an expired suppression is still listed, inactive');
    });

    it("keeps each organization's list to itself: another organization's suppressions answer 404 and never refuse its calls", async (t) => {
      const { app, deps } = await build(t, store.kind);
      const acme = await createOrgFixture(deps);
      const other = await createOrgFixture(deps, 'Other');
      assert.equal((await put(app, acme.apiKey, NUMBER, { reason: 'acme only' })).statusCode, 200);
      assertProblem(await getJson(app, `/api/v1/public/suppressions/${ENCODED}`, other.apiKey), 404, 'suppression_not_found');
      assertProblem(await remove(app, other.apiKey, NUMBER), 404, 'suppression_not_found');
      assert.deepEqual((await getJson(app, '/api/v1/public/suppressions', other.apiKey)).json().data, []);
      assert.equal((await call(app, other)).statusCode, 200);
      assertProblem(await call(app, acme), 422, 'number_suppressed');
      assert.equal((await getJson(app, `/api/v1/public/suppressions/${ENCODED}`, acme.apiKey)).json().reason, 'acme only', "the other organization's DELETE removed nothing");
    });

    it('pages the list in number order with after and limit', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const numbers = ['+12025550125', '+12025550121', '+12025550123', '+12025550122', '+12025550124'];
      for (const n of numbers) assert.equal((await put(app, f.apiKey, n)).statusCode, 200);
      const seen: string[] = [];
      let after: string | null = null;
      for (let page = 0; page < 5; page++) {
        const url: string = `/api/v1/public/suppressions?limit=2${after ? `&after=${encodeURIComponent(after)}` : ''}`;
        const response = await getJson(app, url, f.apiKey);
        assert.equal(response.statusCode, 200, response.body);
        const body = response.json() as { data: { phone_number: string }[]; next_after: string | null };
        seen.push(...body.data.map((s) => s.phone_number));
        after = body.next_after;
        if (after === null) break;
      }
      assert.deepEqual(seen, [...numbers].sort());
      assertProblem(await getJson(app, '/api/v1/public/suppressions?limit=0', f.apiKey), 422, 'validation_failed');
      assertProblem(await getJson(app, '/api/v1/public/suppressions?after=12', f.apiKey), 422, 'validation_failed');
    });

    it('imports a CSV, reporting each invalid line by its line number and importing the rest', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const csv = [
        'Phone_Number,reason,expires_at',
        '+12025550121,opted out,',
        '"+1 202 555 0122","moved, no longer a customer",2099-01-01T00:00:00Z',
        '',
        '2025550123,no plus,',
        '+12025550124,,yesterday',
        ',empty,',
        '+12025550121,duplicate: the last line wins,',
        'sip:alice@example.com,a SIP URI,',
      ].join('\r\n');
      const response = await importCsv(app, f.apiKey, csv);
      assert.equal(response.statusCode, 200, response.body);
      const result = response.json() as { imported: number; invalid: { line: number; value: string; detail: string }[]; invalid_count: number };
      assert.equal(result.imported, 2);
      assert.deepEqual(result.invalid.map((i) => [i.line, i.value]), [
        [5, '2025550123'],
        [6, '+12025550124'],
        [7, ''],
        [9, 'sip:alice@example.com'],
      ]);
      assert.match(result.invalid[0]?.detail ?? '', /international format/);
      assert.match(result.invalid[1]?.detail ?? '', /not a date-time/);
      assert.equal(result.invalid_count, 4);
      const listed = (await getJson(app, '/api/v1/public/suppressions', f.apiKey)).json().data as { phone_number: string; reason: string; expires_at: string | null }[];
      assert.deepEqual(listed.map((s) => [s.phone_number, s.reason, s.expires_at]), [
        ['+12025550121', 'duplicate: the last line wins', null],
        ['+12025550122', 'moved, no longer a customer', '2099-01-01T00:00:00.000Z'],
      ]);
      assertProblem(await call(app, f, '+12025550122'), 422, 'number_suppressed');
    });

    it('refuses a CSV without a phone_number column, malformed CSV, another content type and a body over SUPPRESSION_IMPORT_MAX_BYTES, importing nothing', async (t) => {
      const { app, deps } = await build(t, store.kind, { env: { SUPPRESSION_IMPORT_MAX_BYTES: '1024' } });
      const f = await createOrgFixture(deps);
      assertProblem(await importCsv(app, f.apiKey, 'number,reason\n+12025550121,x\n'), 422, 'validation_failed');
      assertProblem(await importCsv(app, f.apiKey, ''), 422, 'validation_failed');
      const malformed = assertProblem(await importCsv(app, f.apiKey, 'phone_number,reason\n+12025550121,ok\n+12025550122,"unterminated\n'), 422, 'validation_failed');
      assert.match(malformed.errors?.[0]?.detail ?? '', /Not valid CSV/);
      assertProblem(await importCsv(app, f.apiKey, 'phone_number\n+12025550121\n', 'text/plain'), 415, 'unsupported_media_type');
      assertProblem(await postJson(app, '/api/v1/public/suppressions/import', { phone_number: NUMBER }, { key: f.apiKey }), 415, 'unsupported_media_type');
      const big = `phone_number\n${Array.from({ length: 100 }, (_, i) => `+1202555${String(1000 + i)}`).join('\n')}\n`;
      assert.ok(big.length > 1024);
      assertProblem(await importCsv(app, f.apiKey, big), 413, 'payload_too_large');
      // Chunked (no Content-Length): the limit is enforced while the body streams in.
      const { Readable } = await import('node:stream');
      const chunked = await app.inject({
        method: 'POST',
        url: '/api/v1/public/suppressions/import',
        headers: { 'x-api-key': f.apiKey, 'content-type': 'text/csv' },
        payload: Readable.from([Buffer.from(big.slice(0, 600)), Buffer.from(big.slice(600))]),
      });
      assertProblem(chunked, 413, 'payload_too_large');
      assert.deepEqual((await getJson(app, '/api/v1/public/suppressions', f.apiKey)).json().data, []);
    });

    it('cancels, never dialing, a queued run whose number was suppressed after it was queued, with reason suppressed', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const suppressed = (await call(env.app, f, '+12025550100')).json().workflow_run_id as number;
      const kept = (await call(env.app, f, '+12025550153')).json().workflow_run_id as number;
      const alsoSuppressed = (await call(env.app, f, '+12025550100')).json().workflow_run_id as number;
      assert.equal((await put(env.app, f.apiKey, '+12025550100', { reason: 'complained' })).statusCode, 200);
      env.dispatcher.start();
      for (const runId of [suppressed, alsoSuppressed]) {
        const run = await waitForRun(env, runId, ended);
        assert.equal(run.state, 'canceled');
        assert.equal(run.outcome_reason, 'suppressed');
        assert.equal(run.claimed_at, null, 'never claimed');
        assert.deepEqual(await eventTypes(env, runId), ['queued', 'canceled']);
      }
      const dialed = await waitForRun(env, kept, ended);
      assert.equal(dialed.state, 'completed');
      assert.deepEqual(
        env.simulator.dials.map((d) => d.runId),
        [kept],
        'the simulator dialed only the unsuppressed run',
      );
      const events = await env.deps.store.db.selectFrom('run_events').select(['data']).where('run_id', '=', suppressed).where('type', '=', 'canceled').executeTakeFirstOrThrow();
      assert.deepEqual(typeof events.data === 'string' ? JSON.parse(events.data) : events.data, { reason: 'suppressed' });
      assert.equal((await getRun(env.deps.store, f.orgId, suppressed)).state, 'canceled', 'the owner reads it canceled');
    });

    it('dials a queued run whose suppression expired before the dispatcher reached it', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const runId = (await call(env.app, f, '+12025550100')).json().workflow_run_id as number;
      // Written directly: the API refuses an expiry in the past, and this one has just passed.
      await env.deps.store.db
        .insertInto('suppressions')
        .values({ org_id: f.orgId, phone_number: '+12025550100', reason: null, expires_at: Date.now() - 1, created_at: Date.now() - 60_000, updated_at: Date.now() - 60_000 })
        .execute();
      env.dispatcher.start();
      const run = await waitForRun(env, runId, ended);
      assert.equal(run.state, 'completed');
      assert.equal(env.simulator.dials.filter((d) => d.runId === runId).length, 1);
    });
  });

  describe(`Suppression and the Idempotency-Key (${store.kind})`, { skip: store.skip }, () => {
    it('refuses a suppressed number as number_suppressed before looking at the Idempotency-Key, as the check order says', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const send = (phone: string, key: string) => postJson(app, PATHS.initiateCall(f.agentUuid), { phone_number: phone }, { key: f.apiKey, headers: { 'idempotency-key': key } });
      assert.equal((await send('+12025550123', 'order-1')).statusCode, 200);
      assert.equal((await put(app, f.apiKey, '+12025550124')).statusCode, 200);
      // The same key with another payload would be idempotency_key_reused; the policy comes first.
      assertProblem(await send('+12025550124', 'order-1'), 422, 'number_suppressed');
      assert.equal(await countRuns(deps), 1);
    });
  });

  describe(`Per-number frequency cap (${store.kind})`, { skip: store.skip }, () => {
    it("counts through the number's own index, not by walking the organization's runs in the window (the plan names it)", async (t) => {
      const { deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const plan = await explainCapOpening(deps.store, f.orgId, NUMBER, Date.now() - 86_400_000, 3);
      assert.match(plan, /workflow_runs_org_phone_idx/, plan);
      assert.doesNotMatch(plan, /workflow_runs_org_created_idx|TEMP B-TREE|Seq Scan/, plan);
    });

    it('is off by default: one number may be called any number of times', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      for (let i = 0; i < 5; i++) assert.equal((await call(app, f)).statusCode, 200);
    });

    it('refuses the call over the cap with 429 number_frequency_capped and a Retry-After until the oldest counted run leaves the window, creating no run', async (t) => {
      const clock = manualClock();
      const { app, deps } = await build(t, store.kind, { clock });
      const f = await createOrgFixture(deps);
      await setOrganizationLimits(deps.store, f.orgId, { number_max_calls: 2, number_window_seconds: 3600 });
      assert.equal((await call(app, f)).statusCode, 200);
      clock.advance(600_000);
      assert.equal((await call(app, f, '+1 202 555 0123')).statusCode, 200);
      clock.advance(1_000);
      const refused = await call(app, f);
      const problem = assertProblem(refused, 429, 'number_frequency_capped');
      // The first run was created 601 s ago: it leaves the 3600 s window in 2999 s.
      assert.equal(refused.headers['retry-after'], '2999');
      assert.equal(problem.number_max_calls, 2);
      assert.equal(problem.number_window_seconds, 3600);
      assert.equal(await countRuns(deps), 2);
      assert.equal((await call(app, f, '+12025550124')).statusCode, 200, 'the cap is per number');

      clock.advance(2_998_500);
      const late = await call(app, f);
      assertProblem(late, 429, 'number_frequency_capped');
      assert.equal(late.headers['retry-after'], '1', 'rounded up, never 0');
      clock.advance(500);
      assert.equal((await call(app, f)).statusCode, 200, 'a place opens when the oldest run leaves the window');
      assertProblem(await call(app, f), 429, 'number_frequency_capped');
    });

    it('refuses a number both suppressed and over its cap as number_suppressed: the list comes first', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      await setOrganizationLimits(deps.store, f.orgId, { number_max_calls: 1, number_window_seconds: 3600 });
      assert.equal((await call(app, f)).statusCode, 200);
      assertProblem(await call(app, f), 429, 'number_frequency_capped');
      assert.equal((await put(app, f.apiKey, NUMBER, {})).statusCode, 200);
      assertProblem(await call(app, f), 422, 'number_suppressed');
      assert.equal(await countRuns(deps), 1);
    });

    it('counts runs in every state, so a canceled call still counts, and counts per organization', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const other = await createOrgFixture(deps, 'Other');
      await setOrganizationLimits(deps.store, f.orgId, { number_max_calls: 1, number_window_seconds: 60 });
      const runId = (await call(app, f)).json().workflow_run_id as number;
      const cancel = await app.inject({ method: 'POST', url: `/api/v1/public/workflow-runs/${runId}/cancel`, headers: { 'x-api-key': f.apiKey } });
      assert.equal(cancel.statusCode, 200, cancel.body);
      assertProblem(await call(app, f), 429, 'number_frequency_capped');
      assert.equal((await call(app, other)).statusCode, 200, "another organization's runs do not count");
      // A check that creates nothing (a dry run) counts at once; one whose insert follows leaves
      // the count to its creating transaction.
      const { askCallingPolicy } = await import('../src/admission/policy.js');
      const cap = { numberCap: { maxCalls: 1, windowSeconds: 60 } };
      const subject = { orgId: f.orgId, destination: E164 };
      const now = await askCallingPolicy(deps.store, cap, subject, Date.now(), { answeredAtInsert: [] });
      assert.equal(now.admitted ? undefined : now.refusal.code, 'number_frequency_capped');
      const decision = await askCallingPolicy(deps.store, cap, subject, Date.now(), { answeredAtInsert: ['suppression', 'cap'] });
      assert.ok(decision.admitted && decision.atInsert?.guards.cap);
      const off = await askCallingPolicy(deps.store, {}, subject, Date.now(), { answeredAtInsert: ['suppression', 'cap'] });
      assert.equal(off.admitted ? off.atInsert?.guards.cap : 'refused', undefined, 'nothing to count with the cap off');
    });

    it('replays the stored answer to a retry with the same Idempotency-Key instead of counting its own run against the cap', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      await setOrganizationLimits(deps.store, f.orgId, { number_max_calls: 1, number_window_seconds: 3600 });
      const send = (key: string) => postJson(app, PATHS.initiateCall(f.agentUuid), { phone_number: NUMBER }, { key: f.apiKey, headers: { 'idempotency-key': key } });
      const first = await send('order-1');
      assert.equal(first.statusCode, 200, first.body);
      const retry = await send('order-1');
      assert.equal(retry.statusCode, 200, retry.body);
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      assert.equal(retry.body, first.body);
      assert.equal((await put(app, f.apiKey, NUMBER)).statusCode, 200);
      assert.equal((await send('order-1')).body, first.body, 'a suppression added since does not refuse the replay either');
      assertProblem(await send('order-2'), 422, 'number_suppressed');
      assert.equal((await remove(app, f.apiKey, NUMBER)).statusCode, 204);
      assertProblem(await send('order-2'), 429, 'number_frequency_capped');
      assert.equal(await countRuns(deps), 1);
    });

    it('never creates more than the cap from 20 parallel requests for one number', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      await setOrganizationLimits(deps.store, f.orgId, { number_max_calls: 3, number_window_seconds: 86_400 });
      const responses = await Promise.all(Array.from({ length: 20 }, () => call(app, f)));
      assert.equal(responses.filter((r) => r.statusCode === 200).length, 3);
      for (const refused of responses.filter((r) => r.statusCode !== 200)) assertProblem(refused, 429, 'number_frequency_capped');
      assert.equal(await countRuns(deps), 3);
    });

    it('applies the exact check in the creating insert: requests that all passed the first check still stop at the cap', async (t) => {
      // The request-time read sees no runs for every request below (they are checked before any
      // commits), so only the insert's own check under the number's lock can hold the cap.
      const { deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const definition = await deps.store.db.selectFrom('workflow_definitions').select(['id', 'workflow_id', 'version']).executeTakeFirstOrThrow();
      const { askCallingPolicy } = await import('../src/admission/policy.js');
      const now = Date.now();
      const decisions = await Promise.all(Array.from({ length: 10 }, () => askCallingPolicy(deps.store, { numberCap: { maxCalls: 1, windowSeconds: 86_400 } }, { orgId: f.orgId, destination: E164 }, now, { answeredAtInsert: [] })));
      const run = {
        orgId: f.orgId, workflowId: definition.workflow_id, definitionId: definition.id, definitionVersion: definition.version, mode: 'published' as const, triggerUuid: null,
        phoneNumber: NUMBER, callerId: null, telephonyConfigurationId: f.telephonyId, initialContextJson: null, scheduledFor: null,
      };
      // Both ways a run is created: alone (one statement on PostgreSQL) and in a transaction with other writes.
      const outcomes = await Promise.allSettled(decisions.map((d, i) => {
        assert.ok(d.admitted && d.atInsert);
        return createRun(deps.store, run, now, { checks: d.atInsert, ...(i % 2 === 0 ? { onCreated: async () => undefined } : {}) });
      }));
      assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 1);
      for (const failed of outcomes.filter((o) => o.status === 'rejected')) assert.equal((failed.reason as { code?: string }).code, 'number_frequency_capped');
      assert.equal(await countRuns(deps), 1);
    });
  });
}
