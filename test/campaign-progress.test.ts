// A campaign's state and its progress come from one read, on both stores: its counts add up to its
// total in every state (draft, running, paused, completed, canceled), and a completed campaign
// never shows a contact in progress, even when its progress was counted, and kept by the progress
// cache (CAMPAIGN_PROGRESS_CACHE_MS), while its last attempts were still being called.
import assert from 'node:assert/strict';
import { runCampaignTick } from '../src/campaigns/scheduler.js';
import { getJson } from './helpers/app.js';
import { act, addContacts, CAMPAIGNS, createCampaign, offsetClock, untilRunsEnd } from './helpers/campaigns.js';
import { buildWithDispatcher, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, type OrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

// The simulator's reserved numbers (telephony/simulator.ts): answered and completed, busy.
const COMPLETES = '+12025550100';
const BUSY = '+12025550101';

const BUCKETS = ['pending', 'in_progress', 'reached', 'exhausted', 'suppressed', 'invalid', 'canceled'] as const;

interface Shown {
  state: string;
  progress: Record<(typeof BUCKETS)[number] | 'total', number>;
}

/** The campaign as one GET shows it, after checking that its buckets add up to its total. */
async function shown(env: DispatchEnv, f: OrgFixture, id: number, expectedState: string): Promise<Shown> {
  const response = await getJson(env.app, `${CAMPAIGNS}/${id}`, f.apiKey);
  assert.equal(response.statusCode, 200, response.body);
  const campaign = response.json() as Shown;
  assert.equal(campaign.state, expectedState);
  const sum = BUCKETS.reduce((total, bucket) => total + campaign.progress[bucket], 0);
  assert.equal(sum, campaign.progress.total, `${campaign.state}: ${JSON.stringify(campaign.progress)} adds up to its total`);
  const listed = ((await getJson(env.app, CAMPAIGNS, f.apiKey)).json() as { data: (Shown & { id: number })[] }).data.find((c) => c.id === id);
  assert.equal(listed?.state, campaign.state, 'the list shows the campaign as its GET does');
  assert.deepEqual(listed?.progress, campaign.progress);
  return campaign;
}

for (const store of await storeCases()) {
  describe(`Campaign progress (${store.kind})`, { skip: store.skip }, () => {
    it('adds up in every state, and a completed campaign shows no contact in progress though its progress was cached while they were', async (t) => {
      const clock = offsetClock();
      const env = await buildWithDispatcher(t, store.kind, { clock, env: { CAMPAIGN_PROGRESS_CACHE_MS: '60000' } });
      const f = await createOrgFixture(env.deps);
      const { id } = await createCampaign(env.app, f);
      await addContacts(env.app, f, id, [{ phone_number: COMPLETES }, { phone_number: BUSY }]);
      assert.equal((await shown(env, f, id, 'draft')).progress.pending, 2);
      assert.equal((await act(env.app, f, id, 'start')).statusCode, 200);
      assert.equal((await runCampaignTick(env.deps)).created, 2);
      // Past the window of the count the start answered with: counted now, while both contacts are
      // being called, and kept for the reads within the window.
      clock.advance(60_000);
      assert.equal((await shown(env, f, id, 'running')).progress.in_progress, 2);
      await untilRunsEnd(env, id);
      await runCampaignTick(env.deps); // settles both contacts, then completes the campaign
      const completed = await shown(env, f, id, 'completed');
      assert.equal(completed.progress.in_progress, 0, 'a completed campaign has no contact in progress');
      assert.equal(completed.progress.pending, 0);
      assert.equal(completed.progress.reached + completed.progress.exhausted, 2);
    });

    it('adds up when paused and when canceled, with the canceled contacts counted', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { env: { CAMPAIGN_PROGRESS_CACHE_MS: '60000' } });
      const f = await createOrgFixture(env.deps);
      const { id } = await createCampaign(env.app, f, { max_concurrent_calls: 1 });
      await addContacts(env.app, f, id, [COMPLETES, '+12025550110', '+12025550111', '+12025550112'].map((phone_number) => ({ phone_number })));
      assert.equal((await act(env.app, f, id, 'start')).statusCode, 200);
      assert.equal((await runCampaignTick(env.deps)).created, 1);
      await shown(env, f, id, 'running');
      assert.equal((await act(env.app, f, id, 'pause')).statusCode, 200);
      await shown(env, f, id, 'paused');
      await untilRunsEnd(env, id);
      await runCampaignTick(env.deps);
      await shown(env, f, id, 'paused');
      const canceled = await act(env.app, f, id, 'cancel');
      assert.equal(canceled.statusCode, 200);
      const answer = canceled.json() as Shown;
      assert.equal(BUCKETS.reduce((total, bucket) => total + answer.progress[bucket], 0), answer.progress.total);
      const after = await shown(env, f, id, 'canceled');
      assert.equal(after.progress.pending, 0, 'a canceled campaign has no contact left to call');
      assert.ok(after.progress.canceled >= 3, JSON.stringify(after.progress));
    });
  });
}
