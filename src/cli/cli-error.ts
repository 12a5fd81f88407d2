// The CLI's own refusals, apart from errors.ts (which reports every failure and imports the
// service's error types): the command groups throw these, and loading them costs nothing.

/** A refusal the CLI itself decides (a missing row, an unreadable file), with a stable code. */
export class CliError extends Error {
  constructor(
    readonly code: 'not_found' | 'invalid_input' | 'invalid_state' | 'direct_mode_only' | 'service_unreachable',
    message: string,
  ) {
    super(message);
    this.name = 'CliError';
  }
}
