// The providers this service knows, each a folder under telephony/ with its definition
// (definition.ts). Everything that differs by provider reads it from here: deps.ts builds the
// providers, config.ts takes their environment variables, route checks use their decoders, the
// catalog and the CLI list them, the HTTP layer mounts their callbacks, and code that depends on a
// capability (a SIP URI, a call that outlives its node) asks the route's definition. The database
// holds the name as text and checks nothing (migration 018): this list is the authority.
// Adding a provider is a folder and a line in BUILT_IN_PROVIDERS (docs/design.md, "Provider interface").
import type { ProviderCapabilities, ProviderDefinition } from './definition.js';
import { simulatorDefinition } from './simulator/definition.js';
import { sipDefinition } from './sip/definition.js';
import { twilioDefinition } from './twilio/definition.js';

export const BUILT_IN_PROVIDERS = [simulatorDefinition, twilioDefinition, sipDefinition] as const;

type UnionToIntersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;

/** Every built-in provider's environment variables, as TypeBox properties (config.ts merges them in). */
export type ProviderConfigKeys = UnionToIntersection<(typeof BUILT_IN_PROVIDERS)[number]['configKeys']>;

export const PROVIDER_CONFIG_KEYS = Object.assign({}, ...BUILT_IN_PROVIDERS.map((d) => d.configKeys)) as ProviderConfigKeys;

const NAME = /^[a-z][a-z0-9_]{0,31}$/;

export class ProviderRegistry {
  private readonly byName = new Map<string, ProviderDefinition>();

  constructor(readonly definitions: readonly ProviderDefinition[]) {
    for (const definition of definitions) {
      if (!NAME.test(definition.name)) throw new Error(`A provider's name is lower case letters, digits and _ (at most 32): "${definition.name}".`);
      if (this.byName.has(definition.name)) throw new Error(`Two providers are named "${definition.name}".`);
      this.byName.set(definition.name, definition);
    }
  }

  /** The providers' names, in registry order. */
  get names(): string[] {
    return this.definitions.map((d) => d.name);
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  find(name: string): ProviderDefinition | undefined {
    return this.byName.get(name);
  }

  /** A registered provider's definition; a name nobody registered is a bug in the caller (check `has` on input). */
  get(name: string): ProviderDefinition {
    const definition = this.byName.get(name);
    if (!definition) throw new Error(`No provider named "${name}" is registered (${this.names.join(', ')}).`);
    return definition;
  }

  /** What the provider can do; every capability false for a name nobody registered. */
  capabilities(name: string): ProviderCapabilities {
    return this.byName.get(name)?.capabilities ?? NO_CAPABILITIES;
  }

  /** This registry and more providers (a deployment's own, a test's fake). */
  with(...more: readonly ProviderDefinition[]): ProviderRegistry {
    return new ProviderRegistry([...this.definitions, ...more]);
  }
}

const NO_CAPABILITIES: ProviderCapabilities = { callsOutliveNode: false, dialsSipUris: false, supportsMachineDetection: false, supportsTransfer: false, sendsDtmf: false };

/** The registry of the built-in providers. */
export const builtInProviders = new ProviderRegistry(BUILT_IN_PROVIDERS);
