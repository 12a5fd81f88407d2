// Group commit (store/engine/group-commit.ts): the writes of one moment share a transaction, and with
// savepoint isolation a write that refuses undoes only itself.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, SqliteDialect, sql, type Generated, type Transaction } from 'kysely';
import { GroupCommit, type Isolation } from '../src/store/engine/group-commit.js';
import type { Database } from '../src/store/schema/schema.js';

interface Notes {
  notes: { id: Generated<number>; text: string };
}

/** A group over a real SQLite table, counting the transactions it opens. */
async function groupOverSqlite(isolation: Isolation) {
  const db = new Kysely<Notes>({ dialect: new SqliteDialect({ database: new SqliteDatabase(':memory:') }) });
  await sql`create table notes (id integer primary key, text text not null unique)`.execute(db);
  let transactions = 0;
  const group = new GroupCommit(
    (work) => {
      transactions++;
      return db.transaction().execute((trx) => work(trx as unknown as Transaction<Database>));
    },
    200,
    1,
    isolation,
  );
  const insert = (text: string) => (trx: Transaction<Database>) => (trx as unknown as Transaction<Notes>).insertInto('notes').values({ text }).execute();
  const texts = async () => (await db.selectFrom('notes').select('text').orderBy('id').execute()).map((r) => r.text);
  return { db, group, insert, texts, transactions: () => transactions };
}

class Refused extends Error {}

describe('Group commit with savepoint isolation (durable writes on SQLite)', () => {
  it('commits the writes of one moment in a single transaction, in the order they came', async () => {
    const { db, group, insert, texts, transactions } = await groupOverSqlite('savepoint');
    await Promise.all(['a', 'b', 'c', 'd'].map((text) => group.run(insert(text))));
    assert.deepEqual(await texts(), ['a', 'b', 'c', 'd']);
    assert.equal(transactions(), 1);
    await db.destroy();
  });

  it('rolls back only the write that refused, rejects its caller with its own error, and commits the others', async () => {
    const { db, group, insert, texts, transactions } = await groupOverSqlite('savepoint');
    const refusing = async (trx: Transaction<Database>) => {
      await insert('written then undone')(trx);
      throw new Refused('over the cap');
    };
    const results = await Promise.allSettled([group.run(insert('a')), group.run(refusing), group.run(insert('b'))]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.ok((results[1] as PromiseRejectedResult).reason instanceof Refused);
    assert.deepEqual(await texts(), ['a', 'b']);
    assert.equal(transactions(), 1, 'the refusal did not cost the others a transaction of their own');
    await db.destroy();
  });

  it('never runs a write twice: a write that fails on a constraint is undone alone, the next one still sees what came before it', async () => {
    const { db, group, insert, texts } = await groupOverSqlite('savepoint');
    let runs = 0;
    const counted = async (trx: Transaction<Database>) => {
      runs++;
      await insert('a')(trx);
    };
    const results = await Promise.allSettled([group.run(insert('a')), group.run(counted), group.run(insert('c'))]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.equal(runs, 1);
    assert.deepEqual(await texts(), ['a', 'c']);
    await db.destroy();
  });

  it('answers no caller before the shared transaction has committed, and fails every caller when it cannot commit', async () => {
    const db = new Kysely<Notes>({ dialect: new SqliteDialect({ database: new SqliteDatabase(':memory:') }) });
    await sql`create table notes (id integer primary key, text text not null unique)`.execute(db);
    const committed: string[] = [];
    const failing = new GroupCommit(
      async (work) => {
        await db.transaction().execute((trx) => work(trx as unknown as Transaction<Database>));
        throw new Error('commit failed');
      },
      200,
      1,
      'savepoint',
    );
    const write = (text: string) => async (trx: Transaction<Database>) => {
      await (trx as unknown as Transaction<Notes>).insertInto('notes').values({ text }).execute();
      committed.push(text);
    };
    const results = await Promise.allSettled([failing.run(write('a')), failing.run(write('b'))]);
    assert.deepEqual(results.map((r) => r.status), ['rejected', 'rejected']);
    assert.deepEqual(committed, ['a', 'b'], 'each write ran once, and neither was answered as committed');
    await db.destroy();
  });
});

describe('Group commit with retry-alone isolation (relaxed writes)', () => {
  it('retries each write of a failed batch alone, so a bad write takes none of the others down', async () => {
    const { db, group, insert, texts } = await groupOverSqlite('retry-alone');
    const results = await Promise.allSettled([group.run(insert('a')), group.run(insert('a')), group.run(insert('b'))]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.deepEqual(await texts(), ['a', 'b']);
    await db.destroy();
  });
});
