// The event stream across a node restart: the client reconnects to the node that came back with
// the id of the last event it got, and receives every event written in between, once.
import assert from 'node:assert/strict';
import { buildApp } from '../src/app.js';
import { postJson } from './helpers/app.js';
import { PATHS } from './helpers/fixtures.js';
import { prepareDatabase, startServiceProcess } from './helpers/service-process.js';
import { SseClient } from './helpers/sse-client.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

for (const store of await storeCases()) {
  describe(`The event stream across a node restart (${store.kind})`, { skip: store.skip }, () => {
    it('gives a client that resumes on the restarted node with its last event id every event written meanwhile, none missing or repeated', async (t) => {
      const db = await prepareDatabase(t, store.kind);
      const { apiKey, agentUuid, orgId } = db.fixture;
      const env = { DATABASE_URL: db.url, DIALTONE_ROLE: 'api', STREAM_POLL_INTERVAL_MS: '20' };
      const call = async (baseUrl: string) => {
        const response = await fetch(`${baseUrl}${PATHS.initiateCall(agentUuid)}`, { method: 'POST', headers: { 'x-api-key': apiKey, 'content-type': 'application/json' }, body: JSON.stringify({ phone_number: '+12025550123' }) });
        const body = await response.text();
        assert.equal(response.status, 200, body);
        return (JSON.parse(body) as { workflow_run_id: number }).workflow_run_id;
      };
      const cancel = async (baseUrl: string, runId: number) => {
        const response = await fetch(`${baseUrl}/api/v1/public/workflow-runs/${runId}/cancel`, { method: 'POST', headers: { 'x-api-key': apiKey } });
        assert.equal(response.status, 200, await response.text());
      };

      const first = await startServiceProcess(env);
      t.after(() => first.child.kill('SIGKILL'));
      const client = await SseClient.open(first.url, apiKey);
      t.after(() => client.close());
      await client.waitFor(() => client.messages.length >= 1);
      const startId = client.messages[0]?.id ?? 0;
      await cancel(first.url, await call(first.url));
      await call(first.url);
      await client.waitFor(() => client.runEvents.length >= 3, 5_000, 'the first node\'s events');

      first.child.kill('SIGTERM');
      assert.equal(await first.exited, 0, first.output());
      await client.ended;

      // While no node serves streams, the organization's runs go on changing (another node's API).
      const writer = await buildApp(db.deps);
      t.after(() => writer.close());
      const meanwhile = await postJson(writer, PATHS.initiateCall(agentUuid), { phone_number: '+12025550124' }, { key: apiKey });
      assert.equal(meanwhile.statusCode, 200, meanwhile.body);
      const meanwhileId = (meanwhile.json() as { workflow_run_id: number }).workflow_run_id;
      assert.equal((await writer.inject({ method: 'POST', url: `/api/v1/public/workflow-runs/${meanwhileId}/cancel`, headers: { 'x-api-key': apiKey } })).statusCode, 200);

      const second = await startServiceProcess(env);
      t.after(() => second.child.kill('SIGKILL'));
      const resumed = await SseClient.open(second.url, apiKey, { lastEventId: client.lastId as number });
      t.after(() => resumed.close());
      const after = await call(second.url);
      await resumed.waitFor(() => resumed.runEvents.some((e) => e.run_id === after), 5_000, 'the restarted node\'s live event');

      const stored = await db.observer.db
        .selectFrom('run_events as e')
        .innerJoin('workflow_runs as r', 'r.id', 'e.run_id')
        .select('e.id')
        .where('r.org_id', '=', orgId)
        .where('e.id', '>', startId)
        .orderBy('e.id')
        .execute();
      const received = [...client.messages, ...resumed.messages].filter((m) => m.event === 'run').map((m) => m.id);
      assert.equal(stored.length, 6);
      assert.deepEqual(received, stored.map((r) => Number(r.id)), 'every event once, in order, across the restart');
      second.child.kill('SIGTERM');
      assert.equal(await second.exited, 0, second.output());
    });
  });
}
