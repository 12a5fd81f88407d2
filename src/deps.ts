// The one dependencies object: built once at start-up, passed explicitly to the HTTP app, the
// dispatcher and the CLI. Tests build it with their own store, clock and logger.
import pino, { type Logger } from 'pino';
import type { Config } from './config.js';
import { openStore, type Store } from './store/store.js';
import { CredentialsCipher } from './telephony/credentials-cipher.js';

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export interface Deps {
  config: Config;
  store: Store;
  clock: Clock;
  logger: Logger;
  cipher: CredentialsCipher;
}

export interface DepsOverrides {
  store?: Store;
  clock?: Clock;
  logger?: Logger;
}

export function buildDeps(config: Config, overrides: DepsOverrides = {}): Deps {
  return {
    config,
    store: overrides.store ?? openStore(config.DATABASE_URL, { poolSize: config.DATABASE_POOL_SIZE }),
    clock: overrides.clock ?? systemClock,
    logger: overrides.logger ?? pino({ level: config.LOG_LEVEL }),
    cipher: new CredentialsCipher(config.DIALTONE_SECRET_KEY),
  };
}
