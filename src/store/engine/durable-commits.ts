// Every SQLite commit that wrote something is durable before its caller hears of it, unless the
// writer said it may be lost in a power cut (a relaxed transaction, `Store.relaxed`).
//
// The connection commits at synchronous=NORMAL (store.ts says why): a commit is in the WAL file but
// not yet on the disk. Durability used to be asked for per call, by `Store.transaction('durable')`,
// and every write that did not ask (a key revoked, a workflow published, a route changed, an
// organization's limits...) was answered at NORMAL, so a power loss could undo a revocation the
// operator had been told about. Here it is decided once, for every statement, where Kysely runs
// them on the one connection: a commit of a transaction that wrote, or a write outside a
// transaction (its own implicit commit), owes a flush of the WAL (wal-sync.ts), and the connection's
// user is answered only once that flush returns. The flush waits after the connection is handed
// back, so the next writer runs its statements while the disk flushes, as the durable group commit
// always did (group-commit.ts).
//
// Whether a statement writes is SQLite's own answer (sqlite3_stmt_readonly, better-sqlite3's
// `readonly`) and whether it changed a row is its result's, so a write added tomorrow, in any
// file, is covered without being listed anywhere.
// Kysely has no hook around a commit, and better-sqlite3 no asynchronous one, so this wraps
// Kysely's SQLite driver: a few lines of delegation.
import type { Database as BetterSqlite } from 'better-sqlite3';
import type { CompiledQuery, DatabaseConnection, Dialect, Driver, QueryResult, SqliteDatabase, SqliteDialectConfig, TransactionSettings } from 'kysely';
import { SqliteDialect } from './kysely.js';

export interface CommitHooks {
  /** A commit that wrote (durable or relaxed): the checkpointer may have work. */
  committed(): void;
  /** A commit that must reach the disk before its caller is answered: counted at once (for `Store.durable`), then flushed. */
  committedDurable(): void;
  /** Resolves once every WAL frame written so far is on the disk (wal-sync.ts); undefined: nothing to flush (in memory). */
  flush: (() => Promise<void>) | undefined;
}

/** Watches what the connection runs and owes its user a flush after each commit that wrote. */
export class DurableCommits {
  /** Whether the statement about to run is read-only (BEGIN, COMMIT, SAVEPOINT and reads are). */
  private preparedReadonly = true;
  /** A statement changed a row since the last commit point. */
  private wrote = false;
  /** The connection's current user said its writes may be lost in a power cut. */
  private relaxed = false;
  /** A durable commit happened during the current use of the connection: flush before answering. */
  private owed = false;

  constructor(
    private readonly sqlite: BetterSqlite,
    private readonly hooks: CommitHooks,
  ) {}

  /** The database Kysely's driver prepares its statements on, with each statement's kind noted. */
  watch(database: SqliteDatabase): SqliteDatabase {
    return {
      close: () => database.close(),
      prepare: (sql) => {
        const statement = database.prepare(sql) as ReturnType<SqliteDatabase['prepare']> & { readonly?: boolean };
        // Kysely's driver prepares each statement right before it runs it, one at a time.
        this.preparedReadonly = statement.readonly === true;
        return statement;
      },
    };
  }

  /** Kysely's SQLite dialect whose driver flushes as this says. */
  dialect(config: SqliteDialectConfig): Dialect {
    const commits = this;
    return new (class extends SqliteDialect {
      override createDriver(): Driver {
        return commits.driver(super.createDriver());
      }
    })(config);
  }

  /**
   * The writes of the connection's current user (inside a transaction, or `Kysely.connection()`)
   * may be lost in a power cut: they commit at NORMAL, without a flush of their own.
   */
  relaxCurrent(): void {
    this.relaxed = true;
  }

  private driver(inner: Driver): Driver {
    let wrapped: { inner: DatabaseConnection; outer: DatabaseConnection } | undefined;
    return {
      init: () => inner.init(),
      acquireConnection: async () => {
        const connection = await inner.acquireConnection();
        // SQLite has one connection: wrapped once, handed out each time.
        if (wrapped?.inner !== connection) wrapped = { inner: connection, outer: this.connection(connection) };
        return wrapped.outer;
      },
      beginTransaction: (connection, settings: TransactionSettings) => inner.beginTransaction(connection, settings),
      commitTransaction: (connection) => inner.commitTransaction(connection),
      rollbackTransaction: async (connection) => {
        // Nothing the transaction wrote remains: no commit to flush.
        this.wrote = false;
        await inner.rollbackTransaction(connection);
      },
      ...(inner.savepoint ? { savepoint: inner.savepoint.bind(inner) } : {}),
      ...(inner.rollbackToSavepoint ? { rollbackToSavepoint: inner.rollbackToSavepoint.bind(inner) } : {}),
      ...(inner.releaseSavepoint ? { releaseSavepoint: inner.releaseSavepoint.bind(inner) } : {}),
      releaseConnection: async (connection) => {
        const owed = this.owed;
        this.owed = false;
        this.relaxed = false;
        // Handed back first: the next user runs while this one's flush waits on the disk.
        await inner.releaseConnection(connection);
        if (owed && this.hooks.flush) await this.hooks.flush();
      },
      destroy: () => inner.destroy(),
    };
  }

  private connection(inner: DatabaseConnection): DatabaseConnection {
    return {
      executeQuery: async <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
        try {
          const result = await inner.executeQuery<R>(query);
          // A write that changed nothing (an update no row matched, an insert that met its
          // conflict) owes no flush: the scheduler's and dispatcher's idle ticks stay off the disk.
          if (!this.preparedReadonly && (result.rows.length > 0 || Number(result.numAffectedRows ?? 0) > 0)) this.wrote = true;
          return result;
        } finally {
          // Out of any transaction after a statement that wrote: it was committed, by COMMIT or
          // as a statement on its own.
          if (this.wrote && !this.sqlite.inTransaction) this.commitPoint();
        }
      },
      streamQuery: <R>(query: CompiledQuery, chunkSize?: number) => inner.streamQuery<R>(query, chunkSize),
    };
  }

  private commitPoint(): void {
    this.wrote = false;
    this.hooks.committed();
    if (this.relaxed) return;
    this.owed = true;
    this.hooks.committedDurable();
  }
}
