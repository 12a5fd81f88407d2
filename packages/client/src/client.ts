// The client's surface: one object per group of operations, each a thin call through openapi-fetch
// typed by the generated `paths` (openapi.ts), answering the success body or throwing
// DialtoneApiError. Nothing here imports Node: it needs only fetch, Request, ReadableStream and
// TextDecoderStream (tested on Node 20+, Deno and chromium: README.md, "Where it runs"). Webhook
// verification is added on top in dialtone.ts, not here: it needs standardwebhooks, which is
// CommonJS, so this class (the `@dialtone/client/core` entry) is what a page loads without a bundler.
import createClient, { type Client } from 'openapi-fetch';
import { DialtoneApiError, errorFromResponse } from './errors.js';
import type { components, operations, paths } from './openapi.js';
import { retryingFetch, type RetryOptions } from './retry.js';
import { streamEvents, type StreamMessage, type StreamOptions } from './stream.js';

type Schemas = components['schemas'];
type JsonBody<O extends keyof operations> = operations[O] extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;
type Query<O extends keyof operations> = operations[O] extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;
/** A query as the caller writes it: numbers where the wire has digits. */
type Loose<Q> = { [K in keyof Q]?: Q[K] | number };

export type WorkflowRun = Schemas['WorkflowRun'];
export type WorkflowRunPage = Schemas['WorkflowRunPage'];
export type WorkflowRunEvent = Schemas['WorkflowRunEvent'];
export type RunState = Schemas['RunState'];
export type InitiateCallQueued = Schemas['InitiateCallQueued'];
export type InitiateCallDryRun = Schemas['InitiateCallDryRun'];
export type InitiateCallBody = JsonBody<'initiateCall'>;
export type Campaign = Schemas['Campaign'];
export type Suppression = Schemas['Suppression'];
export type WebhookEndpoint = Schemas['WebhookEndpoint'];

/** Which agent a call runs: an agent (version) UUID, or a workflow's UUID (its published version, or its draft for a test call). */
export type AgentRef = string | { agentUuid: string } | { workflowUuid: string };

export interface DialtoneOptions {
  /** Where the service is, e.g. `https://dialtone.example.com` (no trailing path). */
  baseUrl: string;
  /** The organization's API key (X-API-Key). */
  apiKey: string;
  /** A fetch to use instead of the global one (a proxy agent, a test double). */
  fetch?: typeof fetch;
  /** Retries of 429 and 503 answers (see retry.ts); `false` turns them off. */
  retry?: RetryOptions | false;
}

export interface IdempotencyOptions {
  /** Makes a retry safe: the same key and body within 24 h answer the first run again, never a second call. */
  idempotencyKey?: string;
}

export interface WaitOptions {
  /** Resolve when the run is in one of these states, or when this returns true (default: any terminal state). */
  until?: readonly RunState[] | ((run: WorkflowRun) => boolean);
  /** Give up after this long (default 10 minutes); rejects with an Error naming the run's last state. */
  timeoutMs?: number;
  /** Between reads (default 1000 ms). */
  pollIntervalMs?: number;
  signal?: AbortSignal;
}

const TERMINAL: readonly RunState[] = ['completed', 'busy', 'no_answer', 'rejected', 'failed', 'canceled', 'expired'];

/** openapi-fetch's answer: the typed data, or the error body with the response. */
interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

async function unwrap<T>(pending: Promise<Answer<T>>): Promise<T> {
  const { data, error, response } = await pending;
  if (!response.ok) throw errorFromResponse(response, error);
  return data as T;
}

/** Query values as the wire wants them (strings), without the undefined ones. */
function wireQuery<Q extends object>(query: Loose<Q> | undefined): Q {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(query ?? {})) if (value !== undefined && value !== null) out[name] = String(value);
  return out as Q;
}

