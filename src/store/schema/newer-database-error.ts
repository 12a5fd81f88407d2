// Its own file, light to import: the CLI's failure report and `main.ts` name this error without
// loading the migrations.

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
