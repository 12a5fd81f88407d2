// Campaigns and answering-machine detection: an attempt a machine answered (and Dialtone hung up
// on) reached no one, so its contact is retried when retry.on names `machine`, and counted apart
// from the contacts a person answered. The test ticks the scheduler itself and moves the clock.
import assert from 'node:assert/strict';
import { runCampaignTick } from '../src/campaigns/scheduler.js';
import { settle, DEFAULT_RETRY } from '../src/campaigns/settings.js';
import type { FastifyInstance } from 'fastify';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { getJson, postJson } from './helpers/app.js';
import { act, addContacts, CAMPAIGNS, campaignOf, contactsOf, createCampaign, offsetClock, untilRunsEnd } from './helpers/campaigns.js';
import { buildWithDispatcher, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, definition, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const VOICEMAIL = '+12025550120';
const PERSON = '+12025550122';

function patchCampaign(app: FastifyInstance, f: OrgFixture, campaignId: number, body: unknown) {
  return app.inject({ method: 'PATCH', url: `${CAMPAIGNS}/${campaignId}`, headers: { 'x-api-key': f.apiKey, 'content-type': 'application/json' }, payload: JSON.stringify(body) });
}

/** Starts the campaign, creates its attempts, and answers its runs as the API lists them once they all ended. */
async function attemptsOf(env: DispatchEnv, f: OrgFixture, campaignId: number) {
  assert.equal((await act(env.app, f, campaignId, 'start')).statusCode, 200);
  await runCampaignTick(env.deps);
  await untilRunsEnd(env, campaignId);
  return (await getJson(env.app, `${CAMPAIGNS}/${campaignId}/runs`, f.apiKey)).json().data as { answered_by: string | null; raw_answered_by: string | null; outcome_reason: string | null }[];
}

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

    it("dials a campaign's attempts with its own answering_machine in place of its agent's, and counts machines apart in its progress", async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { clock: offsetClock() });
      const f = await createOrgFixture(env.deps); // the agent asks nothing
      const own = { detect: 'on', on_machine: 'hangup' };
      const detecting = await createCampaign(env.app, f, { name: 'Detecting', answering_machine: own });
      assert.deepEqual(detecting.answering_machine, own);
      await addContacts(env.app, f, detecting.id, [{ phone_number: VOICEMAIL }, { phone_number: PERSON }]);
      const detected = await attemptsOf(env, f, detecting.id);
      assert.deepEqual(detected.map((r) => r.answered_by).sort(), ['human', 'machine']);
      assert.equal(detected.find((r) => r.answered_by === 'machine')?.outcome_reason, 'machine_hangup');
      await runCampaignTick(env.deps); // settles
      const progress = (await campaignOf(env, f, detecting.id)).progress as unknown as { answered_by: Record<string, number>; reached: number; exhausted: number };
      assert.deepEqual(progress.answered_by, { human: 1, machine: 1, fax: 0, unknown: 0 });
      assert.equal(progress.reached, 1, 'the person');
      assert.equal(progress.exhausted, 1, 'the voicemail box, hung up on');

      // The same agent in a campaign without settings of its own asks nothing: no verdict.
      const plain = await createCampaign(env.app, f, { name: 'Plain' });
      assert.equal(plain.answering_machine, null);
      await addContacts(env.app, f, plain.id, [{ phone_number: VOICEMAIL }]);
      const undetected = await attemptsOf(env, f, plain.id);
      assert.deepEqual(undetected.map((r) => [r.answered_by, r.outcome_reason === 'machine_hangup']), [[null, false]]);
      assert.deepEqual(((await campaignOf(env, f, plain.id)).progress as unknown as { answered_by: Record<string, number> }).answered_by, { human: 0, machine: 0, fax: 0, unknown: 0 });
    });

    it("changes a campaign's answering_machine with PATCH (off, or back to its agent's), and the attempts dialed after follow it", async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { clock: offsetClock() });
      const f = await createOrgFixture(env.deps, 'Acme', { ...definition(), answering_machine: { detect: 'on', on_machine: 'hangup' } });
      const { id } = await createCampaign(env.app, f);
      const off = await patchCampaign(env.app, f, id, { answering_machine: { detect: 'off' } });
      assert.equal(off.statusCode, 200, off.body);
      assert.deepEqual(off.json().answering_machine, { detect: 'off' });
      await addContacts(env.app, f, id, [{ phone_number: VOICEMAIL }]);
      const runs = await attemptsOf(env, f, id);
      assert.deepEqual(runs.map((r) => r.answered_by), [null], "the campaign's detect off replaced the agent's detect on");

      const back = await patchCampaign(env.app, f, id, { answering_machine: null });
      assert.equal(back.statusCode, 200, back.body);
      assert.equal(back.json().answering_machine, null);
      const stored = await env.deps.store.db.selectFrom('campaigns').select('answering_machine').where('id', '=', id).executeTakeFirstOrThrow();
      assert.equal(stored.answering_machine, null);

      assert.equal((await act(env.app, f, id, 'cancel')).statusCode, 200);
      assertProblem(await patchCampaign(env.app, f, id, { answering_machine: { detect: 'off' } }), 409, 'campaign_state_conflict');
      const other = await createOrgFixture(env.deps, 'Other');
      assertProblem(await patchCampaign(env.app, other, id, { answering_machine: null }), 404, 'campaign_not_found');
    });

    it("lists every problem of a campaign's answering_machine with its JSON Pointer, and creates or changes nothing", async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps);
      const bad = { detect: 'maybe', on_machine: 'leave_message', detection_timeout_ms: 100, tone: 'x' };
      const created = await postJson(env.app, CAMPAIGNS, { name: 'x', agent_uuid: f.agentUuid, mode: 'published', answering_machine: bad }, { key: f.apiKey });
      const problem = assertProblem(created, 422, 'validation_failed') as { errors?: { pointer: string }[] };
      assert.deepEqual(
        [...new Set(problem.errors?.map((e) => e.pointer))].sort(),
        ['/answering_machine/detect', '/answering_machine/detection_timeout_ms', '/answering_machine/message', '/answering_machine/tone'],
      );
      assert.equal((await env.deps.store.db.selectFrom('campaigns').select('id').execute()).length, 0);

      const { id } = await createCampaign(env.app, f, { answering_machine: { detect: 'on', on_machine: 'hangup' } });
      const patched = await patchCampaign(env.app, f, id, { answering_machine: { detect: 'message_end', on_machine: 'leave_message', message: 'Hi {{name' } });
      const patchProblem = assertProblem(patched, 422, 'validation_failed') as { errors?: { pointer: string }[] };
      assert.deepEqual([...new Set(patchProblem.errors?.map((e) => e.pointer))], ['/answering_machine/message']);
      assertProblem(await patchCampaign(env.app, f, id, {}), 422, 'validation_failed');
      assert.deepEqual((await campaignOf(env, f, id) as unknown as { answering_machine: unknown }).answering_machine, { detect: 'on', on_machine: 'hangup' });
    });

    it("admits a campaign's own answering_machine against its route: detection through SIP is refused, off lets a detecting agent through", async (t) => {
      const env = await buildWithDispatcher(t, store.kind, { start: false });
      const f = await createOrgFixture(env.deps, 'Acme', { ...definition(), answering_machine: { detect: 'on', on_machine: 'hangup' } });
      const sip = await createTelephonyConfiguration(
        env.deps.store,
        env.deps.cipher,
        { orgId: f.orgId, name: 'Trunk', provider: 'sip', callerIds: ['+12025550100'], settings: { host: '2001:db8::1', port: 5060, transport: 'udp', media_address: '127.0.0.1', media_port: 40000 } },
        env.deps.clock.now(),
      );
      const body = { name: 'Trunk drive', agent_uuid: f.agentUuid, mode: 'published', telephony_configuration_id: sip.id };
      assertProblem(await postJson(env.app, CAMPAIGNS, body, { key: f.apiKey }), 422, 'machine_detection_unsupported');
      const off = await postJson(env.app, CAMPAIGNS, { ...body, answering_machine: { detect: 'off' } }, { key: f.apiKey });
      assert.equal(off.statusCode, 201, off.body);
      const id = off.json().id as number;
      assertProblem(await patchCampaign(env.app, f, id, { answering_machine: { detect: 'on', on_machine: 'connect_agent' } }), 422, 'machine_detection_unsupported');
      assertProblem(await patchCampaign(env.app, f, id, { answering_machine: null }), 422, 'machine_detection_unsupported', );
      assert.deepEqual((await campaignOf(env, f, id) as unknown as { answering_machine: unknown }).answering_machine, { detect: 'off' });
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
