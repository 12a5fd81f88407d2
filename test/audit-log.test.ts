// The audit log's foundation (docs/design.md, "Audit log"): an entry is written in the caller's
// transaction (committed with the change, rolled back with it), says who acted, and never holds a
// secret, whatever the caller passed.
import assert from 'node:assert/strict';
import { CLI_ACTOR, recordAuditEvent, redactSecrets, REDACTED, SYSTEM_ACTOR } from '../src/audit/audit-log.js';
import { createApiKey } from '../src/auth/api-keys.js';
import { createOrganization } from '../src/orgs/organizations.js';
import { migrateToLatest } from '../src/store/schema/migrate.js';
import type { Store } from '../src/store/engine/store.js';
import { selectAuditEvents } from '../src/store/statements/audit-statements.js';
import { createTestDatabase, openTestStore, storeCases, type TestDatabase } from './helpers/stores.js';
import { after, before, describe, it } from './helpers/suite.js';

for (const storeCase of await storeCases()) {
  describe(`The audit log (${storeCase.kind})`, { skip: storeCase.skip }, () => {
    let database: TestDatabase;
    let store: Store;
    before(async () => {
      database = await createTestDatabase(storeCase.kind);
      store = openTestStore(database);
      await migrateToLatest(store);
    });
    after(async () => {
      await store.close();
      await database.drop();
    });

    it('writes an entry in the caller\'s transaction, naming the key that acted, and reads it back newest first', async () => {
      const org = await createOrganization(store, 'Audited', 1_000);
      const id = await store.transaction('durable', (trx) =>
        recordAuditEvent(trx, {
          orgId: org.id,
          actor: { kind: 'api_key', keyId: 41, keyName: 'ops key' },
          action: 'organization.settings_updated',
          target: { type: 'organization', id: org.id },
          before: { calling_hours: null },
          after: { calling_hours: { time_zone: 'UTC' } },
          at: 2_000,
        }),
      );
      const second = await store.transaction('durable', (trx) =>
        recordAuditEvent(trx, { orgId: org.id, actor: CLI_ACTOR, action: 'api_key.revoked', target: { type: 'api_key', id: 7 }, at: 3_000 }),
      );
      assert.ok(second > id);
      const rows = await selectAuditEvents(store, org.id, {}, 10);
      assert.deepEqual(
        rows.map((row) => ({ ...row, id: Number(row.id), org_id: Number(row.org_id), actor_key_id: row.actor_key_id === null ? null : Number(row.actor_key_id), created_at: Number(row.created_at) })),
        [
          { id: second, org_id: org.id, actor: 'cli', actor_key_id: null, actor_key_name: null, action: 'api_key.revoked', target_type: 'api_key', target_id: '7', before: null, after: null, created_at: 3_000 },
          {
            id,
            org_id: org.id,
            actor: 'api_key',
            actor_key_id: 41,
            actor_key_name: 'ops key',
            action: 'organization.settings_updated',
            target_type: 'organization',
            target_id: String(org.id),
            before: '{"calling_hours":null}',
            after: '{"calling_hours":{"time_zone":"UTC"}}',
            created_at: 2_000,
          },
        ],
      );
    });

    it('leaves no entry when the change\'s transaction rolls back', async () => {
      const org = await createOrganization(store, 'Rolled back', 1_000);
      await assert.rejects(
        store.transaction('durable', async (trx) => {
          await recordAuditEvent(trx, { orgId: org.id, actor: SYSTEM_ACTOR, action: 'organization.pruned', target: { type: 'organization', id: org.id }, at: 1_500 });
          throw new Error('the change failed');
        }),
        /the change failed/,
      );
      assert.deepEqual(await selectAuditEvents(store, org.id, {}, 10), []);
    });

    it('never stores a secret: a created key\'s secret, hashes, tokens and signing secrets are redacted by name and by shape, whether it is set stays visible', async () => {
      const org = await createOrganization(store, 'Secrets', 1_000);
      const key = await createApiKey(store, org.id, 'the key', 1_000);
      await store.transaction('durable', (trx) =>
        recordAuditEvent(trx, {
          orgId: org.id,
          actor: CLI_ACTOR,
          action: 'api_key.created',
          target: { type: 'api_key', id: key.id },
          after: {
            ...key,
            hash: 'feedfacecafe0123',
            credentials: { account_sid: 'AC1', auth_token: 'tok-123' },
            webhook: { signing_secret: 'whsec_c2VjcmV0c2VjcmV0', note: `copied ${key.key} here` },
            nested: [{ password: 'hunter2' }, { description: 'whsec_QUJDREVGR0hJSktM' }],
            auth_token_set: true,
            private_key: null,
          },
          at: 2_000,
        }),
      );
      const [row] = await selectAuditEvents(store, org.id, { action: 'api_key.created' }, 1);
      assert.ok(row?.after);
      for (const secret of [key.key, key.key.slice('dt_live_'.length + 11), 'feedfacecafe0123', 'tok-123', 'c2VjcmV0c2VjcmV0', 'hunter2', 'QUJDREVGR0hJSktM']) {
        assert.ok(!row.after.includes(secret), `the entry holds no "${secret}"`);
      }
      assert.deepEqual(JSON.parse(row.after), {
        id: key.id,
        org_id: org.id,
        name: 'the key',
        prefix: key.prefix,
        scopes: ['calls', 'campaigns', 'webhooks', 'admin'],
        key: REDACTED,
        hash: REDACTED,
        credentials: REDACTED,
        webhook: { signing_secret: REDACTED, note: REDACTED },
        nested: [{ password: REDACTED }, { description: REDACTED }],
        auth_token_set: true,
        private_key: null,
      });
    });

    it('filters an organization\'s entries by action, actor and time, and pages them by id, never showing another organization\'s', async () => {
      const org = await createOrganization(store, 'Filtered', 1_000);
      const other = await createOrganization(store, 'Other', 1_000);
      const key = { kind: 'api_key', keyId: 5, keyName: 'k' } as const;
      const ids: number[] = [];
      await store.transaction('durable', async (trx) => {
        for (let i = 0; i < 5; i++) {
          ids.push(await recordAuditEvent(trx, { orgId: org.id, actor: i % 2 === 0 ? key : CLI_ACTOR, action: i < 3 ? 'api_key.created' : 'api_key.revoked', target: { type: 'api_key', id: i }, at: 10_000 + i * 1_000 }));
        }
        await recordAuditEvent(trx, { orgId: other.id, actor: key, action: 'api_key.created', target: { type: 'api_key', id: 99 }, at: 10_000 });
      });
      const idsOf = async (filter: Parameters<typeof selectAuditEvents>[2], limit = 10) => (await selectAuditEvents(store, org.id, filter, limit)).map((row) => Number(row.id));
      assert.deepEqual(await idsOf({}), [...ids].reverse());
      assert.deepEqual(await idsOf({ action: 'api_key.revoked' }), [ids[4], ids[3]]);
      assert.deepEqual(await idsOf({ actorKeyId: 5 }), [ids[4], ids[2], ids[0]]);
      assert.deepEqual(await idsOf({ actor: 'cli' }), [ids[3], ids[1]]);
      assert.deepEqual(await idsOf({ since: 11_000, until: 13_000 }), [ids[2], ids[1]]);
      assert.deepEqual(await idsOf({}, 2), [ids[4], ids[3]]);
      assert.deepEqual(await idsOf({ beforeId: ids[3] }, 2), [ids[2], ids[1]]);
    });

    it('refuses an action that is not <target>.<verb> in lower snake case, and writes nothing', async () => {
      const org = await createOrganization(store, 'Malformed', 1_000);
      await assert.rejects(
        store.transaction('durable', (trx) => recordAuditEvent(trx, { orgId: org.id, actor: CLI_ACTOR, action: 'Created key', target: { type: 'api_key', id: 1 }, at: 1 })),
        /not <target>\.<verb>/,
      );
      assert.deepEqual(await selectAuditEvents(store, org.id, {}, 10), []);
    });
  });
}

describe('Redacting secrets', () => {
  it('keeps what is not secret as it was, at any depth', () => {
    const value = { name: 'x', limits: { rate_limit_per_second: 5, windows: [{ days: ['mon'], start: '09:00' }] }, prefix: 'dt_live_ABCDEFGHIJ', key_id: 3, n: null };
    assert.deepEqual(redactSecrets(value), value);
  });
});
