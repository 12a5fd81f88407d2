// DIALTONE_SECRET_KEY at start-up (src/secret-key.ts): generated on an embedded database's first
// start and kept beside it (0600), an explicit key winning, nothing generated on PostgreSQL, and a
// node whose key is not the stored secrets' key (or that has none) refused with a clear message,
// on both stores.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import type { TestContext } from 'node:test';
import pino from 'pino';
import { buildDeps, type Deps } from '../src/deps.js';
import { configuredSecretKey, establishSecretKey, SecretKeyError, secretKeyFilePath } from '../src/secret-key.js';
import { migrateToLatest } from '../src/store/schema/migrate.js';
import { openStore } from '../src/store/engine/store.js';
import { createEndpoint } from '../src/webhooks/endpoints.js';
import { TEST_SECRET_KEY, testConfig, problemOf, build, postJson } from './helpers/app.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { createTestDatabase, storeCases, type StoreKind } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';

const OTHER_KEY = Buffer.alloc(32, 9).toString('base64');
// Probed before any test starts: a probe racing the SQLite tests' synchronous work can time out.
const STORES = await storeCases();

/** A node's dependencies on the database: DIALTONE_SECRET_KEY as given (undefined: not set). */
async function node(t: TestContext, url: string, key: string | undefined): Promise<Deps> {
  const config = testConfig(url);
  const deps = buildDeps({ ...config, DIALTONE_SECRET_KEY: key }, { store: openStore(url, { poolSize: 2 }), logger: pino({ level: 'silent' }) });
  t.after(() => deps.store.close());
  await migrateToLatest(deps.store);
  return deps;
}

async function database(t: TestContext, kind: StoreKind): Promise<string> {
  const db = await createTestDatabase(kind);
  t.after(() => db.drop());
  return db.url;
}

function webhookContext(deps: Deps) {
  return { store: deps.store, cipher: deps.cipher, clock: deps.clock, config: deps.config, wake: () => undefined };
}

async function registerEndpoint(deps: Deps): Promise<void> {
  const f = await createOrgFixture(deps, `Org ${Math.random()}`);
  await createEndpoint(webhookContext(deps), f.orgId, { url: 'https://93.184.216.34/hooks' });
}

const refusal = (code: string, pattern: RegExp) => (error: unknown) => error instanceof SecretKeyError && error.code === code && pattern.test(error.message);

