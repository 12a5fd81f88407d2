import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it, type TestContext } from 'node:test';
import { authenticateApiKey, createApiKey, listApiKeys, revokeApiKey } from '../src/auth/api-keys.js';
import { parseDestination } from '../src/shared/phone-number.js';
import { createOrganization } from '../src/orgs/organizations.js';
import { migrateToLatest } from '../src/store/schema/migrate.js';
import type { Store } from '../src/store/engine/store.js';
import { CredentialsCipher, SecretKeyMissingError } from '../src/shared/credentials-cipher.js';
import { TEST_SECRET_KEY } from './helpers/app.js';
import { createTestDatabase, openTestStore } from './helpers/stores.js';

describe('parseDestination', () => {
  it('normalizes an international number written with spaces and punctuation to E.164', () => {
    assert.deepEqual(parseDestination('+1 (202) 555-0123'), { ok: true, destination: { kind: 'e164', value: '+12025550123' } });
    assert.deepEqual(parseDestination('  +44 20 7946 0958 '), { ok: true, destination: { kind: 'e164', value: '+442079460958' } });
    assert.deepEqual(parseDestination('+12025550123'), { ok: true, destination: { kind: 'e164', value: '+12025550123' } });
  });

  it('refuses a number in national format: there is no country to assume', () => {
    for (const input of ['(202) 555-0123', '2025550123', '020 7946 0958', '0012025550123']) {
      const result = parseDestination(input);
      assert.equal(result.ok, false, input);
      assert.match(result.ok ? '' : result.detail, /international format/, input);
    }
  });

  it('refuses numbers that are not valid, dialable numbers', () => {
    for (const input of ['+1 202 555 01', '+1 000 555 0123', '+999 1234567', '+', '+abc', '+1 202 555 0123 4567 89']) {
      const result = parseDestination(input);
      assert.equal(result.ok, false, input);
      assert.match(result.ok ? '' : result.detail, /not a valid, dialable phone number/, input);
    }
  });

  it('refuses a number with an extension rather than ringing the main line', () => {
    const result = parseDestination('+1 202-555-0123 ext. 42');
    assert.equal(result.ok, false);
    assert.match(result.ok ? '' : result.detail, /extension/);
  });

  it('accepts sip: and sips: URIs by their form and refuses malformed ones', () => {
    for (const input of ['sip:alice@example.com', 'sips:bob@10.0.0.1:5061;transport=tls', 'sip:+12025550123@trunk.example.net']) {
      assert.deepEqual(parseDestination(input), { ok: true, destination: { kind: 'sip_uri', value: input } });
    }
    assert.deepEqual(parseDestination(' sip:alice@example.com '), { ok: true, destination: { kind: 'sip_uri', value: 'sip:alice@example.com' } });
    for (const input of ['sip:alice', 'sip:@example.com', 'sip:alice@', 'sip:al ice@example.com']) {
      const result = parseDestination(input);
      assert.equal(result.ok, false, input);
      assert.match(result.ok ? '' : result.detail, /not a valid SIP URI/, input);
    }
  });
});

