// Signing per the Standard Webhooks specification, so that a receiver can verify our messages with
// any off-the-shelf library: `webhook-signature` holds `v1,<base64 HMAC-SHA256>` of
// `${webhook-id}.${webhook-timestamp}.${body}`, keyed by the bytes of the secret after `whsec_`,
// one entry per secret (two while a rotated secret overlaps the new one), space-separated.
//
// Written here with node:crypto rather than taken from the `standardwebhooks` package: the tests
// verify our headers with that package, and they prove something only if the code that signs is
// not the code that verifies.
import { createHmac, randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/** A new endpoint secret: `whsec_` and the base64 of 32 random bytes (the HMAC key). Shown once. */
export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** The HMAC key of a secret. Throws without echoing the secret, which must never reach a log. */
function secretKey(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : '';
  const key = Buffer.from(encoded, 'base64');
  if (key.length === 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) {
    throw new Error('webhook secret is malformed: expected whsec_ followed by base64');
  }
  return key;
}

/**
 * The `webhook-signature` header value: `v1,<signature>` for each secret, in the order given,
 * separated by spaces. `body` must be the exact string sent (the signature covers its bytes).
 */
export function signatureHeader(secrets: readonly string[], msgId: string, timestampSeconds: number, body: string): string {
  if (secrets.length === 0) throw new Error('a webhook needs at least one secret to be signed');
  const content = `${msgId}.${timestampSeconds}.${body}`;
  return secrets
    .map((secret) => `v1,${createHmac('sha256', secretKey(secret)).update(content, 'utf8').digest('base64')}`)
    .join(' ');
}

export interface WebhookHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
  'content-type': 'application/json';
  'user-agent': string;
  [name: string]: string;
}

export interface WebhookHeadersInput {
  /** `msg_…`, the same on every attempt of one message so receivers can deduplicate. */
  msgId: string;
  /** When this attempt is sent, in whole seconds since the epoch (receivers reject stale ones). */
  timestampSeconds: number;
  body: string;
  /** The endpoint's current secret, and the previous one while it still overlaps. */
  secrets: readonly string[];
  /** Dialtone's version, for `user-agent: Dialtone/<version>`. */
  version: string;
}

/** Every header of one attempt of a webhook message. */
export function webhookHeaders({ msgId, timestampSeconds, body, secrets, version }: WebhookHeadersInput): WebhookHeaders {
  return {
    'webhook-id': msgId,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': signatureHeader(secrets, msgId, timestampSeconds, body),
    'content-type': 'application/json',
    'user-agent': `Dialtone/${version}`,
  };
}
