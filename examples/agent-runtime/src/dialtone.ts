// Dialtone's runtime API, as this example uses it (docs/agent-runtime.md): every request carries
// the run's token as a bearer token, never an API key; errors come back as
// application/problem+json, whose `code` and `detail` are put in the error thrown.

/** What GET /api/v1/runtime/runs/{id} answers (the fields this example reads). */
export interface RuntimeRun {
  run_id: number;
  state: string;
  definition: { nodes?: { id: string; type: string; data?: Record<string, unknown> }[]; result_schema?: unknown };
  context: Record<string, unknown>;
}

export class DialtoneRuntimeApi {
  private readonly base: string;

  constructor(
    dialtoneUrl: string,
    private readonly runId: number,
    private readonly token: string,
  ) {
    this.base = `${dialtoneUrl.replace(/\/+$/, '')}/api/v1/runtime/runs/${runId}`;
  }

  run(): Promise<RuntimeRun> {
    return this.request<RuntimeRun>('GET', '');
  }

  /** The call's structured result, stored with the run (valid against its result_schema, when it declares one). */
  async result(data: Record<string, unknown>): Promise<void> {
    await this.request('POST', '/result', { data }, `result-${this.runId}`);
  }

  /** One of the runtime's own events in the run's log (`agent.<name>`). */
  async event(type: string, data: Record<string, unknown>): Promise<void> {
    await this.request('POST', '/events', { type, data }, `${type}-${this.runId}`);
  }

  async hangUp(reason: string): Promise<void> {
    await this.request('POST', '/hangup', { reason }, `hangup-${this.runId}`);
  }

  /** One request; an Idempotency-Key lets a retry of an action act once. */
  private async request<T>(method: 'GET' | 'POST', path: string, body?: unknown, idempotencyKey?: string): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
    const response = await fetch(`${this.base}${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    const text = await response.text();
    if (!response.ok) {
      let problem: { code?: string; detail?: string } = {};
      try {
        problem = JSON.parse(text) as typeof problem;
      } catch {
        // not a problem document: the status says enough
      }
      throw new Error(`${method} ${path || '/'}: ${response.status} ${problem.code ?? ''} ${problem.detail ?? ''}`.trim());
    }
    return (text === '' ? undefined : JSON.parse(text)) as T;
  }
}

/**
 * A definition's text template rendered with the run's context: `{{name}}`, `{{a.b}}` and
 * `{{name | fallback}}`, as Dialtone's own templates read them (docs/design.md, "Domain").
 */
export function renderTemplate(template: string, context: Record<string, unknown>): string {
  return template.replace(/\{\{\s*([^}|]+?)\s*(?:\|\s*([^}]*?)\s*)?\}\}/g, (_, path: string, fallback: string | undefined) => {
    let value: unknown = context;
    for (const key of path.split('.')) value = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
    if (value === undefined || value === null || value === '') return fallback ?? '';
    return typeof value === 'object' ? JSON.stringify(value) : String(value);
  });
}
