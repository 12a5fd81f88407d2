// PostgreSQL: the compiled statements are prepared once per connection (store/engine/prepared-statements.ts)
// and run with each run's own values; with DATABASE_PREPARED_STATEMENTS=false nothing is prepared.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { executeCompiled } from '../src/store/engine/compiled-statements.js';
import { namePreparedStatements, prepareOnPostgres, preparedStatementName } from '../src/store/engine/prepared-statements.js';
import { openStore, type Store } from '../src/store/engine/store.js';
import { createTestDatabase, storeCases, type TestDatabase } from './helpers/stores.js';

type ProbeTables = { prepared_probe: { id: number; label: string } };

describe('Prepared statements', () => {
  it('sends a registered text with its values as a named statement, and everything else as it came', () => {
    const sent: unknown[][] = [];
    const client = { query: (...args: unknown[]) => sent.push(args) };
    namePreparedStatements(client);
    prepareOnPostgres('select $1::int as n');
    client.query('select $1::int as n', [1]);
    client.query('select $1::int as other', [2]);
    client.query('select 1');
    client.query({ text: 'select $1::int as n', values: [3] });
    assert.deepEqual(sent, [
      [{ name: preparedStatementName('select $1::int as n'), text: 'select $1::int as n', values: [1] }],
      ['select $1::int as other', [2]],
      ['select 1'],
      [{ text: 'select $1::int as n', values: [3] }],
    ]);
    assert.match(preparedStatementName('select $1::int as n') ?? '', /^dialtone_[0-9a-f]{32}$/);
  });

  it('never names a text that selects or returns every column (*), whose result a later migration may change; count(*) is named', () => {
    for (const text of ['insert into probe (a) values ($1) returning *', 'select * from probe where id = $1', 'select "p".* from probe as "p"']) {
      prepareOnPostgres(text);
      assert.equal(preparedStatementName(text), undefined, text);
    }
    prepareOnPostgres('select count(*) as n from probe where id = $1');
    assert.notEqual(preparedStatementName('select count(*) as n from probe where id = $1'), undefined);
  });
});

const postgres = (await storeCases()).find((c) => c.kind === 'postgres');

describe('Prepared statements on PostgreSQL', { skip: postgres?.skip ?? 'no PostgreSQL case' }, () => {
  let database: TestDatabase;
  const stores: Store[] = [];
  const open = (preparedStatements: boolean) => {
    // One connection, so what the next statement sees of the session is what the insert left there.
    const store = openStore(database.url, { poolSize: 1, preparedStatements });
    stores.push(store);
    return store;
  };
  const insertProbe = (store: Store, values: { id: number; label: string }) => {
    const db = store.db.withTables<ProbeTables>() as unknown as Kysely<ProbeTables>;
    return executeCompiled(db, 'postgres', 'prepared-statements-test:insert-probe', values, (p) =>
      db.insertInto('prepared_probe').values({ id: p('id'), label: p('label') }).returning(['id', 'label']),
    );
  };
  const preparedOnSession = async (store: Store) =>
    (await sql<{ name: string; statement: string }>`select name, statement from pg_prepared_statements`.execute(store.db)).rows;

  before(async () => {
    database = await createTestDatabase('postgres');
    const setup = open(false);
    await sql`create table prepared_probe (id integer primary key, label text not null)`.execute(setup.db);
  });
  after(async () => {
    for (const store of stores) await store.close();
    await database.drop();
  });

  it('prepares a compiled statement once on the connection and runs it again with each run\'s own values', async () => {
    const store = open(true);
    for (let id = 1; id <= 4; id++) assert.deepEqual((await insertProbe(store, { id, label: `probe ${id}` })).rows, [{ id, label: `probe ${id}` }]);
    const prepared = await preparedOnSession(store);
    assert.equal(prepared.length, 1, JSON.stringify(prepared));
    assert.match(prepared[0]?.statement ?? '', /insert into "prepared_probe"/);
    const rows = await sql<{ id: number; label: string }>`select id, label from prepared_probe where id <= 4 order by id`.execute(store.db);
    assert.deepEqual(rows.rows.map((r) => r.label), ['probe 1', 'probe 2', 'probe 3', 'probe 4']);
  });

  it('prepares nothing with prepared statements turned off, and runs the same statement all the same', async () => {
    const store = open(false);
    assert.deepEqual((await insertProbe(store, { id: 10, label: 'unprepared' })).rows, [{ id: 10, label: 'unprepared' }]);
    assert.deepEqual(await preparedOnSession(store), []);
  });
});
