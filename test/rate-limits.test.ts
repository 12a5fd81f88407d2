// Rate limits per API key and per organization: the RateLimit fields say exactly what a client is
// held to, a refusal is 429 rate_limited with a Retry-After that is right, and the client recovers
// after it. Counts are shared between nodes through Redis.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { buildApp } from '../src/app.js';
import { createApiKey } from '../src/auth/api-keys.js';
import { buildDeps } from '../src/deps.js';
import { setOrganizationLimits } from '../src/orgs/organizations.js';
import { build, getJson, postJson, testConfig, type TestEnv } from './helpers/app.js';
import { countRuns, createOrgFixture, PATHS } from './helpers/fixtures.js';
import { assertProblem } from './helpers/problems.js';
import { redisSkip, TEST_REDIS_URL } from './helpers/redis.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const BODY = { phone_number: '+12025550123' };
const limits = (env: Record<string, string>) => ({ env: { RATE_LIMIT_WINDOW_SECONDS: '1', RATE_LIMIT_KEY_PER_SECOND: '0', RATE_LIMIT_ORG_PER_SECOND: '0', ...env } });

for (const store of await storeCases()) {
  describe(`Rate limits (${store.kind})`, { skip: store.skip }, () => {
    it('counts down RateLimit per request, refuses the request over the quota with 429 and a right Retry-After, and lets the client in again after it', async (t) => {
      const { app, deps } = await build(t, store.kind, limits({ RATE_LIMIT_KEY_PER_SECOND: '3' }));
      const f = await createOrgFixture(deps);
      const remaining: string[] = [];
      for (let i = 0; i < 3; i++) {
        const response = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key: f.apiKey });
        assert.equal(response.statusCode, 200, response.body);
        assert.equal(response.headers['ratelimit-policy'], '"key";q=3;w=1');
        remaining.push(String(response.headers.ratelimit));
      }
      assert.deepEqual(remaining, ['"key";r=2;t=1', '"key";r=1;t=1', '"key";r=0;t=1']);

      const refused = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key: f.apiKey });
      assertProblem(refused, 429, 'rate_limited');
      assert.equal(refused.headers['retry-after'], '1');
      assert.equal(refused.headers.ratelimit, '"key";r=0;t=1');
      assert.equal(refused.headers['ratelimit-policy'], '"key";q=3;w=1');
      assert.equal(await countRuns(deps), 3, 'a refused request creates nothing');

      await sleep(Number(refused.headers['retry-after']) * 1000);
      const after = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key: f.apiKey });
      assert.equal(after.statusCode, 200, after.body);
      assert.equal(after.headers.ratelimit, '"key";r=2;t=1');
    });

    it('holds the organization limit across all its keys, and leaves other organizations alone', async (t) => {
      const { app, deps } = await build(t, store.kind, limits({ RATE_LIMIT_ORG_PER_SECOND: '1', RATE_LIMIT_WINDOW_SECONDS: '4' }));
      const f = await createOrgFixture(deps);
      const second = await createApiKey(deps.store, f.orgId, 'second key', Date.now());
      const other = await createOrgFixture(deps, 'Other');
      for (const key of [f.apiKey, second.key, f.apiKey, second.key]) {
        assert.equal((await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key })).statusCode, 200);
      }
      const refused = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key: second.key });
      assertProblem(refused, 429, 'rate_limited');
      assert.equal(refused.headers['ratelimit-policy'], '"org";q=4;w=4');
      const retryAfter = Number(refused.headers['retry-after']);
      assert.ok(retryAfter >= 1 && retryAfter <= 4, `Retry-After ${retryAfter} lies within the 4 s window`);
      assert.match(String(refused.headers.ratelimit), new RegExp(`^"org";r=0;t=${retryAfter}$`));
      const theirs = await postJson(app, PATHS.initiateCall(other.agentUuid), BODY, { key: other.apiKey });
      assert.equal(theirs.statusCode, 200, 'another organization has its own count');
    });

    it('applies an organization\'s own rates over the configured ones, and "default" (null) returns to them', async (t) => {
      const { app, deps } = await build(t, store.kind, limits({ RATE_LIMIT_KEY_PER_SECOND: '100', RATE_LIMIT_WINDOW_SECONDS: '10' }));
      const f = await createOrgFixture(deps);
      await setOrganizationLimits(deps.store, f.orgId, { key_rate_limit_per_second: 0, rate_limit_per_second: 1 });
      const first = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key: f.apiKey });
      assert.equal(first.headers['ratelimit-policy'], '"org";q=10;w=10', 'the key limit is off for this organization, its own org rate applies');
      await setOrganizationLimits(deps.store, f.orgId, { key_rate_limit_per_second: null, rate_limit_per_second: null });
      const back = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key: f.apiKey });
      assert.equal(back.headers['ratelimit-policy'], '"key";q=1000;w=10');
    });

    it('puts the RateLimit fields on every authenticated response, refusals included, and none on a 401', async (t) => {
      const { app, deps } = await build(t, store.kind, limits({ RATE_LIMIT_KEY_PER_SECOND: '50', RATE_LIMIT_ORG_PER_SECOND: '100' }));
      const f = await createOrgFixture(deps);
      const responses = [
        await postJson(app, PATHS.initiateCall(randomUUID()), BODY, { key: f.apiKey }),
        await postJson(app, PATHS.initiateCall(f.agentUuid), { phone_number: 'nope' }, { key: f.apiKey }),
        await getJson(app, '/api/v1/public/workflow-runs/999999', f.apiKey),
      ];
      assert.deepEqual(responses.map((r) => r.statusCode), [404, 422, 404]);
      for (const response of responses) {
        assert.equal(response.headers['ratelimit-policy'], '"key";q=50;w=1, "org";q=100;w=1');
        assert.match(String(response.headers.ratelimit), /^"key";r=\d+;t=1, "org";r=\d+;t=1$/);
      }
      assert.equal(responses.at(-1)?.headers.ratelimit, '"key";r=47;t=1, "org";r=97;t=1');
      const unauthenticated = await postJson(app, PATHS.initiateCall(f.agentUuid), BODY);
      assert.equal(unauthenticated.statusCode, 401);
      assert.equal(unauthenticated.headers.ratelimit, undefined);
    });
  });
}

