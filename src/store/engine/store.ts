// Opens the store named by DATABASE_URL. SQLite (better-sqlite3) is the embedded default;
// PostgreSQL is the store that several nodes share. Everything above this module speaks Kysely
// and never asks which one it has, except through the few helpers below: this file is the one
// place where the two dialects differ.
import { chmodSync, closeSync, existsSync, linkSync, mkdirSync, openSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, PostgresDialect, sql } from './kysely.js';
import type { Transaction } from 'kysely';
import type Pg from 'pg';
import type { Database } from '../schema/schema.js';
import { CoalescingNotifier } from './coalescing-notifier.js';
import { DurableCommits } from './durable-commits.js';
import { GroupCommit } from './group-commit.js';
import { withStatementCache } from './statement-cache.js';
import { BackupRefusedError, BackupUnsupportedError } from './operator-errors.js';
import { namePreparedStatements } from './prepared-statements.js';
import { BACKSTOP_PAGES, CATCH_UP_PAGES, checkpointWorker, WalCheckpointer, type CheckpointThread } from './wal-checkpointer.js';
import { WalIndex } from './wal-index.js';
import { WalSync, type FlushFile } from './wal-sync.js';

/** Most writes one group commit carries: bounds how long it holds the store. */
const GROUP_COMMIT_MAX = 200;
/** SQLite: transactions a caller with many runs at once (`Store.transactionsAtOnce`), sharing a flush. */
const SQLITE_TRANSACTIONS_AT_ONCE = 32;

export type DialectName = 'sqlite' | 'postgres';

/**
 * How hard a commit must hold before it returns.
 * - `durable`: survives power loss (fsync). For promises made to the outside world: a run accepted
 *   with a 200, a claim that allows a dial, a cancel the caller was told about.
 * - `relaxed`: survives a crash of the process, not of the machine. For call-progress updates
 *   (ringing, answered, ended): if the machine dies and one is lost, the run is still never
 *   redialed (its claim was durable) and the reaper ends it.
 */
export type Durability = 'durable' | 'relaxed';

