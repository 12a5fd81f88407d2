import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import type { Store } from '../src/store/engine/store.js';
import { prepareDatabase, startServiceProcess } from './helpers/service-process.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const TERMINAL = ['completed', 'busy', 'no_answer', 'rejected', 'failed', 'canceled', 'expired'];
const RUNS = 40;

interface RunRow {
  id: number;
  state: string;
  provider_call_id: string | null;
  outcome_reason: string | null;
}

function readRuns(store: Store): Promise<RunRow[]> {
  return store.db.selectFrom('workflow_runs').select(['id', 'state', 'provider_call_id', 'outcome_reason']).orderBy('id').execute();
}

function readDials(path: string): { runId: number }[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8').trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as { runId: number });
}

/** Polls the store until `ready` holds for its runs; fails with their states after `timeoutMs`. */
async function waitForStates(store: Store, ready: (rows: RunRow[]) => boolean, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rows = await readRuns(store);
    if (ready(rows)) return;
    if (Date.now() > deadline) assert.fail(`${what} within ${timeoutMs} ms (states: ${rows.map((r) => r.state).join(',')})`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Claimed by a node that has not dialed it (yet): after a crash it must never be dialed. */
const claimedUndialed = (r: RunRow) => r.state === 'dialing' && r.provider_call_id === null;
/** Dialed, the provider has not reported ringing yet. */
const dialedUnanswered = (r: RunRow) => r.state === 'dialing' && r.provider_call_id !== null;

for (const store of await storeCases()) {
  describe(`Crash recovery (${store.kind})`, { skip: store.skip }, () => {
    it('loses no run and dials none twice when a service process is killed with SIGKILL while runs are dialing', async (t) => {
      const { url, observer, deps, fixture: f, dir } = await prepareDatabase(t, store.kind);
      const dialLog = join(dir, 'dials.jsonl');
      // 4 calls a second with a 2 s look-ahead: while the queue drains (about 8 s for 40 runs) some
      // runs are claimed and waiting for their pacing slot, some are dialed and waiting for the
      // (slow) simulator, and the rest are still queued. The kill comes when the store shows that
      // mix, not after a fixed time, so a slow machine only delays it.
      const route = await createTelephonyConfiguration(observer, deps.cipher, { orgId: f.orgId, name: 'Paced', provider: 'simulator', callsPerSecond: 4, maxConcurrentCalls: 50 }, Date.now());

      const common = { DATABASE_URL: url, SIMULATOR_DIAL_LOG: dialLog, REAPER_INTERVAL_MS: '100', DISPATCH_POLL_INTERVAL_MS: '50' };
      const first = await startServiceProcess({
        ...common,
        SIMULATOR_LATENCY_MS: '1500',
        RING_TIMEOUT_MS: '3000',
        REAPER_GRACE_MS: '300',
        DISPATCH_LOOKAHEAD_MS: '2000',
        // The lease outlasts the look-ahead and the dial timeout, so this node's own reaper never
        // ends a run it claimed and is about to dial (a lease shorter than the look-ahead did: under
        // load half the runs ended dispatch_interrupted before the kill). The simulator takes a dial
        // at once; the timeout is far above anything it could take.
        DISPATCH_LEASE_MS: '6000',
        DIAL_TIMEOUT_MS: '3000',
      });
      t.after(() => first.child.kill('SIGKILL'));

      const accepted = await Promise.all(
        Array.from({ length: RUNS }, async () => {
          const response = await fetch(`${first.url}/api/v1/public/agent/${f.agentUuid}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-api-key': f.apiKey },
            body: JSON.stringify({ phone_number: '+12025550123', telephony_configuration_id: route.id }),
          });
          assert.equal(response.status, 200);
          return ((await response.json()) as { workflow_run_id: number }).workflow_run_id;
        }),
      );
      accepted.sort((a, b) => a - b);
      await waitForStates(
        observer,
        (rows) => rows.some(claimedUndialed) && rows.some(dialedUnanswered) && rows.some((r) => r.state === 'queued'),
        'never a run claimed and undialed, one dialed and waiting for the provider, and one still queued at once',
        60_000,
      );
      first.child.kill('SIGKILL');
      assert.equal(await first.exited, 'SIGKILL');
      // Read after the process is gone: exactly what it left behind, and every dial it made.
      const atKill = await readRuns(observer);
      const dialsBeforeKill = readDials(dialLog).length;
      const queuedAtKill = atKill.filter((r) => r.state === 'queued').map((r) => r.id);
      assert.ok(atKill.some((r) => r.state === 'dialing'), `some runs were dialing at the kill (states: ${atKill.map((r) => r.state).join(',')})`);
      assert.ok(queuedAtKill.length > 0, 'some runs were still queued at the kill');

      const second = await startServiceProcess({ ...common, SIMULATOR_LATENCY_MS: '10', SIMULATOR_RING_MS: '20', SIMULATOR_TALK_MS: '20' });
      t.after(() => second.child.kill('SIGKILL'));
      // A bound, not a schedule: the claims the dead process held end once their lease has run out.
      const deadline = Date.now() + 60_000;
      let rows: RunRow[] = [];
      for (;;) {
        rows = await readRuns(observer);
        if (rows.every((r) => TERMINAL.includes(r.state)) || Date.now() > deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }

      assert.deepEqual(rows.map((r) => r.id), accepted, 'every accepted run exists');
      assert.deepEqual(rows.filter((r) => !TERMINAL.includes(r.state)), [], 'every run reached a terminal state');
      const dials = readDials(dialLog);
      const dialCounts = new Map<number, number>();
      for (const d of dials) dialCounts.set(d.runId, (dialCounts.get(d.runId) ?? 0) + 1);
      assert.deepEqual([...dialCounts].filter(([, n]) => n > 1), [], 'no run was dialed twice');
      const redialed = dials.slice(dialsBeforeKill).filter((d) => !queuedAtKill.includes(d.runId));
      assert.deepEqual(redialed, [], 'after the restart only runs still queued at the kill were dialed');
      for (const run of atKill.filter(claimedUndialed)) {
        const after = rows.find((r) => r.id === run.id);
        assert.deepEqual([after?.state, after?.outcome_reason], ['failed', 'dispatch_interrupted'], `run ${run.id}, claimed but not dialed at the kill`);
      }
      const interrupted = rows.filter((r) => r.outcome_reason === 'dispatch_interrupted' || r.outcome_reason === 'provider_silent');
      assert.ok(interrupted.length > 0, 'runs caught mid-dial were ended, not redialed');
      for (const id of queuedAtKill) {
        assert.equal(rows.find((r) => r.id === id)?.state, 'completed', `run ${id}, queued at the crash, completed after the restart`);
        assert.equal(dialCounts.get(id), 1);
      }

      second.child.kill('SIGTERM');
      assert.equal(await second.exited, 0, second.output());
    });
  });
}