const redisSkipReason = await redisSkip();
describe('Rate limits shared through Redis', { skip: redisSkipReason }, () => {
  /** A second node of the same deployment: same store, same Redis, its own process memory. */
  async function secondNode(first: TestEnv, env: Record<string, string>) {
    const deps = buildDeps(testConfig('sqlite::memory:', env), { store: first.deps.store, logger: pino({ level: 'silent' }) });
    const app = await buildApp(deps);
    await app.ready();
    return { app, close: async () => { await app.close(); await deps.rateLimits.close(); } };
  }

  it('counts the requests of two nodes together', async (t) => {
    const env = { RATE_LIMIT_KEY_PER_SECOND: '2', RATE_LIMIT_WINDOW_SECONDS: '10', RATE_LIMIT_ORG_PER_SECOND: '0', REDIS_URL: TEST_REDIS_URL, RATE_LIMIT_REDIS_PREFIX: `dialtone:test:${randomUUID()}` };
    const a = await build(t, 'sqlite', { env });
    const b = await secondNode(a, env);
    t.after(() => b.close());
    const f = await createOrgFixture(a.deps);
    const url = PATHS.initiateCall(f.agentUuid);
    const seen: string[] = [];
    for (const app of [a.app, b.app, a.app, b.app]) {
      const response = await postJson(app, url, BODY, { key: f.apiKey });
      assert.equal(response.statusCode, 200, response.body);
      seen.push(String(response.headers.ratelimit).replace(/;t=\d+/, ''));
    }
    assert.deepEqual(seen, ['"key";r=19', '"key";r=18', '"key";r=17', '"key";r=16'], 'each node sees the other\'s requests');
    for (let i = 0; i < 16; i++) await postJson(i % 2 ? a.app : b.app, url, BODY, { key: f.apiKey });
    assertProblem(await postJson(a.app, url, BODY, { key: f.apiKey }), 429, 'rate_limited');
    assertProblem(await postJson(b.app, url, BODY, { key: f.apiKey }), 429, 'rate_limited');
    assert.equal(await countRuns(a.deps), 20);
  });

  it('keeps limiting on each node by itself while Redis is unreachable, instead of failing requests', async (t) => {
    const env = { RATE_LIMIT_KEY_PER_SECOND: '2', RATE_LIMIT_WINDOW_SECONDS: '10', RATE_LIMIT_ORG_PER_SECOND: '0', REDIS_URL: 'redis://127.0.0.1:1' };
    const { app, deps } = await build(t, 'sqlite', { env });
    const f = await createOrgFixture(deps);
    const statuses: number[] = [];
    for (let i = 0; i < 21; i++) statuses.push((await postJson(app, PATHS.initiateCall(f.agentUuid), BODY, { key: f.apiKey })).statusCode);
    assert.deepEqual(statuses, [...Array(20).fill(200), 429]);
  });
});
