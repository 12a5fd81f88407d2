// Statements built once per shape (store/engine/compiled-statements.ts) run again with each run's own
// values, on both stores, and a shape key that leaves a value out is caught while tests run.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { checkCompiledStatements, executeCompiled } from '../src/store/engine/compiled-statements.js';
import type { Store } from '../src/store/engine/store.js';
import { createTestDatabase, openTestStore, storeCases, type TestDatabase } from './helpers/stores.js';

type ProbeTables = {
  compiled_probe: { id: number; label: string; state: string; score: number | null };
};

for (const { kind, skip } of await storeCases()) {
  describe(`Compiled statements (${kind})`, { skip }, () => {
    let database: TestDatabase;
    let store: Store;
    let db: Kysely<ProbeTables>;

    before(async () => {
      database = await createTestDatabase(kind);
      store = openTestStore(database);
      db = store.db.withTables<ProbeTables>() as unknown as Kysely<ProbeTables>;
      await sql`create table compiled_probe (id integer primary key, label text not null, state text not null, score integer)`.execute(db);
    });
    after(async () => {
      await store.close();
      await database.drop();
    });

    const insertProbe = (values: { id: number; label: string; score: number | null }) =>
      executeCompiled(db, store.dialect, 'compiled-statements-test:insert-probe', values, (p) =>
        db.insertInto('compiled_probe').values({ id: p('id'), label: p('label'), state: 'new', score: p('score') }).returningAll(),
      );

    it('runs a statement built once with each run\'s own values, and keeps the constants of its shape', async () => {
      checkCompiledStatements(false);
      let builds = 0;
      try {
        for (let id = 1; id <= 5; id++) {
          const { rows } = await executeCompiled(db, store.dialect, 'compiled-statements-test:insert-probe-counted', { id, label: `run ${id}`, score: id === 3 ? null : id * 10 }, (p) => {
            builds++;
            return db.insertInto('compiled_probe').values({ id: p('id'), label: p('label'), state: 'new', score: p('score') }).returningAll();
          });
          assert.deepEqual(rows, [{ id, label: `run ${id}`, state: 'new', score: id === 3 ? null : id * 10 }]);
        }
      } finally {
        checkCompiledStatements(true);
      }
      assert.equal(builds, 1, 'built for its template once, then only run');
      const stored = await db.selectFrom('compiled_probe').select(['id', 'label', 'score']).orderBy('id').execute();
      assert.deepEqual(stored, [
        { id: 1, label: 'run 1', score: 10 },
        { id: 2, label: 'run 2', score: 20 },
        { id: 3, label: 'run 3', score: null },
        { id: 4, label: 'run 4', score: 40 },
        { id: 5, label: 'run 5', score: 50 },
      ]);
    });

    it('runs a sql template against the instance it is given, a transaction included', async () => {
      await insertProbe({ id: 10, label: 'ten', score: 1 });
      await insertProbe({ id: 11, label: 'eleven', score: 2 });
      const relabel = (trx: Kysely<ProbeTables>, id: number, label: string) =>
        executeCompiled(trx, store.dialect, 'compiled-statements-test:relabel', { id, label }, (p) => sql`update compiled_probe set label = ${p('label')} where id = ${p('id')}`);
      await assert.rejects(
        db.transaction().execute(async (trx) => {
          await relabel(trx, 10, 'rolled back');
          throw new Error('abandon');
        }),
        /abandon/,
      );
      await db.transaction().execute((trx) => relabel(trx, 11, 'committed'));
      const rows = await db.selectFrom('compiled_probe').select(['id', 'label']).where('id', 'in', [10, 11]).orderBy('id').execute();
      assert.deepEqual(rows, [
        { id: 10, label: 'ten' },
        { id: 11, label: 'committed' },
      ]);
    });

    it('throws, while checking, when a value is neither a parameter nor named by the shape key', async () => {
      await insertProbe({ id: 20, label: 'a', score: 1 });
      await insertProbe({ id: 21, label: 'b', score: 2 });
      // The state is written into the statement as it is on the first run, and the key does not say so.
      const setState = (id: number, state: string) =>
        executeCompiled(db, store.dialect, 'compiled-statements-test:set-state-badly', { id }, (p) => db.updateTable('compiled_probe').set({ state }).where('id', '=', p('id')));
      await setState(20, 'first');
      await assert.rejects(setState(21, 'second'), /compiled statement of shape compiled-statements-test:set-state-badly differs from a fresh build/);
      const row = await db.selectFrom('compiled_probe').select('state').where('id', '=', 21).executeTakeFirstOrThrow();
      assert.equal(row.state, 'new', 'nothing was written with the stale value');
    });

    it('builds a statement with its real values, keeping nothing, when it has no shape', async () => {
      await insertProbe({ id: 30, label: 'x', score: 1 });
      await insertProbe({ id: 31, label: 'y', score: 2 });
      const setStateUncached = (ids: number[], state: string) =>
        executeCompiled(db, store.dialect, undefined, {}, () => db.updateTable('compiled_probe').set({ state }).where('id', 'in', ids));
      await setStateUncached([30], 'one');
      await setStateUncached([30, 31], 'two');
      const rows = await db.selectFrom('compiled_probe').select(['id', 'state']).where('id', 'in', [30, 31]).orderBy('id').execute();
      assert.deepEqual(rows, [
        { id: 30, state: 'two' },
        { id: 31, state: 'two' },
      ]);
    });
  });
}