export interface Store {
  readonly db: Kysely<Database>;
  /** Read only inside store/: the rest of src/ asks the members below, named for what differs. */
  readonly dialect: DialectName;
  /**
   * The store lives in this process (SQLite): no other node shares it, so what this node decides
   * alone (a generated secret key, a demo seeded on first run) holds for the whole service.
   */
  readonly embedded: boolean;
  /**
   * Ids drawn from one sequence may become visible out of order (PostgreSQL: concurrent
   * transactions commit in any order), so a reader following ids waits at a gap for a moment
   * before passing it. SQLite's one writer commits them in order.
   */
  readonly idsCommitOutOfOrder: boolean;
  /**
   * How many durable transactions a caller with many to make runs at once: on PostgreSQL half the
   * pool, so the API keeps connections while a wave runs; on SQLite a wave whose writes share one
   * flush in a group commit (group-commit.ts).
   */
  readonly transactionsAtOnce: number;
  transaction<T>(durability: Durability, work: (trx: StoreTransaction) => Promise<T>): Promise<T>;
  /** A relaxed write, committed together with the other relaxed writes of the same moment (group-commit.ts). */
  batched<T>(work: (trx: StoreTransaction) => Promise<T>): Promise<T>;
  /**
   * Statements whose loss in a power cut breaks no promise (a key's last use, a claim no one has
   * been answered about), run on their own: on SQLite their commits are not flushed (they still
   * survive a crash of the process); on PostgreSQL they commit as any statement does. Every other
   * write, in a transaction or not, is durable before its caller is answered (durable-commits.ts).
   */
  relaxed<T>(work: (db: Kysely<Database>) => Promise<T>): Promise<T>;
  /**
   * Cross-process wake-ups: PostgreSQL LISTEN/NOTIFY. `announce`, called after a commit, sends the
   * notification by a statement of its own, coalesced with the other announcements of the moment
   * (coalescing-notifier.ts), never from inside a transaction, whose commit would hold PostgreSQL's
   * notify lock through its flush. SQLite serves one node, whose in-process signals already do
   * this, so there both are no-ops and polling covers anything else.
   */
  announce(channel: string): void;
  listen(channel: string, onNotify: () => void, onError: (error: Error) => void): Promise<() => Promise<void>>;
  /**
   * Resolves once every durable commit made so far is on the disk. A durable transaction's own
   * caller is answered after that already; readers that show committed data to the outside world
   * (a replayed answer, a webhook message, the event stream) wait for it too, since they may read
   * a write before its flush. PostgreSQL makes a commit visible only after its flush: nothing to wait.
   */
  durable(): Promise<void>;
  /**
   * A bulk writer (the suppression import) awaits this between two of its transactions. On SQLite,
   * once the WAL holds CATCH_UP_PAGES frames, it waits for the checkpoint worker to copy it whole,
   * so that the next commit restarts the WAL instead of the service's connection checkpointing on
   * the event loop at the backstop (wal-checkpointer.ts). Otherwise, and on PostgreSQL, at once.
   */
  betweenBulkWrites(): Promise<void>;
  /** Cheap round trip used by readiness checks. */
  ping(): Promise<void>;
  /**
   * SQLite: a consistent copy of the database, taken online (SQLite's backup API) while other
   * connections, the service's included, keep reading and writing; written to `path` only once
   * complete. PostgreSQL: refused (BackupUnsupportedError); its own tools back it up.
   */
  backup(path: string, options?: BackupOptions): Promise<void>;
  /**
   * After an erasure (erasure/): SQLite keeps the pages it overwrote in the write-ahead log until
   * the log is reused, so this copies the log into the database and truncates it (a TRUNCATE
   * checkpoint). It waits for nobody: when another connection (the checkpoint worker, a backup)
   * holds the log, it answers false and the log is left to be overwritten later. PostgreSQL's old
   * row versions are its VACUUM's (docs/operations.md, "Erasure"): true.
   */
  truncateWal(): Promise<boolean>;
  close(): Promise<void>;
}

export interface BackupOptions {
  /** Replace a file already at the path; otherwise the backup refuses (backup_target_exists) and writes nothing. */
  overwrite?: boolean;
}

/**
 * Pages per step of SQLite's backup: all of them. The whole copy then runs in one step, under one
 * read transaction, so it is one snapshot; in WAL mode that blocks no writer. In smaller steps,
 * any write by another connection between two steps restarts the copy, which under a steady load
 * could never finish.
 */
const ALL_PAGES = 0x7fffffff;

function targetExists(target: string): BackupRefusedError {
  return new BackupRefusedError('backup_target_exists', `${target} already exists: nothing was written. Choose another file, or pass --force to replace it.`);
}

async function backupSqlite(sqlite: SqliteDatabase.Database, path: string, options: BackupOptions): Promise<void> {
  const target = resolve(path);
  // Refused before the copy starts (an earlier backup is worth more than a mistyped name); checked
  // again when the copy is put in place, in case a file appeared meanwhile.
  if (!options.overwrite && existsSync(target)) throw targetExists(target);
  // Written beside the target and renamed when complete: a failed backup never leaves a partial
  // file where a good backup is expected.
  const partial = `${target}.partial-${process.pid}`;
  try {
    await sqlite.backup(partial, { progress: () => ALL_PAGES });
    // The copy holds what the database holds (key hashes, encrypted credentials, callees' numbers).
    chmodSync(partial, 0o600);
    if (options.overwrite) renameSync(partial, target);
    else {
      // A hard link fails if the target exists, where a rename would replace it.
      try {
        linkSync(partial, target);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw targetExists(target);
        throw error;
      }
      rmSync(partial, { force: true });
    }
  } catch (error) {
    rmSync(partial, { force: true });
    throw error;
  }
}

