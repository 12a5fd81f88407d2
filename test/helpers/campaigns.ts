// Campaign helpers: the API calls a test makes, and a clock the test moves by hand (the scheduler
// and the retry delays read only the injected clock, so a test ticks the scheduler itself).
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import type { TestEnv } from './app.js';
import { postJson } from './app.js';
import type { OrgFixture } from './fixtures.js';
import { scaledTimeout } from './timeouts.js';

export const CAMPAIGNS = '/api/v1/public/campaigns';

/** A clock at real time plus an offset the test moves on. */
export function offsetClock() {
  let offset = 0;
  return { now: () => Date.now() + offset, advance: (ms: number) => void (offset += ms) };
}

export async function createCampaign(app: FastifyInstance, f: OrgFixture, body: Record<string, unknown> = {}): Promise<{ id: number; [k: string]: unknown }> {
  const response = await postJson(app, CAMPAIGNS, { name: 'Spring drive', agent_uuid: f.agentUuid, mode: 'published', ...body }, { key: f.apiKey });
  assert.equal(response.statusCode, 201, response.body);
  return response.json();
}

export async function addContacts(app: FastifyInstance, f: OrgFixture, campaignId: number, contacts: unknown[]) {
  const response = await postJson(app, `${CAMPAIGNS}/${campaignId}/contacts`, contacts, { key: f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return response.json() as { added: number; duplicates: number; invalid: { index?: number; line?: number; detail: string }[] };
}

export function act(app: FastifyInstance, f: OrgFixture, campaignId: number, action: string) {
  return postJson(app, `${CAMPAIGNS}/${campaignId}/${action}`, undefined, { key: f.apiKey, raw: '' });
}

export async function campaignOf(env: TestEnv, f: OrgFixture, campaignId: number) {
  const response = await env.app.inject({ method: 'GET', url: `${CAMPAIGNS}/${campaignId}`, headers: { 'x-api-key': f.apiKey } });
  assert.equal(response.statusCode, 200, response.body);
  return response.json() as { state: string; paused_reason: string | null; progress: Record<string, number> & { outcomes: Record<string, number> } };
}

export interface ContactState {
  id: number;
  phone_number: string;
  status: string;
  attempts: { attempt: number; run_id: number; state: string }[];
  next_attempt_at: string | null;
}

export async function contactsOf(env: TestEnv, f: OrgFixture, campaignId: number): Promise<Map<string, ContactState>> {
  const response = await env.app.inject({ method: 'GET', url: `${CAMPAIGNS}/${campaignId}/contacts?limit=1000`, headers: { 'x-api-key': f.apiKey } });
  assert.equal(response.statusCode, 200, response.body);
  return new Map((response.json().data as ContactState[]).map((c) => [c.phone_number, c]));
}

/** Runs of a campaign not yet ended (queued or live), counted in the store. */
export async function openRuns(env: TestEnv, campaignId: number): Promise<number> {
  const row = await env.deps.store.db
    .selectFrom('workflow_runs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('campaign_id', '=', campaignId)
    .where('state', 'in', ['queued', 'dialing', 'ringing', 'in_progress'])
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Waits (real time, polling like waitForRun) until every run of the campaign has ended. */
export async function untilRunsEnd(env: TestEnv, campaignId: number, timeoutMs = scaledTimeout(10_000)): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await openRuns(env, campaignId)) > 0) {
    if (Date.now() > deadline) throw new Error(`campaign ${campaignId} still has open runs after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
