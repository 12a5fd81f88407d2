// Issue 13's acceptance test: every Twilio status callback of a batch of runs is lost (none is ever
// sent) while the node that placed them is killed with SIGKILL and another is started. Some calls
// were placed and recorded, some were placed by Twilio while the node was still waiting for
// Twilio's answer (the run has no call id). Real service processes; Twilio is a local server
// speaking its REST wire format, which says what became of each call.
import assert from 'node:assert/strict';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { prepareDatabase, startServiceProcess } from './helpers/service-process.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { ACCOUNT_SID, AUTH_TOKEN, PUBLIC_BASE_URL, startFakeTwilio } from './helpers/twilio-server.js';

const RUNS = 12;
/** Calls Twilio answers before the rest stall (placed at Twilio, never recorded by the node). */
const ANSWERED = 8;
const RECONCILE_AFTER_MS = 2_000;
const REAPER_INTERVAL_MS = 200;
const DISPATCH_LEASE_MS = 8_000;
/** Time for the second process to start and serve, on a loaded machine. */
const START_SLACK_MS = 8_000;

/** What Twilio reports of each call, by the order the calls reached it, and the state it means. */
const REPORTED: [string, string][] = [
  ['completed', 'completed'],
  ['busy', 'busy'],
  ['no-answer', 'no_answer'],
  ['failed', 'failed'],
  ['canceled', 'canceled'],
  ['in-progress', 'in_progress'],
];

const LIVE = ['dialing', 'ringing', 'in_progress'];

for (const store of await storeCases()) {
  describe(`Lost Twilio callbacks across a node's crash (${store.kind})`, { skip: store.skip }, () => {
    it('ends every run in the state Twilio reports, leaves none live past RECONCILE_AFTER_MS plus one sweep, and dials none twice', async (t) => {
      const { url, observer, deps, fixture: f } = await prepareDatabase(t, store.kind);
      const fake = await startFakeTwilio(t);
      const route = await createTelephonyConfiguration(
        observer,
        deps.cipher,
        { orgId: f.orgId, name: 'Twilio', provider: 'twilio', callerIds: ['+12025550100'], credentials: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN }, callsPerSecond: 50, maxConcurrentCalls: 100 },
        Date.now(),
      );
      const env = {
        DATABASE_URL: url,
        TWILIO_API_BASE_URL: fake.baseUrl,
        // Twilio would call back here; in this test nothing ever does (every callback is lost).
        PUBLIC_BASE_URL,
        RECONCILE_AFTER_MS: String(RECONCILE_AFTER_MS),
        REAPER_INTERVAL_MS: String(REAPER_INTERVAL_MS),
        REAPER_GRACE_MS: '500',
        DISPATCH_LEASE_MS: String(DISPATCH_LEASE_MS),
        DIAL_TIMEOUT_MS: '6000',
        DISPATCH_POLL_INTERVAL_MS: '50',
        RING_TIMEOUT_MS: '60000',
        MAX_CALL_DURATION_MS: '600000',
        RECONCILE_READS_PER_SECOND: '50',
      };
      fake.stallCreatesAfter(ANSWERED);
      const first = await startServiceProcess(env);
      t.after(() => first.child.kill('SIGKILL'));

      const numbers = new Map<number, string>();
      for (let i = 0; i < RUNS; i++) {
        const phoneNumber = `+120255501${String(60 + i)}`;
        const response = await fetch(`${first.url}/api/v1/public/agent/${f.agentUuid}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': f.apiKey },
          body: JSON.stringify({ phone_number: phoneNumber, telephony_configuration_id: route.id }),
        });
        assert.equal(response.status, 200);
        numbers.set(((await response.json()) as { workflow_run_id: number }).workflow_run_id, phoneNumber);
      }
      // Every run reached Twilio: the first ANSWERED were answered and recorded, the rest are still waiting for Twilio's answer.
      const reached = Date.now() + 15_000;
      for (;;) {
        const recorded = await observer.db.selectFrom('workflow_runs').select('id').where('provider_call_id', 'is not', null).execute();
        if ((fake.calls.size === RUNS && recorded.length === ANSWERED) || Date.now() > reached) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.equal(fake.calls.size, RUNS, 'every run reached Twilio before the crash');
      first.child.kill('SIGKILL');
      assert.equal(await first.exited, 'SIGKILL');
      const atKill = await observer.db.selectFrom('workflow_runs').select(['id', 'state', 'provider_call_id']).execute();
      assert.equal(atKill.filter((r) => r.state === 'dialing' && r.provider_call_id === null).length, RUNS - ANSWERED, 'runs were interrupted mid-dial');

      // Twilio carries on without the node: each call ends (or is still up) as it reports.
      const expected = new Map<string, string>();
      [...fake.calls.values()].forEach((call, i) => {
        const [status, state] = REPORTED[i % REPORTED.length] as [string, string];
        call.status = status;
        expected.set(call.to, state);
      });
      fake.stallCreatesAfter(undefined);

      const restartedAt = Date.now();
      const second = await startServiceProcess(env);
      t.after(() => second.child.kill('SIGKILL'));
      // The latest any run may settle: its lease (the interrupted ones) or RECONCILE_AFTER_MS of quiet, plus one sweep, after the restart.
      const bound = restartedAt + Math.max(RECONCILE_AFTER_MS, DISPATCH_LEASE_MS) + REAPER_INTERVAL_MS + START_SLACK_MS;
      const settled = (rows: { id: number; state: string }[]) => rows.every((r) => r.state === expected.get(numbers.get(r.id) ?? ''));
      let rows: { id: number; state: string; provider_call_id: string | null; outcome_reason: string | null }[] = [];
      for (;;) {
        rows = await observer.db.selectFrom('workflow_runs').select(['id', 'state', 'provider_call_id', 'outcome_reason']).execute();
        if (settled(rows) || Date.now() > bound) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const settledAfterMs = Date.now() - restartedAt;

      assert.equal(rows.length, RUNS);
      for (const row of rows) {
        const phoneNumber = numbers.get(row.id) ?? '';
        assert.equal(row.state, expected.get(phoneNumber), `run ${row.id} (${phoneNumber}) ends as Twilio reports (${row.outcome_reason}), within ${settledAfterMs} ms of the restart`);
        const call = [...fake.calls.values()].find((c) => c.to === phoneNumber);
        assert.equal(row.provider_call_id, call?.sid, `run ${row.id} holds its own call`);
      }
      assert.ok(rows.filter((r) => LIVE.includes(r.state)).every((r) => r.state === 'in_progress'), 'only calls Twilio reports up are live');
      const creates = fake.creates();
      assert.equal(creates.length, RUNS, 'no run was dialed twice');
      assert.equal(new Set(creates.map((c) => c.form.get('To'))).size, RUNS);

      second.child.kill('SIGTERM');
      assert.equal(await second.exited, 0, second.output());
    });
  });
}
