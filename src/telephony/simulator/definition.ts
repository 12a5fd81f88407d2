// The simulator as the registry knows it (telephony/definition.ts): a carrier without a network,
// built into every node, whose outcome is picked by the destination number (docs/simulator.md).
import { Type } from '@sinclair/typebox';
import { defineProvider } from '../definition.js';
import { defaultVoice, voiceFromFile } from './audio.js';
import { decodeSimulatorRoute, SimulatorProvider, type SimulatorRouteConfig } from './provider.js';

const ms = (max: number, dflt: number) => Type.Integer({ minimum: 0, maximum: max, default: dflt });
const int = (min: number, max: number, dflt: number) => Type.Integer({ minimum: min, maximum: max, default: dflt });

/** The service's simulator timings; a route's settings may replace each for its own calls. */
const configKeys = {
  /** Simulator timings (ms): dial to ringing, ringing to answer, answer to hang-up, one "simulated second". */
  SIMULATOR_LATENCY_MS: ms(60_000, 100),
  SIMULATOR_RING_MS: ms(600_000, 2_000),
  SIMULATOR_TALK_MS: ms(3_600_000, 5_000),
  SIMULATOR_SECOND_MS: ms(60_000, 1_000),
  /** When set, the simulator appends one JSON line per dial to this file (for audits and tests). */
  SIMULATOR_DIAL_LOG: Type.Optional(Type.String({ minLength: 1 })),
  /** With AGENT_RUNTIME_URL set, whether answered simulated calls stream to it (a route's `stream` setting decides for its own calls). */
  SIMULATOR_STREAM: Type.Union([Type.Literal('true'), Type.Literal('false')], { default: 'true' }),
  /** What the simulated callee says on a streamed call: a WAV (8 kHz mono, 16-bit PCM or μ-law) or raw μ-law file, played once; unset, a tone pattern. */
  SIMULATOR_STREAM_AUDIO: Type.Optional(Type.String({ minLength: 1 })),
  /** When set, what the agent runtime played to each streamed call is written to this directory as run-<id>.wav. */
  SIMULATOR_STREAM_RECORD_DIR: Type.Optional(Type.String({ minLength: 1 })),
  /** How long the agent runtime has to accept a simulated call's stream before the call ends failed (agent_runtime_unreachable). */
  SIMULATOR_STREAM_CONNECT_TIMEOUT_MS: int(100, 60_000, 5_000),
  /** Largest message taken from the agent runtime over a simulated call's stream; a larger one closes the stream (and the call). */
  SIMULATOR_STREAM_MAX_MESSAGE_BYTES: int(1_024, 16_777_216, 1_048_576),
  /** Most audio from the agent runtime queued to play on one simulated call, in ms; what arrives beyond it is dropped. */
  SIMULATOR_STREAM_MAX_QUEUED_MS: int(1_000, 3_600_000, 120_000),
  /** How far behind real time the agent runtime's audio may fall and still be caught up (as SIP_MEDIA_STREAM_CATCH_UP_MS). */
  SIMULATOR_STREAM_CATCH_UP_MS: int(20, 1_000, 100),
};

export const simulatorDefinition = defineProvider<SimulatorRouteConfig, typeof configKeys>({
  name: 'simulator',
  summary: 'Built-in simulated carrier: no network, the outcome follows the destination number (docs/simulator.md).',
  capabilities: {
    callsOutliveNode: false,
    dialsSipUris: false,
    // Its reserved numbers play voicemail boxes, faxes and people, and say which when asked.
    supportsMachineDetection: true,
    // Transfers to reserved targets end as their number says; digits are recorded (docs/simulator.md).
    supportsTransfer: true,
    sendsDtmf: true,
  },
  settings: [
    { name: 'answer_latency_ms', type: 'integer', description: 'Dial to ringing, in place of SIMULATOR_LATENCY_MS.' },
    { name: 'ring_ms', type: 'integer', description: 'Ringing to answer, in place of SIMULATOR_RING_MS.' },
    { name: 'talk_ms', type: 'integer', description: 'Answer to hang-up, in place of SIMULATOR_TALK_MS.' },
    { name: 'second_ms', type: 'integer', description: 'One simulated second, in place of SIMULATOR_SECOND_MS.' },
    // A boolean in JSON; "true" and "false" as text too, so the CLI's string flag can set it.
    { name: 'stream', type: 'string', description: 'true or false: whether answered calls stream to AGENT_RUNTIME_URL, in place of SIMULATOR_STREAM.' },
  ],
  credentials: [],
  decodeRoute: decodeSimulatorRoute,
  configKeys,
  callbackRoutes: [],
  create: ({ config, clock, logger, emit, emitVerdict, emitTransfer, agentRuntime }) =>
    new SimulatorProvider(
      { latencyMs: config.SIMULATOR_LATENCY_MS, ringMs: config.SIMULATOR_RING_MS, talkMs: config.SIMULATOR_TALK_MS, secondMs: config.SIMULATOR_SECOND_MS },
      clock,
      emit,
      config.SIMULATOR_DIAL_LOG,
      emitVerdict,
      emitTransfer,
      agentRuntime && {
        streaming: {
          runtime: agentRuntime,
          byDefault: config.SIMULATOR_STREAM === 'true',
          limits: { connectTimeoutMs: config.SIMULATOR_STREAM_CONNECT_TIMEOUT_MS, maxMessageBytes: config.SIMULATOR_STREAM_MAX_MESSAGE_BYTES, maxQueuedMs: config.SIMULATOR_STREAM_MAX_QUEUED_MS, catchUpMs: config.SIMULATOR_STREAM_CATCH_UP_MS },
          // Read once at start-up: a file the simulator cannot play stops the service with the reason.
          voice: config.SIMULATOR_STREAM_AUDIO ? voiceFromFile(config.SIMULATOR_STREAM_AUDIO) : defaultVoice(),
          recordDir: config.SIMULATOR_STREAM_RECORD_DIR,
        },
        warn: (runId, message) => logger.warn({ runId }, `simulated call's media stream: ${message}`),
      },
    ),
});
