// Verifying a webhook message Dialtone sent: Standard Webhooks signatures (docs/webhooks.md), checked
// by the `standardwebhooks` package, the specification's own reference library, so the client does
// not carry a second implementation of the HMAC and of the timestamp tolerance.
import { Webhook } from 'standardwebhooks';

/** The headers of a received message, as any framework gives them (a Headers object or a plain record). */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

function headerRecord(headers: WebhookHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof Headers !== 'undefined' && headers instanceof Headers) {
    headers.forEach((value, name) => {
      out[name.toLowerCase()] = value;
    });
    return out;
  }
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/**
 * The message, parsed, when its signature verifies under the endpoint's secret (`whsec_…`) and its
 * timestamp is recent; throws otherwise. `rawBody` must be the bytes as received: a body parsed and
 * serialized again no longer matches its signature.
 */
export function verifyWebhook<T = unknown>(headers: WebhookHeaders, rawBody: string | Uint8Array, secret: string): T {
  const body = typeof rawBody === 'string' ? rawBody : new TextDecoder().decode(rawBody);
  return new Webhook(secret).verify(body, headerRecord(headers)) as T;
}