describe('CredentialsCipher', () => {
  const credentials = { account_sid: 'AC0123456789abcdef', auth_token: 'very-secret-auth-token' };

  it('decrypts what it encrypted, for the same organization', () => {
    const cipher = new CredentialsCipher(TEST_SECRET_KEY);
    assert.deepEqual(cipher.decrypt(7, cipher.encrypt(7, credentials)), credentials);
    const hexKey = Buffer.alloc(32, 7).toString('hex');
    assert.deepEqual(new CredentialsCipher(hexKey).decrypt(7, cipher.encrypt(7, credentials)), credentials, 'the same key given in hex');
  });

  it('produces a different ciphertext each time, none of it showing the plaintext', () => {
    const cipher = new CredentialsCipher(TEST_SECRET_KEY);
    const first = cipher.encrypt(7, credentials);
    const second = cipher.encrypt(7, credentials);
    assert.notEqual(first, second);
    for (const envelope of [first, second]) {
      assert.match(envelope, /^v1\.[A-Za-z0-9+/=]+\.[A-Za-z0-9+/=]+\.[A-Za-z0-9+/=]+$/);
      assert.ok(!envelope.includes(credentials.auth_token) && !envelope.includes(Buffer.from(credentials.auth_token).toString('base64')));
    }
  });

  it('refuses to decrypt a ciphertext under another organization id', () => {
    const cipher = new CredentialsCipher(TEST_SECRET_KEY);
    const envelope = cipher.encrypt(7, credentials);
    assert.throws(() => cipher.decrypt(8, envelope));
  });

  it('refuses a tampered ciphertext, tag or envelope, and a different key', () => {
    const cipher = new CredentialsCipher(TEST_SECRET_KEY);
    const envelope = cipher.encrypt(7, credentials);
    const [version, iv, tag, body] = envelope.split('.') as [string, string, string, string];
    const flip = (b64: string) => {
      const bytes = Buffer.from(b64, 'base64');
      bytes[0] = (bytes[0] ?? 0) ^ 1;
      return bytes.toString('base64');
    };
    assert.throws(() => cipher.decrypt(7, [version, iv, tag, flip(body)].join('.')), 'body');
    assert.throws(() => cipher.decrypt(7, [version, iv, flip(tag), body].join('.')), 'tag');
    assert.throws(() => cipher.decrypt(7, [version, flip(iv), tag, body].join('.')), 'iv');
    assert.throws(() => cipher.decrypt(7, ['v0', iv, tag, body].join('.')), /Unrecognized credentials envelope/);
    assert.throws(() => cipher.decrypt(7, 'garbage'), /Unrecognized credentials envelope/);
    assert.throws(() => new CredentialsCipher(Buffer.alloc(32, 8).toString('base64')).decrypt(7, envelope), 'another key');
  });

  it('gives a clear error naming DIALTONE_SECRET_KEY when no key is set, and only when one is needed', () => {
    const cipher = new CredentialsCipher(undefined);
    const missing = (error: unknown) => error instanceof SecretKeyMissingError && /DIALTONE_SECRET_KEY is not set/.test(error.message);
    assert.throws(() => cipher.encrypt(7, credentials), missing);
    assert.throws(() => cipher.decrypt(7, new CredentialsCipher(TEST_SECRET_KEY).encrypt(7, credentials)), missing);
  });

  it('refuses a key that is not 32 bytes', () => {
    assert.throws(() => new CredentialsCipher(Buffer.alloc(16).toString('base64')), /DIALTONE_SECRET_KEY must be 32 bytes/);
    assert.throws(() => new CredentialsCipher('abc'), /DIALTONE_SECRET_KEY must be 32 bytes/);
  });
});

async function sqliteStore(t: TestContext): Promise<Store> {
  const database = await createTestDatabase('sqlite');
  const store = openTestStore(database);
  t.after(async () => {
    await store.close();
    await database.drop();
  });
  await migrateToLatest(store);
  return store;
}

const NOW = 1_700_000_000_000;
const INTERVAL = 60_000;

