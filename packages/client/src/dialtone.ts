// The full client: every operation (DialtoneCore, client.ts) and the verification of webhook
// messages, which needs the standardwebhooks package (CommonJS: a bundler or Node or Deno loads it,
// an import map alone does not). Kept apart so the `@dialtone/client/core` entry never imports it.
import { DialtoneCore } from './client.js';
import { verifyWebhook, type WebhookHeaders } from './webhooks.js';

export class Dialtone extends DialtoneCore {
  readonly webhooks = {
    /** The message, when its Standard Webhooks signature verifies under the endpoint's secret; throws otherwise. */
    verify: <T = unknown>(headers: WebhookHeaders, rawBody: string | Uint8Array, secret: string): T => verifyWebhook<T>(headers, rawBody, secret),
  };
}