const idempotency = (options: IdempotencyOptions | undefined) => (options?.idempotencyKey !== undefined ? { 'idempotency-key': options.idempotencyKey } : {});

/** Every API operation and the live stream; `Dialtone` (dialtone.ts) adds `webhooks.verify`. */
export class DialtoneCore {
  /** The typed openapi-fetch client underneath, for an operation this surface does not wrap. */
  readonly api: Client<paths>;
  private readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly fetchImpl: typeof fetch;

  constructor(options: DialtoneOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.apiKey = options.apiKey;
    const base = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.fetchImpl = base;
    const send = options.retry === false ? (request: Request) => base(request) : retryingFetch(base, options.retry ?? {});
    this.api = createClient<paths>({ baseUrl: this.baseUrl, fetch: send, headers: { 'x-api-key': this.apiKey } });
  }

  private path(agent: AgentRef, test: boolean): { url: '/api/v1/public/agent/{uuid}' | '/api/v1/public/agent/test/{uuid}' | '/api/v1/public/agent/workflow/{workflow_uuid}' | '/api/v1/public/agent/test/workflow/{workflow_uuid}'; params: { uuid: string } | { workflow_uuid: string } } {
    if (typeof agent === 'string' || 'agentUuid' in agent) {
      const uuid = typeof agent === 'string' ? agent : agent.agentUuid;
      return { url: test ? '/api/v1/public/agent/test/{uuid}' : '/api/v1/public/agent/{uuid}', params: { uuid } };
    }
    return { url: test ? '/api/v1/public/agent/test/workflow/{workflow_uuid}' : '/api/v1/public/agent/workflow/{workflow_uuid}', params: { workflow_uuid: agent.workflowUuid } };
  }

  private async initiate(agent: AgentRef, body: InitiateCallBody, test: boolean, dryRun: boolean, options?: IdempotencyOptions): Promise<Schemas['InitiateCallQueued'] | Schemas['InitiateCallDryRun']> {
    const { url, params } = this.path(agent, test);
    // The four operations take the same body, query and headers; only the path parameter's name differs.
    const post = this.api.POST as unknown as (url: string, init: object) => Promise<Answer<Schemas['InitiateCallQueued'] | Schemas['InitiateCallDryRun']>>;
    return unwrap(post(url, { params: { path: params, query: dryRun ? { dry_run: 'true' } : {}, header: idempotency(options) }, body }));
  }

  /** The four Initiate Call operations, and their dry run. */
  readonly calls = {
    /** Places a call with the agent's published definition: answers the run created (status `queued` or `scheduled`). */
    start: async (agent: AgentRef, body: InitiateCallBody, options?: IdempotencyOptions): Promise<InitiateCallQueued> =>
      (await this.initiate(agent, body, false, false, options)) as InitiateCallQueued,
    /** Places a test call: the latest draft, else the published definition. */
    startTest: async (agent: AgentRef, body: InitiateCallBody, options?: IdempotencyOptions): Promise<InitiateCallQueued> =>
      (await this.initiate(agent, body, true, false, options)) as InitiateCallQueued,
    /** Runs every check a call would pass and creates nothing (`?dry_run=true`); throws the refusal the call would get. */
    validate: async (agent: AgentRef, body: InitiateCallBody, options: { test?: boolean } = {}): Promise<InitiateCallDryRun> =>
      (await this.initiate(agent, body, options.test ?? false, true)) as InitiateCallDryRun,
  };

