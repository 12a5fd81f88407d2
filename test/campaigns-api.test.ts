// Campaigns over HTTP (issue 15): creation and its refusals, the state machine, contacts imported
// as JSON and CSV with invalid ones reported by index or line and duplicates counted, and
// Idempotency-Key on the import.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { importContactCsv } from '../src/campaigns/contacts.js';
import { DialtoneError } from '../src/errors.js';
import { insertContacts } from '../src/store/statements/campaign-statements.js';
import { runCampaignTick } from '../src/campaigns/scheduler.js';
import { messageBody } from '../src/webhooks/message.js';
import { build, getJson, postJson } from './helpers/app.js';
import { act, addContacts, CAMPAIGNS, createCampaign } from './helpers/campaigns.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

for (const store of await storeCases()) {
  describe(`Campaigns API (${store.kind})`, { skip: store.skip }, () => {
    it('creates a draft campaign with the defaults filled in, reads and lists it, and hides it from another organization', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const other = await createOrgFixture(deps, 'Other');
      const created = await createCampaign(app, f, { schedule: { timezone: 'America/New_York', windows: { mon: ['09:00-17:00'] } } });
      assert.equal(created.state, 'draft');
      assert.equal(created.paused_reason, null);
      assert.equal(created.agent_uuid, f.agentUuid);
      assert.equal(created.workflow_uuid, f.workflowUuid);
      assert.equal(created.telephony_configuration_id, f.telephonyId);
      assert.equal(created.max_concurrent_calls, 50, "the route's cap by default");
      assert.deepEqual(created.retry, { max_attempts: 1, delay_seconds: 600, on: ['busy', 'no_answer', 'failed'] });
      assert.deepEqual(created.circuit_breaker, { failure_ratio: 0.5, window_seconds: 120, min_calls: 10 });
      assert.deepEqual(created.progress, { total: 0, pending: 0, in_progress: 0, reached: 0, exhausted: 0, suppressed: 0, invalid: 0, canceled: 0, attempts: 0, outcomes: {}, answered_by: { human: 0, machine: 0, fax: 0, unknown: 0 } });

      const read = await getJson(app, `${CAMPAIGNS}/${created.id}`, f.apiKey);
      assert.equal(read.statusCode, 200);
      assert.deepEqual(read.json(), created);
      const list = await getJson(app, CAMPAIGNS, f.apiKey);
      assert.deepEqual(list.json().data.map((c: { id: number }) => c.id), [created.id]);
      assert.equal(list.json().next_after, null);
      assertProblem(await getJson(app, `${CAMPAIGNS}/${created.id}`, other.apiKey), 404, 'campaign_not_found');
      assertProblem(await getJson(app, `${CAMPAIGNS}/abc`, f.apiKey), 404, 'campaign_not_found');
      assert.deepEqual((await getJson(app, CAMPAIGNS, other.apiKey)).json().data, []);
    });

    it('refuses bad campaigns with every problem listed, 404 for an unknown agent, and creates nothing', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const both = assertProblem(await postJson(app, CAMPAIGNS, { name: 'x', agent_uuid: f.agentUuid, workflow_uuid: f.workflowUuid, mode: 'published' }, { key: f.apiKey }), 422, 'validation_failed');
      assert.deepEqual((both.errors ?? []).map((e) => e.pointer), [''], 'exactly one of agent_uuid and workflow_uuid');
      assertProblem(await postJson(app, CAMPAIGNS, { name: 'x', agent_uuid: f.agentUuid, mode: 'published', retry: { on: ['completed'] } }, { key: f.apiKey }), 422, 'validation_failed');
      assertProblem(await postJson(app, CAMPAIGNS, { name: 'x', agent_uuid: f.agentUuid, mode: 'published', retry: { max_attempts: 11, delay_seconds: 5 } }, { key: f.apiKey }), 422, 'validation_failed');
      const schedule = assertProblem(await postJson(app, CAMPAIGNS, { name: 'x', agent_uuid: f.agentUuid, mode: 'published', schedule: { timezone: 'Mars/Olympus', windows: { mon: ['17:00-09:00'] } } }, { key: f.apiKey }), 422, 'validation_failed');
      assert.deepEqual((schedule.errors ?? []).map((e) => e.pointer).sort(), ['/schedule/timezone', '/schedule/windows/mon/0']);
      assertProblem(await postJson(app, CAMPAIGNS, { name: 'x', agent_uuid: '6b1c3a52-52a8-4f5b-9b8e-2f2f2c9a1d10', mode: 'published' }, { key: f.apiKey }), 404, 'agent_not_found');
      assertProblem(await postJson(app, CAMPAIGNS, { name: 'x', agent_uuid: f.agentUuid, mode: 'published', telephony_configuration_id: 999 }, { key: f.apiKey }), 404, 'telephony_configuration_not_found');
      assert.deepEqual((await getJson(app, CAMPAIGNS, f.apiKey)).json().data, []);
    });

    it('moves draft → running ⇄ paused → canceled and answers 409 campaign_state_conflict to any other move, changing nothing', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f);
      assertProblem(await act(app, f, id, 'pause'), 409, 'campaign_state_conflict');
      assertProblem(await act(app, f, id, 'resume'), 409, 'campaign_state_conflict');
      assert.equal((await act(app, f, id, 'start')).json().state, 'running');
      const conflict = assertProblem(await act(app, f, id, 'start'), 409, 'campaign_state_conflict');
      assert.equal(conflict.state, 'running');
      const paused = (await act(app, f, id, 'pause')).json();
      assert.deepEqual([paused.state, paused.paused_reason], ['paused', 'request']);
      const resumed = (await act(app, f, id, 'resume')).json();
      assert.deepEqual([resumed.state, resumed.paused_reason], ['running', null]);
      assert.equal((await act(app, f, id, 'cancel')).json().state, 'canceled');
      for (const action of ['start', 'pause', 'resume', 'cancel']) assertProblem(await act(app, f, id, action), 409, 'campaign_state_conflict');
      assertProblem(await postJson(app, `${CAMPAIGNS}/${id}/contacts`, [{ phone_number: '+12025550123' }], { key: f.apiKey }), 409, 'campaign_state_conflict');
      assertProblem(await act(app, f, 999_999, 'start'), 404, 'campaign_not_found');
    });

    it('reports campaign.started, campaign.paused and campaign.completed to subscribed endpoints, written with the change', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const subscribed = await postJson(app, '/api/v1/public/webhook-endpoints', { url: 'https://93.184.216.34/campaigns', events: ['campaign.started', 'campaign.paused', 'campaign.completed'] }, { key: f.apiKey });
      assert.equal(subscribed.statusCode, 201, subscribed.body);
      const runsOnly = await postJson(app, '/api/v1/public/webhook-endpoints', { url: 'https://93.184.216.34/runs', events: ['run.ended'] }, { key: f.apiKey });
      assert.equal(runsOnly.statusCode, 201, runsOnly.body);
      const empty = await createCampaign(app, f, { name: 'Empty' });
      const paused = await createCampaign(app, f, { name: 'Paused' });
      await act(app, f, empty.id, 'start');
      await runCampaignTick(deps); // nothing to call: completed
      await act(app, f, paused.id, 'start');
      await act(app, f, paused.id, 'pause');
      await act(app, f, paused.id, 'resume');
      await act(app, f, paused.id, 'pause');
      const rows = await deps.store.db.selectFrom('webhook_deliveries').select(['endpoint_id', 'event_type', 'message_id', 'payload', 'run_id']).orderBy('id').execute();
      assert.ok(rows.every((r) => r.endpoint_id === subscribed.json().id), 'nothing for the endpoint subscribed to run.ended only');
      assert.deepEqual(rows.map((r) => r.event_type), ['campaign.started', 'campaign.completed', 'campaign.started', 'campaign.paused', 'campaign.paused']);
      assert.equal(new Set(rows.map((r) => r.message_id)).size, rows.length, 'each change has its own message id');
      const body = JSON.parse(messageBody({ event_type: rows[3]?.event_type ?? '', payload: rows[3]?.payload ?? '', workflow_uuid: null, definition_version: null }));
      assert.equal(body.type, 'campaign.paused');
      assert.deepEqual(body.data.campaign, { id: paused.id, name: 'Paused', state: 'paused', paused_reason: 'request' });
    });

    it('imports JSON contacts, listing invalid ones by index and counting numbers given twice or already present as duplicates', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f);
      const first = await addContacts(app, f, id, [
        { phone_number: '+12025550123', initial_context: { name: 'Ada' } },
        { phone_number: '12345' },
        { phone_number: '+1 (202) 555-0124', timezone: 'America/Chicago' },
        { phone_number: '+12025550123' },
        { phone_number: '+12025550125', timezone: 'Mars/Olympus' },
        { phone_number: 'sip:alice@example.com' },
      ]);
      assert.equal(first.added, 2);
      assert.equal(first.duplicates, 1);
      assert.deepEqual(first.invalid.map((i) => i.index), [1, 4, 5]);
      const second = await addContacts(app, f, id, [{ phone_number: '+12025550124' }, { phone_number: '+12025550126' }]);
      assert.deepEqual([second.added, second.duplicates, second.invalid.length], [1, 1, 0]);
      const contacts = (await getJson(app, `${CAMPAIGNS}/${id}/contacts`, f.apiKey)).json().data as { phone_number: string; status: string; attempts: unknown[] }[];
      assert.deepEqual(contacts.map((c) => c.phone_number), ['+12025550123', '+12025550124', '+12025550126']);
      assert.ok(contacts.every((c) => c.status === 'pending' && c.attempts.length === 0));
      const campaign = (await getJson(app, `${CAMPAIGNS}/${id}`, f.apiKey)).json();
      assert.deepEqual([campaign.progress.total, campaign.progress.pending], [3, 3]);

      assertProblem(await postJson(app, `${CAMPAIGNS}/${id}/contacts`, [{ phone: '+12025550127' }], { key: f.apiKey }), 422, 'validation_failed');
      assertProblem(await postJson(app, `${CAMPAIGNS}/${id}/contacts`, { phone_number: '+12025550127' }, { key: f.apiKey }), 422, 'validation_failed');
      assert.equal((await getJson(app, `${CAMPAIGNS}/${id}`, f.apiKey)).json().progress.total, 3, 'a refused import adds nothing');
    });

    it('imports CSV contacts: other columns become initial_context strings, invalid lines are listed by line, duplicates counted', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f);
      const csv = 'phone_number,timezone,name,plan\n+12025550123,America/New_York,Ada,gold\nnot a number,,Bob,\n+12025550124,,Cy,\n+12025550123,,Ada again,\n+12025550125,Nowhere/Land,Di,\n';
      const response = await app.inject({ method: 'POST', url: `${CAMPAIGNS}/${id}/contacts`, headers: { 'x-api-key': f.apiKey, 'content-type': 'text/csv' }, payload: csv });
      assert.equal(response.statusCode, 200, response.body);
      const answer = response.json();
      assert.equal(answer.added, 2);
      assert.equal(answer.duplicates, 1);
      assert.deepEqual(answer.invalid.map((i: { line: number }) => i.line), [3, 6]);
      const rows = await deps.store.db.selectFrom('campaign_contacts').select(['phone_number', 'initial_context', 'timezone']).orderBy('id').execute();
      assert.deepEqual(rows, [
        { phone_number: '+12025550123', initial_context: JSON.stringify({ name: 'Ada', plan: 'gold' }), timezone: 'America/New_York' },
        { phone_number: '+12025550124', initial_context: JSON.stringify({ name: 'Cy' }), timezone: null },
      ]);
      const noColumn = await app.inject({ method: 'POST', url: `${CAMPAIGNS}/${id}/contacts`, headers: { 'x-api-key': f.apiKey, 'content-type': 'text/csv' }, payload: 'number\n+12025550126\n' });
      assertProblem(noColumn, 422, 'validation_failed');
      const text = await app.inject({ method: 'POST', url: `${CAMPAIGNS}/${id}/contacts`, headers: { 'x-api-key': f.apiKey, 'content-type': 'text/plain' }, payload: 'hi' });
      assertProblem(text, 415, 'unsupported_media_type');
    });

    it('refuses an import over CAMPAIGN_CONTACTS_MAX_BYTES with 413, JSON or CSV, adding nothing', async (t) => {
      const { app, deps } = await build(t, store.kind, { env: { CAMPAIGN_CONTACTS_MAX_BYTES: '2048' } });
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f);
      const many = Array.from({ length: 100 }, (_, i) => ({ phone_number: `+1202555${String(1000 + i)}` }));
      assertProblem(await postJson(app, `${CAMPAIGNS}/${id}/contacts`, many, { key: f.apiKey }), 413, 'payload_too_large');
      const csv = `phone_number\n${[...many, ...many, ...many].map((m) => m.phone_number).join('\n')}\n`;
      assertProblem(await app.inject({ method: 'POST', url: `${CAMPAIGNS}/${id}/contacts`, headers: { 'x-api-key': f.apiKey, 'content-type': 'text/csv' }, payload: csv }), 413, 'payload_too_large');
      assert.equal((await getJson(app, `${CAMPAIGNS}/${id}`, f.apiKey)).json().progress.total, 0);
    });

    it('replays an import with the same Idempotency-Key and payload, and refuses the key with another payload', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f);
      const send = (body: unknown) => postJson(app, `${CAMPAIGNS}/${id}/contacts`, body, { key: f.apiKey, headers: { 'idempotency-key': 'import-1' } });
      const first = await send([{ phone_number: '+12025550123' }]);
      assert.equal(first.statusCode, 200, first.body);
      assert.equal(first.json().added, 1);
      const again = await send([{ phone_number: '+12025550123' }]);
      assert.equal(again.statusCode, 200);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.deepEqual(again.json(), first.json(), 'the first answer, not "1 duplicate"');
      assertProblem(await send([{ phone_number: '+12025550124' }]), 422, 'idempotency_key_reused');

      assert.equal((await postJson(app, `${CAMPAIGNS}/${id}/cancel`, {}, { key: f.apiKey })).statusCode, 200);
      const afterEnd = await send([{ phone_number: '+12025550123' }]);
      assert.equal(afterEnd.statusCode, 200, 'a retry after the campaign ended still gets the answer its import got');
      assert.equal(afterEnd.headers['idempotent-replayed'], 'true');
      assert.deepEqual(afterEnd.json(), first.json());
      const newKey = await postJson(app, `${CAMPAIGNS}/${id}/contacts`, [{ phone_number: '+12025550125' }], { key: f.apiKey, headers: { 'idempotency-key': 'import-2' } });
      assertProblem(newKey, 409, 'campaign_state_conflict');
      assert.equal((await getJson(app, `${CAMPAIGNS}/${id}`, f.apiKey)).json().progress.total, 1);
    });

    it('serves a campaign\'s progress counted within CAMPAIGN_PROGRESS_CACHE_MS to reads, counts afresh after it, after an import, and for every action', async (t) => {
      // A clock moved by hand (the cache reads deps.clock).
      const clock = { at: Date.UTC(2026, 10, 24, 12), now(): number { return this.at; } };
      const { app, deps } = await build(t, store.kind, { clock, env: { CAMPAIGN_PROGRESS_CACHE_MS: '1000' } });
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f);
      const total = async () => (await getJson(app, `${CAMPAIGNS}/${id}`, f.apiKey)).json().progress.total as number;
      await addContacts(app, f, id, [{ phone_number: '+12025550123' }]);
      assert.equal(await total(), 1, 'an import is seen at once by the node that made it');
      // A contact written behind this node's back, as another node's import would.
      await deps.store.transaction('durable', (trx) => insertContacts(trx, id, [{ phoneNumber: '+12025550124', initialContextJson: null, timezone: null }], clock.now()));
      assert.equal(await total(), 1, 'within the window a read is served the count already made');
      const listed = (await getJson(app, CAMPAIGNS, f.apiKey)).json().data[0].progress.total;
      assert.equal(listed, 1);
      clock.at += 1000;
      assert.equal(await total(), 2, 'past the window a read counts again');
      await deps.store.transaction('durable', (trx) => insertContacts(trx, id, [{ phoneNumber: '+12025550125', initialContextJson: null, timezone: null }], clock.now()));
      const started = await postJson(app, `${CAMPAIGNS}/${id}/start`, {}, { key: f.apiKey });
      assert.equal(started.json().progress.total, 3, 'an action answers a fresh count');
      assert.equal(await total(), 3, 'and the reads after it see that count');
    });

    it('ends a CSV import whose upload is cut off with bad_request, writing nothing, instead of waiting for ever', async (t) => {
      const { app, deps } = await build(t, store.kind);
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f);
      const body = new PassThrough();
      const importing = importContactCsv(deps, f.orgId, id, body, { idempotencyKey: undefined, path: `${CAMPAIGNS}/${id}/contacts` });
      body.write('phone_number\n+12025550123\n+120255');
      setImmediate(() => body.destroy());
      await assert.rejects(importing, (error: unknown) => error instanceof DialtoneError && error.code === 'bad_request');
      assert.equal((await getJson(app, `${CAMPAIGNS}/${id}`, f.apiKey)).json().progress.total, 0);
    });
  });
}
