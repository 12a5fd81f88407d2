// @dialtone/client: a typed client for Dialtone's HTTP API (README.md).
export { Dialtone, type AgentRef, type Campaign, type DialtoneOptions, type IdempotencyOptions, type InitiateCallBody, type InitiateCallDryRun, type InitiateCallQueued, type RunState, type Suppression, type WaitOptions, type WebhookEndpoint, type WorkflowRun, type WorkflowRunEvent, type WorkflowRunPage } from './client.js';
export { DialtoneApiError, errorFromResponse, type FieldProblem, type Problem } from './errors.js';
export type { components, operations, paths } from './openapi.js';
export type { RetryOptions } from './retry.js';
export type { RunStreamData, StreamMessage, StreamOptions } from './stream.js';
export { verifyWebhook, type WebhookHeaders } from './webhooks.js';

import { Dialtone, type DialtoneOptions } from './client.js';

/** A client for one Dialtone service and API key. */
export function createDialtone(options: DialtoneOptions): Dialtone {
  return new Dialtone(options);
}
