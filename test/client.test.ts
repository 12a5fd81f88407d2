// @dialtone/client (packages/client) against the real service: a `npm start` process on each store,
// reached over HTTP. Every wrapped operation is called, its answer checked against what the service
// stored; refusals arrive as DialtoneApiError with the problem's code, errors and Retry-After; 429s
// are retried only where a retry cannot do anything twice; the event stream resumes after a cut
// connection with no event lost or repeated; webhook messages verify through the client (built on
// the standardwebhooks package) and a tampered one does not.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { Dialtone, DialtoneApiError, type StreamMessage, type WorkflowRun } from '../packages/client/src/index.js';
import { stopOnTeardown } from './helpers/process.js';
import { prepareDatabase, startServiceProcess } from './helpers/service-process.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';
import { startReceiver, WEBHOOK_TEST_ENV } from './helpers/webhooks.js';

const ANSWERED = '+12025550100';
const BUSY = '+12025550101';

async function service(t: TestContext, kind: StoreKind, env: Record<string, string> = {}) {
  const db = await prepareDatabase(t, kind);
  const process = await startServiceProcess({ DATABASE_URL: db.url, ...QUICK_CALLS, ...WEBHOOK_TEST_ENV, ...env });
  stopOnTeardown(t, process.child);
  const dialtone = new Dialtone({ baseUrl: process.url, apiKey: db.fixture.apiKey });
  return { db, url: process.url, dialtone, fixture: db.fixture };
}