export interface StoreOptions {
  poolSize?: number;
  /** SQLite: how the WAL file is flushed for a durable commit (fdatasync); tests observe it. */
  flushWal?: FlushFile;
  /** SQLite: told when a flush or a checkpoint fails, which is fatal (wal-sync.ts, wal-checkpointer.ts); the service exits the process. */
  onFlushFailure?: (error: unknown) => void;
  /** SQLite: told how long each flush of the WAL took, in seconds (wal-sync.ts). */
  onWalFlushed?: (seconds: number) => void;
  /**
   * SQLite: told how long each durable write that committed took, in seconds, from being queued to
   * being on the disk: its wait for a batch, its statements, the commit and the flush that covers it.
   */
  onDurableWrite?: (seconds: number) => void;
  /** SQLite: told when a checkpoint could not run; the next one tries again (wal-checkpointer.ts). */
  onCheckpointTrouble?: (error: Error) => void;
  /** SQLite: the thread that checkpoints the WAL (a worker thread); tests observe or replace it. */
  checkpointThread?: (path: string) => CheckpointThread;
  /** PostgreSQL: prepare the compiled statements on each connection (prepared-statements.ts; default true). */
  preparedStatements?: boolean;
  /** PostgreSQL: told when an announcement (`Store.announce`) could not be sent; listeners' polling covers it. */
  onAnnounceFailure?: (error: unknown) => void;
  /** PostgreSQL: least time between the starts of two notifications of a channel by `announce` (coalescing-notifier.ts; default 5 ms). */
  announceIntervalMs?: number;
}