  readonly runs = {
    get: (runId: number): Promise<WorkflowRun> => unwrap(this.api.GET('/api/v1/public/workflow-runs/{id}', { params: { path: { id: runId } } })),
    list: (query?: Loose<Query<'listWorkflowRuns'>>): Promise<WorkflowRunPage> =>
      unwrap(this.api.GET('/api/v1/public/workflow-runs', { params: { query: wireQuery<Query<'listWorkflowRuns'>>(query) } })),
    events: (runId: number, query?: Loose<Query<'listWorkflowRunEvents'>>) =>
      unwrap(this.api.GET('/api/v1/public/workflow-runs/{id}/events', { params: { path: { id: runId }, query: wireQuery<Query<'listWorkflowRunEvents'>>(query) } })),
    cancel: (runId: number): Promise<WorkflowRun> => unwrap(this.api.POST('/api/v1/public/workflow-runs/{id}/cancel', { params: { path: { id: runId } } })),
    /** Reads the run until it reaches a state in `until` (default: it ended), and answers it. */
    wait: async (runId: number, options: WaitOptions = {}): Promise<WorkflowRun> => {
      const until = options.until ?? TERMINAL;
      const done = typeof until === 'function' ? until : (run: WorkflowRun) => until.includes(run.state);
      const deadline = Date.now() + (options.timeoutMs ?? 600_000);
      for (;;) {
        const run = await this.runs.get(runId);
        if (done(run)) return run;
        if (Date.now() >= deadline) throw new Error(`Run ${run.name} is still ${run.state} after ${options.timeoutMs ?? 600_000} ms.`);
        if (options.signal?.aborted) throw options.signal.reason;
        await new Promise((resolve) => setTimeout(resolve, Math.min(options.pollIntervalMs ?? 1000, Math.max(0, deadline - Date.now()))));
      }
    },
  };

  readonly campaigns = {
    create: (body: JsonBody<'createCampaign'>): Promise<Campaign> => unwrap(this.api.POST('/api/v1/public/campaigns', { body })),
    list: (query?: Loose<Query<'listCampaigns'>>) => unwrap(this.api.GET('/api/v1/public/campaigns', { params: { query: wireQuery<Query<'listCampaigns'>>(query) } })),
    get: (campaignId: number): Promise<Campaign> => unwrap(this.api.GET('/api/v1/public/campaigns/{id}', { params: { path: { id: campaignId } } })),
    start: (campaignId: number): Promise<Campaign> => unwrap(this.api.POST('/api/v1/public/campaigns/{id}/start', { params: { path: { id: campaignId } } })),
    pause: (campaignId: number): Promise<Campaign> => unwrap(this.api.POST('/api/v1/public/campaigns/{id}/pause', { params: { path: { id: campaignId } } })),
    resume: (campaignId: number): Promise<Campaign> => unwrap(this.api.POST('/api/v1/public/campaigns/{id}/resume', { params: { path: { id: campaignId } } })),
    cancel: (campaignId: number): Promise<Campaign> => unwrap(this.api.POST('/api/v1/public/campaigns/{id}/cancel', { params: { path: { id: campaignId } } })),
    addContacts: (campaignId: number, contacts: JsonBody<'addCampaignContacts'>, options?: IdempotencyOptions) =>
      unwrap(this.api.POST('/api/v1/public/campaigns/{id}/contacts', { params: { path: { id: campaignId }, header: idempotency(options) }, body: contacts })),
    contacts: (campaignId: number, query?: Loose<Query<'listCampaignContacts'>>) =>
      unwrap(this.api.GET('/api/v1/public/campaigns/{id}/contacts', { params: { path: { id: campaignId }, query: wireQuery<Query<'listCampaignContacts'>>(query) } })),
    runs: (campaignId: number, query?: Loose<Query<'listCampaignRuns'>>) =>
      unwrap(this.api.GET('/api/v1/public/campaigns/{id}/runs', { params: { path: { id: campaignId }, query: wireQuery<Query<'listCampaignRuns'>>(query) } })),
  };

