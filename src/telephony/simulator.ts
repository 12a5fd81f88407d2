// The built-in simulator: a carrier without a network. It answers like a real provider (accepts the
// dial, reports ringing, answer, hang-up) on timers, and picks the outcome from the destination
// number so every path can be exercised on purpose. The table is documented in docs/simulator.md.
import { appendFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import type { Clock } from '../deps.js';
import type { FieldError } from '../errors.js';
import { DialRefusedError, type DialRequest, type InProcessProvider, type LiveCall, type ProviderEventKind, type ProviderEventSink, type RouteDecoding, type RouteInput } from './provider.js';

export interface SimulatorTimings {
  latencyMs: number;
  ringMs: number;
  talkMs: number;
  secondMs: number;
}

type Step = { afterMs: number; kind: ProviderEventKind; raw: string };

/** What a simulated destination does. `steps` run in order, each after the previous one. */
export interface Script {
  description: string;
  refuse?: { outcome: 'failed'; raw: string };
  steps: Step[];
}

export const RESERVED_PREFIX = '+120255501';

/** The script for a destination number (E.164). */
export function scriptFor(number: string, t: SimulatorTimings): Script {
  const ring: Step = { afterMs: t.latencyMs, kind: 'ringing', raw: 'ringing' };
  const answer: Step = { afterMs: t.ringMs, kind: 'answered', raw: 'answered' };
  const hangUp = (afterMs: number): Step => ({ afterMs, kind: 'completed', raw: 'completed' });
  const suffix = number.startsWith(RESERVED_PREFIX) ? number.slice(RESERVED_PREFIX.length) : undefined;
  switch (suffix) {
    case '01':
      return { description: 'busy', steps: [ring, { afterMs: t.latencyMs, kind: 'busy', raw: '486 Busy Here' }] };
    case '02':
      return { description: 'rings until the ring timeout (no answer)', steps: [ring] };
    case '03':
      return { description: 'rejected', steps: [ring, { afterMs: t.ringMs, kind: 'rejected', raw: '603 Decline' }] };
    case '04':
      return { description: 'refused at dial time (failed)', refuse: { outcome: 'failed', raw: '404 Not Found' }, steps: [] };
    case '05':
      return { description: 'answered, then the call drops (failed)', steps: [ring, answer, { afterMs: t.talkMs, kind: 'failed', raw: 'call dropped' }] };
    case '06':
      return { description: 'accepted, then never heard from again', steps: [] };
    case '07':
      return { description: 'answered and never hangs up (maximum duration ends it)', steps: [ring, answer] };
    default:
      break;
  }
  if (suffix !== undefined && /^[5-9][0-9]$/.test(suffix)) {
    const seconds = Number(suffix) - 50;
    return { description: `answered, talks ${seconds} simulated seconds`, steps: [ring, answer, hangUp(seconds * t.secondMs)] };
  }
  return { description: 'answered, then completed', steps: [ring, answer, hangUp(t.talkMs)] };
}

/**
 * A route's own timings, each in place of the service's SIMULATOR_* setting of the same role: a
 * demo route can run a thousand-contact campaign in a minute while another keeps life-like calls.
 */
export type SimulatorRouteConfig = Partial<SimulatorTimings>;

/**
 * The simulator route's settings, besides those every provider understands (routes.ts): the name,
 * the timing it replaces and its bounds, the same as the SIMULATOR_* setting's (config.ts).
 */
export const SIMULATOR_ROUTE_SETTINGS = {
  answer_latency_ms: { timing: 'latencyMs', max: 60_000 },
  ring_ms: { timing: 'ringMs', max: 600_000 },
  talk_ms: { timing: 'talkMs', max: 3_600_000 },
  second_ms: { timing: 'secondMs', max: 60_000 },
} as const satisfies Record<string, { timing: keyof SimulatorTimings; max: number }>;

/** Settings the other providers, or every provider, understand: not the simulator's to refuse. */
const SHARED_SETTINGS = new Set(['ring_timeout_ms']);

/**
 * The simulator's schema: its timings, each a whole number of milliseconds within its bounds; any
 * other key is refused, so a misspelt timing is said at creation rather than silently ignored.
 */
export function decodeSimulatorRoute(input: RouteInput = { settings: {}, credentials: null }): RouteDecoding<SimulatorRouteConfig> {
  const problems: FieldError[] = [];
  const config: SimulatorRouteConfig = {};
  for (const [name, value] of Object.entries(input.settings)) {
    if (SHARED_SETTINGS.has(name)) continue;
    const setting = (SIMULATOR_ROUTE_SETTINGS as Record<string, { timing: keyof SimulatorTimings; max: number } | undefined>)[name];
    if (!setting) {
      problems.push({ pointer: `/settings/${name}`, detail: `Not a simulator setting; the simulator takes ${Object.keys(SIMULATOR_ROUTE_SETTINGS).join(', ')} (and ring_timeout_ms).` });
      continue;
    }
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > setting.max) {
      problems.push({ pointer: `/settings/${name}`, detail: `Must be a whole number of milliseconds, from 0 to ${setting.max}.` });
      continue;
    }
    config[setting.timing] = value;
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, config };
}

