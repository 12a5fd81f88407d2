// Idempotency-Key on the four Initiate Call operations, on both stores: a retry never rings anyone
// twice, a reused key never runs another request, and the records outlive a restart.
import assert from 'node:assert/strict';
import { setOrganizationLimits } from '../src/orgs/organizations.js';
import { build, getJson, postJson } from './helpers/app.js';
import { countRuns, createOrgFixture, OPERATION_CASES, PATHS } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { prepareDatabase, startServiceProcess } from './helpers/service-process.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const BODY = { phone_number: '+12025550123', initial_context: { name: 'Ada', account: { tier: 'gold', id: 7 } } };
const withKey = (apiKey: string, idempotencyKey: string) => ({ key: apiKey, headers: { 'idempotency-key': idempotencyKey } });

/** A clock the test moves by hand, starting now. */
function manualClock() {
  let now = Date.now();
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

for (const store of await storeCases()) {
  describe(`Idempotency-Key (${store.kind})`, { skip: store.skip }, () => {
    for (const op of OPERATION_CASES) {
      it(`${op.name}: a repeat with the same key and payload returns the identical body with Idempotent-Replayed: true and creates no run`, async (t) => {
        const { app, deps } = await build(t, store.kind);
        const f = await createOrgFixture(deps);
        const first = await postJson(app, op.path(f), BODY, withKey(f.apiKey, `op-${op.name}`));
        assert.equal(first.statusCode, 200, first.body);
        assert.equal(first.headers['idempotent-replayed'], undefined, 'the first answer is not a replay');
        const again = await postJson(app, op.path(f), BODY, withKey(f.apiKey, `op-${op.name}`));
        assert.equal(again.statusCode, 200, again.body);
        assert.equal(again.headers['idempotent-replayed'], 'true');
        assert.equal(again.body, first.body, 'byte-for-byte the first body');
        assert.match(String(again.headers['content-type']), /^application\/json/);
        assert.equal(await countRuns(deps), 1);
      });
    }

    it('creates exactly one run when 20 requests with one key arrive at once; the others replay it or are told it is in flight', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const responses = await Promise.all(
        Array.from({ length: 20 }, () => postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'burst-1'))),
      );
      assert.equal(await countRuns(deps), 1, 'one run for one key');
      const ok = responses.filter((r) => r.statusCode === 200);
      const created = ok.filter((r) => r.headers['idempotent-replayed'] === undefined);
      assert.equal(created.length, 1, 'exactly one request created the run');
      for (const r of ok) assert.equal(r.body, created[0]?.body, 'every 200 is the same answer');
      for (const r of responses.filter((r) => r.statusCode !== 200)) {
        assertProblem(r, 409, 'idempotency_key_in_use');
        assert.equal(r.headers['retry-after'], '1');
      }
      const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
      const counted = (outcome: string) => Number(new RegExp(`^dialtone_idempotency_requests_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(metrics)?.[1] ?? 0);
      assert.equal(counted('created'), 1);
      assert.equal(counted('replayed') + counted('in_use'), 19, metrics);
      const later = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'burst-1'));
      assert.equal(later.headers['idempotent-replayed'], 'true');
      assert.equal(later.body, created[0]?.body);
    });

    it('treats a body with the same members in another order as the same payload', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const first = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'order'));
      const reordered = { initial_context: { account: { id: 7, tier: 'gold' }, name: 'Ada' }, phone_number: '+12025550123' };
      const again = await postJson(app, PATHS.initiateCall(f.agentUuid), reordered, withKey(f.apiKey, 'order'));
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal(again.body, first.body);
      assert.equal(await countRuns(deps), 1);
    });

    it('refuses the key with another body, another operation or another target with 422 idempotency_key_reused and dials nothing new', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const other = await createOrgFixture(deps, 'Acme 2');
      await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'reuse'));
      const attempts = [
        postJson(app, PATHS.initiateCall(f.agentUuid), { ...BODY, phone_number: '+12025550124' }, withKey(f.apiKey, 'reuse')),
        postJson(app, PATHS.initiateCallTest(f.agentUuid), BODY, withKey(f.apiKey, 'reuse')),
        postJson(app, PATHS.initiateCallByWorkflowUuid(f.workflowUuid), BODY, withKey(f.apiKey, 'reuse')),
      ];
      for (const response of await Promise.all(attempts)) {
        const problem = assertProblem(response, 422, 'idempotency_key_reused');
        assert.equal(problem.header, 'Idempotency-Key');
      }
      assert.equal(await countRuns(deps), 1);
      // Keys belong to an organization: another organization's identical key is its own.
      const theirs = await postJson(app, PATHS.initiateCall(other.agentUuid), BODY, withKey(other.apiKey, 'reuse'));
      assert.equal(theirs.statusCode, 200, theirs.body);
      assert.equal(theirs.headers['idempotent-replayed'], undefined);
      assert.equal(await countRuns(deps), 2);
    });

    it('refuses a key over 255 characters, an empty key and a non-ASCII key with 422 naming the header, and creates nothing', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      for (const bad of ['k'.repeat(256), '""', 'clé-été']) {
        const response = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, bad));
        const problem = assertProblem(response, 422, 'validation_failed');
        assert.equal(problem.header, 'Idempotency-Key', bad);
      }
      const longest = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'k'.repeat(255)));
      assert.equal(longest.statusCode, 200, '255 characters is allowed');
      const quoted = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, `"${'k'.repeat(255)}"`));
      assert.equal(quoted.headers['idempotent-replayed'], 'true', 'the structured-field string form names the same key');
      assert.equal(await countRuns(deps), 1);
    });

    it('answers a dry run with a malformed key (too long, empty, not printable ASCII) exactly as the real request, on each operation', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const malformed = ['k'.repeat(300), '', '""', 'tab\there', 'clé-été'];
      for (const op of OPERATION_CASES) {
        for (const bad of malformed) {
          const options = { key: f.apiKey, headers: { 'idempotency-key': bad } };
          const dryRun = await postJson(app, `${op.path(f)}?dry_run=true`, BODY, options);
          const real = await postJson(app, op.path(f), BODY, options);
          assert.equal(real.statusCode, 422, `${op.name} ${JSON.stringify(bad)}: ${real.body}`);
          const problem = assertProblem(real, 422, 'validation_failed');
          assert.equal(problem.header, 'Idempotency-Key', `${op.name} ${JSON.stringify(bad)}`);
          assert.equal(dryRun.statusCode, real.statusCode, `${op.name} ${JSON.stringify(bad)}: ${dryRun.body}`);
          const { request_id: _dryRequest, ...dryProblem } = dryRun.json() as Record<string, unknown>;
          const { request_id: _realRequest, ...realProblem } = real.json() as Record<string, unknown>;
          assert.deepEqual(dryProblem, realProblem, `${op.name} ${JSON.stringify(bad)}`);
        }
        // A well-formed key passes the dry run and is not consumed by it.
        const valid = await postJson(app, `${op.path(f)}?dry_run=true`, BODY, withKey(f.apiKey, `dry-${op.name}`));
        assert.equal(valid.statusCode, 200, valid.body);
        assert.equal((valid.json() as { status: string }).status, 'valid');
      }
      assert.equal(await countRuns(deps), 0);
    });

    it('stores nothing for a request refused by validation, so the corrected retry with the same key creates the run', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const refused = await postJson(app, PATHS.initiateCall(f.agentUuid), { phone_number: 'not a number' }, withKey(f.apiKey, 'fix-me'));
      assertProblem(refused, 422, 'invalid_phone_number');
      const fixed = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'fix-me'));
      assert.equal(fixed.statusCode, 200, fixed.body);
      assert.equal(fixed.headers['idempotent-replayed'], undefined);
      assert.equal(await countRuns(deps), 1);
    });

    it('gives the key back when the run cannot be created (queue full), so the retry is not refused as in flight', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      await setOrganizationLimits(deps.store, f.orgId, { max_queued_runs: 1 });
      assert.equal((await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key: f.apiKey })).statusCode, 200);
      const full = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'after-full'));
      assertProblem(full, 429, 'queue_full');
      const rows = await deps.store.db.selectFrom('idempotency_keys').selectAll().execute();
      assert.deepEqual(rows, [], 'no record is left behind');
      await setOrganizationLimits(deps.store, f.orgId, { max_queued_runs: 2 });
      const retry = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'after-full'));
      assert.equal(retry.statusCode, 200, retry.body);
      assert.equal(await countRuns(deps), 2);
    });

    it('answers 409 while another request holds the key, and takes over a claim left by a dead process after IDEMPOTENCY_LOCK_MS', async (t) => {
      const clock = manualClock();
      const { app, deps } = await build(t, store.kind, { clock, env: { IDEMPOTENCY_LOCK_MS: '5000' } });
      const f = await createOrgFixture(deps);
      const first = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'held'));
      const { fingerprint } = await deps.store.db.selectFrom('idempotency_keys').select('fingerprint').executeTakeFirstOrThrow();
      // A claim as a request that died between claiming and creating its run leaves it.
      await deps.store.db
        .insertInto('idempotency_keys')
        .values({
          org_id: f.orgId,
          key: 'orphan',
          fingerprint,
          state: 'in_flight',
          owner: 'a-dead-process',
          locked_until: clock.now() + 5000,
          response_status: null,
          response_body: null,
          run_id: null,
          created_at: clock.now(),
          expires_at: clock.now() + 86_400_000,
        })
        .execute();
      assertProblem(await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'orphan')), 409, 'idempotency_key_in_use');
      assert.equal(await countRuns(deps), 1);
      clock.advance(5000);
      const taken = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'orphan'));
      assert.equal(taken.statusCode, 200, taken.body);
      assert.equal(taken.headers['idempotent-replayed'], undefined);
      assert.notEqual(taken.json().workflow_run_id, first.json().workflow_run_id);
      assert.equal(await countRuns(deps), 2);
    });

    it('forgets a key after IDEMPOTENCY_TTL_MS: the same key then starts a new call', async (t) => {
      const clock = manualClock();
      const { app, deps } = await build(t, store.kind, { clock, env: { IDEMPOTENCY_TTL_MS: '60000' } });
      const f = await createOrgFixture(deps);
      const first = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'daily'));
      clock.advance(59_999);
      assert.equal((await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'daily'))).headers['idempotent-replayed'], 'true');
      clock.advance(1);
      const fresh = await postJson(app, PATHS.initiateCall(f.agentUuid), { ...BODY, phone_number: '+12025550125' }, withKey(f.apiKey, 'daily'));
      assert.equal(fresh.statusCode, 200, fresh.body);
      assert.notEqual(fresh.json().workflow_run_id, first.json().workflow_run_id);
      assert.equal(await countRuns(deps), 2);
    });

    it('replays the run id of a run that has moved on since: the answer is the first answer, and the run is readable', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const first = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'moved'));
      const id = first.json().workflow_run_id as number;
      const cancel = await app.inject({ method: 'POST', url: `/api/v1/public/workflow-runs/${id}/cancel`, headers: { 'x-api-key': f.apiKey } });
      assert.equal(cancel.statusCode, 200, cancel.body);
      const again = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, withKey(f.apiKey, 'moved'));
      assert.equal(again.body, first.body);
      assert.equal((await getJson(app, `/api/v1/public/workflow-runs/${id}`, f.apiKey)).json().state, 'canceled');
    });
  });
}

describe('Idempotency-Key across a restart of the service process', () => {
  it('replays the first answer from a new process on the same database, and dials nothing new', async (t) => {
    const { url, deps, fixture: f } = await prepareDatabase(t, 'sqlite');
    const send = (url: string) =>
      fetch(`${url}${PATHS.initiateCall(f.agentUuid)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': f.apiKey, 'idempotency-key': 'survives-restart' },
        body: JSON.stringify(BODY),
      });

    const first = await startServiceProcess({ DATABASE_URL: url, DIALTONE_ROLE: 'api' });
    t.after(() => first.child.kill('SIGKILL'));
    const original = await send(first.url);
    const originalBody = await original.text();
    assert.equal(original.status, 200, originalBody);
    first.child.kill('SIGTERM');
    assert.equal(await first.exited, 0, first.output());

    const second = await startServiceProcess({ DATABASE_URL: url, DIALTONE_ROLE: 'api' });
    t.after(() => second.child.kill('SIGKILL'));
    const replay = await send(second.url);
    assert.equal(replay.status, 200);
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(await replay.text(), originalBody);
    assert.equal(await countRuns(deps), 1);
    second.child.kill('SIGTERM');
    assert.equal(await second.exited, 0, second.output());
  });
});