  readonly suppressions = {
    put: (phoneNumber: string, body: JsonBody<'putSuppression'> = {}): Promise<Suppression> =>
      unwrap(this.api.PUT('/api/v1/public/suppressions/{phone_number}', { params: { path: { phone_number: phoneNumber } }, body })),
    get: (phoneNumber: string): Promise<Suppression> => unwrap(this.api.GET('/api/v1/public/suppressions/{phone_number}', { params: { path: { phone_number: phoneNumber } } })),
    delete: async (phoneNumber: string): Promise<void> => {
      await unwrap(this.api.DELETE('/api/v1/public/suppressions/{phone_number}', { params: { path: { phone_number: phoneNumber } } }));
    },
    list: (query?: Loose<Query<'listSuppressions'>>) => unwrap(this.api.GET('/api/v1/public/suppressions', { params: { query: wireQuery<Query<'listSuppressions'>>(query) } })),
    /** Imports a CSV (`phone_number[,reason[,expires_at]]` with a header line), as text. */
    import: async (csv: string): Promise<unknown> => {
      const response = await this.fetchImpl(`${this.baseUrl}/api/v1/public/suppressions/import`, { method: 'POST', headers: { 'x-api-key': this.apiKey, 'content-type': 'text/csv' }, body: csv });
      const body: unknown = await response.json().catch(() => undefined);
      if (!response.ok) throw errorFromResponse(response, body);
      return body;
    },
  };

  readonly phoneNumbers = {
    /**
     * Erases a person's data: the number, its initial_context, results and contact fields from every
     * run, event, delivery and contact of the organization; `suppress` also adds it to the
     * suppression list. Answers the counts; refused (409 runs_not_ended) while a run to it is live.
     */
    erase: (phoneNumber: string, options: { suppress?: boolean } = {}) =>
      unwrap(this.api.DELETE('/api/v1/public/phone-numbers/{phone_number}/data', { params: { path: { phone_number: phoneNumber }, query: options.suppress ? { suppress: 'true' } : {} } })),
  };

  readonly webhookEndpoints = {
    create: (body: JsonBody<'createWebhookEndpoint'>) => unwrap(this.api.POST('/api/v1/public/webhook-endpoints', { body })),
    list: () => unwrap(this.api.GET('/api/v1/public/webhook-endpoints')),
    get: (endpointId: number) => unwrap(this.api.GET('/api/v1/public/webhook-endpoints/{id}', { params: { path: { id: endpointId } } })),
    update: (endpointId: number, body: JsonBody<'updateWebhookEndpoint'>) => unwrap(this.api.PATCH('/api/v1/public/webhook-endpoints/{id}', { params: { path: { id: endpointId } }, body })),
    delete: async (endpointId: number): Promise<void> => {
      await unwrap(this.api.DELETE('/api/v1/public/webhook-endpoints/{id}', { params: { path: { id: endpointId } } }));
    },
    rotateSecret: (endpointId: number) => unwrap(this.api.POST('/api/v1/public/webhook-endpoints/{id}/rotate-secret', { params: { path: { id: endpointId } } })),
    test: (endpointId: number) => unwrap(this.api.POST('/api/v1/public/webhook-endpoints/{id}/test', { params: { path: { id: endpointId } } })),
    deliveries: (endpointId: number, query?: Loose<Query<'listWebhookDeliveries'>>) =>
      unwrap(this.api.GET('/api/v1/public/webhook-endpoints/{id}/deliveries', { params: { path: { id: endpointId }, query: wireQuery<Query<'listWebhookDeliveries'>>(query) } })),
    retryDelivery: (endpointId: number, deliveryId: number) =>
      unwrap(this.api.POST('/api/v1/public/webhook-endpoints/{id}/deliveries/{delivery_id}/retry', { params: { path: { id: endpointId, delivery_id: deliveryId } } })),
  };

  readonly stream = {
    /** The organization's live events, resumed across reconnections (stream.ts). */
    events: (options?: StreamOptions): AsyncGenerator<StreamMessage, void, undefined> =>
      streamEvents({ baseUrl: this.baseUrl, headers: () => ({ 'x-api-key': this.apiKey }), fetch: this.fetchImpl }, options),
  };
}

export { DialtoneApiError };
