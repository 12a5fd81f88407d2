// The store's refusals that an operator fixes, in a file of their own, light to import: the CLI's
// failure report and `main.ts` name them without loading the migrations or the store.
import { closeSync, openSync, readSync } from 'node:fs';

/**
 * The database has migrations applied that this version does not know: a newer version wrote it.
 * Migrations are forward-only, so this version's statements may not match its schema; refusing to
 * start is the only safe answer (docs/operations.md, "Upgrades").
 */
export class DatabaseNewerError extends Error {
  readonly code = 'database_newer';
  constructor(readonly unknown: string[]) {
    super(
      `The database has migrations this version of Dialtone does not know (${unknown.join(', ')}): a newer version has upgraded it. Run that version (or newer), or restore a backup taken before the upgrade; migrations are never undone.`,
    );
    this.name = 'DatabaseNewerError';
  }
}

/** `Store.backup` on PostgreSQL: pg_dump and its kin do it, consistently and with the server's help. */
export class BackupUnsupportedError extends Error {
  readonly code = 'backup_unsupported';
  constructor() {
    super('Backups of a PostgreSQL store are taken with PostgreSQL\'s own tools (pg_dump, or a base backup with WAL archiving): see docs/operations.md, "Backups".');
    this.name = 'BackupUnsupportedError';
  }
}

/** Why `dialtone backup` refused before copying anything. */
export type BackupRefusal = 'backup_target_exists' | 'backup_source_missing' | 'backup_source_not_sqlite';

/** `Store.backup` and `dialtone backup` refused: the target would be overwritten, or the source is no SQLite database. */
export class BackupRefusedError extends Error {
  constructor(
    readonly code: BackupRefusal,
    message: string,
  ) {
    super(message);
    this.name = 'BackupRefusedError';
  }
}

/** The first 16 bytes of every SQLite database file (https://www.sqlite.org/fileformat.html, 1.3.1). */
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * Refuses a backup whose source is not an existing SQLite database, before the store is opened:
 * opening it would create an empty database where the operator expected theirs (a mistyped
 * DATABASE_URL), and the copy of that would look like a backup. PostgreSQL URLs pass (the store
 * refuses them itself, pointing at pg_dump). Here rather than in store.ts so that the CLI checks it
 * without loading the store.
 */
export function assertBackupSource(databaseUrl: string): void {
  if (!databaseUrl.startsWith('sqlite:')) return;
  const path = databaseUrl.slice('sqlite:'.length);
  if (path === '' || path === ':memory:') throw new BackupRefusedError('backup_source_missing', 'DATABASE_URL names an in-memory SQLite database: there is no file to back up.');
  let header: Buffer;
  try {
    const fd = openSync(path, 'r');
    try {
      header = Buffer.alloc(SQLITE_HEADER.length);
      header = header.subarray(0, readSync(fd, header, 0, header.length, 0));
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new BackupRefusedError('backup_source_missing', `There is no database at ${path} (DATABASE_URL): nothing to back up. Set DATABASE_URL to the service's database.`);
    throw new BackupRefusedError('backup_source_missing', `Cannot read the database at ${path} (DATABASE_URL): ${(error as Error).message}`);
  }
  if (!header.equals(SQLITE_HEADER)) throw new BackupRefusedError('backup_source_not_sqlite', `${path} (DATABASE_URL) is not a SQLite database${header.length === 0 ? ' (it is empty)' : ''}: nothing was backed up.`);
}
