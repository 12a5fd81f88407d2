// @dialtone/client: a typed client for Dialtone's HTTP API (README.md).
export * from './core.js';
export { Dialtone } from './dialtone.js';
export { verifyWebhook, type WebhookHeaders } from './webhooks.js';

import { Dialtone } from './dialtone.js';
import type { DialtoneOptions } from './client.js';

/** A client for one Dialtone service and API key. */
export function createDialtone(options: DialtoneOptions): Dialtone {
  return new Dialtone(options);
}
