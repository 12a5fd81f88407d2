// SQLite's temporary storage (store.ts, temp_store): the savepoints of a group commit of created
// runs keep their sub-journal in memory instead of spilling it to a temporary file.
import assert from 'node:assert/strict';
import { readdirSync, readlinkSync } from 'node:fs';
import { describe, it } from 'node:test';
import pino from 'pino';
import { buildDeps } from '../src/deps.js';
import { createRun } from '../src/runs/create-run.js';
import { migrateToLatest } from '../src/store/schema/migrate.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { testConfig } from './helpers/app.js';
import { createOrgFixture } from './helpers/fixtures.js';
import { createTestDatabase, openTestStore } from './helpers/stores.js';

/** Files this process holds open that were deleted once opened: how SQLite keeps its temporary files (Linux). */
function openDeletedSqliteTempFiles(): string[] {
  const open: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target.includes('etilqs_') && target.endsWith('(deleted)')) open.push(target);
    } catch {
      // Closed between the listing and the reading.
    }
  }
  return open;
}

describe('SQLite temporary storage', { skip: process.platform !== 'linux' && 'reads /proc/self/fd' }, () => {
  it('commits a batch of created runs without writing a temporary file for its savepoints', async (t) => {
    const database = await createTestDatabase('sqlite');
    const store = openTestStore(database);
    t.after(async () => {
      await store.close();
      await database.drop();
    });
    const deps = buildDeps(testConfig(database.url), { store, logger: pino({ level: 'silent' }) });
    await migrateToLatest(store);
    const fixture = await createOrgFixture(deps);
    const route = await createTelephonyConfiguration(store, deps.cipher, { orgId: fixture.orgId, name: 'Route', provider: 'simulator' }, Date.now());
    const definition = await store.db.selectFrom('workflow_definitions').select(['id', 'workflow_id', 'version']).executeTakeFirstOrThrow();
    const newRun = (i: number) =>
      createRun(
        store,
        {
          orgId: fixture.orgId,
          workflowId: definition.workflow_id,
          definitionId: definition.id,
          definitionVersion: definition.version,
          mode: 'published',
          triggerUuid: null,
          phoneNumber: `+1202555${String(1000 + i)}`,
          callerId: null,
          telephonyConfigurationId: route.id,
          initialContextJson: null,
          scheduledFor: null,
        },
        Date.now(),
        { checks: { guards: { suppressedAt: Date.now() }, refusal: () => new Error('suppressed') } },
      );
    // A thousand runs first: on tables that small every index is one page, and a batch changes too
    // few pages to spill (without the setting this test passes on empty tables and fails here).
    for (let i = 0; i < 1_000; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => newRun(i + j)));
    // Writes queued in one turn share a transaction, each in its savepoint; the last one looks,
    // while that transaction is still open, for a temporary file SQLite would have spilled to.
    let seenInTransaction: string[] | undefined;
    const runs = Array.from({ length: 50 }, (_, i) => newRun(1_000 + i));
    const look = store.transaction('durable', async () => {
      seenInTransaction = openDeletedSqliteTempFiles();
    });
    const created = await Promise.all(runs);
    await look;
    assert.equal(new Set(created.map((run) => run.id)).size, runs.length);
    assert.deepEqual(seenInTransaction, [], 'no temporary file was open inside the batch');
  });
});
