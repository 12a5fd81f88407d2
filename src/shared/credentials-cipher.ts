// Secrets at rest under DIALTONE_SECRET_KEY: provider credentials and webhook signing secrets
// (AES-256-GCM), and, through keys derived from it, the agent runtime's run tokens
// (runtime/run-token.ts). The envelope records a version so the key or algorithm can be rotated
// later; the organization id is bound as associated data, so a ciphertext copied to another
// organization's row does not decrypt. Where the key comes from (the variable, or the key file of
// an embedded database) is secret-key.ts's business.
import { createCipheriv, createDecipheriv, createHmac, randomBytes, hkdfSync } from 'node:crypto';

const VERSION = 'v1';

export class SecretKeyMissingError extends Error {
  constructor() {
    super('DIALTONE_SECRET_KEY is not set: it is required to store or read provider credentials and webhook secrets (32 bytes, base64 or hex).');
    this.name = 'SecretKeyMissingError';
  }
}

/** A new random key, as DIALTONE_SECRET_KEY takes it (base64 of 32 bytes). */
export function newSecretKey(): string {
  return randomBytes(32).toString('base64');
}

/** Parses DIALTONE_SECRET_KEY: 64 hex characters or base64 of exactly 32 bytes. */
export function parseSecretKey(text: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new Error('DIALTONE_SECRET_KEY must be 32 bytes, given as 64 hex characters or base64.');
  return key;
}

export class CredentialsCipher {
  private key: Buffer | undefined;
  /**
   * Derived keys by purpose. HKDF is a few microseconds of native work and a key object each time;
   * a run token is issued with every answered call, and deriving its key per call was 4 % of a
   * draining dispatcher's CPU (docs/benchmarks.md). The key never changes once set (install()
   * refuses a second one), so what is derived from it never does either.
   */
  private readonly derived = new Map<string, Buffer>();

  constructor(secretKey: string | undefined) {
    this.key = secretKey === undefined ? undefined : parseSecretKey(secretKey);
  }

  get hasKey(): boolean {
    return this.key !== undefined;
  }

  /**
   * Gives a cipher built without a key the one generated at start-up (secret-key.ts): the
   * dependencies holding this cipher are built before the store says whether one may be generated.
   */
  install(secretKey: string): void {
    if (this.key) throw new Error('the secret key is already set');
    this.key = parseSecretKey(secretKey);
  }

  /**
   * A value that tells keys apart without revealing them: an HMAC of a constant under a key
   * derived for this purpose only. Stored in the database (migration 017) by the first node.
   */
  keyCheck(): string {
    return createHmac('sha256', this.derivedKey('secret-key-check')).update('dialtone secret key check v1').digest('base64url');
  }

  private requireKey(): Buffer {
    if (!this.key) throw new SecretKeyMissingError();
    return this.key;
  }

  /** A key for another purpose (signing tokens), derived with HKDF so it never equals the encryption key. */
  derivedKey(purpose: string): Buffer {
    let key = this.derived.get(purpose);
    if (!key) {
      key = Buffer.from(hkdfSync('sha256', this.requireKey(), Buffer.alloc(0), `dialtone:${purpose}`, 32));
      this.derived.set(purpose, key);
    }
    return key;
  }

  encrypt(orgId: number, credentials: Record<string, unknown>): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.requireKey(), iv);
    cipher.setAAD(Buffer.from(`org:${orgId}`));
    const body = Buffer.concat([cipher.update(JSON.stringify(credentials), 'utf8'), cipher.final()]);
    return [VERSION, iv.toString('base64'), cipher.getAuthTag().toString('base64'), body.toString('base64')].join('.');
  }

  decrypt(orgId: number, envelope: string): Record<string, unknown> {
    const [version, iv, tag, body] = envelope.split('.');
    if (version !== VERSION || !iv || !tag || body === undefined) throw new Error('Unrecognized credentials envelope.');
    const decipher = createDecipheriv('aes-256-gcm', this.requireKey(), Buffer.from(iv, 'base64'));
    decipher.setAAD(Buffer.from(`org:${orgId}`));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    const plain = Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]);
    return JSON.parse(plain.toString('utf8')) as Record<string, unknown>;
  }
}
