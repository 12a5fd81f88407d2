// The simulator as the registry knows it (telephony/definition.ts): a carrier without a network,
// built into every node, whose outcome is picked by the destination number (docs/simulator.md).
import { Type } from '@sinclair/typebox';
import { defineProvider } from '../definition.js';
import { decodeSimulatorRoute, SimulatorProvider, type SimulatorRouteConfig } from './provider.js';

const ms = (max: number, dflt: number) => Type.Integer({ minimum: 0, maximum: max, default: dflt });

/** The service's simulator timings; a route's settings may replace each for its own calls. */
const configKeys = {
  /** Simulator timings (ms): dial to ringing, ringing to answer, answer to hang-up, one "simulated second". */
  SIMULATOR_LATENCY_MS: ms(60_000, 100),
  SIMULATOR_RING_MS: ms(600_000, 2_000),
  SIMULATOR_TALK_MS: ms(3_600_000, 5_000),
  SIMULATOR_SECOND_MS: ms(60_000, 1_000),
  /** When set, the simulator appends one JSON line per dial to this file (for audits and tests). */
  SIMULATOR_DIAL_LOG: Type.Optional(Type.String({ minLength: 1 })),
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
  ],
  credentials: [],
  decodeRoute: decodeSimulatorRoute,
  configKeys,
  callbackRoutes: [],
  create: ({ config, clock, emit, emitVerdict, emitTransfer }) =>
    new SimulatorProvider(
      { latencyMs: config.SIMULATOR_LATENCY_MS, ringMs: config.SIMULATOR_RING_MS, talkMs: config.SIMULATOR_TALK_MS, secondMs: config.SIMULATOR_SECOND_MS },
      clock,
      emit,
      config.SIMULATOR_DIAL_LOG,
      emitVerdict,
      emitTransfer,
    ),
});
