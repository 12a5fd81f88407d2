// `npm start`: serve on the configured store (SQLite and the simulator by default).
import { ConfigError } from './config.js';
import { SecretKeyError } from './secret-key.js';
import { ListenError, main } from './server.js';
import { DatabaseNewerError } from './store/engine/operator-errors.js';

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof ConfigError || error instanceof ListenError || error instanceof SecretKeyError || error instanceof DatabaseNewerError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
