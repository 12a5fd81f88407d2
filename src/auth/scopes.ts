// What an API key may do (docs/api.md, "Scopes"). Every route of the public API declares the one
// scope it needs (http/scopes.ts); a key without it is refused with 403 insufficient_scope. A key
// holds any set of them: a CRM's key can place calls and nothing else.
export const SCOPES = ['calls', 'campaigns', 'webhooks', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

/** What each scope allows, for people (the CLI's help, the OpenAPI document's description). */
export const SCOPE_SUMMARIES: Record<Scope, string> = {
  calls: 'place calls; read runs, their events, the stats, the event stream and the agents and routes to call through',
  campaigns: 'campaigns and their contacts; the suppression list',
  webhooks: 'webhook endpoints and their deliveries',
  admin: 'administer the organization: API keys, agents, telephony routes, its settings and audit log; erasing a person\'s data',
};

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** As stored (api_keys.scopes): the names in SCOPES order, comma-separated. */
export function encodeScopes(scopes: Iterable<Scope>): string {
  const held = new Set(scopes);
  return SCOPES.filter((scope) => held.has(scope)).join(',');
}

/** A stored list back to scopes; a name this version does not know grants nothing. */
export function decodeScopes(stored: string): Scope[] {
  const held = new Set(stored.split(','));
  return SCOPES.filter((scope) => held.has(scope));
}

/**
 * A comma-separated list as a person types it (`calls,campaigns`, spaces allowed), or the names it
 * holds that are not scopes. An empty list is refused: a key that can do nothing is a mistake.
 */
export function parseScopeList(text: string): { scopes: Scope[] } | { unknown: string[] } {
  const names = text.split(',').map((name) => name.trim()).filter((name) => name !== '');
  const unknown = names.filter((name) => !isScope(name));
  if (unknown.length > 0 || names.length === 0) return { unknown: names.length === 0 ? [text] : unknown };
  return { scopes: decodeScopes(names.join(',')) };
}
