// Telephony configuration rows become DecodedRoutes here, and only here: settings parsed, the
// credentials decrypted once (a route's decoding is kept until its row changes) and checked against
// its provider's schema, every problem listed. Dispatch, callbacks, readiness and reconciliation all
// go through `decode`, so a route whose stored settings or credentials do not fit its provider is
// refused the same way everywhere.
import type { FieldError } from '../errors.js';
import type { ProviderName, TelephonyConfigurationRow } from '../store/schema/schema.js';
import { decodeJson } from '../store/engine/store.js';
import type { CredentialsCipher } from '../shared/credentials-cipher.js';
import type { DecodedRoute, ProviderCapabilities, Providers, ReadinessProblem, RouteInput, ServiceSettings } from './provider.js';
import type { ProviderDefinition } from './definition.js';
import { builtInProviders, type ProviderRegistry } from './registry.js';

export type RouteResult = { ok: true; route: DecodedRoute } | { ok: false; problems: FieldError[] };

/** Decoded routes kept; past this the cache starts over (routes are few; this only bounds a leak). */
const CACHE_LIMIT = 1_000;

/** Settings every provider understands. */
export function commonSettingsProblems(settings: Record<string, unknown>): FieldError[] {
  const ring = settings.ring_timeout_ms;
  if (ring !== undefined && !(typeof ring === 'number' && Number.isInteger(ring) && ring > 0 && ring <= 600_000)) {
    return [{ pointer: '/settings/ring_timeout_ms', detail: 'Must be a whole number of milliseconds, above 0 and at most 600000.' }];
  }
  return [];
}

/** A route naming a provider nobody registered (one removed from the registry since the row was written). */
function unknownProvider(provider: ProviderName, registry: ProviderRegistry): FieldError {
  return { pointer: '/provider', detail: `No provider named "${provider}" is registered; this service knows ${registry.names.join(', ')}.` };
}

/**
 * Checks settings and credentials against the provider's schema, its definition's decoder (as given
 * at creation, before encryption: no provider need be built for it).
 */
export function routeInputProblems(provider: ProviderName, input: RouteInput, registry: ProviderRegistry = builtInProviders): FieldError[] {
  const definition = registry.find(provider);
  if (!definition) return [unknownProvider(provider, registry)];
  const decoded = definition.decodeRoute(input);
  return [...commonSettingsProblems(input.settings), ...(decoded.ok ? [] : decoded.problems)];
}

interface Cached {
  updatedAt: number;
  settings: string;
  envelope: string | null;
  result: RouteResult;
}

export class RouteDecoder {
  private readonly cache = new Map<number, Cached>();

  constructor(
    private readonly cipher: CredentialsCipher,
    private readonly providers: Providers,
    private readonly registry: ProviderRegistry,
  ) {}

  decode(row: TelephonyConfigurationRow): RouteResult {
    const settingsText = typeof row.settings === 'string' ? row.settings : JSON.stringify(row.settings);
    const cached = this.cache.get(row.id);
    if (cached && cached.updatedAt === row.updated_at && cached.settings === settingsText && cached.envelope === row.credentials_encrypted) return cached.result;
    const result = this.decodeNow(row);
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
    this.cache.set(row.id, { updatedAt: row.updated_at, settings: settingsText, envelope: row.credentials_encrypted, result });
    return result;
  }

  /** Why the route cannot place a call now, said for a person: its schema's problems, then its provider's readiness. */
  readiness(row: TelephonyConfigurationRow, service: ServiceSettings): string[] {
    const decoded = this.decode(row);
    if (!decoded.ok) return decoded.problems.map(describeProblem);
    return this.providerReadiness(row, decoded.route, service).map((problem) => (typeof problem === 'string' ? problem : problem.detail));
  }

  /**
   * The same problems, each with its JSON Pointer into the configuration as the management API
   * shows it (`/settings/host`, `/credentials/auth_token`, `/caller_ids`; empty for the route as a
   * whole or the service around it).
   */
  readinessProblems(row: TelephonyConfigurationRow, service: ServiceSettings): FieldError[] {
    const decoded = this.decode(row);
    if (!decoded.ok) return decoded.problems;
    return this.providerReadiness(row, decoded.route, service).map((problem) => (typeof problem === 'string' ? { pointer: '', detail: problem } : problem));
  }

  private providerReadiness(row: TelephonyConfigurationRow, route: DecodedRoute, service: ServiceSettings): ReadinessProblem[] {
    const provider = this.providers[row.provider];
    if (!provider) return [{ pointer: '/provider', detail: `No provider named "${row.provider}" is running in this process.` }];
    return provider.readiness(route, service);
  }

  private decodeNow(row: TelephonyConfigurationRow): RouteResult {
    const settings = decodeJson<Record<string, unknown>>(row.settings) ?? {};
    let credentials: Record<string, unknown> | null = null;
    if (row.credentials_encrypted !== null) {
      try {
        credentials = this.cipher.decrypt(row.org_id, row.credentials_encrypted);
      } catch (error) {
        // A changed DIALTONE_SECRET_KEY, or no key at all: said as such, never as a crash.
        return { ok: false, problems: [{ pointer: '/credentials', detail: `Cannot be decrypted: ${(error as Error).message}` }] };
      }
    }
    const definition = this.registry.find(row.provider);
    if (!definition) return { ok: false, problems: [unknownProvider(row.provider, this.registry)] };
    const problems = commonSettingsProblems(settings);
    const decoded = definition.decodeRoute({ settings, credentials });
    if (!decoded.ok) problems.push(...decoded.problems);
    if (problems.length > 0 || !decoded.ok) return { ok: false, problems };
    const ring = settings.ring_timeout_ms;
    return {
      ok: true,
      route: {
        id: row.id,
        orgId: row.org_id,
        provider: row.provider,
        capabilities: routeCapabilities(definition, decoded.config),
        callerIds: decodeJson<string[]>(row.caller_ids) ?? [],
        ringTimeoutMs: typeof ring === 'number' ? ring : undefined,
        config: decoded.config,
      },
    };
  }
}

/** The provider's capabilities, less machine detection when this route's settings rule it out. */
function routeCapabilities(definition: ProviderDefinition, config: unknown): ProviderCapabilities {
  const { capabilities } = definition;
  if (!capabilities.supportsMachineDetection || !definition.answeringMachineRefusal?.(config)) return capabilities;
  return { ...capabilities, supportsMachineDetection: false };
}

export function describeProblem(problem: FieldError): string {
  return `${problem.pointer.replace(/^\//, '')}: ${problem.detail}`;
}

/** Why a route whose stored settings or credentials do not fit its provider refuses dials. */
export function routeInvalidDetail(problems: FieldError[]): string {
  return `The telephony configuration does not match its provider's schema: ${problems.map(describeProblem).join('; ')}`;
}