describe('The secret key of an embedded (SQLite) database', () => {
  it('is generated on the first start without DIALTONE_SECRET_KEY, kept beside the database 0600, and read again by the next start', async (t) => {
    const url = await database(t, 'sqlite');
    const file = secretKeyFilePath(url) ?? '';
    assert.equal(file, `${url.slice('sqlite:'.length)}.key`);
    const first = await node(t, url, undefined);
    assert.equal(first.cipher.hasKey, false);
    assert.deepEqual(await establishSecretKey(first), { kind: 'generated', keyFile: file });
    assert.equal((statSync(file).mode & 0o777).toString(8), '600');
    const key = readFileSync(file, 'utf8').trim();
    assert.equal(Buffer.from(key, 'base64').length, 32);
    // Webhooks work at once: an endpoint's secret is stored encrypted under it.
    await registerEndpoint(first);

    const second = await node(t, url, undefined);
    assert.equal(configuredSecretKey(second.config), key);
    assert.deepEqual(await establishSecretKey(second), { kind: 'given' });
    const [endpoint] = await second.store.db.selectFrom('webhook_endpoints').select(['org_id', 'secret_encrypted']).execute();
    assert.ok(endpoint);
    assert.match(String(second.cipher.decrypt(endpoint.org_id, endpoint.secret_encrypted).secret), /^whsec_/);
    assert.equal(readFileSync(file, 'utf8').trim(), key, 'the file is never rewritten');
  });

  it('uses an explicit DIALTONE_SECRET_KEY and writes no key file', async (t) => {
    const url = await database(t, 'sqlite');
    const deps = await node(t, url, TEST_SECRET_KEY);
    assert.deepEqual(await establishSecretKey(deps), { kind: 'given' });
    assert.equal(existsSync(secretKeyFilePath(url) ?? ''), false);
  });

  it('refuses a start whose key file went missing while secrets are stored, and one whose explicit key is not the key file\'s, saying what to do', async (t) => {
    const url = await database(t, 'sqlite');
    const file = secretKeyFilePath(url) ?? '';
    const first = await node(t, url, undefined);
    await establishSecretKey(first);
    await registerEndpoint(first);
    const key = readFileSync(file, 'utf8');
    // An explicit key wins over the file, and is checked like any other.
    await assert.rejects(establishSecretKey(await node(t, url, OTHER_KEY)), refusal('secret_key_mismatch', /^DIALTONE_SECRET_KEY is not the key this database's secrets were written with/));
    writeFileSync(file, '', { mode: 0o600 });
    assert.throws(() => buildDeps({ ...testConfig(url), DIALTONE_SECRET_KEY: undefined }), refusal('secret_key_file_invalid', /does not hold a key/));
    const { rmSync } = await import('node:fs');
    rmSync(file);
    await assert.rejects(establishSecretKey(await node(t, url, undefined)), refusal('secret_key_missing', /key file .* is missing.*put the key file back/));
    assert.equal(existsSync(file), false, 'no new key is generated over stored secrets');
    writeFileSync(file, key, { mode: 0o600 });
    assert.deepEqual(await establishSecretKey(await node(t, url, undefined)), { kind: 'given' });
  });

  it('gives an in-memory database a key of its own for the life of the process, with no file', async (t) => {
    const deps = buildDeps({ ...testConfig('sqlite::memory:'), DIALTONE_SECRET_KEY: undefined }, { logger: pino({ level: 'silent' }) });
    t.after(() => deps.store.close());
    await migrateToLatest(deps.store);
    assert.equal(secretKeyFilePath('sqlite::memory:'), undefined);
    assert.deepEqual(await establishSecretKey(deps), { kind: 'generated', keyFile: undefined });
    await registerEndpoint(deps);
  });
});

for (const store of STORES) {
  describe(`The secret key check (${store.kind})`, { skip: store.skip }, () => {
    it('refuses a node whose key is not the one the stored secrets were written with, or that has none, and starts one with the same key', async (t) => {
      const url = await database(t, store.kind);
      const first = await node(t, url, TEST_SECRET_KEY);
      assert.deepEqual(await establishSecretKey(first), { kind: 'given' });
      await assert.rejects(establishSecretKey(await node(t, url, OTHER_KEY)), refusal('secret_key_mismatch', /is not the key this database's secrets were written with: give every node the same DIALTONE_SECRET_KEY/));
      if (store.kind === 'postgres') {
        await assert.rejects(establishSecretKey(await node(t, url, undefined)), refusal('secret_key_missing', /^DIALTONE_SECRET_KEY is not set, but this database holds secrets written under a key: give this node the key the other nodes are given/));
      }
      assert.deepEqual(await establishSecretKey(await node(t, url, TEST_SECRET_KEY)), { kind: 'given' });
      // The check is a value that tells keys apart, not the key.
      const [row] = await first.store.db.selectFrom('secret_key_check').select('value').execute();
      assert.ok(row && !row.value.includes(TEST_SECRET_KEY) && row.value !== Buffer.from(TEST_SECRET_KEY, 'base64').toString('base64url'));
    });

    it('checks a database written before the check existed by decrypting one of its secrets', async (t) => {
      const url = await database(t, store.kind);
      const writer = await node(t, url, TEST_SECRET_KEY);
      await registerEndpoint(writer);
      assert.equal((await writer.store.db.selectFrom('secret_key_check').selectAll().execute()).length, 0);
      await assert.rejects(establishSecretKey(await node(t, url, OTHER_KEY)), refusal('secret_key_mismatch', /is not the key/));
      assert.equal((await writer.store.db.selectFrom('secret_key_check').selectAll().execute()).length, 0, 'a refused key stores no check');
      assert.deepEqual(await establishSecretKey(await node(t, url, TEST_SECRET_KEY)), { kind: 'given' });
      assert.equal((await writer.store.db.selectFrom('secret_key_check').selectAll().execute()).length, 1);
    });

    it('stores one check when nodes with the same key start at once', async (t) => {
      const url = await database(t, store.kind);
      const nodes: Deps[] = [];
      for (let i = 0; i < 4; i++) nodes.push(await node(t, url, TEST_SECRET_KEY));
      const outcomes = await Promise.all(nodes.map((n) => establishSecretKey(n)));
      assert.deepEqual(outcomes, Array(4).fill({ kind: 'given' }));
      assert.equal((await nodes[0]?.store.db.selectFrom('secret_key_check').selectAll().execute())?.length, 1);
    });
  });
}

describe('PostgreSQL without DIALTONE_SECRET_KEY', () => {
  it('generates nothing: the node starts with webhooks refused (503 webhooks_not_configured, logged as one warning without a stack)', async (t) => {
    const [postgres] = STORES.filter((c) => c.kind === 'postgres');
    if (postgres?.skip) return t.skip(postgres.skip);
    const url = await database(t, 'postgres');
    const deps = await node(t, url, undefined);
    assert.deepEqual(await establishSecretKey(deps), { kind: 'absent' });
    assert.equal((await deps.store.db.selectFrom('secret_key_check').selectAll().execute()).length, 0);

    const lines: { level: number; msg: string; err?: unknown }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const env = await build(t, 'postgres', { env: { DIALTONE_SECRET_KEY: '' }, logger });
    const f = await createOrgFixture(env.deps);
    const response = await postJson(env.app, '/api/v1/public/webhook-endpoints', { url: 'https://93.184.216.34/hooks' }, { key: f.apiKey });
    assert.equal(response.statusCode, 503);
    assert.equal(problemOf(response).code, 'webhooks_not_configured');
    const logged = lines.filter((l) => /DIALTONE_SECRET_KEY/.test(l.msg));
    assert.equal(logged.length, 1);
    assert.equal(logged[0]?.level, 40, 'warn');
    assert.equal(logged[0]?.err, undefined, 'no stack trace');
    assert.ok(!lines.some((l) => l.level >= 50), 'nothing at error level');
  });
});
