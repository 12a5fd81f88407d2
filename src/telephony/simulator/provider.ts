// The built-in simulator: a carrier without a network. It answers like a real provider (accepts the
// dial, reports ringing, answer, hang-up) on timers, and picks the outcome from the destination
// number so every path can be exercised on purpose. The table is documented in docs/simulator.md.
import { appendFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import type { Clock } from '../../shared/clock.js';
import type { FieldError } from '../../errors.js';
import type { AnsweredBy } from '../../store/schema/schema.js';
import {
  CallControlRefusedError,
  DialRefusedError,
  type DialRequest,
  type InProcessProvider,
  type LiveCall,
  type MachineDetectionRequest,
  type MachineVerdictSink,
  type ProviderEventKind,
  type ProviderEventSink,
  type RouteDecoding,
  type RouteInput,
  type TransferOutcomeSink,
  type TransferRequest,
  type TransferResult,
} from '../provider.js';
import { SimulatedStream, type SimulatorStreaming } from './stream.js';

/** The raw status and reason of a call that ended after a message was left on it. */
const VOICEMAIL_LEFT = 'voicemail_left';

export interface SimulatorTimings {
  latencyMs: number;
  ringMs: number;
  talkMs: number;
  secondMs: number;
}

type Step = { afterMs: number; kind: ProviderEventKind; raw: string } | { afterMs: number; kind: 'verdict'; answeredBy: AnsweredBy; raw: string };

/** What a simulated destination does. `steps` run in order, each after the previous one. */
export interface Script {
  description: string;
  refuse?: { outcome: 'failed'; raw: string };
  steps: Step[];
}

export const RESERVED_PREFIX = '+120255501';

/**
 * The answering machines' timings, in simulated seconds (SIMULATOR_SECOND_MS each): a voicemail
 * greeting lasts 4 and its beep comes at its end; detection without waiting for the end decides
 * after 2; a fax is known after 1; the person who answers after a silence speaks after 2 and is
 * known half a second later. A box records for 30 seconds after its beep (or the talk time, when
 * longer), then hangs up. A message left takes one second per three words.
 */
export const MACHINE_TIMINGS = { greetingSeconds: 4, detectSeconds: 2, faxSeconds: 1, silenceSeconds: 2.5, wordsPerSecond: 3, recordingSeconds: 30 } as const;

/**
 * The script of an answering machine's or a person's number (the verdict steps only when the dial
 * asks for detection): without detection the call goes on as any other, the agent talking to a
 * recording until the box hangs up.
 */
function machineScript(suffix: string, t: SimulatorTimings, detection: MachineDetectionRequest | undefined, ring: Step, answer: Step, hangUp: (afterMs: number) => Step): Script | undefined {
  const seconds = (n: number) => n * t.secondMs;
  const m = MACHINE_TIMINGS;
  const after = (verdict: Step | undefined, rest: number): Step[] => (verdict ? [verdict, hangUp(Math.max(0, rest - verdict.afterMs))] : [hangUp(rest)]);
  switch (suffix) {
    case '20': {
      const verdict: Step | undefined = !detection
        ? undefined
        : detection.detect === 'message_end'
          ? { afterMs: seconds(m.greetingSeconds), kind: 'verdict', answeredBy: 'machine', raw: 'machine_end_beep' }
          : { afterMs: seconds(m.detectSeconds), kind: 'verdict', answeredBy: 'machine', raw: 'machine_start' };
      const recording = Math.max(seconds(m.recordingSeconds), t.talkMs);
      return { description: 'a voicemail box: a greeting, a beep, then it records', steps: [ring, answer, ...after(verdict, seconds(m.greetingSeconds) + recording)] };
    }
    case '21': {
      const verdict: Step | undefined = detection ? { afterMs: seconds(m.faxSeconds), kind: 'verdict', answeredBy: 'fax', raw: 'fax' } : undefined;
      return { description: 'a fax machine', steps: [ring, answer, ...after(verdict, t.talkMs)] };
    }
    case '22': {
      const verdict: Step | undefined = detection ? { afterMs: seconds(m.silenceSeconds), kind: 'verdict', answeredBy: 'human', raw: 'human' } : undefined;
      return { description: 'a person who answers after a short silence', steps: [ring, answer, ...after(verdict, seconds(m.silenceSeconds) + t.talkMs)] };
    }
    default:
      return undefined;
  }
}

/** The script for a destination number (E.164), and the detection its dial asked for. */
export function scriptFor(number: string, t: SimulatorTimings, detection?: MachineDetectionRequest): Script {
  const ring: Step = { afterMs: t.latencyMs, kind: 'ringing', raw: 'ringing' };
  const answer: Step = { afterMs: t.ringMs, kind: 'answered', raw: 'answered' };
  const hangUp = (afterMs: number): Step => ({ afterMs, kind: 'completed', raw: 'completed' });
  const suffix = number.startsWith(RESERVED_PREFIX) ? number.slice(RESERVED_PREFIX.length) : undefined;
  const machine = suffix === undefined ? undefined : machineScript(suffix, t, detection, ring, answer, hangUp);
  if (machine) return machine;
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
 * `stream`, in place of SIMULATOR_STREAM, says whether its answered calls stream to the agent runtime.
 */
export type SimulatorRouteConfig = Partial<SimulatorTimings> & { stream?: boolean };

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
 * The simulator's schema: its timings, each a whole number of milliseconds within its bounds, and
 * `stream` (true or false); any other key is refused, so a misspelt one is said at creation rather
 * than silently ignored.
 */
export function decodeSimulatorRoute(input: RouteInput = { settings: {}, credentials: null }): RouteDecoding<SimulatorRouteConfig> {
  const problems: FieldError[] = [];
  const config: SimulatorRouteConfig = {};
  for (const [name, value] of Object.entries(input.settings)) {
    if (SHARED_SETTINGS.has(name)) continue;
    if (name === 'stream') {
      if (typeof value === 'boolean') config.stream = value;
      else if (value === 'true' || value === 'false') config.stream = value === 'true';
      else problems.push({ pointer: '/settings/stream', detail: 'Must be true or false: whether answered calls stream to AGENT_RUNTIME_URL, in place of SIMULATOR_STREAM.' });
      continue;
    }
    const setting = (SIMULATOR_ROUTE_SETTINGS as Record<string, { timing: keyof SimulatorTimings; max: number } | undefined>)[name];
    if (!setting) {
      problems.push({ pointer: `/settings/${name}`, detail: `Not a simulator setting; the simulator takes ${Object.keys(SIMULATOR_ROUTE_SETTINGS).join(', ')}, stream (and ring_timeout_ms).` });
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

/**
 * What a transfer's target does (docs/simulator.md, "Transfers"), by the same reserved numbers:
 * `…0101` is busy, `…0102` rings until the transfer's timeout (in simulated seconds), `…0104`
 * fails, `…0108` is a transfer the carrier refuses outright; any other target answers after the
 * ring time. Undefined: refused at once.
 */
export function transferScript(to: string, request: Pick<TransferRequest, 'timeoutSeconds'>, t: SimulatorTimings): { afterMs: number; result: TransferResult; raw: string } | undefined {
  const suffix = to.startsWith(RESERVED_PREFIX) ? to.slice(RESERVED_PREFIX.length) : undefined;
  switch (suffix) {
    case '01':
      return { afterMs: t.latencyMs, result: 'busy', raw: '486 Busy Here' };
    case '02':
      return { afterMs: request.timeoutSeconds * t.secondMs, result: 'no_answer', raw: 'transfer timeout' };
    case '04':
      return { afterMs: t.latencyMs, result: 'failed', raw: '404 Not Found' };
    case '08':
      return undefined;
    default:
      return { afterMs: t.ringMs, result: 'answered', raw: '200 OK' };
  }
}

/** A call in play: what its steps need to report, and whether it streams once answered. */
interface SimulatedCall {
  runId: number;
  providerCallId: string;
  orgId: number;
  streams: boolean;
}

/** Streaming as the provider is given it: the settings, and where its warnings go (with the run's id). */
export interface SimulatorMedia {
  streaming: SimulatorStreaming;
  warn(runId: number, message: string): void;
}

export interface SimulatedDial {
  runId: number;
  to: string;
  from: string | null;
  providerCallId: string;
  at: number;
}

export class SimulatorProvider implements InProcessProvider<SimulatorRouteConfig> {
  readonly name = 'simulator';
  readonly callsOutliveNode = false;
  /**
   * The dials this process placed since `record()`, in order: for tests. A service keeps no such
   * list (it would grow with every call); audits use SIMULATOR_DIAL_LOG.
   */
  private recorded: SimulatedDial[] | undefined;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** The messages left on this process's calls since `record()`, for tests (the run's events keep them too). */
  private messages: { runId: number; text: string }[] | undefined;
  /** The digits sent and transfers asked on this process's calls since `record()`, for tests (the run's events keep them too). */
  private controls: { runId: number; digits?: string; transferTo?: string }[] | undefined;
  /** A transfer's timer per call: one transfer at a time. */
  private readonly transfers = new Map<string, NodeJS.Timeout>();
  /** The answered calls streaming to the agent runtime, by provider call id. */
  private readonly streams = new Map<string, SimulatedStream>();

  constructor(
    private readonly timings: SimulatorTimings,
    private readonly clock: Clock,
    private readonly emit: ProviderEventSink,
    private readonly dialLogPath?: string,
    private readonly verdicts: MachineVerdictSink = () => undefined,
    private readonly transferOutcomes: TransferOutcomeSink = () => undefined,
    /** Streaming answered calls to the agent runtime; undefined without AGENT_RUNTIME_URL. */
    private readonly media: SimulatorMedia | undefined = undefined,
  ) {}

  readiness(): string[] {
    return [];
  }

  async dial(request: DialRequest<SimulatorRouteConfig>): Promise<{ providerCallId: string }> {
    // The route's own timings, where it sets them, over the service's.
    const script = scriptFor(request.to, { ...this.timings, ...request.route.config }, request.machineDetection);
    const providerCallId = `SIM${randomUUID().replace(/-/g, '')}`;
    const dial: SimulatedDial = { runId: request.runId, to: request.to, from: request.from, providerCallId, at: this.clock.now() };
    this.recorded?.push(dial);
    // Written synchronously before the call "exists", so a crash can never hide a dial from the log.
    if (this.dialLogPath) appendFileSync(this.dialLogPath, `${JSON.stringify(dial)}\n`);
    if (script.refuse) throw new DialRefusedError(script.refuse.outcome, script.refuse.raw, `Simulated refusal: ${script.description}.`);
    const streams = this.media !== undefined && (request.route.config.stream ?? this.media.streaming.byDefault);
    this.play({ runId: request.runId, providerCallId, orgId: request.route.orgId, streams }, script.steps);
    return { providerCallId };
  }

  /** Starts keeping every dial in memory, and returns that record (it grows as dials happen). */
  record(): SimulatedDial[] {
    this.messages ??= [];
    this.controls ??= [];
    this.recorded ??= [];
    return this.recorded;
  }

  /** The record started by `record()`; empty when nothing is recorded. */
  get dials(): readonly SimulatedDial[] {
    return this.recorded ?? [];
  }

  /** The digits sent and transfers asked since `record()`. */
  get callControls(): readonly { runId: number; digits?: string; transferTo?: string }[] {
    return this.controls ?? [];
  }

  /** The messages left since `record()`. */
  get messagesLeft(): readonly { runId: number; text: string }[] {
    return this.messages ?? [];
  }

  private play(call: SimulatedCall, steps: Step[]): void {
    const { runId, providerCallId } = call;
    const [next, ...rest] = steps;
    if (!next) {
      this.timers.delete(providerCallId);
      return;
    }
    const timer = setTimeout(() => {
      const at = this.clock.now();
      if (next.kind === 'verdict') this.verdicts({ runId, providerCallId, answeredBy: next.answeredBy, raw: next.raw, at });
      else {
        // The callee hung up (or the line dropped): the stream's `stop` goes before the event.
        if (next.kind !== 'ringing' && next.kind !== 'answered') this.stopStream(providerCallId);
        this.emit({ runId, providerCallId, kind: next.kind, rawStatus: next.raw, at, ...(next.kind === 'completed' && next.raw === VOICEMAIL_LEFT ? { reason: VOICEMAIL_LEFT } : {}) });
        if (next.kind === 'answered' && call.streams) this.startStream(call);
      }
      this.play(call, rest);
    }, next.afterMs);
    this.timers.set(providerCallId, timer);
  }

  /**
   * The answered call streams to the agent runtime. The runtime closing the stream hangs the call
   * up, and one that cannot be reached ends it failed, with the reasons a SIP call's stream gives
   * (sip/provider.ts): `stream_closed`, `agent_runtime_unreachable`.
   */
  private startStream(call: SimulatedCall): void {
    const media = this.media;
    if (!media) return;
    const ended = (kind: 'completed' | 'failed', reason: string, rawStatus: string) => {
      if (this.streams.get(call.providerCallId) !== stream) return;
      this.streams.delete(call.providerCallId);
      this.cancelTimers(call.providerCallId);
      this.emit({ runId: call.runId, providerCallId: call.providerCallId, kind, rawStatus, reason, at: this.clock.now() });
    };
    const stream: SimulatedStream = new SimulatedStream(media.streaming, call, this.clock, {
      runtimeClosed: (detail) => ended('completed', 'stream_closed', detail),
      runtimeUnreachable: (detail) => ended('failed', 'agent_runtime_unreachable', `agent runtime unreachable: ${detail}`),
      warn: (message) => media.warn(call.runId, message),
    });
    this.streams.set(call.providerCallId, stream);
  }

  private stopStream(providerCallId: string): void {
    const stream = this.streams.get(providerCallId);
    if (!stream) return;
    this.streams.delete(providerCallId);
    stream.stop();
  }

  /** The call is over here: nothing more of its script, nor of a transfer in flight, plays. */
  private cancelTimers(providerCallId: string): void {
    for (const timers of [this.timers, this.transfers]) {
      const timer = timers.get(providerCallId);
      if (timer) clearTimeout(timer);
      timers.delete(providerCallId);
    }
  }

  /**
   * The message is "spoken" over what the call was doing (a box recording after its beep), then
   * the line goes down: the call completes `voicemail_left` once its words have been said.
   */
  async leaveMessage(call: LiveCall<SimulatorRouteConfig>, text: string): Promise<void> {
    const timer = this.timers.get(call.providerCallId);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.messages?.push({ runId: call.runId, text });
    const timings = { ...this.timings, ...call.route.config };
    const words = text.split(/\s+/).filter((w) => w !== '').length;
    const speakingMs = Math.ceil((words / MACHINE_TIMINGS.wordsPerSecond) * timings.secondMs);
    this.play({ runId: call.runId, providerCallId: call.providerCallId, orgId: call.route.orgId, streams: false }, [{ afterMs: speakingMs, kind: 'completed', raw: VOICEMAIL_LEFT }]);
  }

  /**
   * A blind transfer: the target (transferScript) answers, is busy, rings out or fails after its
   * time. A target who answers takes the call: the simulator plays nothing more of it. Otherwise
   * the call goes on with the agent as it was.
   */
  async transfer(call: LiveCall<SimulatorRouteConfig>, request: TransferRequest): Promise<void> {
    const timings = { ...this.timings, ...call.route.config };
    const script = transferScript(request.to, request, timings);
    this.controls?.push({ runId: call.runId, transferTo: request.to });
    if (!script) throw new CallControlRefusedError('501 Not Implemented', 'Simulated refusal: the carrier does not transfer calls to this target.');
    const previous = this.transfers.get(call.providerCallId);
    if (previous) clearTimeout(previous);
    this.transfers.set(
      call.providerCallId,
      setTimeout(() => {
        this.transfers.delete(call.providerCallId);
        if (script.result === 'answered') {
          const timer = this.timers.get(call.providerCallId);
          if (timer) clearTimeout(timer);
          this.timers.delete(call.providerCallId);
          // The target took the callee: the agent runtime's stream ends (`stop`), as the call is no longer its.
          this.stopStream(call.providerCallId);
        }
        this.transferOutcomes({ runId: call.runId, providerCallId: call.providerCallId, result: script.result, raw: script.raw, at: this.clock.now() });
      }, script.afterMs),
    );
  }

  /**
   * Digits "sent" to the far end: kept for tests (the run's `dtmf` event records them). The
   * simulated carrier, like many real ones, carries no A-D: those are refused, so a runtime can
   * meet a refusal on purpose (docs/simulator.md).
   */
  async sendDigits(call: LiveCall<SimulatorRouteConfig>, digits: string): Promise<void> {
    if (/[A-D]/.test(digits)) throw new CallControlRefusedError('488 Not Acceptable Here', 'Simulated refusal: the carrier carries no A-D digits.');
    this.controls?.push({ runId: call.runId, digits });
  }

  async hangUp(call: LiveCall<SimulatorRouteConfig>): Promise<void> {
    this.cancelTimers(call.providerCallId);
    this.stopStream(call.providerCallId);
  }

  async close(): Promise<void> {
    for (const providerCallId of [...this.streams.keys()]) this.stopStream(providerCallId);
    for (const timer of [...this.timers.values(), ...this.transfers.values()]) clearTimeout(timer);
    this.timers.clear();
    this.transfers.clear();
  }
}
