// Review finding (fails at ab5fb1d): a node's catch-up re-slot (route-pacer.ts → takePacingSlots)
// gives a slow campaign's late claimed run the campaign's *next* slot, one full campaign spacing
// after the slot its claim reserved. For a campaign slower than ~1 / (DISPATCH_LEASE_MS - lookahead)
// that lands past the claim's lease (deadline_at): the reaper failed the run (dispatch_interrupted)
// before the pacer reached it, so the attempt ended failed, never dialed (and counted for the
// breaker). The re-slot now renews such a claim in its own transaction. (The runs that are not late
// keep their reserved slots: route-pacer.test.ts.)
import assert from 'node:assert/strict';
import { runCampaignTick } from '../src/campaigns/scheduler.js';
import { claimRuns, takePacingSlots } from '../src/dispatch/claim-runs.js';
import { reapSilentRuns } from '../src/dispatch/end-runs.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { act, addContacts, createCampaign } from './helpers/campaigns.js';
import { buildWithDispatcher } from './helpers/dispatch.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

for (const store of await storeCases()) {
  describe(`Re-slot of a slow campaign's claimed run (${store.kind})`, { skip: store.skip }, () => {
    it('renews the claim when the fresh slot would outlast its lease, so the reaper leaves the run to its node', async (t) => {
      // A campaign slower than 1 / lease: one call a second against a one-second lease (the
      // shortest allowed) has the shape of one call every ~50 s against the default 30 s lease.
      // (The scheduler creates no attempt at all for a campaign slower than one call a second: see
      // campaigns/settings.ts's pacingAllowance.)
      const env = await buildWithDispatcher(t, store.kind, { start: false, env: { DISPATCH_LEASE_MS: '1000', DIAL_TIMEOUT_MS: '200' } });
      const { config } = env.deps;
      const f = await createOrgFixture(env.deps);
      const route = await createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: f.orgId, name: 'Shared', provider: 'simulator', callsPerSecond: 10, maxConcurrentCalls: 50 }, env.deps.clock.now());
      const { id: campaignId } = await createCampaign(env.app, f, { telephony_configuration_id: route.id, calls_per_second: 1, max_concurrent_calls: 5 });
      await addContacts(env.app, f, campaignId, [{ phone_number: '+12025551700' }]);
      await act(env.app, f, campaignId, 'start');
      assert.equal((await runCampaignTick(env.deps)).created, 1);
      const now = env.deps.clock.now();
      const { claimed } = await claimRuns(env.deps.store, route.id, {
        nodeId: env.deps.nodeId,
        now,
        leaseMs: config.DISPATCH_LEASE_MS,
        lookaheadMs: config.DISPATCH_LOOKAHEAD_MS,
        pacingHeadroom: config.DISPATCH_PACING_HEADROOM,
        batchSize: config.DISPATCH_BATCH_SIZE,
      });
      const [claim] = claimed;
      assert.ok(claim, 'the campaign run is claimed');
      assert.equal(claim.run.campaign_id, campaignId);

      // The node falls behind by a little more than its tolerance and re-slots the late run, as its dispatcher does.
      const renewBeforeMs = config.DIAL_TIMEOUT_MS + 2_000;
      const [reslot] = await takePacingSlots(
        env.deps.store,
        route.id,
        [{ campaignId, campaignCallsPerSecond: 1, claim: { runId: claim.run.id, leaseExpiresAt: claim.leaseExpiresAt } }],
        claim.dialAt + 100,
        config.DISPATCH_PACING_HEADROOM,
        { nodeId: env.deps.nodeId, leaseMs: config.DISPATCH_LEASE_MS, renewBeforeMs },
      );
      assert.ok(reslot);
      assert.ok(reslot.dialAt > claim.leaseExpiresAt, 'the campaign\'s next slot is past the lease the claim took');
      assert.ok(
        reslot.leaseExpiresAt !== undefined && reslot.dialAt + config.DIAL_TIMEOUT_MS <= reslot.leaseExpiresAt,
        `re-slotted to ${reslot.dialAt - now} ms after the claim, with the lease at ${(reslot.leaseExpiresAt ?? claim.leaseExpiresAt) - now} ms: the reaper fails the run first`,
      );

      const row = await env.deps.store.db.selectFrom('workflow_runs').select(['state', 'lease_owner', 'lease_expires_at', 'deadline_at']).where('id', '=', claim.run.id).executeTakeFirstOrThrow();
      assert.deepEqual({ ...row, lease_expires_at: Number(row.lease_expires_at), deadline_at: Number(row.deadline_at) }, {
        state: 'dialing',
        lease_owner: env.deps.nodeId,
        lease_expires_at: reslot.leaseExpiresAt,
        deadline_at: reslot.leaseExpiresAt,
      });
      // The reaper, once the first lease has run out: the run is still its node's to dial.
      assert.deepEqual(await reapSilentRuns(env.deps.store, env.deps.lifecycle, claim.leaseExpiresAt + config.DIAL_TIMEOUT_MS), []);
    });

    it('leaves the lease alone when the fresh slot is well inside it', async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const { config } = env.deps;
      const f = await createOrgFixture(env.deps);
      const route = await createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: f.orgId, name: 'Shared', provider: 'simulator', callsPerSecond: 10, maxConcurrentCalls: 50 }, env.deps.clock.now());
      const now = env.deps.clock.now();
      // A direct run's fresh slot (no such claimed run exists: nothing is written for it either way).
      const [reslot] = await takePacingSlots(
        env.deps.store,
        route.id,
        [{ campaignId: null, campaignCallsPerSecond: null, claim: { runId: 1, leaseExpiresAt: now + config.DISPATCH_LEASE_MS } }],
        now,
        config.DISPATCH_PACING_HEADROOM,
        { nodeId: env.deps.nodeId, leaseMs: config.DISPATCH_LEASE_MS, renewBeforeMs: config.DIAL_TIMEOUT_MS + 2_000 },
      );
      assert.deepEqual(reslot, { dialAt: now, leaseExpiresAt: now + config.DISPATCH_LEASE_MS });
    });
  });
}
