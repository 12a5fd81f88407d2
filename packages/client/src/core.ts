// @dialtone/client/core: every operation and the live stream, without webhook verification, so
// nothing it imports is CommonJS: a page loads it with an import map of its dependencies' own ESM
// files and no bundler (the Dialtone console does: console/api.js). README.md, "Where it runs".
export { DialtoneCore, type AgentRef, type Campaign, type DialtoneOptions, type IdempotencyOptions, type InitiateCallBody, type InitiateCallDryRun, type InitiateCallQueued, type RunState, type Suppression, type WaitOptions, type WebhookEndpoint, type WorkflowRun, type WorkflowRunEvent, type WorkflowRunPage } from './client.js';
export { DialtoneApiError, errorFromResponse, type FieldProblem, type Problem } from './errors.js';
export type { components, operations, paths } from './openapi.js';
export type { RetryOptions } from './retry.js';
export type { RunStreamData, StreamMessage, StreamOptions } from './stream.js';

import { DialtoneCore, type DialtoneOptions } from './client.js';

/** A client for one Dialtone service and API key, without `webhooks.verify` (use the main entry for that). */
export function createDialtoneCore(options: DialtoneOptions): DialtoneCore {
  return new DialtoneCore(options);
}
