// Campaigns and answering-machine detection: an attempt a machine answered (and Dialtone hung up
// on) reached no one, so its contact is retried when retry.on names `machine`, and counted apart
// from the contacts a person answered. The test ticks the scheduler itself and moves the clock.
import assert from 'node:assert/strict';
import { runCampaignTick } from '../src/campaigns/scheduler.js';
import { settle, DEFAULT_RETRY } from '../src/campaigns/settings.js';
import { getJson } from './helpers/app.js';
import { act, addContacts, campaignOf, contactsOf, createCampaign, offsetClock, untilRunsEnd } from './helpers/campaigns.js';
import { buildWithDispatcher } from './helpers/dispatch.js';
import { createOrgFixture, definition } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const VOICEMAIL = '+12025550120';
const PERSON = '+12025550122';

describe('settling an attempt a machine answered', () => {
  const ended = { state: 'completed' as const, endedAt: 0, attempts: 1, refunded: 0 };
  const retryOnMachine = { ...DEFAULT_RETRY, maxAttempts: 2, on: ['machine' as const] };

  it('reaches the contact when a person answered, or when the agent kept the machine\'s call', () => {
    assert.deepEqual(settle({ ...ended, reason: 'hangup', answeredBy: 'human' }, retryOnMachine, false, 0), { status: 'reached' });
    assert.deepEqual(settle({ ...ended, reason: 'hangup', answeredBy: 'machine' }, retryOnMachine, false, 0), { status: 'reached' }, 'connect_agent');
    assert.deepEqual(settle({ ...ended, reason: 'hangup', answeredBy: null }, retryOnMachine, false, 0), { status: 'reached' }, 'nobody asked');
  });

  it('retries a machine hung up on or left a message when retry.on names machine, and uses it up otherwise', () => {
    for (const reason of ['machine_hangup', 'voicemail_left']) {
      assert.equal(settle({ ...ended, reason, answeredBy: 'machine' }, retryOnMachine, false, 0).status, 'pending');
      assert.equal(settle({ ...ended, reason, answeredBy: 'fax' }, retryOnMachine, false, 0).status, 'pending');
      assert.equal(settle({ ...ended, reason, answeredBy: 'machine' }, DEFAULT_RETRY, false, 0).status, 'exhausted');
      assert.equal(settle({ ...ended, reason, answeredBy: 'machine', attempts: 2 }, retryOnMachine, false, 0).status, 'exhausted');
    }
  });
});

for (const store of await storeCases()) {
  describe(`Campaigns and answering machines (${store.kind})`, { skip: store.skip }, () => {
    it('retries a voicemail contact with retry.on ["machine"] and counts it apart from the person reached', async (t) => {
      const clock = offsetClock();
      const env = await buildWithDispatcher(t, store.kind, { clock });
      const f = await createOrgFixture(env.deps, 'Acme', { ...definition(), answering_machine: { detect: 'on', on_machine: 'hangup' } });
      const { id } = await createCampaign(env.app, f, { retry: { max_attempts: 2, delay_seconds: 60, on: ['machine'] } });
      await addContacts(env.app, f, id, [{ phone_number: VOICEMAIL }, { phone_number: PERSON }]);
      await act(env.app, f, id, 'start');

      assert.equal((await runCampaignTick(env.deps)).created, 2);
      await untilRunsEnd(env, id);
      await runCampaignTick(env.deps); // settles
      const waiting = await contactsOf(env, f, id);
      assert.equal(waiting.get(PERSON)?.status, 'reached');
      assert.equal(waiting.get(VOICEMAIL)?.status, 'pending', 'a machine reached no one: retried');
      clock.advance(61_000);
      assert.equal((await runCampaignTick(env.deps)).created, 1);
      await untilRunsEnd(env, id);
      await runCampaignTick(env.deps);

      const contacts = await contactsOf(env, f, id);
      assert.equal(contacts.get(VOICEMAIL)?.status, 'exhausted');
      assert.deepEqual(contacts.get(VOICEMAIL)?.attempts.map((a) => a.state), ['completed', 'completed']);
      const machines = (await getJson(env.app, `/api/v1/public/workflow-runs?campaign_id=${id}&answered_by=machine`, f.apiKey)).json().data as { outcome_reason: string }[];
      assert.deepEqual(machines.map((r) => r.outcome_reason), ['machine_hangup', 'machine_hangup']);
      await runCampaignTick(env.deps);
      const done = await campaignOf(env, f, id);
      assert.equal(done.state, 'completed');
      assert.equal(done.progress.reached, 1, 'only the person counts as reached');
      assert.equal(done.progress.exhausted, 1);
    });

    it('refuses a retry.on condition that is neither a retryable state nor machine', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const response = await env.app.inject({
        method: 'POST',
        url: '/api/v1/public/campaigns',
        headers: { 'x-api-key': f.apiKey, 'content-type': 'application/json' },
        payload: JSON.stringify({ name: 'x', agent_uuid: f.agentUuid, mode: 'published', retry: { on: ['robot'] } }),
      });
      assert.equal(response.statusCode, 422, response.body);
    });
  });
}
