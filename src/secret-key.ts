// Where DIALTONE_SECRET_KEY comes from, and the start-up check that it is the key the stored
// secrets were written with. The key encrypts webhook signing secrets and provider credentials
// and signs the agent runtime's run tokens (shared/credentials-cipher.ts, runtime/run-token.ts).
//
// An explicit DIALTONE_SECRET_KEY always wins. Without it, an embedded (SQLite) database gets a
// key generated on its first start and kept in a file beside it (`<database>.key`, mode 0600,
// never logged), as self-hosted services do, so webhooks work on a plain `npm start`; an
// in-memory database gets one for the life of the process. Nodes sharing PostgreSQL must all be
// given the same key: nothing is generated there, since each node would generate its own.
//
// A check value of the key (an HMAC of a constant, migration 017) is stored by the first start
// with a key; a later start with another key, or with none where secrets are stored, is refused
// with a message saying what to do, rather than failing later on every secret it touches.
import { readFileSync, writeFileSync } from 'node:fs';
import type { Config } from './config.js';
import type { Clock } from './shared/clock.js';
import type { Store } from './store/engine/store.js';
import { insertKeyCheckIfAbsent, selectAnyEncryptedSecret, selectKeyCheck } from './store/statements/secret-key-statements.js';
import { newSecretKey, parseSecretKey, type CredentialsCipher } from './shared/credentials-cipher.js';

/** A start that cannot use the secret key it was given (or has none where one is needed): the operator's to fix. */
export class SecretKeyError extends Error {
  constructor(
    readonly code: 'secret_key_missing' | 'secret_key_mismatch' | 'secret_key_file_invalid',
    message: string,
  ) {
    super(message);
    this.name = 'SecretKeyError';
  }
}

/** The key file of an embedded database, named after it; undefined for PostgreSQL and in-memory SQLite. */
export function secretKeyFilePath(databaseUrl: string): string | undefined {
  if (!databaseUrl.startsWith('sqlite:')) return undefined;
  const path = databaseUrl.slice('sqlite:'.length);
  return path === '' || path === ':memory:' ? undefined : `${path}.key`;
}

/**
 * The key as configured: DIALTONE_SECRET_KEY, else the embedded database's key file when it
 * exists. Never generates one (establishSecretKey does, once the database says it may).
 */
export function configuredSecretKey(config: Pick<Config, 'DIALTONE_SECRET_KEY' | 'DATABASE_URL'>): string | undefined {
  if (config.DIALTONE_SECRET_KEY !== undefined) return config.DIALTONE_SECRET_KEY;
  const file = secretKeyFilePath(config.DATABASE_URL);
  return file === undefined ? undefined : readKeyFile(file);
}

function readKeyFile(file: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new SecretKeyError('secret_key_file_invalid', `Cannot read the secret key file ${file}: ${(error as Error).message}`);
  }
  try {
    parseSecretKey(text);
  } catch {
    throw new SecretKeyError('secret_key_file_invalid', `The secret key file ${file} does not hold a key (32 bytes, base64 or hex): restore it from a backup, or set DIALTONE_SECRET_KEY.`);
  }
  return text;
}

/** Writes a new key file, 0600 and only if there is none; another process that won the race wrote the key to use. */
function createKeyFile(file: string): string {
  const key = newSecretKey();
  try {
    writeFileSync(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
    return key;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const existing = readKeyFile(file);
    if (existing === undefined) throw error;
    return existing;
  }
}

function decrypts(cipher: CredentialsCipher, secret: { orgId: number; envelope: string }): boolean {
  try {
    cipher.decrypt(secret.orgId, secret.envelope);
    return true;
  } catch {
    return false;
  }
}

/** What establishSecretKey did, for the caller to log (the key itself never appears). */
export type SecretKeyOutcome =
  | { kind: 'given' }
  | { kind: 'generated'; keyFile: string | undefined }
  /** PostgreSQL without a key and nothing stored under one: secrets are refused until one is given. */
  | { kind: 'absent' };

/**
 * Settles the key at start-up, after the migrations: generates one where the store allows it
 * (see the top of this file), then compares its check value with the stored one, storing it on
 * the first start. Throws SecretKeyError when the key is missing or is not the stored secrets' key.
 */
export async function establishSecretKey(deps: { store: Store; cipher: CredentialsCipher; config: Config; clock: Clock }): Promise<SecretKeyOutcome> {
  const file = secretKeyFilePath(deps.config.DATABASE_URL);
  const given = deps.config.DIALTONE_SECRET_KEY !== undefined ? 'DIALTONE_SECRET_KEY' : `the key in ${file ?? '(none)'}`;
  let stored = await selectKeyCheck(deps.store);
  let outcome: SecretKeyOutcome = { kind: 'given' };
  if (!deps.cipher.hasKey) {
    if (stored !== undefined || (await selectAnyEncryptedSecret(deps.store)) !== undefined) {
      throw new SecretKeyError(
        'secret_key_missing',
        file !== undefined
          ? `DIALTONE_SECRET_KEY is not set and the key file ${file} is missing, but this database holds secrets written under a key: put the key file back (from the backup of the database), or set DIALTONE_SECRET_KEY to that key.`
          : 'DIALTONE_SECRET_KEY is not set, but this database holds secrets written under a key: give this node the key the other nodes are given.',
      );
    }
    if (!deps.store.embedded) return { kind: 'absent' };
    deps.cipher.install(file !== undefined ? createKeyFile(file) : newSecretKey());
    outcome = { kind: 'generated', keyFile: file };
  }
  const check = deps.cipher.keyCheck();
  if (stored === undefined) {
    // Written before the check existed: a stored secret tells whether the key is its key.
    const sample = await selectAnyEncryptedSecret(deps.store);
    if (sample !== undefined && !decrypts(deps.cipher, sample)) throw mismatch(given);
    stored = await insertKeyCheckIfAbsent(deps.store, check, deps.clock.now());
  }
  if (stored !== check) throw mismatch(given);
  return outcome;
}

function mismatch(given: string): SecretKeyError {
  return new SecretKeyError(
    'secret_key_mismatch',
    `${given} is not the key this database's secrets were written with: give every node the same DIALTONE_SECRET_KEY, the one the database was first started with (webhook secrets, provider credentials and run tokens written under one key cannot be read under another).`,
  );
}
