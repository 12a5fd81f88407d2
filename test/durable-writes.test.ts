// Every write a caller is told succeeded is on the disk first (store/engine/durable-commits.ts): on SQLite
// the WAL is flushed before the write's promise resolves, whether the write is a statement on its
// own, a transaction of its own or a durable group commit. Each operation below runs while the
// flush is held: it must start a flush and not be answered until the flush returns. (PostgreSQL
// commits these writes at synchronous_commit on, its default: durable at commit.)
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../src/app.js';
import { createApiKey, revokeApiKey } from '../src/auth/api-keys.js';
import { buildDeps, type Deps } from '../src/deps.js';
import { createOrganization, setCallingHours, setOrganizationLimits } from '../src/orgs/organizations.js';
import { migrateToLatest } from '../src/store/schema/migrate.js';
import { openStore, type Store } from '../src/store/engine/store.js';
import { createTelephonyConfiguration, disableTelephonyConfiguration, setDefaultTelephonyConfiguration, setTelephonyStatus } from '../src/telephony/configurations.js';
import { archiveWorkflow, createWorkflow, publishDraft, saveDraft } from '../src/workflows/workflows.js';
import { testConfig } from './helpers/app.js';
import { CAMPAIGNS } from './helpers/campaigns.js';
import { createOrgFixture, definition, type OrgFixture } from './helpers/fixtures.js';
import { WEBHOOK_TEST_ENV } from './helpers/webhooks.js';

/** The WAL's flush, which the test can hold: while held, every flush begun waits. */
class FlushGate {
  begun = 0;
  private held: Promise<void> | undefined;
  private release: () => void = () => undefined;

  readonly flush = async (handle: FileHandle): Promise<void> => {
    this.begun++;
    await this.held;
    await handle.datasync();
  };

  hold(): void {
    this.held = new Promise((resolve) => (this.release = resolve));
  }

  open(): void {
    this.release();
    this.held = undefined;
  }
}

/** Polls for a condition the thread pool or the store brings about, for up to 10 s. */
async function waitFor(check: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.ok(check(), 'the condition never held');
}

