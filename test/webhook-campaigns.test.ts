// Campaign changes as webhook messages: every change the event stream reports (created, started,
// paused, resumed, completed, canceled) is written to the outbox in the change's transaction and
// delivered signed, checked with the standardwebhooks package rather than Dialtone's own code.
import assert from 'node:assert/strict';
import { runCampaignTick } from '../src/campaigns/scheduler.js';
import { postJson } from './helpers/app.js';
import { act, createCampaign } from './helpers/campaigns.js';
import { buildWithDispatcher } from './helpers/dispatch.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { Receiver, startReceiver, WEBHOOK_TEST_ENV } from './helpers/webhooks.js';

const CAMPAIGN_TYPES = ['campaign.created', 'campaign.started', 'campaign.paused', 'campaign.resumed', 'campaign.completed', 'campaign.canceled'];

for (const store of await storeCases()) {
  describe(`Campaign webhooks (${store.kind})`, { skip: store.skip }, () => {
    it('delivers campaign.created, started, paused, resumed, completed and canceled, each signed as Standard Webhooks verifies, written with the change', async (t) => {
      const receiver = await startReceiver(t);
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV });
      const f = await createOrgFixture(env.deps);
      const created = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: receiver.url, events: CAMPAIGN_TYPES }, { key: f.apiKey });
      assert.equal(created.statusCode, 201, created.body);
      const { id: endpointId, secret } = created.json() as { id: number; secret: string };

      const steered = await createCampaign(env.app, f, { name: 'Steered' });
      const empty = await createCampaign(env.app, f, { name: 'Empty' });
      for (const action of ['start', 'pause', 'resume', 'cancel']) assert.equal((await act(env.app, f, steered.id, action)).statusCode, 200, action);
      assert.equal((await act(env.app, f, empty.id, 'start')).statusCode, 200);
      await runCampaignTick(env.deps); // nothing to call: completed
      // A move refused (canceled cannot resume) writes nothing.
      assert.equal((await act(env.app, f, steered.id, 'resume')).statusCode, 409);

      // Written when each change committed, whatever the worker has sent yet.
      const written = await env.deps.store.db.selectFrom('webhook_deliveries').select(['event_type', 'payload']).where('endpoint_id', '=', endpointId).orderBy('id').execute();
      const expected = [
        ['campaign.created', steered.id, 'draft'],
        ['campaign.created', empty.id, 'draft'],
        ['campaign.started', steered.id, 'running'],
        ['campaign.paused', steered.id, 'paused'],
        ['campaign.resumed', steered.id, 'running'],
        ['campaign.canceled', steered.id, 'canceled'],
        ['campaign.started', empty.id, 'running'],
        ['campaign.completed', empty.id, 'completed'],
      ];
      const summary = (type: string, data: unknown) => {
        const campaign = (data as { campaign: { id: number; state: string } }).campaign;
        return [type, campaign.id, campaign.state];
      };
      assert.deepEqual(written.map((d) => summary(d.event_type, (JSON.parse(d.payload) as { data: unknown }).data)), expected);

      const messages = await receiver.waitFor((all) => all.length >= expected.length);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(receiver.received.length, expected.length, 'each message once');
      for (const message of messages) {
        // Throws unless the signature verifies under the endpoint's secret.
        const verified = Receiver.verify(secret, message) as { type: string; timestamp: string; data: { campaign: { id: number; state: string } } };
        assert.deepEqual(verified, message.json);
        assert.match(String(message.headers['webhook-id']), /^msg_campaign\d+_[a-z]+_\d+_[\w-]{8}$/);
      }
      // Campaign messages have no order between them: compare as sets.
      const key = (row: unknown[]) => row.join(' ');
      assert.deepEqual(messages.map((m) => key(summary(m.json.type, m.json.data))).sort(), expected.map(key).sort());
      assert.equal(new Set(messages.map((m) => m.headers['webhook-id'])).size, expected.length);
    });

    it('gives each campaign change its own message id, even two pauses within the same millisecond', async (t) => {
      // Receivers drop a message whose webhook-id they have seen: two changes sharing one would lose the second.
      const frozen = { now: () => 1_800_000_000_000 };
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV, webhooks: false, clock: frozen });
      const f = await createOrgFixture(env.deps);
      const created = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: 'https://93.184.216.34/hooks', events: CAMPAIGN_TYPES }, { key: f.apiKey });
      assert.equal(created.statusCode, 201, created.body);
      const campaign = await createCampaign(env.app, f);
      for (const action of ['start', 'pause', 'resume', 'pause', 'resume']) assert.equal((await act(env.app, f, campaign.id, action)).statusCode, 200, action);
      const rows = await env.deps.store.db.selectFrom('webhook_deliveries').select(['event_type', 'message_id']).orderBy('id').execute();
      assert.deepEqual(rows.map((r) => r.event_type), ['campaign.created', 'campaign.started', 'campaign.paused', 'campaign.resumed', 'campaign.paused', 'campaign.resumed']);
      assert.equal(new Set(rows.map((r) => r.message_id)).size, rows.length, rows.map((r) => r.message_id).join(', '));
    });

    it('sends a campaign message only to endpoints subscribed to its type (or to every type)', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: WEBHOOK_TEST_ENV, webhooks: false });
      const f = await createOrgFixture(env.deps);
      const register = async (events?: string[]) => {
        const response = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: 'https://93.184.216.34/hooks', ...(events ? { events } : {}) }, { key: f.apiKey });
        assert.equal(response.statusCode, 201, response.body);
        return (response.json() as { id: number }).id;
      };
      const every = await register();
      const canceledOnly = await register(['campaign.canceled']);
      const runsOnly = await register(['run.ended']);
      const campaign = await createCampaign(env.app, f);
      assert.equal((await act(env.app, f, campaign.id, 'cancel')).statusCode, 200);
      const rows = await env.deps.store.db.selectFrom('webhook_deliveries').select(['endpoint_id', 'event_type']).orderBy('id').execute();
      // One change's deliveries carry no order between endpoints: compare sorted.
      const byEndpoint = (a: [number, string], b: [number, string]) => a[0] - b[0] || a[1].localeCompare(b[1]);
      assert.deepEqual(
        rows.map((r): [number, string] => [r.endpoint_id, r.event_type]).sort(byEndpoint),
        [
          [every, 'campaign.canceled'],
          [every, 'campaign.created'],
          [canceledOnly, 'campaign.canceled'],
        ],
      );
      assert.ok(!rows.some((r) => r.endpoint_id === runsOnly));
    });
  });
}
