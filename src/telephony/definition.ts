// What a provider declares about itself, in one place (its folder's `definition.ts`): its name,
// what it can do, the settings and credentials its routes take, the decoder that checks them, the
// service settings (environment variables) it reads, the callbacks it receives over HTTP, and how
// to build it. The registry (registry.ts) lists the definitions; the catalog, the CLI, the
// configuration schema, route checks and deps.ts all read them from there, so adding a provider is
// one folder and one line (docs/design.md, "Provider interface").
import type { Static, TObject, TProperties } from '@sinclair/typebox';
import type { Logger } from 'pino';
import type { Clock } from '../shared/clock.js';
import type { AnsweringMachineAsk, MachineVerdictSink, ProviderCapabilities, ProviderEventSink, RouteDecoding, RouteInput, TelephonyProvider, TransferOutcomeSink } from './provider.js';

export type { ProviderCapabilities } from './provider.js';

/** One key of a route's `settings` or `credentials`, described for people (CLI help, the catalog). */
export interface RouteFieldDescription {
  readonly name: string;
  readonly description: string;
  /** How the CLI reads it from a flag (`--<provider>-<name>`); credentials are never taken from flags. */
  readonly type: 'string' | 'integer';
  readonly required?: boolean;
}

/** The service-wide settings a provider may read besides its own keys. */
export interface ServiceConfig {
  /** Where providers call back (PUBLIC_BASE_URL). */
  readonly PUBLIC_BASE_URL?: string | undefined;
  readonly MAX_CALL_DURATION_MS: number;
  readonly DIAL_TIMEOUT_MS: number;
}

/**
 * Where answered calls are handed to the agent runtime (AGENT_RUNTIME_URL), for a provider that
 * relays a call's media itself (SIP): the URL and the `start` message's customParameters of a run
 * (its id and a fresh run token), the same as Twilio's `<Connect><Stream>` carries.
 */
export interface AgentRuntimeHandOff {
  readonly url: string;
  parameters(runId: number): Record<string, string>;
}

/** What a provider's factory is given. */
export interface ProviderContext<K extends TProperties> {
  /** The provider's own configuration keys, validated at start-up (config.ts), and the service-wide ones. */
  readonly config: Static<TObject<K>> & ServiceConfig;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Where the provider reports what happens to its calls. */
  readonly emit: ProviderEventSink;
  /** Where a provider that detects machines reports who answered (answering-machine detection). */
  readonly emitVerdict: MachineVerdictSink;
  /** Where a provider that transfers calls reports how each transfer ended. */
  readonly emitTransfer: TransferOutcomeSink;
  /** The agent runtime answered calls go to; undefined without AGENT_RUNTIME_URL. */
  readonly agentRuntime: AgentRuntimeHandOff | undefined;
}

/** A path a provider calls back on for a run, under /api/v1/providers/<name>/runs/:id/. */
export type CallbackRoute = 'answer' | 'status' | 'amd' | 'transfer';

/** What a provider's folder writes: everything about it, typed by its own route config and keys. */
export interface ProviderSpec<C, K extends TProperties> {
  /** Stored in the route's `provider` column and shown everywhere: lower case, stable. */
  readonly name: string;
  /** One line saying what it is (CLI help, the catalog). */
  readonly summary: string;
  readonly capabilities: ProviderCapabilities;
  readonly settings: readonly RouteFieldDescription[];
  readonly credentials: readonly RouteFieldDescription[];
  /** The route's settings and credentials schema: every problem listed with its JSON Pointer, or the typed config. */
  decodeRoute(input: RouteInput): RouteDecoding<C>;
  /**
   * Why a route of a provider that detects machines cannot do what an agent's answering_machine
   * asks (without `onMachine`: cannot detect at all), said to the caller; undefined when it can.
   * Absent: every route can do all its provider's capabilities say. A SIP route with media_address
   * sends the call's audio elsewhere, so Dialtone cannot hear who answered; a message cannot be
   * left on a SIP call without a speech command (`service`: the provider's own keys, as configured).
   */
  answeringMachineRefusal?(config: C, asked?: AnsweringMachineAsk, service?: Partial<Static<TObject<K>>>): string | undefined;
  /**
   * The environment variables it reads (TypeBox properties). Those of the built-in providers are
   * merged into the configuration schema (config.ts), so they are validated and documented with the rest.
   */
  readonly configKeys: K;
  /** The callbacks it receives over HTTP, each verified and parsed by its `callbacks` (provider.ts); empty when none. */
  readonly callbackRoutes: readonly CallbackRoute[];
  /** Builds the provider once per process (deps.ts). */
  create(context: ProviderContext<K>): TelephonyProvider<C>;
}

/** A provider's definition as the registry holds it, whatever its route config and keys. */
export interface ProviderDefinition extends Omit<ProviderSpec<unknown, TProperties>, 'create' | 'decodeRoute' | 'answeringMachineRefusal'> {
  decodeRoute(input: RouteInput): RouteDecoding<unknown>;
  /** The spec's, given a config its own decoder made (routes.ts) and the service's configuration; undefined when the spec has none. */
  answeringMachineRefusal?(config: unknown, asked?: AnsweringMachineAsk, service?: object): string | undefined;
  /** Given the service's whole configuration, of which the provider reads its own keys. */
  create(context: ProviderContext<TProperties>): TelephonyProvider;
}

/**
 * A provider's definition from its spec. The spec's factory is typed by its own keys; the registry
 * hands it the service's configuration, validated against a schema that holds those keys (config.ts
 * merges every built-in provider's), which is what makes the narrowing below true.
 */
export function defineProvider<C, K extends TProperties>(spec: ProviderSpec<C, K>): ProviderDefinition & { readonly configKeys: K } {
  const refusal = spec.answeringMachineRefusal;
  return {
    ...spec,
    decodeRoute: (input) => spec.decodeRoute(input),
    // The config was made by this spec's decoder (routes.ts decodes with the same definition).
    // The service's configuration holds this spec's keys (config.ts merges them), as `create` assumes.
    ...(refusal ? { answeringMachineRefusal: (config: unknown, asked?: AnsweringMachineAsk, service?: object) => refusal(config as C, asked, service as Partial<Static<TObject<K>>> | undefined) } : {}),
    create: (context) => spec.create(context as ProviderContext<K>) as TelephonyProvider,
  };
}
