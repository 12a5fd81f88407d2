// Review finding (fails at ab5fb1d): a node's catch-up re-slot (route-pacer.ts → takePacingSlots)
// gives a slow campaign's already-claimed run the campaign's *next* slot, one full campaign spacing
// after the slot its claim reserved. For a campaign slower than ~1 / (DISPATCH_LEASE_MS - lookahead)
// that lands past the claim's lease (deadline_at): the reaper fails the run (dispatch_interrupted)
// before the pacer reaches it, so the attempt ends failed, never dialed (and counts for the breaker).
import assert from 'node:assert/strict';
import { takePacingSlots } from '../src/dispatch/claim-runs.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { act, addContacts, createCampaign } from './helpers/campaigns.js';
import { buildWithDispatcher } from './helpers/dispatch.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

for (const store of await storeCases()) {
  describe(`Re-slot of a slow campaign's claimed run (${store.kind})`, { skip: store.skip }, () => {
    it('keeps the fresh slot of a claimed run inside the lease its claim holds', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const route = await createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: f.orgId, name: 'Shared', provider: 'simulator', callsPerSecond: 10, maxConcurrentCalls: 50 }, env.deps.clock.now());
      // One call every ~50 s: a small team's campaign.
      const { id: campaignId } = await createCampaign(env.app, f, { telephony_configuration_id: route.id, calls_per_second: 0.02, max_concurrent_calls: 5 });
      await addContacts(env.app, f, campaignId, [{ phone_number: '+12025551700' }]);
      await act(env.app, f, campaignId, 'start');
      const run = { campaignId, campaignCallsPerSecond: 0.02 };
      const headroom = env.deps.config.DISPATCH_PACING_HEADROOM;
      const now = env.deps.clock.now();
      // The claim's slot for the run (claimRuns takes the same slots, under the same lock)...
      const [claimedAt] = await takePacingSlots(env.deps.store, route.id, [run], now, headroom);
      const leaseExpiresAt = now + env.deps.config.DISPATCH_LEASE_MS;
      // ...then the node falls behind by a little more than its tolerance and re-slots what it holds.
      const [reslotted] = await takePacingSlots(env.deps.store, route.id, [run], (claimedAt as number) + 100, headroom);
      assert.ok(
        (reslotted as number) + env.deps.config.DIAL_TIMEOUT_MS <= leaseExpiresAt,
        `re-slotted to ${(reslotted as number) - now} ms after the claim, past its lease of ${env.deps.config.DISPATCH_LEASE_MS} ms: the reaper fails the run first`,
      );
    });
  });
}