export function openStore(url: string, options: StoreOptions = {}): Store {
  if (url.startsWith('sqlite:')) return openSqlite(url.slice('sqlite:'.length), options);
  if (/^postgres(ql)?:\/\//.test(url)) return openPostgres(url, options);
  throw new Error(`Unsupported DATABASE_URL scheme: ${url.split(':')[0]}`);
}

function openSqlite(path: string, options: StoreOptions): Store {
  const inMemory = path === ':memory:' || path === '';
  if (!inMemory) {
    // The database holds API key hashes, encrypted credentials and callees' numbers: only the
    // service's own user may read it. A new directory is created 0700 and a new file 0600 before
    // SQLite opens it; SQLite gives its -wal and -shm files the database file's permissions.
    mkdirSync(dirname(resolve(path)), { recursive: true, mode: 0o700 });
    closeSync(openSync(path, 'a', 0o600));
  }
  const sqlite = new SqliteDatabase(inMemory ? ':memory:' : path);
  // WAL lets readers proceed while the dispatcher writes. Every transaction commits with
  // synchronous=NORMAL (durable against process crashes, no fsync on the event loop); a commit that
  // wrote is answered only once the WAL file is flushed on the thread pool (wal-sync.ts), unless
  // its writer relaxed it (durable-commits.ts).
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  // Temporary storage in memory. A group commit runs each write in a savepoint of its own
  // (group-commit.ts), and a savepoint copies into the statement sub-journal the pages it changes
  // that the batch's earlier writes had already changed. Once the tables outgrow their first pages,
  // a batch of created runs journals more than the 64 KiB SQLite keeps in memory, and SQLite then
  // spills the sub-journal to a temporary file, which (unlike an in-memory one) is not emptied when
  // each savepoint is released. Measured with strace on an API node under load: a temporary file
  // opened every few requests (from subjournalPageIfRequired), and 17 pwrite calls per created run
  // against 9 with this setting. test/sqlite-temp-store.test.ts checks that none is opened. The
  // cost: sorts and temporary tables never spill to disk either. The service's reads walk indexes;
  // the one sort that grows with the data is the stats' count of an organization's runs by state
  // since a time (an hour by default): measured on a million runs, its peak was 54 MB above the
  // process's, against 15 MB when it could spill (docs/benchmarks.md, "SQLite temporary storage").
  sqlite.pragma('temp_store = MEMORY');
  // Deleted or overwritten content is overwritten with zeros, in b-tree pages and freed pages
  // alike: a run's row is rewritten at each of its transitions, and without this the earlier copies
  // (with the callee's number) stay in the pages' free space until reused, where an erasure
  // (erasure/) could not reach them (docs/operations.md, "Erasure"). The cost is writing the pages
  // a statement frees, which the service's writes rarely do.
  sqlite.pragma('secure_delete = ON');
  // An in-memory database has no file to make durable.
  const walSync = inMemory ? undefined : new WalSync(`${resolve(path)}-wal`, options.flushWal, options.onFlushFailure, options.onWalFlushed);
  // Checkpoints run on a worker thread (wal-checkpointer.ts); this connection checkpoints only if
  // the WAL outgrows the backstop, which writes it is not told about could make it do.
  let checkpointer: WalCheckpointer | undefined;
  let walIndex: WalIndex | undefined;
  if (!inMemory) {
    sqlite.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
    const thread = options.checkpointThread ?? checkpointWorker;
    walIndex = new WalIndex(`${resolve(path)}-shm`);
    const index = walIndex;
    checkpointer = new WalCheckpointer(() => thread(resolve(path)), () => index.pendingFrames(), options.onFlushFailure, options.onCheckpointTrouble);
  }
  // Every commit that wrote is flushed before its caller is answered, whichever statement or
  // transaction made it, unless its writer relaxed it (durable-commits.ts): the one place that
  // decides durability on SQLite.
  const commits = new DurableCommits(sqlite, {
    committed: () => checkpointer?.committed(),
    committedDurable: () => walSync?.committedOne(),
    flush: walSync ? () => walSync.sync() : undefined,
  });
  const db = new Kysely<Database>({ dialect: commits.dialect({ database: commits.watch(withStatementCache(sqlite)) }) });
  const transaction: Store['transaction'] = (durability, work) =>
    db.transaction().execute(
      durability === 'durable'
        ? (trx) => work(storeTransaction(trx, 'sqlite'))
        : (trx) => {
            commits.relaxCurrent();
            return work(storeTransaction(trx, 'sqlite'));
          },
    );
  const group = new GroupCommit<StoreTransaction>((work) => transaction('relaxed', work), GROUP_COMMIT_MAX, 1);
  // Durable transactions of the same moment share one fsync (group-commit.ts): on one connection
  // the fsync is what a durable write waits for, so each one alone would cap the node at one
  // accepted call per fsync.
  // Two batches at once: while one waits for its flush (off the event loop), the next runs its
  // statements, so the connection is not idle during the flush; its own flush follows.
  const durableGroup = new GroupCommit<StoreTransaction>((work) => transaction('durable', work), GROUP_COMMIT_MAX, 2, 'savepoint');
  // Timed around the group commit: what a durable write waits for is its turn for a batch as much
  // as its flush, and neither the flush's own timing nor a request's latency tells the two apart.
  const { onDurableWrite } = options;
  const timedDurable = <T>(work: (trx: StoreTransaction) => Promise<T>): Promise<T> => {
    if (!onDurableWrite) return durableGroup.run(work);
    const queuedAt = performance.now();
    return durableGroup.run(work).then((result) => {
      onDurableWrite((performance.now() - queuedAt) / 1000);
      return result;
    });
  };
  return {
    db,
    dialect: 'sqlite',
    embedded: true,
    idsCommitOutOfOrder: false,
    transactionsAtOnce: SQLITE_TRANSACTIONS_AT_ONCE,
    transaction: (durability, work) => (durability === 'durable' ? timedDurable(work) : transaction(durability, work)),
    batched: (work) => group.run(work),
    relaxed: (work) =>
      db.connection().execute((connection) => {
        commits.relaxCurrent();
        return work(connection);
      }),
    announce: () => undefined,
    listen: async () => async () => undefined,
    async ping() {
      sqlite.prepare('select 1').get();
    },
    backup: (path, backupOptions = {}) => backupSqlite(sqlite, path, backupOptions),
    truncateWal: async () => {
      if (inMemory) return true;
      // Through Kysely's connection, whose mutex waits for any transaction on it to end.
      return db.connection().execute(async (connection) => {
        const { rows: timeout } = await sql<{ timeout: number }>`pragma busy_timeout`.execute(connection);
        await sql`pragma busy_timeout = 0`.execute(connection);
        try {
          const { rows } = await sql<{ busy: number; log: number; checkpointed: number }>`pragma wal_checkpoint(TRUNCATE)`.execute(connection);
          return rows[0]?.busy === 0;
        } finally {
          await sql.raw(`pragma busy_timeout = ${Number(timeout[0]?.timeout ?? 5000)}`).execute(connection);
        }
      });
    },
    durable: () => walSync?.durable() ?? Promise.resolve(),
    betweenBulkWrites: async () => {
      if (checkpointer && walIndex && walIndex.frames() >= CATCH_UP_PAGES) await checkpointer.catchUp();
    },
    close: async () => {
      await checkpointer?.close();
      walIndex?.close();
      walSync?.beginClose();
      await db.destroy();
      await walSync?.finishClose();
    },
  };
}

const PG_INT8 = 20;
const PG_NUMERIC = 1700;

function openPostgres(url: string, options: StoreOptions): Store {
  const { poolSize = 10, preparedStatements = true, onAnnounceFailure = () => undefined, announceIntervalMs = 5 } = options;
  // Required here, not imported: a node on SQLite never loads the PostgreSQL driver. It is
  // CommonJS, so this is the very module `import pg from 'pg'` would give.
  const pg = createRequire(import.meta.url)('pg') as typeof Pg;
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    // BIGINT carries ids and epoch-millisecond times, all far below 2^53: read them as numbers.
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === PG_INT8 || oid === PG_NUMERIC
          ? (value: string) => Number(value)
          : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    },
  });
  // An idle pooled connection can be closed by the server (restart, failover, admin). The pool
  // drops it and opens another on demand; without a listener the 'error' event would kill the process.
  pool.on('error', () => undefined);
  if (preparedStatements) pool.on('connect', (client) => namePreparedStatements(client));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const transaction: Store['transaction'] = (durability, work) =>
    db.transaction().execute(async (trx) => {
      // PostgreSQL's own switch for the same trade: the commit returns before its WAL is flushed.
      if (durability === 'relaxed') await sql`set local synchronous_commit = off`.execute(trx);
      return work(storeTransaction(trx, 'postgres'));
    });
  const group = new GroupCommit<StoreTransaction>((work) => transaction('relaxed', work), GROUP_COMMIT_MAX, Math.max(1, Math.floor(poolSize / 2)));
  const announcements = new CoalescingNotifier(async (channel) => {
    await pool.query("select pg_notify($1, '')", [channel]);
  }, onAnnounceFailure, announceIntervalMs);
  return {
    db,
    dialect: 'postgres',
    embedded: false,
    idsCommitOutOfOrder: true,
    transactionsAtOnce: Math.max(1, Math.floor(poolSize / 2)),
    transaction,
    batched: (work) => group.run(work),
    // Committed as every statement is; losing one would break nothing, winning nothing by relaxing one statement.
    relaxed: (work) => work(db),
    announce: (channel) => announcements.announce(channel),
    async listen(channel, onNotify, onError) {
      // A dedicated connection: a pooled one would be handed to other queries between notifications.
      const client = new pg.Client({ connectionString: url });
      client.on('notification', (message) => {
        if (message.channel === channel) onNotify();
      });
      client.on('error', onError);
      await client.connect();
      await client.query(`listen ${client.escapeIdentifier(channel)}`);
      return async () => {
        await client.end().catch(() => undefined);
      };
    },
    durable: () => Promise.resolve(),
    betweenBulkWrites: () => Promise.resolve(),
    async ping() {
      await pool.query('select 1');
    },
    backup: () => Promise.reject(new BackupUnsupportedError()),
    truncateWal: () => Promise.resolve(true),
    close: async () => {
      await announcements.close();
      await db.destroy();
    },
  };
}