describe('durability of every write a caller is told succeeded (SQLite)', () => {
  const gate = new FlushGate();
  let dir: string;
  let store: Store;
  let deps: Deps;
  let app: FastifyInstance;
  let f: OrgFixture;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'dialtone-durable-'));
    const url = `sqlite:${join(dir, 'dialtone.db')}`;
    store = openStore(url, { flushWal: gate.flush });
    await migrateToLatest(store);
    deps = buildDeps(testConfig(url, WEBHOOK_TEST_ENV), { store, logger: pino({ level: 'silent' }) });
    app = await buildApp(deps);
    await app.ready();
    f = await createOrgFixture(deps);
  });

  after(async () => {
    gate.open();
    await app.close();
    await deps.rateLimits.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Runs the operation with the flush held: it must begin a flush and wait for it before it answers. */
  async function answeredOnlyAfterFlush<T>(operation: () => Promise<T>): Promise<T> {
    gate.hold();
    const before = gate.begun;
    let answered = false;
    const pending = operation().finally(() => (answered = true));
    try {
      await waitFor(() => gate.begun > before || answered);
      assert.equal(answered, false, 'answered before its write was flushed to the disk');
    } finally {
      gate.open();
    }
    return pending;
  }

  const request = (method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, body?: unknown) =>
    app.inject({
      method,
      url: `/api/v1/public${url}`,
      headers: { 'x-api-key': f.apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });

  const ok = async (response: Promise<{ statusCode: number; body: string }>) => {
    const answer = await response;
    assert.ok(answer.statusCode >= 200 && answer.statusCode < 300, `${answer.statusCode} ${answer.body}`);
    return answer;
  };

  it('flushes an organization created, its limits and its calling hours before answering', async () => {
    const org = await answeredOnlyAfterFlush(() => createOrganization(deps.store, 'Durable org', deps.clock.now()));
    await answeredOnlyAfterFlush(() => setOrganizationLimits(deps.store, org.id, { max_queued_runs: 7 }));
    await answeredOnlyAfterFlush(() => setCallingHours(deps.store, org.id, null));
  });

  it('flushes an API key created and an API key revoked before answering', async () => {
    const key = await answeredOnlyAfterFlush(() => createApiKey(deps.store, f.orgId, 'to revoke', deps.clock.now()));
    assert.equal((await answeredOnlyAfterFlush(() => revokeApiKey(deps.store, key.id, deps.clock.now())))?.id, key.id);
  });

  it('flushes a workflow created, a draft saved and published, and a workflow archived before answering', async () => {
    const created = await answeredOnlyAfterFlush(() => createWorkflow(deps.store, { orgId: f.orgId, name: 'Durable agent', definition: definition() }, deps.clock.now()));
    await answeredOnlyAfterFlush(() => saveDraft(deps.store, created.workflow_uuid, definition({ greeting: 'Hi' }), deps.clock.now()));
    await answeredOnlyAfterFlush(() => publishDraft(deps.store, created.workflow_uuid, deps.clock.now()));
    await answeredOnlyAfterFlush(() => archiveWorkflow(deps.store, created.workflow_uuid, deps.clock.now()));
  });

  it('flushes a telephony configuration created, made the default, its status set and disabled before answering', async () => {
    const route = await answeredOnlyAfterFlush(() =>
      createTelephonyConfiguration(deps.store, deps.cipher, { orgId: f.orgId, name: 'Second route', provider: 'simulator', callerIds: ['+12025550101'] }, deps.clock.now()),
    );
    await answeredOnlyAfterFlush(() => setDefaultTelephonyConfiguration(deps.store, route.id, deps.clock.now()));
    await answeredOnlyAfterFlush(() => setTelephonyStatus(deps.store, route.id, 'inactive', deps.clock.now()));
    await answeredOnlyAfterFlush(() => setTelephonyStatus(deps.store, route.id, 'active', deps.clock.now()));
    await answeredOnlyAfterFlush(() => disableTelephonyConfiguration(deps.store, route.id, deps.clock.now()));
    await answeredOnlyAfterFlush(() => setDefaultTelephonyConfiguration(deps.store, f.telephonyId, deps.clock.now()));
  });

  it('flushes a suppression added and removed before answering', async () => {
    await answeredOnlyAfterFlush(() => ok(request('PUT', '/suppressions/+12025550123', { reason: 'asked' })));
    await answeredOnlyAfterFlush(() => ok(request('DELETE', '/suppressions/+12025550123')));
  });

  it('flushes a webhook endpoint created, changed, its secret rotated and removed before answering', async () => {
    const created = (await answeredOnlyAfterFlush(() => ok(request('POST', '/webhook-endpoints', { url: 'http://127.0.0.1:9/hook' })))).body;
    const id = (JSON.parse(created) as { id: number }).id;
    await answeredOnlyAfterFlush(() => ok(request('PATCH', `/webhook-endpoints/${id}`, { description: 'changed' })));
    await answeredOnlyAfterFlush(() => ok(request('POST', `/webhook-endpoints/${id}/rotate-secret`)));
    await answeredOnlyAfterFlush(() => ok(request('DELETE', `/webhook-endpoints/${id}`)));
  });

  it('flushes a campaign created, its contacts added, and each of its moves before answering', async () => {
    const created = (await answeredOnlyAfterFlush(() => ok(request('POST', '/campaigns', { name: 'Durable drive', agent_uuid: f.agentUuid, mode: 'published' })))).body;
    const id = (JSON.parse(created) as { id: number }).id;
    await answeredOnlyAfterFlush(() => ok(request('POST', `/campaigns/${id}/contacts`, [{ phone_number: '+12025550142' }])));
    for (const action of ['start', 'pause', 'resume', 'cancel']) {
      await answeredOnlyAfterFlush(() => ok(app.inject({ method: 'POST', url: `${CAMPAIGNS}/${id}/${action}`, headers: { 'x-api-key': f.apiKey } })));
    }
  });

  it('flushes nothing for a read, a write that changed no row, or a relaxed write', async () => {
    const before = gate.begun;
    await store.db.selectFrom('api_keys').select('id').execute();
    await store.db.updateTable('api_keys').set({ name: 'nobody' }).where('id', '=', -1).execute();
    await store.relaxed((db) => db.updateTable('api_keys').set({ last_used_at: deps.clock.now() }).where('id', '=', f.apiKeyId).execute());
    await store.transaction('relaxed', (trx) => trx.updateTable('api_keys').set({ last_used_at: deps.clock.now() }).where('id', '=', f.apiKeyId).execute());
    assert.equal(gate.begun, before);
    // And the same write, not relaxed, is flushed.
    await answeredOnlyAfterFlush(() => store.db.updateTable('api_keys').set({ last_used_at: deps.clock.now() + 1 }).where('id', '=', f.apiKeyId).execute());
  });
});
