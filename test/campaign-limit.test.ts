// The cap on an organization's open campaigns (issue 29): exact when creations race at it, per
// organization, and freed by ending a campaign.
import assert from 'node:assert/strict';
import { build, getJson, postJson } from './helpers/app.js';
import { act, CAMPAIGNS, createCampaign } from './helpers/campaigns.js';
import { createOrgFixture, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

for (const store of await storeCases()) {
  describe(`Campaigns per organization (${store.kind})`, { skip: store.skip }, () => {
    it('creates exactly CAMPAIGN_MAX_OPEN_PER_ORGANIZATION open campaigns when creations race at the cap, refusing the rest with 422 campaign_limit', async (t) => {
      const { app, deps } = await build(t, store.kind, { env: { CAMPAIGN_MAX_OPEN_PER_ORGANIZATION: '3' } });
      const f = await createOrgFixture(deps);
      const other = await createOrgFixture(deps, 'Other');
      await createCampaign(app, f);
      // Two places left, twelve creations at once; another organization's at the same time is not held up by them.
      const create = (owner: OrgFixture, i: number) => postJson(app, CAMPAIGNS, { name: `Drive ${i}`, agent_uuid: owner.agentUuid, mode: 'published' }, { key: owner.apiKey });
      const responses = await Promise.all([...Array.from({ length: 12 }, (_, i) => create(f, i)), create(other, 99)]);
      const [theirs] = responses.splice(12, 1);
      assert.equal(theirs?.statusCode, 201, theirs?.body);
      assert.deepEqual(responses.map((r) => r.statusCode).sort(), [...Array<number>(2).fill(201), ...Array<number>(10).fill(422)]);
      for (const refused of responses.filter((r) => r.statusCode === 422)) assertProblem(refused, 422, 'campaign_limit');
      assert.equal((await getJson(app, CAMPAIGNS, f.apiKey)).json().data.length, 3);
    });

    it('counts only open campaigns: canceling one makes room for another', async (t) => {
      const { app, deps } = await build(t, store.kind, { env: { CAMPAIGN_MAX_OPEN_PER_ORGANIZATION: '1' } });
      const f = await createOrgFixture(deps);
      const { id } = await createCampaign(app, f);
      assertProblem(await postJson(app, CAMPAIGNS, { name: 'Second', agent_uuid: f.agentUuid, mode: 'published' }, { key: f.apiKey }), 422, 'campaign_limit');
      assert.equal((await act(app, f, id, 'cancel')).statusCode, 200);
      await createCampaign(app, f, { name: 'Second' });
    });
  });
}
