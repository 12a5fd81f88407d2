import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { prepareDatabase, startServiceProcess } from './helpers/service-process.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const TERMINAL = ['completed', 'busy', 'no_answer', 'rejected', 'failed', 'canceled', 'expired'];
const RUNS = 40;

for (const store of await storeCases()) {
  describe(`Crash recovery (${store.kind})`, { skip: store.skip }, () => {
    it('loses no run and dials none twice when a service process is killed with SIGKILL while runs are dialing', async (t) => {
      const { url, observer, deps, fixture: f, dir } = await prepareDatabase(t, store.kind);
      const dialLog = join(dir, 'dials.jsonl');
      // 2 calls a second with a 2 s look-ahead: at the kill some runs are dialed and waiting for the
      // (slow) simulator, some are claimed and waiting for their pacing slot, some still queued. The
      // pace is slower than requests arrive even on a loaded machine (one every 500 ms), so a queue
      // builds up whatever the request rate, and the kill waits for that state, not for a time.
      const route = await createTelephonyConfiguration(observer, deps.cipher, { orgId: f.orgId, name: 'Paced', provider: 'simulator', callsPerSecond: 2, maxConcurrentCalls: 50 }, Date.now());

      const common = { DATABASE_URL: url, SIMULATOR_DIAL_LOG: dialLog, REAPER_INTERVAL_MS: '100', DISPATCH_POLL_INTERVAL_MS: '50' };
      const first = await startServiceProcess({
        ...common,
        SIMULATOR_LATENCY_MS: '1500',
        RING_TIMEOUT_MS: '3000',
        REAPER_GRACE_MS: '300',
        DISPATCH_LEASE_MS: '1000',
        DIAL_TIMEOUT_MS: '500',
        DISPATCH_LOOKAHEAD_MS: '2000',
      });
      t.after(() => first.child.kill('SIGKILL'));

      const accepted: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const response = await fetch(`${first.url}/api/v1/public/agent/${f.agentUuid}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': f.apiKey },
          body: JSON.stringify({ phone_number: '+12025550123', telephony_configuration_id: route.id }),
        });
        assert.equal(response.status, 200);
        accepted.push(((await response.json()) as { workflow_run_id: number }).workflow_run_id);
      }
      // Killed once runs are dialing and others still queued (both hold until the queue drains, 20 s at this pace).
      const states = () => observer.db.selectFrom('workflow_runs').select(['id', 'state']).execute();
      const midway = Date.now() + 10_000;
      for (let rows = await states(); !(rows.some((r) => r.state === 'dialing') && rows.some((r) => r.state === 'queued')); rows = await states()) {
        assert.ok(Date.now() < midway, `runs dialing and runs queued at once (states: ${rows.map((r) => r.state).join(',')})`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      first.child.kill('SIGKILL');
      assert.equal(await first.exited, 'SIGKILL');
      // Read after the kill: exactly what the dead process left, which nothing changes before the restart.
      const snapshot = await states();
      const dialingAtKill = snapshot.filter((r) => r.state === 'dialing');
      assert.ok(dialingAtKill.length > 0, `some runs were dialing at the kill (states: ${snapshot.map((r) => r.state).join(',')})`);
      assert.ok(snapshot.some((r) => r.state === 'queued'), 'some runs were still queued at the kill');
      // The restarted node dials the rest at a test's pace.
      await observer.db.updateTable('telephony_configurations').set({ calls_per_second: 50 }).where('id', '=', route.id).execute();

      const second = await startServiceProcess({ ...common, SIMULATOR_LATENCY_MS: '10', SIMULATOR_RING_MS: '20', SIMULATOR_TALK_MS: '20' });
      t.after(() => second.child.kill('SIGKILL'));
      const deadline = Date.now() + 20_000;
      let rows: { id: number; state: string; outcome_reason: string | null }[] = [];
      for (;;) {
        rows = await observer.db.selectFrom('workflow_runs').select(['id', 'state', 'outcome_reason']).execute();
        if (rows.every((r) => TERMINAL.includes(r.state)) || Date.now() > deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }

      assert.deepEqual(rows.map((r) => r.id).sort((a, b) => a - b), accepted, 'every accepted run exists');
      assert.deepEqual(rows.filter((r) => !TERMINAL.includes(r.state)), [], 'every run reached a terminal state');
      const dials = readFileSync(dialLog, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { runId: number });
      const dialCounts = new Map<number, number>();
      for (const d of dials) dialCounts.set(d.runId, (dialCounts.get(d.runId) ?? 0) + 1);
      assert.deepEqual([...dialCounts].filter(([, n]) => n > 1), [], 'no run was dialed twice');
      const interrupted = rows.filter((r) => r.outcome_reason === 'dispatch_interrupted' || r.outcome_reason === 'provider_silent');
      assert.ok(interrupted.length > 0, 'runs caught mid-dial were ended, not redialed');
      const queuedAtKill = snapshot.filter((r) => r.state === 'queued').map((r) => r.id);
      for (const id of queuedAtKill) {
        assert.equal(rows.find((r) => r.id === id)?.state, 'completed', `run ${id}, queued at the crash, completed after the restart`);
        assert.equal(dialCounts.get(id), 1);
      }

      second.child.kill('SIGTERM');
      assert.equal(await second.exited, 0, second.output());
    });
  });
}
