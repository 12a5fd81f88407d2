// The outbox across a crash: messages written while the receiver is down, by a service process
// that is then killed with SIGKILL, all reach the receiver once it is back and a new process runs.
import assert from 'node:assert/strict';
import { insertEndpoint } from '../src/store/statements/webhook-statements.js';
import { newWebhookSecret } from '../src/webhooks/signature.js';
import { prepareDatabase, startServiceProcess } from './helpers/service-process.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { Receiver } from './helpers/webhooks.js';

const RUNS = 10;
const TERMINAL = ['completed', 'busy', 'no_answer', 'rejected', 'failed', 'canceled', 'expired'];

for (const store of await storeCases()) {
  describe(`Webhooks across a crash (${store.kind})`, { skip: store.skip }, () => {
    it('delivers every message written while the receiver was down, after the node is killed with SIGKILL and another starts', async (t) => {
      const { url, observer, deps, fixture: f } = await prepareDatabase(t, store.kind);
      // Take a free port for the receiver, then close it: the receiver is down until the restart.
      const receiver = await new Receiver().start();
      const port = receiver.port;
      await receiver.stop();
      t.after(() => receiver.stop());
      const secret = newWebhookSecret();
      await insertEndpoint(observer, {
        orgId: f.orgId,
        url: `http://127.0.0.1:${port}/hooks`,
        description: null,
        eventFilter: '',
        secretEncrypted: deps.cipher.encrypt(f.orgId, { secret }),
        at: Date.now(),
      });

      const common = {
        DATABASE_URL: url,
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        WEBHOOK_TIMEOUT_MS: '1000',
        WEBHOOK_POLL_INTERVAL_MS: '50',
        // Retried every 300 ms for a minute: long enough to span the crash and the restart.
        WEBHOOK_RETRY_SCHEDULE: ['0', ...Array.from({ length: 200 }, () => '300ms')].join(','),
        SIMULATOR_LATENCY_MS: '5',
        SIMULATOR_RING_MS: '20',
        SIMULATOR_TALK_MS: '20',
        DISPATCH_POLL_INTERVAL_MS: '20',
      };
      const first = await startServiceProcess(common);
      t.after(() => first.child.kill('SIGKILL'));
      for (let i = 0; i < RUNS; i++) {
        const response = await fetch(`${first.url}/api/v1/public/agent/${f.agentUuid}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': f.apiKey },
          body: JSON.stringify({ phone_number: '+12025550100' }),
        });
        assert.equal(response.status, 200);
      }
      // Every run ends and its first message has been tried (and refused: nobody listens); the later
      // ones wait behind it (per-run order).
      const deadline = Date.now() + 20_000;
      for (;;) {
        const runs = await observer.db.selectFrom('workflow_runs').select('state').execute();
        const untried = await observer.db.selectFrom('webhook_deliveries').select('id').where('attempt_count', '=', 0).where('seq', '=', 1).execute();
        if (runs.every((r) => TERMINAL.includes(r.state)) && untried.length === 0) break;
        assert.ok(Date.now() < deadline, 'runs ended and their deliveries were tried');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      first.child.kill('SIGKILL');
      assert.equal(await first.exited, 'SIGKILL');
      const events = await observer.db.selectFrom('run_events').select(['run_id', 'seq']).execute();
      assert.ok(events.length >= RUNS * 4);
      const pendingAtKill = await observer.db.selectFrom('webhook_deliveries').select('id').where('status', '=', 'pending').execute();
      assert.equal(pendingAtKill.length, events.length, 'every message is still owed to the receiver');

      await receiver.start(port);
      const second = await startServiceProcess(common);
      t.after(() => second.child.kill('SIGKILL'));
      // An attempt in flight at the kill (rare: attempts to a closed port take a millisecond) is
      // sent again only once its claim lapses, WEBHOOK_TIMEOUT_MS + 30 s later.
      await receiver.waitFor((all) => new Set(all.map((m) => m.headers['webhook-id'])).size >= events.length, 60_000);
      const expected = new Set(events.map((e) => `msg_run${e.run_id}_${e.seq}`));
      assert.deepEqual(new Set(receiver.received.map((m) => String(m.headers['webhook-id']))), expected);
      for (const m of receiver.received) assert.doesNotThrow(() => Receiver.verify(secret, m));
      second.child.kill('SIGTERM');
      assert.equal(await second.exited, 0, second.output());
    });
  });
}
