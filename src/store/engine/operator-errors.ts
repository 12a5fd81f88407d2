// The store's refusals that an operator fixes, in a file of their own, light to import: the CLI's
// failure report and `main.ts` name them without loading the migrations or the store.

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
