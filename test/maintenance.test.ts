// The dispatcher's maintenance pass runs the housekeeping the service hands it: here the purge of
// expired Idempotency-Key records, as src/server.ts wires it. Time is a fake clock.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { purgeExpiredIdempotencyKeys } from '../src/calls/idempotency.js';
import { maintain } from '../src/dispatch/maintenance.js';
import { build, postJson } from './helpers/app.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';

const TTL_MS = 60_000;

describe('Maintenance pass', () => {
  it('runs the service\'s housekeeping with the pass\'s time, and the Idempotency-Key purge removes a record once its TTL has passed, not before', async (t) => {
    const clock = { at: Date.UTC(2026, 10, 23, 12), now() { return this.at; } };
    const { app, deps } = await build(t, 'sqlite', { clock, env: { IDEMPOTENCY_TTL_MS: String(TTL_MS) } });
    const f = await createOrgFixture(deps);
    const key = randomUUID();
    const first = await postJson(app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123' }, { key: f.apiKey, headers: { 'idempotency-key': key } });
    assert.equal(first.statusCode, 200);
    const records = () => deps.store.db.selectFrom('idempotency_keys').select('key').execute();
    const seen: number[] = [];
    const pass = (now: number) =>
      maintain(deps, now, {
        inProcessProviders: [],
        reaped: async () => undefined,
        housekeeping: [(at) => (seen.push(at), purgeExpiredIdempotencyKeys(deps.store, at))],
      });

    await pass(clock.at + TTL_MS - 1);
    assert.deepEqual((await records()).map((r) => r.key), [key], 'kept within its TTL');
    await pass(clock.at + TTL_MS);
    assert.deepEqual(await records(), [], 'purged once expired');
    assert.deepEqual(seen, [clock.at + TTL_MS - 1, clock.at + TTL_MS]);
  });
});