/**
 * A transaction of this store, as code outside store/ holds it: only to hand to the store's
 * statements. It is Kysely's own transaction (store/ builds on it directly) carrying its store's
 * dialect, set when the store opens it (`storeTransaction`), so a statement handed it needs nothing else.
 */
export type StoreTransaction = Transaction<Database> & { readonly dialect: DialectName };

/**
 * Where a statement runs, the one way every statement in store/statements/ takes it (its first
 * parameter, `on`): the store (each statement its own implicit transaction) or one of its
 * transactions. Both carry their dialect. A statement that needs a transaction of its own opens
 * one on the store, and joins the one it is handed (`atomically`).
 */
export type Connection = Store | StoreTransaction;

/** Marks Kysely's transaction as one of this store's (see StoreTransaction). */
export function storeTransaction(trx: Transaction<Database>, dialect: DialectName): StoreTransaction {
  return Object.assign(trx, { dialect });
}

/** True when the connection is one of the store's transactions rather than the store. */
export function inTransaction(on: Connection): on is StoreTransaction {
  return on instanceof Kysely;
}

/** The Kysely instance a statement is built on. */
export function queryable(on: Connection): Kysely<Database> {
  return inTransaction(on) ? on : on.db;
}

/**
 * Runs `work` in a transaction: the one the statement was handed, or else a new one of the store
 * with the given durability (`Store.transaction`).
 */
