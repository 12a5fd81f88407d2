// A provider that exists only in tests, written as a new provider would be: this folder and one
// registry line (`builtInProviders.with(fakeDefinition)`), nothing else. It answers every call at
// once and hangs up, and it takes one required setting, `line`, so its schema has something to refuse.
import type { FieldError } from '../../src/errors.js';
import { defineProvider } from '../../src/telephony/definition.js';
import type { DialRequest, InProcessProvider, ProviderEventKind, ProviderEventSink, RouteDecoding, RouteInput } from '../../src/telephony/provider.js';
import type { Clock } from '../../src/shared/clock.js';

export interface FakeRouteConfig {
  line: string;
}

export function decodeFakeRoute(input: RouteInput): RouteDecoding<FakeRouteConfig> {
  const problems: FieldError[] = [];
  const { line, ...rest } = input.settings;
  if (typeof line !== 'string' || line === '') problems.push({ pointer: '/settings/line', detail: 'Required: the fake line to dial on.' });
  for (const name of Object.keys(rest)) if (name !== 'ring_timeout_ms') problems.push({ pointer: `/settings/${name}`, detail: 'Not a fake setting.' });
  if (input.credentials !== null) problems.push({ pointer: '/credentials', detail: 'The fake provider takes no credentials.' });
  return problems.length > 0 ? { ok: false, problems } : { ok: true, config: { line: line as string } };
}

export class FakeProvider implements InProcessProvider<FakeRouteConfig> {
  readonly name = 'fake';
  readonly callsOutliveNode = false;
  readonly dials: { runId: number; to: string; line: string }[] = [];
  private calls = 0;

  constructor(
    private readonly clock: Clock,
    private readonly emit: ProviderEventSink,
  ) {}

  readiness(): string[] {
    return [];
  }

  async dial(request: DialRequest<FakeRouteConfig>): Promise<{ providerCallId: string }> {
    this.calls += 1;
    const providerCallId = `FAKE${this.calls}`;
    this.dials.push({ runId: request.runId, to: request.to, line: request.route.config.line });
    // Reported after the dial has answered, as a real carrier's events arrive.
    const report = (kind: ProviderEventKind) => this.emit({ runId: request.runId, providerCallId, kind, rawStatus: kind, at: this.clock.now() });
    setImmediate(() => {
      report('ringing');
      report('answered');
      report('completed');
    });
    return { providerCallId };
  }

  async hangUp(): Promise<void> {}

  async close(): Promise<void> {}
}

export const fakeDefinition = defineProvider<FakeRouteConfig, Record<never, never>>({
  name: 'fake',
  summary: 'A provider for tests: answers at once, then hangs up.',
  capabilities: { callsOutliveNode: false, dialsSipUris: true, supportsMachineDetection: false, supportsTransfer: false, sendsDtmf: false },
  settings: [{ name: 'line', type: 'string', required: true, description: 'The fake line to dial on.' }],
  credentials: [],
  decodeRoute: decodeFakeRoute,
  configKeys: {},
  callbackRoutes: [],
  create: ({ clock, emit }) => new FakeProvider(clock, emit),
});