export interface SimulatedDial {
  runId: number;
  to: string;
  from: string | null;
  providerCallId: string;
  at: number;
}

export class SimulatorProvider implements InProcessProvider<SimulatorRouteConfig> {
  readonly name = 'simulator' as const;
  readonly callsOutliveNode = false;
  /**
   * The dials this process placed since `record()`, in order: for tests. A service keeps no such
   * list (it would grow with every call); audits use SIMULATOR_DIAL_LOG.
   */
  private recorded: SimulatedDial[] | undefined;
  private readonly timers = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly timings: SimulatorTimings,
    private readonly clock: Clock,
    private readonly emit: ProviderEventSink,
    private readonly dialLogPath?: string,
  ) {}

  decodeRoute(input: RouteInput): RouteDecoding<SimulatorRouteConfig> {
    return decodeSimulatorRoute(input);
  }

  readiness(): string[] {
    return [];
  }

  async dial(request: DialRequest<SimulatorRouteConfig>): Promise<{ providerCallId: string }> {
    // The route's own timings, where it sets them, over the service's.
    const script = scriptFor(request.to, { ...this.timings, ...request.route.config });
    const providerCallId = `SIM${randomUUID().replace(/-/g, '')}`;
    const dial: SimulatedDial = { runId: request.runId, to: request.to, from: request.from, providerCallId, at: this.clock.now() };
    this.recorded?.push(dial);
    // Written synchronously before the call "exists", so a crash can never hide a dial from the log.
    if (this.dialLogPath) appendFileSync(this.dialLogPath, `${JSON.stringify(dial)}\n`);
    if (script.refuse) throw new DialRefusedError(script.refuse.outcome, script.refuse.raw, `Simulated refusal: ${script.description}.`);
    this.play(request.runId, providerCallId, script.steps);
    return { providerCallId };
  }

  /** Starts keeping every dial in memory, and returns that record (it grows as dials happen). */
  record(): SimulatedDial[] {
    this.recorded ??= [];
    return this.recorded;
  }

  /** The record started by `record()`; empty when nothing is recorded. */
  get dials(): readonly SimulatedDial[] {
    return this.recorded ?? [];
  }

  private play(runId: number, providerCallId: string, steps: Step[]): void {
    const [next, ...rest] = steps;
    if (!next) {
      this.timers.delete(providerCallId);
      return;
    }
    const timer = setTimeout(() => {
      this.emit({ runId, providerCallId, kind: next.kind, rawStatus: next.raw, at: this.clock.now() });
      this.play(runId, providerCallId, rest);
    }, next.afterMs);
    this.timers.set(providerCallId, timer);
  }

  async hangUp(call: LiveCall<SimulatorRouteConfig>): Promise<void> {
    const timer = this.timers.get(call.providerCallId);
    if (timer) clearTimeout(timer);
    this.timers.delete(call.providerCallId);
  }

  async close(): Promise<void> {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }
}
