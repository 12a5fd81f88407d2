// The SQLite store prepares each statement text once, and bounds how many it keeps.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { withStatementCache } from '../src/store/engine/statement-cache.js';

function countingDatabase() {
  const sqlite = new SqliteDatabase(':memory:');
  let prepared = 0;
  const prepare = sqlite.prepare.bind(sqlite);
  sqlite.prepare = ((text: string) => {
    prepared++;
    return prepare(text);
  }) as typeof sqlite.prepare;
  return { sqlite, prepared: () => prepared };
}

describe('SQLite statement cache', () => {
  it('prepares a statement text once however often Kysely runs it, with each run\'s own parameters', async () => {
    const { sqlite, prepared } = countingDatabase();
    const db = new Kysely<{ t: { id: number; v: string } }>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
    await sql`create table t (id integer primary key, v text)`.execute(db);
    const before = prepared();
    for (let i = 1; i <= 50; i++) await db.insertInto('t').values({ id: i, v: `v${i}` }).execute();
    for (let i = 1; i <= 50; i++) assert.equal((await db.selectFrom('t').select('v').where('id', '=', i).executeTakeFirstOrThrow()).v, `v${i}`);
    assert.equal(prepared() - before, 2, 'one insert text and one select text');
    await db.destroy();
  });

  it('keeps at most its capacity, evicting the least recently used text', () => {
    const { sqlite, prepared } = countingDatabase();
    const cache = withStatementCache(sqlite, 2);
    cache.prepare('select 1');
    cache.prepare('select 2');
    cache.prepare('select 1'); // now the most recently used
    cache.prepare('select 3'); // evicts "select 2"
    assert.equal(prepared(), 3);
    cache.prepare('select 1');
    cache.prepare('select 3');
    assert.equal(prepared(), 3, 'both still cached');
    cache.prepare('select 2');
    assert.equal(prepared(), 4, 'evicted, so prepared again');
    cache.close();
  });
});