/** Awaits a promise expected to reject with DialtoneApiError, and answers the error. */
async function refusal(pending: Promise<unknown>): Promise<DialtoneApiError> {
  const error = await pending.then(
    () => assert.fail('expected a refusal'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof DialtoneApiError, `a DialtoneApiError, got ${String(error)}`);
  return error;
}

// Quick simulated calls; the ring and call timeouts stay the defaults, so a loaded machine cannot turn an answer into a no-answer.
const QUICK_CALLS = { SIMULATOR_LATENCY_MS: '5', SIMULATOR_RING_MS: '20', SIMULATOR_TALK_MS: '30', SIMULATOR_SECOND_MS: '10', DISPATCH_POLL_INTERVAL_MS: '20' };

const ended = { timeoutMs: scaledTimeout(20_000), pollIntervalMs: 20 };

for (const store of await storeCases()) {
  describe(`@dialtone/client against the service (${store.kind})`, { skip: store.skip }, () => {
    it('places calls four ways, validates without creating, replays an idempotent start, and reads, lists, waits for and cancels runs', async (t) => {
      const { dialtone, fixture } = await service(t, store.kind);

      const dry = await dialtone.calls.validate(fixture.agentUuid, { phone_number: ANSWERED });
      assert.equal(dry.status, 'valid');
      assert.equal(dry.workflow_run_id, null);
      assert.equal((await dialtone.runs.list()).data.length, 0, 'a dry run creates nothing');

      const first = await dialtone.calls.start(fixture.agentUuid, { phone_number: ANSWERED, initial_context: { name: 'Ada' } }, { idempotencyKey: 'client-start-1' });
      const again = await dialtone.calls.start(fixture.agentUuid, { phone_number: ANSWERED, initial_context: { name: 'Ada' } }, { idempotencyKey: 'client-start-1' });
      assert.equal(first.status, 'queued');
      assert.equal(again.workflow_run_id, first.workflow_run_id, 'the same key answers the first run');
      const test = await dialtone.calls.startTest(fixture.agentUuid, { phone_number: BUSY });
      const byWorkflow = await dialtone.calls.start({ workflowUuid: fixture.workflowUuid }, { phone_number: ANSWERED });
      const testByWorkflow = await dialtone.calls.startTest({ workflowUuid: fixture.workflowUuid }, { phone_number: ANSWERED });

      const done = await dialtone.runs.wait(first.workflow_run_id, ended);
      assert.equal(done.state, 'completed');
      assert.deepEqual(done.initial_context, { name: 'Ada' });
      assert.equal((await dialtone.runs.wait(test.workflow_run_id, ended)).state, 'busy');
      assert.equal((await dialtone.runs.wait(test.workflow_run_id, ended)).mode, 'test');
      for (const id of [byWorkflow.workflow_run_id, testByWorkflow.workflow_run_id]) assert.equal((await dialtone.runs.wait(id, ended)).state, 'completed');

      const got = await dialtone.runs.get(first.workflow_run_id);
      assert.equal(got.name, first.workflow_run_name);
      const page = await dialtone.runs.list({ state: 'busy', limit: 10 });
      assert.deepEqual(page.data.map((r) => r.id), [test.workflow_run_id]);
      const all = await dialtone.runs.list({ limit: 2 });
      assert.equal(all.data.length, 2);
      assert.notEqual(all.next_after, null);
      const rest = await dialtone.runs.list({ limit: 10, after: all.next_after ?? 0 });
      assert.equal(rest.data.length, 2, 'four runs in all, paged');
      const events = await dialtone.runs.events(first.workflow_run_id, { limit: 100 });
      assert.deepEqual(events.data.map((e) => e.type), ['queued', 'dialing', 'ringing', 'in_progress', 'completed']);

      // A call that never ends by itself, canceled while live; a second cancel is a typed refusal.
      const long = await dialtone.calls.start(fixture.agentUuid, { phone_number: '+12025550107' });
      await dialtone.runs.wait(long.workflow_run_id, { ...ended, until: ['in_progress'] });
      const canceled = await dialtone.runs.cancel(long.workflow_run_id);
      assert.equal(canceled.id, long.workflow_run_id);
      const finished: WorkflowRun = await dialtone.runs.wait(long.workflow_run_id, ended);
      assert.equal(finished.outcome_reason, 'canceled_by_request');
      const conflict = await refusal(dialtone.runs.cancel(long.workflow_run_id));
      assert.equal(conflict.status, 409);
    });

    it('throws DialtoneApiError carrying the problem: its code, status, every invalid field and the request id', async (t) => {
      const { dialtone, fixture, url } = await service(t, store.kind);
      const invalid = await refusal(dialtone.calls.start(fixture.agentUuid, { phone_number: 42 as unknown as string, telephony_configuration_id: -1 }));
      assert.equal(invalid.status, 422);
      assert.equal(invalid.code, 'validation_failed');
      assert.deepEqual(invalid.errors.map((e) => e.pointer).sort(), ['/phone_number', '/telephony_configuration_id']);
      assert.ok(invalid.requestId);
      assert.equal((await dialtone.runs.list()).data.length, 0, 'nothing was created');

      const unknownRun = await refusal(dialtone.runs.get(987654));
      assert.equal(unknownRun.status, 404);
      const stranger = new Dialtone({ baseUrl: url, apiKey: 'dt_live_not_a_key' });
      const unauthorized = await refusal(stranger.runs.list());
      assert.equal(unauthorized.status, 401);

      await dialtone.suppressions.put(BUSY, { reason: 'asked not to be called' });
      const suppressed = await refusal(dialtone.calls.validate(fixture.agentUuid, { phone_number: BUSY }));
      assert.equal(suppressed.status, 422);
      assert.equal(suppressed.code, 'number_suppressed');
    });

    it('manages suppressions, campaigns and webhook endpoints, and verifies the messages it is sent with the endpoint secret', async (t) => {
      const receiver = await startReceiver(t);
      const { dialtone, fixture } = await service(t, store.kind);

      // Suppressions: put, get, list, import, delete.
      const put = await dialtone.suppressions.put('+12025550188', { reason: 'do not call' });
      assert.equal(put.phone_number, '+12025550188');
      assert.equal((await dialtone.suppressions.get('+12025550188')).reason, 'do not call');
      await dialtone.suppressions.import('phone_number,reason\n+12025550189,imported\n');
      const listed = await dialtone.suppressions.list({ limit: 10 });
      assert.deepEqual(listed.data.map((s) => s.phone_number).sort(), ['+12025550188', '+12025550189']);
      await dialtone.suppressions.delete('+12025550188');
      assert.equal((await refusal(dialtone.suppressions.get('+12025550188'))).status, 404);

      // Erasure: a person's runs lose their number; with suppress, the number is suppressed for good.
      const call = await dialtone.calls.start(fixture.agentUuid, { phone_number: '+12025550187', initial_context: { name: 'Grace' } });
      await dialtone.runs.wait(call.workflow_run_id, ended);
      const erased = await dialtone.phoneNumbers.erase('+12025550187', { suppress: true });
      assert.ok(JSON.stringify(erased).includes('1'), JSON.stringify(erased));
      const after = await dialtone.runs.get(call.workflow_run_id);
      assert.notEqual(after.phone_number, '+12025550187');
      assert.equal(after.initial_context, null);
      assert.equal((await dialtone.suppressions.get('+12025550187')).phone_number, '+12025550187');

      // Webhook endpoints: create, get, list, update, test, deliveries, retry, rotate, delete.
      const endpoint = await dialtone.webhookEndpoints.create({ url: receiver.url, events: ['webhook.test', 'campaign.completed'] });
      assert.match(endpoint.secret, /^whsec_/);
      assert.equal((await dialtone.webhookEndpoints.get(endpoint.id)).url, receiver.url);
      assert.deepEqual((await dialtone.webhookEndpoints.list()).data.map((e) => e.id), [endpoint.id]);
      const updated = await dialtone.webhookEndpoints.update(endpoint.id, { description: 'CRM' });
      assert.equal(updated.description, 'CRM');
      const sent = await dialtone.webhookEndpoints.test(endpoint.id);
      const [message] = await receiver.waitFor((all) => all.some((m) => m.json.type === 'webhook.test'), scaledTimeout(10_000));
      assert.ok(message);
      const verified = dialtone.webhooks.verify<{ type: string }>(message.headers as Record<string, string>, message.body, endpoint.secret);
      assert.equal(verified.type, 'webhook.test');
      assert.throws(() => dialtone.webhooks.verify(message.headers as Record<string, string>, message.body.replace('webhook.test', 'webhook.tset'), endpoint.secret));
      const deliveries = await dialtone.webhookEndpoints.deliveries(endpoint.id, { limit: 10 });
      assert.ok(deliveries.data.some((d) => d.id === sent.delivery_id));
      const retried = await dialtone.webhookEndpoints.retryDelivery(endpoint.id, sent.delivery_id);
      assert.deepEqual(retried, { delivery_id: sent.delivery_id, status: 'pending' });
      const rotated = await dialtone.webhookEndpoints.rotateSecret(endpoint.id);
      assert.notEqual(rotated.secret, endpoint.secret);

      // Campaigns: create, add contacts, start, finish, read contacts and attempts; pause, resume, cancel another.
      const campaign = await dialtone.campaigns.create({ name: 'Client', agent_uuid: fixture.agentUuid, mode: 'published' });
      const added = await dialtone.campaigns.addContacts(campaign.id, [{ phone_number: ANSWERED }, { phone_number: '+12025550150' }], { idempotencyKey: 'client-contacts-1' });
      assert.equal(added.added, 2);
      assert.equal((await dialtone.campaigns.start(campaign.id)).state, 'running');
      const deadline = Date.now() + scaledTimeout(30_000);
      while ((await dialtone.campaigns.get(campaign.id)).state !== 'completed') {
        assert.ok(Date.now() < deadline, 'the campaign completes');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const contacts = await dialtone.campaigns.contacts(campaign.id, { limit: 10 });
      assert.deepEqual(contacts.data.map((c) => c.status), ['reached', 'reached']);
      assert.equal((await dialtone.campaigns.runs(campaign.id)).data.length, 2);
      assert.ok((await dialtone.campaigns.list()).data.some((c) => c.id === campaign.id));
      // Starting in an hour, with a contact: running, and nothing to call yet.
      const later = new Date(Date.now() + 3_600_000).toISOString();
      const other = await dialtone.campaigns.create({ name: 'Steered', agent_uuid: fixture.agentUuid, mode: 'published', starts_at: later });
      await dialtone.campaigns.addContacts(other.id, [{ phone_number: '+12025550177' }]);
      await dialtone.campaigns.start(other.id);
      assert.equal((await dialtone.campaigns.pause(other.id)).state, 'paused');
      assert.equal((await dialtone.campaigns.resume(other.id)).state, 'running');
      assert.equal((await dialtone.campaigns.cancel(other.id)).state, 'canceled');
      const completed = await receiver.waitFor((all) => all.some((m) => m.json.type === 'campaign.completed'), scaledTimeout(10_000));
      const completion = completed.find((m) => m.json.type === 'campaign.completed');
      assert.ok(completion);
      // Signed with the new secret since the rotation (and the old one during its overlap).
      assert.equal(dialtone.webhooks.verify<{ type: string }>(completion.headers as Record<string, string>, completion.body, rotated.secret).type, 'campaign.completed');

      await dialtone.webhookEndpoints.delete(endpoint.id);
      assert.equal((await refusal(dialtone.webhookEndpoints.get(endpoint.id))).status, 404);
    });

    it('resumes the event stream after a cut connection with Last-Event-ID, losing and repeating nothing', async (t) => {
      const { dialtone, url, fixture } = await service(t, store.kind);
      // A fetch whose first stream breaks after its first run event: the client must reconnect by itself.
      let streams = 0;
      const cutting: typeof fetch = async (input, init) => {
        const response = await fetch(input, init);
        if (!String(input).endsWith('/stream') || streams++ > 0 || response.body === null) return response;
        let seenRun = false;
        const decoder = new TextDecoder();
        const cut = response.body.pipeThrough(
          new TransformStream<Uint8Array, Uint8Array>({
            transform(chunk, controller) {
              if (seenRun) return controller.error(new Error('connection reset'));
              if (decoder.decode(chunk, { stream: true }).includes('event: run')) seenRun = true;
              controller.enqueue(chunk);
            },
          }),
        );
        return new Response(cut, { status: response.status, headers: response.headers });
      };
      const reading = new Dialtone({ baseUrl: url, apiKey: fixture.apiKey, fetch: cutting });
      const abort = new AbortController();
      const seen: StreamMessage[] = [];
      const runs: number[] = [];
      const collecting = (async () => {
        for await (const message of reading.stream.events({ signal: abort.signal, reconnectDelayMs: 10 })) {
          seen.push(message);
          if (message.event === 'ready' && seen.filter((m) => m.event === 'ready').length === 1) {
            for (const number of [ANSWERED, '+12025550150']) runs.push((await dialtone.calls.start(fixture.agentUuid, { phone_number: number })).workflow_run_id);
          }
          const runEvents = seen.filter((m) => m.event === 'run');
          if (runEvents.filter((m) => m.event === 'run' && m.data.type === 'completed').length === 2) abort.abort();
        }
      })();
      const timer = setTimeout(() => abort.abort(), scaledTimeout(30_000));
      await collecting;
      clearTimeout(timer);
      assert.ok(streams >= 2, 'the stream was opened again after the cut');
      const runEvents = seen.flatMap((m) => (m.event === 'run' ? [m.data] : []));
      for (const runId of runs) {
        assert.deepEqual(
          runEvents.filter((e) => e.run_id === runId).map((e) => e.type),
          ['queued', 'dialing', 'ringing', 'in_progress', 'completed'],
          `run ${runId}: every event once, in order`,
        );
      }
      const ids = seen.filter((m) => m.event === 'run').map((m) => Number(m.id));
      assert.equal(new Set(ids).size, ids.length, 'no message twice');

      // Resuming from an id given by hand answers what came after it, and only that.
      const middle = seen.filter((m) => m.event === 'run')[3];
      assert.ok(middle);
      const resumed: StreamMessage[] = [];
      const stop = new AbortController();
      for await (const message of dialtone.stream.events({ lastEventId: middle.id, signal: stop.signal })) {
        if (message.event === 'run') resumed.push(message);
        if (resumed.length === ids.length - 4) stop.abort();
      }
      assert.deepEqual(resumed.map((m) => Number(m.id)), ids.slice(4));
    });
  });
}

describe('@dialtone/client retries', () => {
  it('retries a refused read after the Retry-After the service names, never retries a POST without an Idempotency-Key, and retries one with a key', async (t) => {
    // Two requests per two-second window for the key: the third in a window is refused with 429.
    const { db, url } = await service(t, 'sqlite', { RATE_LIMIT_KEY_PER_SECOND: '1', RATE_LIMIT_ORG_PER_SECOND: '0', RATE_LIMIT_WINDOW_SECONDS: '2' });
    const statuses: number[] = [];
    const waits: number[] = [];
    const recording: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      statuses.push(response.status);
      return response;
    };
    const sleep = (ms: number) => {
      waits.push(ms);
      return new Promise<void>((resolve) => setTimeout(resolve, ms));
    };
    const retrying = new Dialtone({ baseUrl: url, apiKey: db.fixture.apiKey, fetch: recording, retry: { maxRetries: 5, sleep } });
    // Reads until one is refused (three in a window normally; more on a machine slow enough to let a window pass).
    let reads = 0;
    while (!statuses.includes(429) && reads < 50) {
      await retrying.runs.list();
      reads += 1;
    }
    assert.ok(statuses.includes(429), `a read was refused: ${statuses.join(', ')}`);
    assert.equal(statuses.filter((s) => s === 200).length, reads, 'every read answered in the end');
    assert.ok(waits.length > 0 && waits.every((ms) => ms >= 1000 && ms % 1000 === 0), `waited the Retry-After seconds: ${waits.join(', ')}`);

    // Exhaust the window, then a POST without a key: refused once, not retried, Retry-After exposed.
    statuses.length = 0;
    const noRetry = new Dialtone({ baseUrl: url, apiKey: db.fixture.apiKey, fetch: recording, retry: { maxRetries: 5, sleep } });
    let refused: DialtoneApiError | undefined;
    for (let i = 0; i < 4 && !refused; i++) {
      refused = await noRetry.calls.start(db.fixture.agentUuid, { phone_number: ANSWERED }).then(
        () => undefined,
        (e: unknown) => (e instanceof DialtoneApiError ? e : assert.fail(String(e))),
      );
    }
    assert.ok(refused, 'a start was refused');
    assert.equal(refused.status, 429);
    assert.equal(refused.code, 'rate_limited');
    assert.ok((refused.retryAfterSeconds ?? 0) >= 1);
    assert.equal(statuses.at(-1), 429, 'the refused POST was sent once');

    statuses.length = 0;
    const keyed = await noRetry.calls.start(db.fixture.agentUuid, { phone_number: ANSWERED }, { idempotencyKey: 'retry-me' });
    assert.equal(keyed.status, 'queued');
    const runs = await db.observer.db.selectFrom('workflow_runs').select('id').execute();
    assert.equal(runs.filter((r) => r.id === keyed.workflow_run_id).length, 1, 'created once');
  });
});
