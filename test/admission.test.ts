// Admission (admission/, docs/design.md, "Check order") is one decision for every path that
// creates a run: the same refusal cases, in the same world at the same instant, through a direct
// call, its dry run, a campaign's creation and a campaign's attempt. The direct call and the dry
// run answer the same problem; a campaign's creation refuses what concerns the agent and the route
// (a campaign has no callee yet) and is created otherwise; the attempt records the equivalent
// outcome (docs/design.md, "Check order"; for users docs/campaigns.md): the failed attempt's outcome_reason
// is the code itself, or the contact's status, or its next attempt at the time the direct call was
// told to come back.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { runCampaignTick } from '../src/campaigns/scheduler.js';
import { setCallingHours, setOrganizationLimits } from '../src/orgs/organizations.js';
import type { ErrorCode } from '../src/errors.js';
import { getRun } from '../src/runs/read-run.js';
import { createTelephonyConfiguration, setTelephonyStatus } from '../src/telephony/configurations.js';
import { publishDraft, saveDraft } from '../src/workflows/workflows.js';
import { build, postJson, type TestEnv } from './helpers/app.js';
import { act, addContacts, CAMPAIGNS, contactsOf, createCampaign, type ContactState } from './helpers/campaigns.js';
import { countRuns, createOrgFixture, definition, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { problemOf } from './helpers/app.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const NUMBER = '+12025550140';
/** Monday 2026-03-02 15:00 UTC: 10:00 in Washington, DC (the number's zone). */
const MONDAY_10_AM_DC = Date.parse('2026-03-02T15:00:00Z');

interface World {
  env: TestEnv;
  f: OrgFixture;
  /** The route every path names: a SIP trunk, ready until a case says otherwise. */
  routeId: number;
}

/** What a refused attempt leaves: its contact, and the attempt's run when one was made. */
interface AttemptRecord {
  contact: ContactState;
  run: { state: string; outcome_reason: string | null } | undefined;
  /** Runs created by the tick. */
  created: number;
}

/** What the direct call answered, for the attempt's equivalent (a deferral to when it may come back). */
interface DirectAnswer {
  code: string;
  retryAfterSeconds: number | undefined;
  nextAllowedAt: string | null | undefined;
}

interface RefusalCase {
  name: string;
  code: ErrorCode;
  status: number;
  /** Whether a campaign's creation refuses it too: only what concerns the agent or the route. */
  refusesCreation: boolean;
  /** Makes the world refuse calls to NUMBER through the route (after the campaign was created). */
  refuse(w: World): Promise<void>;
  /** The attempt's recorded outcome, as equivalent to the direct call's answer. */
  attempt(record: AttemptRecord, direct: DirectAnswer): void;
}

function failedWith(code: string) {
  return (record: AttemptRecord) => {
    assert.equal(record.created, 1, 'the attempt is made, and counted');
    assert.deepEqual(record.run, { state: 'failed', outcome_reason: code }, 'and ends at once, undialed, with the refusal as its reason');
  };
}

function settled(status: string) {
  return (record: AttemptRecord) => {
    assert.equal(record.created, 0, 'no attempt is made');
    assert.equal(record.contact.status, status);
  };
}

const CASES: RefusalCase[] = [
  {
    name: 'unknown route (disabled since)',
    code: 'telephony_configuration_not_found',
    status: 404,
    refusesCreation: true,
    refuse: async (w) => void (await setTelephonyStatus(w.env.deps.store, w.routeId, 'inactive', w.env.deps.clock.now())),
    attempt: failedWith('telephony_configuration_not_found'),
  },
  {
    name: 'route not ready (a SIP trunk without its host)',
    code: 'telephony_not_ready',
    status: 422,
    refusesCreation: true,
    refuse: async (w) => void (await w.env.deps.store.db.updateTable('telephony_configurations').set({ settings: JSON.stringify({}), updated_at: w.env.deps.clock.now() + 1 }).where('id', '=', w.routeId).execute()),
    attempt: failedWith('telephony_not_ready'),
  },
  {
    name: 'suppressed number',
    code: 'number_suppressed',
    status: 422,
    refusesCreation: false,
    refuse: async (w) => {
      const response = await w.env.app.inject({ method: 'PUT', url: `/api/v1/public/suppressions/${encodeURIComponent(NUMBER)}`, headers: { 'x-api-key': w.f.apiKey } });
      assert.equal(response.statusCode, 200, response.body);
    },
    attempt: settled('suppressed'),
  },
  {
    name: 'per-number cap reached',
    code: 'number_frequency_capped',
    status: 429,
    refusesCreation: false,
    refuse: async (w) => {
      await setOrganizationLimits(w.env.deps.store, w.f.orgId, { number_max_calls: 1, number_window_seconds: 3600 });
      const first = await postJson(w.env.app, PATHS.initiateCall(w.f.agentUuid), { phone_number: NUMBER, telephony_configuration_id: w.routeId }, { key: w.f.apiKey });
      assert.equal(first.statusCode, 200, first.body);
    },
    attempt: (record, direct) => {
      assert.equal(record.created, 0, 'no attempt is made');
      assert.equal(record.contact.status, 'pending', 'the contact waits');
      const waits = (Date.parse(record.contact.next_attempt_at ?? '') - MONDAY_10_AM_DC) / 1000;
      assert.equal(Math.ceil(waits), direct.retryAfterSeconds, 'until the place the direct call was told to wait for (Retry-After)');
    },
  },
  {
    name: 'outside calling hours',
    code: 'outside_calling_hours',
    status: 422,
    refusesCreation: false,
    refuse: async (w) => void (await setCallingHours(w.env.deps.store, w.f.orgId, { timezone: 'America/New_York', outside: 'refuse', windows: { tue: ['09:00-17:00'] } })),
    attempt: (record, direct) => {
      assert.equal(record.created, 0, 'no attempt is made');
      assert.equal(record.contact.status, 'pending', 'the contact waits');
      assert.equal(record.contact.next_attempt_at, direct.nextAllowedAt, "until the direct call's next_allowed_at");
    },
  },
  {
    name: 'missing required variable (the agent requires it since)',
    code: 'missing_template_variables',
    status: 422,
    refusesCreation: false,
    refuse: async (w) => {
      const now = w.env.deps.clock.now();
      await saveDraft(w.env.deps.store, w.f.workflowUuid, definition({ variables: { customer: { required: true } } }), now);
      await publishDraft(w.env.deps.store, w.f.workflowUuid, now);
    },
    attempt: settled('invalid'),
  },
];

async function world(t: TestContext, kind: StoreKind): Promise<World> {
  const env = await build(t, kind, { clock: { now: () => MONDAY_10_AM_DC } });
  const f = await createOrgFixture(env.deps);
  const route = await createTelephonyConfiguration(env.deps.store, env.deps.cipher, { orgId: f.orgId, name: 'SIP trunk', provider: 'sip', settings: { host: 'trunk.example' }, callerIds: ['+12025550100'] }, env.deps.clock.now());
  return { env, f, routeId: route.id };
}

for (const store of await storeCases()) {
  describe(`Admission: one answer on every path (${store.kind})`, { skip: store.skip }, () => {
    for (const c of CASES) {
      it(`${c.name}: a direct call and its dry run answer ${c.status} ${c.code}, a campaign's creation ${c.refusesCreation ? 'too' : 'is created (no callee yet)'}, and its attempt records the same refusal`, async (t) => {
        const w = await world(t, store.kind);
        const { app } = w.env;
        const body = { phone_number: NUMBER, telephony_configuration_id: w.routeId };
        // The campaign is made while everything is admissible; the case then changes the world.
        const campaign = await createCampaign(app, w.f, { telephony_configuration_id: w.routeId });
        await addContacts(app, w.f, campaign.id, [{ phone_number: NUMBER }]);
        assert.equal((await act(app, w.f, campaign.id, 'start')).statusCode, 200);
        await c.refuse(w);
        const runsBefore = await countRuns(w.env.deps);

        const direct = await postJson(app, PATHS.initiateCall(w.f.agentUuid), body, { key: w.f.apiKey });
        const problem = problemOf(direct);
        assert.deepEqual([direct.statusCode, problem.code], [c.status, c.code], `direct call: ${direct.body}`);

        const dry = await postJson(app, `${PATHS.initiateCall(w.f.agentUuid)}?dry_run=true`, body, { key: w.f.apiKey });
        assert.deepEqual([dry.statusCode, problemOf(dry).code], [c.status, c.code], `dry run: ${dry.body}`);
        if (c.status === 429) assert.equal(dry.headers['retry-after'], direct.headers['retry-after']);

        const creation = await postJson(app, CAMPAIGNS, { name: 'Second drive', agent_uuid: w.f.agentUuid, mode: 'published', telephony_configuration_id: w.routeId }, { key: w.f.apiKey });
        if (c.refusesCreation) assert.deepEqual([creation.statusCode, problemOf(creation).code], [c.status, c.code], `campaign creation: ${creation.body}`);
        else assert.equal(creation.statusCode, 201, creation.body);
        assert.equal(await countRuns(w.env.deps), runsBefore, 'no refused path created a run');

        const tick = await runCampaignTick(w.env.deps);
        const contact = (await contactsOf(w.env, w.f, campaign.id)).get(NUMBER);
        assert.ok(contact);
        const runId = contact.attempts.at(-1)?.run_id;
        const run = runId === undefined ? undefined : await getRun(w.env.deps.store, w.f.orgId, runId);
        c.attempt(
          { contact, created: tick.created, run: run && { state: run.state, outcome_reason: run.outcome_reason } },
          { code: problem.code, retryAfterSeconds: direct.headers['retry-after'] === undefined ? undefined : Number(direct.headers['retry-after']), nextAllowedAt: problem.next_allowed_at as string | null | undefined },
        );
      });
    }

    it('answers the first refusal in the written order on every path: a capped number outside calling hours is capped, with or without an Idempotency-Key', async (t) => {
      const w = await world(t, store.kind);
      const { app } = w.env;
      await CASES[3]?.refuse(w);
      await CASES[4]?.refuse(w);
      const body = { phone_number: NUMBER, telephony_configuration_id: w.routeId };
      const url = PATHS.initiateCall(w.f.agentUuid);
      for (const [path, response] of [
        ['direct call', await postJson(app, url, body, { key: w.f.apiKey })],
        ['direct call with a key', await postJson(app, url, body, { key: w.f.apiKey, headers: { 'idempotency-key': 'order-1' } })],
        ['dry run', await postJson(app, `${url}?dry_run=true`, body, { key: w.f.apiKey })],
      ] as const) {
        assert.deepEqual([response.statusCode, problemOf(response).code], [429, 'number_frequency_capped'], `${path}: ${response.body}`);
      }
    });

    it('settles a contact whose attempt a not-ready route refused by its retry rule, and the breaker pauses the campaign when such failures pile up', async (t) => {
      const w = await world(t, store.kind);
      const { app } = w.env;
      const campaign = await createCampaign(app, w.f, { telephony_configuration_id: w.routeId, retry: { max_attempts: 1 }, circuit_breaker: { min_calls: 2, failure_ratio: 0.5, window_seconds: 600 } });
      await addContacts(app, w.f, campaign.id, [{ phone_number: NUMBER }, { phone_number: '+12025550141' }, { phone_number: '+12025550142' }]);
      assert.equal((await act(app, w.f, campaign.id, 'start')).statusCode, 200);
      await CASES[1]?.refuse(w);
      assert.equal((await runCampaignTick(w.env.deps)).created, 3);
      await runCampaignTick(w.env.deps);
      const contacts = [...(await contactsOf(w.env, w.f, campaign.id)).values()];
      assert.deepEqual(contacts.map((c) => c.status), ['exhausted', 'exhausted', 'exhausted'], 'each used its one attempt');
      const read = await w.env.app.inject({ method: 'GET', url: `${CAMPAIGNS}/${campaign.id}`, headers: { 'x-api-key': w.f.apiKey } });
      assert.deepEqual([read.json().state, read.json().paused_reason], ['paused', 'circuit_breaker']);
    });
  });
}
