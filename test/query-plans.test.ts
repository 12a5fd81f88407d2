// Statements that run on every tick, shutdown or page view read an index, not the whole runs table:
// the plan each store would use names the index. SQLite's planner has no statistics, so a plan
// that looks right on PostgreSQL can still scan there (store/engine/query-plans.ts).
import assert from 'node:assert/strict';
import { explainCampaignAnsweredBy, explainCampaignRunStates, explainQueuedCampaignRuns } from '../src/store/statements/campaign-statements.js';
import { explainRunEvents } from '../src/store/statements/event-stream-statements.js';
import { explainQueuedPerRoute } from '../src/store/statements/run-listing-statements.js';
import { explainReconcileCandidates, explainRecordedCallIds } from '../src/store/statements/run-reads.js';
import { explainReleaseNodeCalls } from '../src/store/statements/run-writes.js';
import { build } from './helpers/app.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

/** A full read of the runs table, as either store prints it. */
const FULL_SCAN = /SCAN workflow_runs$|SCAN workflow_runs\n|Seq Scan on workflow_runs/m;

for (const store of await storeCases()) {
  describe(`Query plans of recurring statements (${store.kind})`, { skip: store.skip }, () => {
    it("counts a route's queued runs through the two partial indexes of queued runs (due now, and deferred)", async (t) => {
      const { deps } = await build(t, store.kind);
      const plan = await explainQueuedPerRoute(deps.store, [1, 2]);
      // Any index of queued runs only will do (PostgreSQL's planner may pick the per-organization one).
      assert.match(plan, /workflow_runs_queued_(org_|age_)?idx/, plan);
      assert.match(plan, /workflow_runs_scheduled_(org_|due_)?idx/, plan);
      assert.doesNotMatch(plan, FULL_SCAN, plan);
    });

    it("lets go of a stopping node's calls by reading the live runs' index, not every run ever made", async (t) => {
      const { deps } = await build(t, store.kind);
      const plan = await explainReleaseNodeCalls(deps.store, 'node-a');
      assert.match(plan, /workflow_runs_live_(deadline_)?idx/, plan);
      assert.doesNotMatch(plan, FULL_SCAN, plan);
    });

    it("reads an organization's stream backlog by walking the events' id range, not the organization's whole history of runs", async (t) => {
      const { deps } = await build(t, store.kind);
      const plan = await explainRunEvents(deps.store, 1, 1_000, 2_000, 500);
      assert.doesNotMatch(plan, /workflow_runs_org_\w*idx|TEMP B-TREE/, plan);
      assert.match(plan, /SEARCH e USING INTEGER PRIMARY KEY \(rowid>\? AND rowid<\?\)|run_events_pkey/, plan);
    });

    it('looks for runs to reconcile among the live runs only (their partial index), not among every run ever made', async (t) => {
      const { deps } = await build(t, store.kind);
      const now = Date.now();
      const plan = await explainReconcileCandidates(deps.store, { providers: ['twilio'], live: ['dialing', 'ringing', 'in_progress'], now, quietSince: now - 60_000, perRoute: 10, limit: 500 });
      assert.match(plan, /workflow_runs_live_(deadline_)?idx/, plan);
      assert.doesNotMatch(plan, FULL_SCAN, plan);
      assert.doesNotMatch(plan, /SCAN r USING INDEX workflow_runs_org/, plan);
    });

    it("finds the calls already recorded for a route's number through the number's index", async (t) => {
      const { deps } = await build(t, store.kind);
      const plan = await explainRecordedCallIds(deps.store, 1, '+12025550123', Date.now() - 60_000);
      if (store.kind === 'sqlite') assert.match(plan, /workflow_runs_org_phone_idx/, plan);
      assert.doesNotMatch(plan, FULL_SCAN, plan);
    });

    it("stops a campaign's queued attempts by reading the queue, not every run the campaign ever made", async (t) => {
      const { deps } = await build(t, store.kind);
      const plan = await explainQueuedCampaignRuns(deps.store, 1, 500);
      assert.match(plan, /campaign_contacts_due_idx/, plan);
      assert.doesNotMatch(plan, /workflow_runs_campaign_(ended_)?idx/, plan);
      assert.doesNotMatch(plan, FULL_SCAN, plan);
    });

    it("counts a campaign's attempts by state from the index alone, never visiting the runs' rows", async (t) => {
      const { deps } = await build(t, store.kind);
      const plan = await explainCampaignRunStates(deps.store, 1);
      // SQLite says COVERING INDEX; PostgreSQL, on an empty table, may choose either access path
      // over the index, so there only the index's name is checked.
      assert.match(plan, store.kind === 'sqlite' ? /COVERING INDEX workflow_runs_campaign_state_idx/ : /workflow_runs_campaign_state_idx/, plan);
      assert.doesNotMatch(plan, FULL_SCAN, plan);
    });

    it("counts a campaign's attempts by who answered from the index of verdicts alone (migration 021)", async (t) => {
      const { deps } = await build(t, store.kind);
      const plan = await explainCampaignAnsweredBy(deps.store, 1);
      assert.match(plan, store.kind === 'sqlite' ? /COVERING INDEX workflow_runs_campaign_answered_by_idx/ : /workflow_runs_campaign_answered_by_idx/, plan);
      assert.doesNotMatch(plan, FULL_SCAN, plan);
    });
  });
}