export function atomically<T>(on: Connection, durability: Durability, work: (trx: StoreTransaction) => Promise<T>): Promise<T> {
  return inTransaction(on) ? work(on) : on.transaction(durability, work);
}

/** A statement whose loss breaks no promise (`Store.relaxed`), or part of the transaction it is handed. */
export function relaxed<T>(on: Connection, work: (db: Kysely<Database>) => Promise<T>): Promise<T> {
  return inTransaction(on) ? work(on) : on.relaxed(work);
}

/** A relaxed write in the store's group commit (`Store.batched`), or part of the transaction it is handed. */
export function batched<T>(on: Connection, work: (trx: StoreTransaction) => Promise<T>): Promise<T> {
  return inTransaction(on) ? work(on) : on.batched(work);
}

/**
 * A transaction of its own, outside the group commits: durable as every write is (PostgreSQL
 * synchronous_commit on; SQLite flushed before it resolves, durable-commits.ts). For the
 * administration writes (workflows, telephony configurations), which are few and need no batching.
 * Handed a transaction, runs in it.
 */
export function plainTransaction<T>(on: Connection, work: (trx: StoreTransaction) => Promise<T>): Promise<T> {
  if (inTransaction(on)) return work(on);
  const { dialect } = on;
  return on.db.transaction().execute((trx) => work(storeTransaction(trx, dialect)));
}

/** Reads a JSON column: SQLite hands back the stored text, PostgreSQL (JSONB) the parsed value. */
export function decodeJson<T>(value: unknown): T {
  return (typeof value === 'string' ? JSON.parse(value) : value) as T;
}

/** True when an error is a unique-constraint violation, in either store. */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

const PG_UNAVAILABLE_CODES = new Set(['57P01', '57P02', '57P03', '53300', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND']);

/**
 * True when an error means the store cannot be reached or used right now (as opposed to a bug or
 * bad data): the caller should answer 503 and the client retry later.
 */
export function isStoreUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string') {
    if (PG_UNAVAILABLE_CODES.has(code) || code.startsWith('08')) return true;
    if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || code.startsWith('SQLITE_IOERR') || code === 'SQLITE_FULL') return true;
  }
  const text = typeof message === 'string' ? message : '';
  return /driver has already been destroyed|database connection is not open|Connection terminated|timeout exceeded when trying to connect|Cannot use a pool after calling end/i.test(text);
}