describe('API keys', () => {
  it('stores only the SHA-256 hash and a display prefix, never the secret', async (t) => {
    const store = await sqliteStore(t);
    const org = await createOrganization(store, 'Acme', NOW);
    const created = await createApiKey(store, org.id, 'backend', NOW);
    assert.match(created.key, /^dt_live_[A-Za-z0-9]{10}_[A-Za-z0-9]{32}$/);
    assert.equal(created.prefix, created.key.slice(0, 'dt_live_'.length + 10));
    const secret = created.key.slice(created.prefix.length + 1);

    const row = await store.db.selectFrom('api_keys').selectAll().where('id', '=', created.id).executeTakeFirstOrThrow();
    assert.equal(row.hash, createHash('sha256').update(created.key).digest('hex'));
    assert.equal(row.prefix, created.prefix);
    assert.equal(row.org_id, org.id);
    const stored = JSON.stringify(row);
    assert.ok(!stored.includes(secret), `the secret is not in the row: ${stored}`);
    assert.ok(!stored.includes(created.key));
    assert.ok(!JSON.stringify(await listApiKeys(store, org.id)).includes(secret), 'nor in the listing');

    const another = await createApiKey(store, org.id, 'second', NOW);
    assert.notEqual(another.key, created.key);
    assert.notEqual(another.prefix, created.prefix);
  });

  it('authenticates the key as its organization\'s, and refuses it with any one character changed', async (t) => {
    const store = await sqliteStore(t);
    const org = await createOrganization(store, 'Acme', NOW);
    const { id, key } = await createApiKey(store, org.id, 'backend', NOW);
    assert.deepEqual(await authenticateApiKey(store, key, NOW, INTERVAL), { keyId: id, keyName: 'backend', orgId: org.id, scopes: ['calls', 'campaigns', 'webhooks', 'admin'], limits: { ratePerSecond: null, keyRatePerSecond: null, maxQueuedRuns: null }, callingHours: null });

    const changeAt = (i: number) => key.slice(0, i) + (key[i] === 'a' ? 'b' : 'a') + key.slice(i + 1);
    for (const i of [key.length - 1, 'dt_live_'.length + 12, 'dt_live_'.length + 2]) {
      assert.equal(await authenticateApiKey(store, changeAt(i), NOW, INTERVAL), undefined, `changed at ${i}`);
    }
    for (const other of ['', key.slice(0, -1), `${key}a`, key.toUpperCase(), key.replace('dt_live_', 'dt_test_'), ` ${key}`]) {
      assert.equal(await authenticateApiKey(store, other, NOW, INTERVAL), undefined, JSON.stringify(other));
    }
  });

  it('refuses a revoked key; revoking again keeps the first revocation time', async (t) => {
    const store = await sqliteStore(t);
    const org = await createOrganization(store, 'Acme', NOW);
    const { id, key } = await createApiKey(store, org.id, 'backend', NOW);
    assert.equal((await revokeApiKey(store, id, NOW + 1_000))?.revoked_at, NOW + 1_000);
    assert.equal(await authenticateApiKey(store, key, NOW + 2_000, INTERVAL), undefined);
    assert.equal((await revokeApiKey(store, id, NOW + 3_000))?.revoked_at, NOW + 1_000);
    assert.equal((await listApiKeys(store, org.id))[0]?.revoked_at, NOW + 1_000);
    assert.equal(await revokeApiKey(store, id + 100, NOW), undefined, 'an unknown key');
  });

  it('writes last_used_at at most once per API_KEY_LAST_USED_WRITE_INTERVAL_MS', async (t) => {
    const store = await sqliteStore(t);
    const org = await createOrganization(store, 'Acme', NOW);
    const { id, key } = await createApiKey(store, org.id, 'backend', NOW);
    const lastUsed = async () => (await store.db.selectFrom('api_keys').select('last_used_at').where('id', '=', id).executeTakeFirstOrThrow()).last_used_at;
    const use = async (now: number) => assert.ok(await authenticateApiKey(store, key, now, INTERVAL), `authenticated at ${now}`);

    assert.equal(await lastUsed(), null, 'never used');
    await use(NOW);
    assert.equal(await lastUsed(), NOW, 'the first use is written');
    await use(NOW + 1);
    await use(NOW + INTERVAL - 1);
    assert.equal(await lastUsed(), NOW, 'uses within the interval are not written');
    await use(NOW + INTERVAL);
    assert.equal(await lastUsed(), NOW + INTERVAL, 'the first use once the interval has passed is written');
    await use(NOW + INTERVAL + 10);
    assert.equal(await lastUsed(), NOW + INTERVAL);
    await use(NOW + 5 * INTERVAL);
    assert.equal(await lastUsed(), NOW + 5 * INTERVAL);

    const { key: everyTime, id: everyId } = await createApiKey(store, org.id, 'unthrottled', NOW);
    for (const now of [NOW + 1, NOW + 2, NOW + 3]) await authenticateApiKey(store, everyTime, now, 0);
    const row = await store.db.selectFrom('api_keys').select('last_used_at').where('id', '=', everyId).executeTakeFirstOrThrow();
    assert.equal(row.last_used_at, NOW + 3, 'an interval of 0 writes every use');
  });
});
