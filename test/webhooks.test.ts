import assert from 'node:assert/strict';
import { getRun } from '../src/runs/read-run.js';
import { insertEndpoint } from '../src/store/statements/webhook-statements.js';
import { getJson, postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, type OrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { Receiver, startReceiver, WEBHOOK_TEST_ENV, type ReceivedMessage } from './helpers/webhooks.js';

const RUN_TYPES = ['run.queued', 'run.dialing', 'run.ringing', 'run.in_progress', 'run.ended'];

async function subscribe(env: DispatchEnv, f: OrgFixture, url: string, extra: Record<string, unknown> = {}): Promise<{ id: number; secret: string }> {
  const response = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url, ...extra }, { key: f.apiKey });
  assert.equal(response.statusCode, 201, response.body);
  return response.json();
}

async function startCall(env: DispatchEnv, f: OrgFixture, phone = '+12025550100'): Promise<number> {
  const response = await postJson(env.app, `/api/v1/public/agent/${f.agentUuid}`, { phone_number: phone }, { key: f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return response.json().workflow_run_id;
}

/** The test settings less WEBHOOK_ALLOW_PRIVATE_NETWORKS: as an operator who never set it. */
const WITHOUT_PRIVATE_NETWORKS = Object.fromEntries(Object.entries(WEBHOOK_TEST_ENV).filter(([key]) => key !== 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'));

const ofRun = (runId: number) => (m: ReceivedMessage) => m.json.data.run?.id === runId;

for (const store of await storeCases()) {
  describe(`Webhooks (${store.kind})`, { skip: store.skip }, () => {
    it('reports every state change of a simulator call once per webhook-id, signed, with the run as GET showed it then', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV });
      const f = await createOrgFixture(env.deps);
      const { secret } = await subscribe(env, f, receiver.url);
      const runId = await startCall(env, f);
      await waitForRun(env, runId, ended);
      const messages = await receiver.waitFor((all) => all.filter(ofRun(runId)).length >= 5);
      const mine = messages.filter(ofRun(runId));
      assert.deepEqual(mine.map((m) => m.json.type), RUN_TYPES);
      assert.deepEqual(mine.map((m) => m.json.data.event?.type), ['queued', 'dialing', 'ringing', 'in_progress', 'completed']);
      assert.deepEqual(mine.map((m) => m.json.data.event?.seq), [1, 2, 3, 4, 5]);
      for (const m of mine) {
        assert.deepEqual(Receiver.verify(secret, m), m.json);
        assert.equal(m.headers['webhook-id'], `msg_run${runId}_${m.json.data.event?.seq}`);
        assert.equal(m.headers['content-type'], 'application/json');
        assert.match(String(m.headers['user-agent']), /^Dialtone\/\d+\.\d+\.\d+/);
        // The run in each message is in the state its event entered.
        assert.equal(m.json.data.run?.state, m.json.data.event?.type);
      }
      // The last message's run is exactly what GET answers now that nothing will change.
      assert.deepEqual(mine[4]?.json.data.run, await getRun(env.deps.store, f.orgId, runId));
      // Nothing is sent twice: no more messages arrive for the run.
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(receiver.received.filter(ofRun(runId)).length, 5);
      const ids = receiver.received.map((m) => m.headers['webhook-id']);
      assert.equal(new Set(ids).size, ids.length);
    });

    it('retries a message the receiver refused: 500 three times then 200 is four attempts of one message, recorded in the deliveries', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: { ...WEBHOOK_TEST_ENV, WEBHOOK_RETRY_SCHEDULE: '0,10ms,10ms,10ms' } });
      const f = await createOrgFixture(env.deps);
      const endpoint = await subscribe(env, f, receiver.url, { events: ['run.queued'] });
      receiver.answer = (_m, i) => (i < 3 ? { status: 500, body: 'not yet' } : { status: 200, body: 'ok' });
      const runId = await startCall(env, f);
      await receiver.waitFor((all) => all.length >= 4);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(receiver.received.length, 4);
      assert.equal(new Set(receiver.received.map((m) => m.headers['webhook-id'])).size, 1);
      assert.ok(receiver.received.every(ofRun(runId)));
      const page = await waitForDeliveries(env, f, endpoint.id, (d) => d[0]?.status === 'succeeded');
      const [delivery] = page;
      assert.equal(delivery?.attempts.length, 4);
      assert.deepEqual(delivery?.attempts.map((a) => a.http_status), [500, 500, 500, 200]);
      assert.equal(delivery?.attempts[0]?.response_body, 'not yet');
      assert.equal(delivery?.next_attempt_at, null);
    });

    it('keeps per-run order with 50 runs in parallel and a receiver that answers in random time and refuses some first attempts', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, {
        env: {
          ...WEBHOOK_TEST_ENV,
          WEBHOOK_ENDPOINT_CONCURRENCY: '10',
          WEBHOOK_RETRY_SCHEDULE: '0,10ms,10ms,10ms',
          // Far above the receiver's answer and the calls' timings: this test is about order, not
          // timeouts. With 2 s, a loaded machine timed out attempts the receiver had recorded and
          // sent them again (at least once, as promised), and the reaper could end a call before its
          // last phase; both are checked below rather than assumed away.
          WEBHOOK_TIMEOUT_MS: '30000',
          RING_TIMEOUT_MS: '30000',
          MAX_CALL_DURATION_MS: '30000',
        },
      });
      const f = await createOrgFixture(env.deps);
      await subscribe(env, f, receiver.url);
      let inFlight = 0;
      let maxInFlight = 0;
      // Every third message is refused once: its run's next messages must wait for its retry. (The
      // receiver records messages as they arrive, so without refusals arrival order is send order
      // whatever the answer times, and sending a run's messages out of order went unnoticed.)
      const seen = new Set<string>();
      receiver.answer = async (message) => {
        const id = String(message.headers['webhook-id']);
        const refuse = !seen.has(id) && seen.size % 3 === 0;
        seen.add(id);
        inFlight += 1;
        maxInFlight = Math.max(maxInFlight, inFlight);
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 15));
        inFlight -= 1;
        return { status: refuse ? 500 : 200 };
      };
      const runIds = await Promise.all(Array.from({ length: 50 }, () => startCall(env, f)));
      await Promise.all(runIds.map((id) => waitForRun(env, id, ended, 60_000)));
      const events = await env.deps.store.db.selectFrom('run_events').select(['run_id', 'seq']).orderBy('run_id').orderBy('seq').execute();
      // Every delivery has succeeded once the receiver has answered each of them.
      const succeeded = async () => {
        const rows = await env.deps.store.db.selectFrom('webhook_deliveries').select('status').execute();
        return rows.length === events.length && rows.every((r) => r.status === 'succeeded');
      };
      const deadline = Date.now() + 60_000;
      while (!(await succeeded())) {
        assert.ok(Date.now() < deadline, 'every message was delivered');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // Message ids sent more than once: only after an attempt that failed (a refusal, or a timeout), never a spurious resend.
      const retried = new Set(
        (
          await env.deps.store.db
            .selectFrom('webhook_attempts as a')
            .innerJoin('webhook_deliveries as d', 'd.id', 'a.delivery_id')
            .select('d.message_id')
            .where((eb) => eb.or([eb('a.error', 'is not', null), eb('a.http_status', 'is', null), eb('a.http_status', '>=', 300)]))
            .execute()
        ).map((r) => r.message_id),
      );
      for (const runId of runIds) {
        const received = receiver.received.filter(ofRun(runId));
        const seqs = received.map((m) => m.json.data.event?.seq);
        const expected = events.filter((e) => e.run_id === runId).map((e) => e.seq);
        assert.deepEqual(expected, [1, 2, 3, 4, 5], `run ${runId} went through every phase`);
        // In seq order: a message goes out only once the one before it was delivered, so a retry
        // repeats the last one sent and never comes after a later one.
        assert.deepEqual(seqs.filter((seq, i) => seq !== seqs[i - 1]), expected, `run ${runId}: messages in seq order, retries included (${seqs.join(',')})`);
        const repeated = received.filter((m, i) => received.findIndex((o) => o.headers['webhook-id'] === m.headers['webhook-id']) !== i);
        for (const m of repeated) assert.ok(retried.has(String(m.headers['webhook-id'])), `${m.headers['webhook-id']} was sent again only after a failed attempt`);
      }
      assert.ok(maxInFlight <= 10, `at most WEBHOOK_ENDPOINT_CONCURRENCY in flight, saw ${maxInFlight}`);
      assert.ok(maxInFlight > 1, 'different runs go out in parallel');
    });

    it("writes a run's deliveries only for its own organization's enabled endpoints: none where the only endpoint is disabled, none where there is none", async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV, webhooks: false });
      const [subscribed, disabled, none] = [await createOrgFixture(env.deps), await createOrgFixture(env.deps), await createOrgFixture(env.deps)];
      const endpoint = await subscribe(env, subscribed, receiver.url);
      const off = await subscribe(env, disabled, receiver.url);
      const patched = await env.app.inject({ method: 'PATCH', url: `/api/v1/public/webhook-endpoints/${off.id}`, payload: { enabled: false }, headers: { 'x-api-key': disabled.apiKey } });
      assert.equal(patched.statusCode, 200, patched.body);
      const runs = [await startCall(env, subscribed, '+12025550111'), await startCall(env, disabled, '+12025550112'), await startCall(env, none, '+12025550113')];
      for (const runId of runs) await waitForRun(env, runId, ended);
      const deliveries = await env.deps.store.db.selectFrom('webhook_deliveries').select(['run_id', 'endpoint_id', 'event_type']).orderBy('id').execute();
      assert.deepEqual(
        deliveries.map((d) => [Number(d.run_id), Number(d.endpoint_id), d.event_type]),
        RUN_TYPES.map((type) => [runs[0], endpoint.id, type]),
      );
    });

    it('sends only the subscribed types', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV });
      const f = await createOrgFixture(env.deps);
      await subscribe(env, f, receiver.url, { events: ['run.ended', 'run.dialing'] });
      const runId = await startCall(env, f, '+12025550101');
      await waitForRun(env, runId, ended);
      await receiver.waitFor((all) => all.length >= 2);
      await new Promise((resolve) => setTimeout(resolve, 150));
      assert.deepEqual(receiver.received.map((m) => m.json.type), ['run.dialing', 'run.ended']);
      assert.equal(receiver.received[1]?.json.data.run?.state, 'busy');
    });

    it('disables an endpoint that answers 410 Gone and sends it nothing more', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV });
      const f = await createOrgFixture(env.deps);
      const endpoint = await subscribe(env, f, receiver.url);
      receiver.answer = () => ({ status: 410 });
      const runId = await startCall(env, f);
      await waitForRun(env, runId, ended);
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(receiver.received.length, 1);
      const shown = (await getJson(env.app, `/api/v1/public/webhook-endpoints/${endpoint.id}`, f.apiKey)).json();
      assert.equal(shown.enabled, false);
      assert.equal(shown.disabled_reason, 'gone');
      const failed = await waitForDeliveries(env, f, endpoint.id, (d) => d.some((x) => x.status === 'failed'));
      assert.equal(failed.find((d) => d.status === 'failed')?.attempts[0]?.http_status, 410);
    });

    it('refuses to register http URLs and hosts that are or resolve to non-public addresses, and registers nothing, with NODE_ENV=development and WEBHOOK_ALLOW_PRIVATE_NETWORKS unset', async (t) => {
      // A plain `npm start` (NODE_ENV defaults to development): private networks stay refused.
      const env = await buildWithDispatcher(t, store.kind, { env: { ...WITHOUT_PRIVATE_NETWORKS, NODE_ENV: 'development' }, webhooks: false });
      const f = await createOrgFixture(env.deps);
      const refused = [
        'http://93.184.216.34/hooks',
        'http://127.0.0.1:3000/hooks',
        'http://169.254.169.254/latest/meta-data',
        'https://127.0.0.1/hooks',
        'https://localhost/hooks',
        'https://169.254.169.254/latest/meta-data',
        'https://10.1.2.3/hooks',
        'https://100.64.0.1/hooks',
        'https://[::1]/hooks',
        'https://[::ffff:127.0.0.1]/hooks',
        'https://[fe80::1]/hooks',
        'https://224.0.0.1/hooks',
      ];
      for (const url of refused) {
        const response = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url }, { key: f.apiKey });
        assert.equal(response.statusCode, 422, url);
        assert.equal(response.json().code, 'webhook_url_not_allowed', url);
        assert.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8');
        // What a name resolves to on the service's network is not told.
        if (url.includes('localhost')) assert.doesNotMatch(response.body, /127\.0\.0\.1|::1|loopback/, url);
      }
      for (const url of ['ftp://93.184.216.34/x', 'https://user:secret@93.184.216.34/x', 'not a url']) {
        const response = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url }, { key: f.apiKey });
        assert.equal(response.statusCode, 422, url);
        assert.equal(response.json().code, 'invalid_webhook_url', url);
        assert.ok(!response.body.includes('secret@'), 'the credentials are not echoed');
      }
      assert.deepEqual((await getJson(env.app, '/api/v1/public/webhook-endpoints', f.apiKey)).json(), { data: [] });
      const patched = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: 'https://93.184.216.34/hooks' }, { key: f.apiKey });
      assert.equal(patched.statusCode, 201, patched.body);
      const moved = await env.app.inject({
        method: 'PATCH',
        url: `/api/v1/public/webhook-endpoints/${patched.json().id}`,
        headers: { 'x-api-key': f.apiKey, 'content-type': 'application/json' },
        payload: JSON.stringify({ url: 'https://127.0.0.1/hooks' }),
      });
      assert.equal(moved.statusCode, 422);
      assert.equal((await getJson(env.app, `/api/v1/public/webhook-endpoints/${patched.json().id}`, f.apiKey)).json().url, 'https://93.184.216.34/hooks');
    });

    it('refuses at connection time a host that resolves to a loopback address, and the receiver is never reached', async (t) => {
      const receiver = await startReceiver(t);
      // Private networks not allowed. The endpoint is written as if `localhost` had resolved to a
      // public address when it was registered (DNS rebinding): only the check at connection stops it.
      const env = await buildWithDispatcher(t, store.kind, { env: { ...WITHOUT_PRIVATE_NETWORKS, NODE_ENV: 'development', WEBHOOK_RETRY_SCHEDULE: '0' } });
      const f = await createOrgFixture(env.deps);
      const endpoint = await insertEndpoint(env.deps.store, {
        orgId: f.orgId,
        url: `https://localhost:${receiver.port}/hooks`,
        description: null,
        eventFilter: ',run.queued,',
        secretEncrypted: env.deps.cipher.encrypt(f.orgId, { secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/pMSuqlFkFI=' }),
        at: env.deps.clock.now(),
      });
      await startCall(env, f);
      const [delivery] = await waitForDeliveries(env, f, endpoint.id, (d) => d[0]?.status === 'failed');
      assert.equal(delivery?.attempts[0]?.error, 'address not allowed: the host resolves to an address that is not public');
      assert.equal(delivery?.attempts[0]?.http_status, null);
      assert.equal(receiver.received.length, 0);
    });

    it('signs with the old and the new secret during the overlap after a rotation, and with the new one only after it', async (t) => {
      const receiver = await startReceiver(t);
      let offset = 0;
      const clock = { now: () => Date.now() + offset };
      const env = await buildWithDispatcher(t, store.kind, { clock, env: { ...WEBHOOK_TEST_ENV, WEBHOOK_SECRET_OVERLAP_MS: '60000' } });
      const f = await createOrgFixture(env.deps);
      const endpoint = await subscribe(env, f, receiver.url, { events: ['webhook.test'] });
      const rotated = await postJson(env.app, `/api/v1/public/webhook-endpoints/${endpoint.id}/rotate-secret`, {}, { key: f.apiKey });
      assert.equal(rotated.statusCode, 200, rotated.body);
      const newSecret = rotated.json().secret as string;
      assert.notEqual(newSecret, endpoint.secret);

      const during = await postJson(env.app, `/api/v1/public/webhook-endpoints/${endpoint.id}/test`, {}, { key: f.apiKey });
      assert.equal(during.statusCode, 202, during.body);
      const [first] = await receiver.waitFor((all) => all.length >= 1);
      assert.ok(first);
      assert.equal(String(first.headers['webhook-signature']).split(' ').length, 2);
      assert.doesNotThrow(() => Receiver.verify(endpoint.secret, first));
      assert.doesNotThrow(() => Receiver.verify(newSecret, first));
      assert.equal(first.json.type, 'webhook.test');
      assert.equal(first.headers['webhook-id'], during.json().message_id);

      offset = 61_000; // the overlap is over (still within the verifier's 5-minute timestamp tolerance)
      await postJson(env.app, `/api/v1/public/webhook-endpoints/${endpoint.id}/test`, {}, { key: f.apiKey });
      const second = (await receiver.waitFor((all) => all.length >= 2))[1];
      assert.ok(second);
      assert.equal(String(second.headers['webhook-signature']).split(' ').length, 1);
      assert.throws(() => Receiver.verify(endpoint.secret, second));
      assert.doesNotThrow(() => Receiver.verify(newSecret, second));
    });

    it('queues a finished delivery again on request, and refuses with 409 while it is pending', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: { ...WEBHOOK_TEST_ENV, WEBHOOK_RETRY_SCHEDULE: '0' } });
      const f = await createOrgFixture(env.deps);
      const endpoint = await subscribe(env, f, receiver.url, { events: ['webhook.test'] });
      receiver.answer = () => ({ status: 503 });
      const sent = (await postJson(env.app, `/api/v1/public/webhook-endpoints/${endpoint.id}/test`, {}, { key: f.apiKey })).json();
      await waitForDeliveries(env, f, endpoint.id, (d) => d[0]?.status === 'failed');
      receiver.answer = () => ({ status: 200 });
      // Held back (the worker is stopped) so the retried delivery stays pending while we ask again.
      await env.webhooks.stop();
      const retried = await postJson(env.app, `/api/v1/public/webhook-endpoints/${endpoint.id}/deliveries/${sent.delivery_id}/retry`, {}, { key: f.apiKey });
      assert.equal(retried.statusCode, 202, retried.body);
      const again = await postJson(env.app, `/api/v1/public/webhook-endpoints/${endpoint.id}/deliveries/${sent.delivery_id}/retry`, {}, { key: f.apiKey });
      assert.equal(again.statusCode, 409);
      assert.equal(again.json().code, 'webhook_delivery_pending');
      env.webhooks.start();
      const [delivery] = await waitForDeliveries(env, f, endpoint.id, (d) => d[0]?.status === 'succeeded');
      assert.deepEqual(delivery?.attempts.map((a) => a.http_status), [503, 200]);
      assert.equal(receiver.received.length, 2);
      assert.equal(receiver.received[0]?.headers['webhook-id'], receiver.received[1]?.headers['webhook-id']);
    });

    it('stops pending deliveries when the endpoint is deleted', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV, webhooks: false });
      const f = await createOrgFixture(env.deps);
      const endpoint = await subscribe(env, f, receiver.url);
      await startCall(env, f);
      const deleted = await env.app.inject({ method: 'DELETE', url: `/api/v1/public/webhook-endpoints/${endpoint.id}`, headers: { 'x-api-key': f.apiKey } });
      assert.equal(deleted.statusCode, 204);
      env.webhooks.start();
      assert.equal(await env.webhooks.deliverDue(), 0);
      assert.equal(receiver.received.length, 0);
      assert.equal((await getJson(env.app, `/api/v1/public/webhook-endpoints/${endpoint.id}`, f.apiKey)).statusCode, 404);
    });

    it('exposes attempts by result, finished deliveries, the outbox depth and the oldest pending age at /metrics', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: { ...WEBHOOK_TEST_ENV, WEBHOOK_RETRY_SCHEDULE: '0' }, webhooks: false });
      const f = await createOrgFixture(env.deps);
      const endpoint = await subscribe(env, f, receiver.url, { events: ['webhook.test'] });
      for (let i = 0; i < 3; i++) await postJson(env.app, `/api/v1/public/webhook-endpoints/${endpoint.id}/test`, {}, { key: f.apiKey });
      const metric = async (name: string) => {
        const text = (await env.app.inject({ method: 'GET', url: '/metrics' })).body;
        return text.split('\n').filter((line) => line.startsWith(name)).join('\n');
      };
      assert.match(await metric('dialtone_webhook_outbox_depth'), /^dialtone_webhook_outbox_depth 3$/);
      assert.match(await metric('dialtone_webhook_oldest_pending_age_seconds'), /^dialtone_webhook_oldest_pending_age_seconds [0-9.]+$/);
      receiver.answer = (_m, i) => ({ status: i === 0 ? 200 : 500 });
      env.webhooks.start();
      await waitForDeliveries(env, f, endpoint.id, (d) => d.every((x) => x.status !== 'pending'));
      assert.match(await metric('dialtone_webhook_attempts_total'), /dialtone_webhook_attempts_total\{result="2xx"\} 1/);
      assert.match(await metric('dialtone_webhook_attempts_total'), /dialtone_webhook_attempts_total\{result="5xx"\} 2/);
      assert.match(await metric('dialtone_webhook_deliveries_total'), /dialtone_webhook_deliveries_total\{outcome="succeeded"\} 1/);
      assert.match(await metric('dialtone_webhook_deliveries_total'), /dialtone_webhook_deliveries_total\{outcome="failed"\} 2/);
      assert.match(await metric('dialtone_webhook_attempt_duration_seconds_count'), / 3$/);
      assert.match(await metric('dialtone_webhook_outbox_depth'), /^dialtone_webhook_outbox_depth 0$/);
    });

    it("answers 404 for another organization's endpoint on every operation, and changes nothing", async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV, webhooks: false });
      const owner = await createOrgFixture(env.deps, 'Owner');
      const other = await createOrgFixture(env.deps, 'Other');
      const endpoint = await subscribe(env, owner, receiver.url);
      const base = `/api/v1/public/webhook-endpoints/${endpoint.id}`;
      const attempts = [
        { method: 'GET' as const, url: base },
        { method: 'PATCH' as const, url: base, payload: { enabled: false } },
        { method: 'DELETE' as const, url: base },
        { method: 'POST' as const, url: `${base}/rotate-secret`, payload: {} },
        { method: 'POST' as const, url: `${base}/test`, payload: {} },
        { method: 'GET' as const, url: `${base}/deliveries` },
        { method: 'POST' as const, url: `${base}/deliveries/1/retry`, payload: {} },
      ];
      for (const a of attempts) {
        const response = await env.app.inject({
          method: a.method,
          url: a.url,
          headers: { 'x-api-key': other.apiKey, ...(a.payload ? { 'content-type': 'application/json' } : {}) },
          ...(a.payload ? { payload: JSON.stringify(a.payload) } : {}),
        });
        assert.equal(response.statusCode, 404, `${a.method} ${a.url}`);
        assert.equal(response.json().code, 'webhook_endpoint_not_found');
      }
      assert.deepEqual((await getJson(env.app, '/api/v1/public/webhook-endpoints', other.apiKey)).json(), { data: [] });
      const mine = (await getJson(env.app, base, owner.apiKey)).json();
      assert.equal(mine.enabled, true);
      assert.equal((await getJson(env.app, `${base}/deliveries`, owner.apiKey)).json().data.length, 0);
    });

    it('registers exactly WEBHOOK_MAX_ENDPOINTS endpoints when registrations race at the limit, and refuses the rest with 422 webhook_endpoint_limit', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: { ...WEBHOOK_TEST_ENV, WEBHOOK_MAX_ENDPOINTS: '3' }, webhooks: false });
      const f = await createOrgFixture(env.deps);
      const other = await createOrgFixture(env.deps, 'Other');
      await subscribe(env, f, receiver.url);
      // Two places left, twelve registrations at once; another organization's at the same time is not held up by them.
      const register = (owner: OrgFixture, i: number) => postJson(env.app, '/api/v1/public/webhook-endpoints', { url: `${receiver.url}/${i}` }, { key: owner.apiKey });
      const responses = await Promise.all([...Array.from({ length: 12 }, (_, i) => register(f, i)), register(other, 99)]);
      const [theirs] = responses.splice(12, 1);
      assert.equal(theirs?.statusCode, 201, theirs?.body);
      assert.deepEqual(responses.map((r) => r.statusCode).sort(), [...Array<number>(2).fill(201), ...Array<number>(10).fill(422)]);
      for (const refused of responses.filter((r) => r.statusCode === 422)) assert.equal(refused.json().code, 'webhook_endpoint_limit');
      assert.equal((await getJson(env.app, '/api/v1/public/webhook-endpoints', f.apiKey)).json().data.length, 3);
    });
  });
}

interface DeliveryJson {
  id: number;
  status: string;
  next_attempt_at: string | null;
  attempts: { http_status: number | null; error: string | null; response_body: string | null }[];
}

async function waitForDeliveries(env: DispatchEnv, f: OrgFixture, endpointId: number, done: (d: DeliveryJson[]) => boolean, timeoutMs = 10_000): Promise<DeliveryJson[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = await getJson(env.app, `/api/v1/public/webhook-endpoints/${endpointId}/deliveries`, f.apiKey);
    assert.equal(response.statusCode, 200, response.body);
    const data = response.json().data as DeliveryJson[];
    if (done(data)) return data;
    if (Date.now() > deadline) throw new Error(`deliveries not as expected after ${timeoutMs} ms: ${JSON.stringify(data)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
