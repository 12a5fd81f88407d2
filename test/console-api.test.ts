// The console's reads through the public API: the run list (filters, paging, the index that serves
// each filter), the workflows and telephony configurations, the stats and the run states.
import assert from 'node:assert/strict';
import { runCampaignTick } from '../src/campaigns/scheduler.js';
import { LIVE_STATES, RUN_STATES, TERMINAL_STATES } from '../src/runs/states.js';
import { countRunsSince, explainRunPage, RECENT_WALK_ROWS, selectRunPage, type RunPageFilter } from '../src/store/statements/run-listing-statements.js';
import { explainWindowPage } from '../src/store/statements/run-window-pages.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { DEMO_DEFINITION } from '../src/first-run.js';
import { createWorkflow, saveDraft } from '../src/workflows/workflows.js';
import { build, getJson, postJson, type TestEnv } from './helpers/app.js';
import { act, addContacts, createCampaign } from './helpers/campaigns.js';
import { createOrgFixture, definition, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

interface Run {
  id: number;
  name: string;
  state: string;
  phone_number: string;
  workflow_uuid: string;
  created_at: string;
}
interface Page {
  data: Run[];
  next_after: number | null;
}

const LIST = '/api/v1/public/workflow-runs';

/** A clock the test moves by hand, so runs get the creation times it chooses. */
function manualClock(start: number) {
  const clock = { at: start, now: () => clock.at };
  return clock;
}

async function call(env: TestEnv, f: OrgFixture, phone: string, path = PATHS.initiateCall(f.agentUuid)): Promise<number> {
  const response = await postJson(env.app, path, { phone_number: phone }, { key: f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return (response.json() as { workflow_run_id: number }).workflow_run_id;
}

async function list(env: TestEnv, key: string, query = ''): Promise<Page> {
  const response = await getJson(env.app, `${LIST}${query}`, key);
  assert.equal(response.statusCode, 200, response.body);
  return response.json() as Page;
}

for (const store of await storeCases()) {
  describe(`GET /api/v1/public/workflow-runs (${store.kind})`, { skip: store.skip }, () => {
    it('lists the organization\'s runs newest first and pages through them with next_after, another organization\'s runs never appearing', async (t) => {
      const env = await build(t, store.kind, { env: { MAX_QUEUED_RUNS_PER_ORG: '1000' } });
      const f = await createOrgFixture(env.deps, 'Acme');
      const other = await createOrgFixture(env.deps, 'Other');
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push(await call(env, f, `+1202555012${i}`));
        await call(env, other, '+12025550123');
      }
      const first = await list(env, f.apiKey, '?limit=2');
      assert.deepEqual(first.data.map((r) => r.id), [ids[4], ids[3]]);
      assert.equal(first.next_after, ids[3]);
      const second = await list(env, f.apiKey, `?limit=2&after=${first.next_after}`);
      assert.deepEqual(second.data.map((r) => r.id), [ids[2], ids[1]]);
      const last = await list(env, f.apiKey, `?limit=2&after=${second.next_after}`);
      assert.deepEqual(last.data.map((r) => r.id), [ids[0]]);
      assert.equal(last.next_after, null, 'the last page says so');
      const all = await list(env, f.apiKey);
      assert.equal(all.data.length, 5);
      assert.match(all.data[0]?.name ?? '', /^WR-API-\d+$/);
    });

    it('filters by state, workflow, phone number (however it is written) and creation time', async (t) => {
      const clock = manualClock(Date.parse('2026-03-01T10:00:00Z'));
      const env = await build(t, store.kind, { clock });
      const f = await createOrgFixture(env.deps, 'Acme');
      const second = await createWorkflow(env.deps.store, { orgId: f.orgId, name: 'Second agent', definition: definition() }, clock.now());
      const early = await call(env, f, '+12025550123');
      clock.at += 60_000;
      const toOther = await call(env, f, '+12025550199');
      clock.at += 60_000;
      const bySecond = await call(env, f, '+12025550123', PATHS.initiateCallByWorkflowUuid(second.workflow_uuid));
      const canceled = await env.app.inject({ method: 'POST', url: `${LIST}/${toOther}/cancel`, headers: { 'x-api-key': f.apiKey } });
      assert.equal(canceled.statusCode, 200, canceled.body);

      const ids = async (query: string) => (await list(env, f.apiKey, query)).data.map((r) => r.id);
      assert.deepEqual(await ids('?state=canceled'), [toOther]);
      assert.deepEqual(await ids('?state=queued'), [bySecond, early]);
      assert.deepEqual(await ids(`?workflow_uuid=${second.workflow_uuid}`), [bySecond]);
      assert.deepEqual(await ids(`?workflow_uuid=${f.workflowUuid}`), [toOther, early]);
      assert.deepEqual(await ids(`?phone_number=${encodeURIComponent('+1 (202) 555-0123')}`), [bySecond, early]);
      assert.deepEqual(await ids('?created_after=2026-03-01T10:01:00Z'), [bySecond, toOther]);
      assert.deepEqual(await ids('?created_before=2026-03-01T10:01:00Z'), [early]);
      assert.deepEqual(await ids('?created_after=2026-03-01T10:00:30Z&created_before=2026-03-01T10:01:30Z'), [toOther]);
      assert.deepEqual(await ids('?state=queued&phone_number=%2B12025550123&created_after=2026-03-01T10:01:00Z'), [bySecond]);
      // A time range paged a run at a time: the cursor goes on within the window, and the window's end is the last page.
      const inWindow = '?created_after=2026-03-01T10:00:30Z&limit=1';
      const firstPage = await list(env, f.apiKey, inWindow);
      assert.deepEqual(firstPage.data.map((r) => r.id), [bySecond]);
      const lastPage = await list(env, f.apiKey, `${inWindow}&after=${firstPage.next_after}`);
      assert.deepEqual(lastPage.data.map((r) => r.id), [toOther]);
      assert.equal(lastPage.next_after, null, 'no run before the window follows');
      const otherOrg = await createOrgFixture(env.deps, 'Other');
      assert.deepEqual((await list(env, otherOrg.apiKey, `?workflow_uuid=${second.workflow_uuid}`)).data, [], 'another organization\'s workflow matches none of its runs');
    });

    it('pages a time range to the same runs whether the walk over the newest runs finds the page or the range is read, with creation times out of id order', async (t) => {
      const env = await build(t, store.kind, { env: { MAX_QUEUED_RUNS_PER_ORG: '1000' } });
      const f = await createOrgFixture(env.deps, 'Acme');
      const other = await createOrgFixture(env.deps, 'Other');
      const T0 = Date.parse('2026-03-01T10:00:00Z');
      // Creation times that do not follow the ids (a clock stepped back, a node's clock behind):
      // the page must be the newest ids in the range all the same.
      const offsets = [5, 1, 9, 3, 7, 0, 8, 2, 6, 4, 11, 10];
      const ids: number[] = [];
      for (const [i, offset] of offsets.entries()) {
        const id = await call(env, i % 4 === 3 ? other : f, `+120255502${String(i).padStart(2, '0')}`);
        await env.deps.store.db.updateTable('workflow_runs').set({ created_at: T0 + offset * 60_000 }).where('id', '=', id).execute();
        if (i % 4 !== 3) ids.push(id);
      }
      const rows = await env.deps.store.db.selectFrom('workflow_runs').select(['id', 'created_at']).where('org_id', '=', f.orgId).execute();
      const expected = (filter: RunPageFilter, limit: number) =>
        rows
          .filter((r) => (filter.createdAfter === undefined || r.created_at >= filter.createdAfter) && (filter.createdBefore === undefined || r.created_at < filter.createdBefore) && (filter.beforeId === undefined || r.id < filter.beforeId))
          .map((r) => r.id)
          .sort((a, b) => b - a)
          .slice(0, limit);
      const at = (minutes: number) => T0 + minutes * 60_000;
      const filters: RunPageFilter[] = [{ createdAfter: at(4) }, { createdBefore: at(4) }, { createdAfter: at(2), createdBefore: at(8) }, { createdAfter: at(6), beforeId: ids[6] }, { createdBefore: at(20), beforeId: ids[3] }, { createdAfter: at(30) }];
      for (const filter of filters) {
        for (const limit of [1, 2, 3, 20]) {
          for (const walkRows of [1, 2, 5, RECENT_WALK_ROWS]) {
            const page = (await selectRunPage(env.deps.store, f.orgId, filter, limit, walkRows)).map((r) => r.id);
            assert.deepEqual(page, expected(filter, limit), `${JSON.stringify(filter)}, limit ${limit}, walk of ${walkRows}`);
          }
        }
      }
    });

    it('filters by campaign, another organization\'s campaign id matching none of its runs, with time bounds only filtering', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps, 'Acme');
      const direct = await call(env, f, '+12025550111');
      const campaign = await createCampaign(env.app, f, { name: 'Drive' });
      await addContacts(env.app, f, campaign.id, [{ phone_number: '+12025550123' }, { phone_number: '+12025550124' }]);
      assert.equal((await act(env.app, f, campaign.id, 'start')).statusCode, 200);
      await runCampaignTick(env.deps);
      const attempts = await env.deps.store.db.selectFrom('workflow_runs').select('id').where('campaign_id', '=', campaign.id).orderBy('id', 'desc').execute();
      assert.equal(attempts.length, 2, 'the tick created an attempt per contact');

      const ids = async (key: string, query: string) => (await list(env, key, query)).data.map((r) => r.id);
      assert.deepEqual(await ids(f.apiKey, `?campaign_id=${campaign.id}`), attempts.map((r) => r.id));
      assert.ok(!(await ids(f.apiKey, `?campaign_id=${campaign.id}`)).includes(direct), 'a direct run is no campaign\'s');
      assert.deepEqual(await ids(f.apiKey, `?campaign_id=${campaign.id}&created_after=2000-01-01T00:00:00Z&created_before=2999-01-01T00:00:00Z`), attempts.map((r) => r.id));
      assert.deepEqual(await ids(f.apiKey, `?campaign_id=${campaign.id}&created_before=2000-01-01T00:00:00Z`), []);
      const other = await createOrgFixture(env.deps, 'Other');
      assert.deepEqual(await ids(other.apiKey, `?campaign_id=${campaign.id}`), [], 'another organization\'s campaign matches none of its runs');
    });

    it('refuses a malformed filter with a 422 problem naming the parameter', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      for (const [query, pointer] of [
        ['?state=ringing_twice', 'state'],
        ['?limit=0', 'limit'],
        ['?limit=101', 'limit'],
        ['?after=-1', 'after'],
        ['?created_after=yesterday', 'created_after'],
        ['?workflow_uuid=not-a-uuid', 'workflow_uuid'],
        ['?campaign_id=abc', 'campaign_id'],
      ] as const) {
        const response = await getJson(env.app, `${LIST}${query}`, f.apiKey);
        assert.equal(response.statusCode, 422, `${query}: ${response.body}`);
        assert.match(String(response.headers['content-type']), /^application\/problem\+json/);
        const problem = response.json() as { code: string; errors: { pointer: string }[] };
        assert.equal(problem.code, 'validation_failed');
        assert.ok(JSON.stringify(problem.errors).includes(pointer), `${query}: ${JSON.stringify(problem.errors)}`);
      }
    });

    it('is served by an index for each filter on this store (the plan names it)', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps);
      const plan = (filter: Parameters<typeof explainRunPage>[2]) => explainRunPage(env.deps.store, f.orgId, filter, 51);
      assert.match(await plan({}), /workflow_runs_org_idx/);
      assert.match(await plan({ beforeId: 100 }), /workflow_runs_org_idx/);
      assert.match(await plan({ state: 'completed' }), /workflow_runs_org_idx/);
      assert.match(await plan({ phoneNumber: '+12025550123' }), /workflow_runs_org_phone_idx/);
      assert.match(await plan({ workflowId: 1 }), /workflow_runs_org_workflow_idx/);
      assert.match(await plan({ createdAfter: Date.now() - 3_600_000 }), /workflow_runs_org_(created_)?idx/);
      if (store.kind === 'sqlite') {
        // A time range's page is found in the index alone (its ids sorted, not its runs), the
        // cursor of a later page only filtering the range: the window's entries are all it reads.
        for (const filter of [{ createdAfter: Date.now() - 3_600_000 }, { createdBefore: Date.now() }, { createdAfter: Date.now() - 3_600_000, beforeId: 100 }]) {
          assert.match(await plan(filter), /SEARCH r USING COVERING INDEX workflow_runs_org_created_idx \(org_id=\? AND created_at[<>]\?\)/, JSON.stringify(filter));
        }
      }
      // A number or a workflow with a time range: their own index, the time bounds only filtering it.
      const hourAgo = Date.now() - 3_600_000;
      assert.match(await plan({ phoneNumber: '+12025550123', createdAfter: hourAgo }), /workflow_runs_org_phone_idx/);
      assert.match(await plan({ phoneNumber: '+12025550123', createdBefore: hourAgo }), /workflow_runs_org_phone_idx/);
      assert.match(await plan({ workflowId: 1, createdAfter: hourAgo, createdBefore: Date.now() }), /workflow_runs_org_workflow_idx/);
      assert.match(await plan({ campaignId: 1 }), /workflow_runs_campaign_idx/);
      assert.match(await plan({ campaignId: 1, createdAfter: hourAgo, createdBefore: Date.now() }), /workflow_runs_campaign_idx/, 'time bounds do not steer it to the (org_id, created_at) index');
      for (const filter of [{}, { phoneNumber: '+12025550123' }, { workflowId: 1 }, { campaignId: 1 }]) {
        assert.doesNotMatch(await plan(filter), /SCAN (r|workflow_runs)\b(?! USING)|Seq Scan on workflow_runs/, `no full scan of the runs for ${JSON.stringify(filter)}`);
      }
    });
  });

  describe(`GET /api/v1/public/workflows and /telephony-configurations (${store.kind})`, { skip: store.skip }, () => {
    it('lists the organization\'s workflows with their published and draft versions and agent UUIDs, and only its own', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps, 'Acme');
      await createOrgFixture(env.deps, 'Other');
      const response = await getJson(env.app, '/api/v1/public/workflows', f.apiKey);
      assert.equal(response.statusCode, 200, response.body);
      const { data } = response.json() as { data: { workflow_uuid: string; name: string; published_version: number | null; draft_version: number | null; agent_uuids: string[]; draft_agent_uuids: string[] }[] };
      assert.deepEqual(
        data.map((w) => [w.workflow_uuid, w.name, w.published_version, w.draft_version, w.agent_uuids, w.draft_agent_uuids]),
        [[f.workflowUuid, 'Acme agent', 1, null, [f.agentUuid], []]],
      );
    });

    it('lists each workflow\'s variable names, published and draft, so a caller knows the initial_context keys', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps, 'Acme', DEMO_DEFINITION);
      const draft = { ...DEMO_DEFINITION, variables: { ...DEMO_DEFINITION.variables, appointment_time: { required: true } } };
      await saveDraft(env.deps.store, f.workflowUuid, draft, Date.now());
      const response = await getJson(env.app, '/api/v1/public/workflows', f.apiKey);
      assert.equal(response.statusCode, 200, response.body);
      const { data } = response.json() as { data: { variables: string[]; draft_variables: string[] }[] };
      assert.deepEqual(
        data.map((w) => [w.variables, w.draft_variables]),
        [[['customer_name', 'topic'], ['appointment_time', 'customer_name', 'topic']]],
      );
    });

    it('lists the telephony configurations without any credential, secret or provider setting', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps, 'Acme');
      const sid = 'AC0123456789abcdef0123456789abcdef';
      const token = 'secret-auth-token-0123456789abcdef';
      await createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: f.orgId, name: 'Twilio', provider: 'twilio', callerIds: ['+12025550100'], credentials: { account_sid: sid, auth_token: token } }, Date.now());
      const response = await getJson(env.app, '/api/v1/public/telephony-configurations', f.apiKey);
      assert.equal(response.statusCode, 200, response.body);
      for (const secret of [sid, token, '"credentials', 'encrypted', 'auth_token', '"settings"', 'account_sid']) assert.ok(!response.body.includes(secret), `${secret} is not in the answer`);
      const { data } = response.json() as { data: Record<string, unknown>[] };
      assert.deepEqual(data.map((c) => [c.name, c.provider, c.has_credentials, c.is_default]), [['Simulator', 'simulator', false, true], ['Twilio', 'twilio', true, false]]);
      for (const c of data) assert.deepEqual(Object.keys(c).sort(), ['caller_ids', 'calls_per_second', 'has_credentials', 'id', 'is_default', 'max_concurrent_calls', 'name', 'provider', 'status']);
    });
  });

  describe(`GET /api/v1/public/stats (${store.kind})`, { skip: store.skip }, () => {
    it('counts the runs created since a time by state and outcome, and what is queued and live on each route now', async (t) => {
      const clock = manualClock(Date.parse('2026-03-01T10:00:00Z'));
      const env = await build(t, store.kind, { clock });
      const f = await createOrgFixture(env.deps, 'Acme');
      const old = await call(env, f, '+12025550123');
      clock.at += 2 * 3_600_000;
      const a = await call(env, f, '+12025550123');
      await call(env, f, '+12025550124');
      await call(env, f, '+12025550125');
      assert.equal((await env.app.inject({ method: 'POST', url: `${LIST}/${a}/cancel`, headers: { 'x-api-key': f.apiKey } })).statusCode, 200);
      // One run live on the route: claimed and dialing, as a dispatcher leaves it.
      await env.deps.store.db.updateTable('workflow_runs').set({ state: 'dialing', deadline_at: clock.now() + 60_000 }).where('id', '=', old).execute();

      const response = await getJson(env.app, '/api/v1/public/stats', f.apiKey);
      assert.equal(response.statusCode, 200, response.body);
      const stats = response.json() as { since: string; total: number; by_state: Record<string, number>; by_outcome: { state: string; outcome_reason: string | null; count: number }[]; routes: { telephony_configuration_id: number; queued: number; live: number }[] };
      assert.equal(stats.since, new Date(clock.now() - 3_600_000).toISOString(), 'the last hour by default');
      assert.equal(stats.total, 3, 'the run created two hours ago is not counted');
      assert.equal(stats.by_state.queued, 2);
      assert.equal(stats.by_state.canceled, 1);
      assert.equal(stats.by_state.completed, 0);
      assert.deepEqual(stats.by_outcome.map((o) => [o.state, o.count]), [['queued', 2], ['canceled', 1]]);
      assert.deepEqual(stats.routes.map((r) => [r.telephony_configuration_id, r.queued, r.live]), [[f.telephonyId, 2, 1]]);

      const wider = (await getJson(env.app, `/api/v1/public/stats?since=${encodeURIComponent('2026-03-01T09:00:00Z')}`, f.apiKey)).json() as { total: number };
      assert.equal(wider.total, 4);
      const bad = await getJson(env.app, '/api/v1/public/stats?since=an-hour-ago', f.apiKey);
      assert.equal(bad.statusCode, 422);
    });

    it('counts the runs by who answered, with the answer rates by human and machine among the runs that have a verdict', async (t) => {
      const clock = manualClock(Date.parse('2026-03-01T10:00:00Z'));
      const env = await build(t, store.kind, { clock });
      const f = await createOrgFixture(env.deps, 'Acme');
      const verdicts = ['human', 'human', 'human', 'machine', null] as const;
      for (const [i, verdict] of verdicts.entries()) {
        const id = await call(env, f, `+1202555013${i}`);
        await env.deps.store.db.updateTable('workflow_runs').set({ state: 'completed', outcome_reason: 'hangup', answered_by: verdict, ended_at: clock.now() }).where('id', '=', id).execute();
      }
      const stats = (await getJson(env.app, '/api/v1/public/stats', f.apiKey)).json() as { total: number; by_outcome: { state: string; outcome_reason: string | null; count: number }[]; answered_by: Record<string, number>; answer_rates: Record<string, number | null> };
      assert.deepEqual(stats.answered_by, { human: 3, machine: 1, fax: 0, unknown: 0, none: 1 });
      assert.deepEqual(stats.answer_rates, { human: 0.75, machine: 0.25, fax: 0, unknown: 0 });
      assert.deepEqual(stats.by_outcome, [{ state: 'completed', outcome_reason: 'hangup', count: 5 }], 'one row per state and outcome, whoever answered');
      const other = await createOrgFixture(env.deps, 'Other');
      const empty = (await getJson(env.app, '/api/v1/public/stats', other.apiKey)).json() as { answer_rates: Record<string, number | null> };
      assert.deepEqual(empty.answer_rates, { human: null, machine: null, fax: null, unknown: null }, 'no verdict, no rate');
    });

    it('counts a window page by page to the same figures as one statement, runs sharing a millisecond across page ends included', async (t) => {
      const clock = manualClock(Date.parse('2026-03-01T10:00:00Z'));
      const env = await build(t, store.kind, { clock });
      const f = await createOrgFixture(env.deps, 'Acme');
      const other = await createOrgFixture(env.deps, 'Other');
      const outcomes = [['completed', 'hangup', 'human'], ['completed', 'hangup', 'machine'], ['failed', 'busy', null], ['canceled', null, null]] as const;
      for (let i = 0; i < 23; i += 1) {
        // Three runs per millisecond, so page ends (pages of 2, 4, 5) fall inside one.
        if (i % 3 === 0) clock.at += 1;
        const id = await call(env, i % 5 === 4 ? other : f, `+120255501${String(i).padStart(2, '0')}`);
        const [state, outcome, answeredBy] = outcomes[i % outcomes.length] ?? outcomes[0];
        await env.deps.store.db.updateTable('workflow_runs').set({ state, outcome_reason: outcome, answered_by: answeredBy, ended_at: clock.now() }).where('id', '=', id).execute();
      }
      const since = Date.parse('2026-03-01T10:00:00Z') + 2;
      const sorted = (rows: Awaited<ReturnType<typeof countRunsSince>>) => rows.map((r) => JSON.stringify(r)).sort();
      const whole = sorted(await countRunsSince(env.deps.store, f.orgId, since, 1_000));
      assert.ok(whole.length >= 3, 'several groups');
      const total = (await countRunsSince(env.deps.store, f.orgId, since, 1_000)).reduce((sum, r) => sum + r.count, 0);
      assert.equal(total, 23 - 4 - 3, "the other organization's 4 runs and the 3 before `since` are not counted");
      for (const pageRows of [1, 2, 4, 5]) assert.deepEqual(sorted(await countRunsSince(env.deps.store, f.orgId, since, pageRows)), whole, `pages of ${pageRows}`);
      if (env.deps.store.embedded) {
        const plan = await explainWindowPage(env.deps.store, f.orgId, { start: since });
        assert.match(plan, /workflow_runs_org_created_idx/, plan);
        assert.doesNotMatch(plan, /TEMP B-TREE/, `a page is read in index order, never sorted: ${plan}`);
      }
    });
  });

  describe(`GET /api/v1/public/run-states (${store.kind})`, { skip: store.skip }, () => {
    it('serves every run state of runs/states.ts in lifecycle order, each saying whether it is terminal and whether it is live', async (t) => {
      const env = await build(t, store.kind);
      const f = await createOrgFixture(env.deps, 'Acme');
      const response = await getJson(env.app, '/api/v1/public/run-states', f.apiKey);
      assert.equal(response.statusCode, 200, response.body);
      const { data } = response.json() as { data: { state: string; terminal: boolean; live: boolean }[] };
      assert.deepEqual(data.map((s) => s.state), [...RUN_STATES]);
      assert.deepEqual(data.filter((s) => s.terminal).map((s) => s.state), [...TERMINAL_STATES]);
      assert.deepEqual(data.filter((s) => s.live).map((s) => s.state), [...LIVE_STATES]);
      assert.deepEqual(data.find((s) => s.state === 'queued'), { state: 'queued', terminal: false, live: false });
    });

    it('refuses a request without a valid API key, like the console\'s other reads', async (t) => {
      const env = await build(t, store.kind);
      const none = await env.app.inject({ method: 'GET', url: '/api/v1/public/run-states' });
      assert.equal(none.statusCode, 401);
      assert.equal((none.json() as { code: string }).code, 'missing_api_key');
      const wrong = await getJson(env.app, '/api/v1/public/run-states', 'dt_live_wrong');
      assert.equal(wrong.statusCode, 401);
      assert.equal((wrong.json() as { code: string }).code, 'invalid_api_key');
    });
  });
}
