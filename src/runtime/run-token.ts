// Per-run tokens for the agent runtime (docs/design.md, "Agent runtime hand-off"): handed to the
// runtime with an answered call, presented back as a Bearer token to read what to run. A token is
// an HMAC over the run id and an expiry, under a key derived from DIALTONE_SECRET_KEY, so any node
// verifies it without a lookup and a token for one run opens no other.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { CredentialsCipher } from '../shared/credentials-cipher.js';

const PURPOSE = 'runtime-run-token';

function signature(key: Buffer, runId: number, expiresAt: number): Buffer {
  return createHmac('sha256', key).update(`run:${runId}:${expiresAt}`).digest();
}

export function issueRunToken(cipher: CredentialsCipher, runId: number, expiresAt: number): string {
  return `${expiresAt.toString(36)}.${signature(cipher.derivedKey(PURPOSE), runId, expiresAt).toString('base64url')}`;
}

/** True when `token` was issued for this run and has not expired. */
export function verifyRunToken(cipher: CredentialsCipher, runId: number, token: string, now: number): boolean {
  const match = /^([0-9a-z]{1,12})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!match) return false;
  const expiresAt = parseInt(match[1] ?? '', 36);
  if (!Number.isSafeInteger(expiresAt) || expiresAt <= now) return false;
  const expected = signature(cipher.derivedKey(PURPOSE), runId, expiresAt);
  const presented = Buffer.from(match[2] ?? '', 'base64url');
  return presented.length === expected.length && timingSafeEqual(presented, expected);
}
