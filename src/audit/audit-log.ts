// The audit log (docs/design.md, "Audit log"): who changed what in an organization, what it was
// before and after, and when. An entry is written by `recordAuditEvent` inside the transaction of
// the change it records, so a change is never without its entry nor an entry without its change.
// Secrets never reach the table: every before/after is redacted here, whatever the caller passes.
// Each entry is also an `audit.event` webhook message, written to the outbox in the same
// transaction, for the endpoints that name that type (docs/webhooks.md).
import { insertAuditEvent } from '../store/statements/audit-statements.js';
import { insertOrganizationDeliveries } from '../store/statements/webhook-statements.js';
import type { AuditEventRow } from '../store/schema/schema.js';
import type { StoreTransaction } from '../store/engine/store.js';
import { AUDIT_WEBHOOK_TYPE, auditMessageId } from '../webhooks/event-types.js';
import { auditMessageBody } from '../webhooks/message.js';

/** Who made a change: an API key (its id and name), the CLI on the database, or the service itself. */
export type AuditActor = { kind: 'api_key'; keyId: number; keyName: string } | { kind: 'cli' } | { kind: 'system' };

/** The CLI working on the database directly (bootstrapping, or an operator on the host). */
export const CLI_ACTOR: AuditActor = { kind: 'cli' };
/** The service acting on its own (a retention pass, say). */
export const SYSTEM_ACTOR: AuditActor = { kind: 'system' };

export interface AuditEntry {
  orgId: number;
  actor: AuditActor;
  /** `<target>.<past participle>`, lower snake case: `api_key.created`, `organization.settings_updated`. */
  action: string;
  /** What changed: its type (`api_key`, `organization`, …) and id, when it has one. */
  target: { type: string; id: string | number | null };
  /** The target before and after the change, as the API shows it; absent when there was none (a creation, a deletion). Redacted here. */
  before?: unknown;
  after?: unknown;
  /** When (ms since the epoch), from the caller's clock. */
  at: number;
}

const ACTION = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;
const TARGET_TYPE = /^[a-z][a-z0-9_]*$/;

/**
 * Records one entry in the caller's transaction, with its `audit.event` message to every enabled
 * endpoint of the organization that names that type, and returns its id. The message is in the
 * outbox once the change commits; the delivery workers find it at their next look (a caller that
 * can wake them after the commit does: `Signals.outbox`). A malformed action or target type is a
 * programming error and throws (the transaction, and so the change, is rolled back).
 */
export async function recordAuditEvent(trx: StoreTransaction, entry: AuditEntry): Promise<number> {
  if (!ACTION.test(entry.action)) throw new Error(`Audit action "${entry.action}" is not <target>.<verb> in lower snake case`);
  if (!TARGET_TYPE.test(entry.target.type)) throw new Error(`Audit target type "${entry.target.type}" is not lower snake case`);
  const { actor } = entry;
  const row: Omit<AuditEventRow, 'id'> = {
    org_id: entry.orgId,
    actor: actor.kind,
    actor_key_id: actor.kind === 'api_key' ? actor.keyId : null,
    actor_key_name: actor.kind === 'api_key' ? actor.keyName : null,
    action: entry.action,
    target_type: entry.target.type,
    target_id: entry.target.id === null ? null : String(entry.target.id),
    before: entry.before === undefined ? null : JSON.stringify(redactSecrets(entry.before)),
    after: entry.after === undefined ? null : JSON.stringify(redactSecrets(entry.after)),
    created_at: entry.at,
  };
  const id = await insertAuditEvent(trx, row);
  await insertOrganizationDeliveries(trx, entry.orgId, {
    messageId: auditMessageId(id),
    eventType: AUDIT_WEBHOOK_TYPE,
    payload: auditMessageBody(entry.at, auditEventView({ ...row, id })),
    at: entry.at,
    onlyNamed: true,
  });
  return id;
}

/** An entry as the API lists it and the `audit.event` message carries it (the AuditEvent schema). */
export interface AuditEventView {
  id: number;
  action: string;
  actor: AuditEventRow['actor'];
  actor_key_id: number | null;
  actor_key_name: string | null;
  target_type: string;
  target_id: string | null;
  before: unknown;
  after: unknown;
  created_at: string;
}

export function auditEventView(row: AuditEventRow): AuditEventView {
  return {
    id: Number(row.id),
    action: row.action,
    actor: row.actor,
    actor_key_id: row.actor_key_id === null ? null : Number(row.actor_key_id),
    actor_key_name: row.actor_key_name,
    target_type: row.target_type,
    target_id: row.target_id,
    before: row.before === null ? null : (JSON.parse(row.before) as unknown),
    after: row.after === null ? null : (JSON.parse(row.after) as unknown),
    created_at: new Date(Number(row.created_at)).toISOString(),
  };
}

/** What a redacted value is replaced with. */
export const REDACTED = '[redacted]';

// A member is secret by its name (`secret`, `password`, `token`, `hash`, `credentials`, `key` or
// `…_key`, anything private or signing) or by its value's shape (a full API key, a webhook signing
// secret): two nets, so a secret under an unexpected name is still caught by its shape.
const SECRET_NAME = /(secret|passw(or)?d|token|hash|credential|private|signing|(^|_)key$)/i;
const SECRET_VALUE = /(dt_live_[A-Za-z0-9]{10}_[A-Za-z0-9]{8,}|whsec_[A-Za-z0-9+/=]{8,})/;

/** null, a boolean, or an object of only those (`credentials_set: { auth_token: true }`): whether secrets are set, never what they are. */
function onlySaysWhetherSet(member: unknown): boolean {
  if (member === null || member === undefined || typeof member === 'boolean') return true;
  return typeof member === 'object' && !Array.isArray(member) && Object.values(member).every((inner) => inner === null || typeof inner === 'boolean');
}

/**
 * A copy of `value` with every secret replaced by REDACTED: a member with a secret's name (unless
 * it only says whether a secret is set: null, a boolean, or an object of those) and any string
 * shaped like a secret, at any depth.
 */
export function redactSecrets(value: unknown): unknown {
  if (typeof value === 'string') return SECRET_VALUE.test(value) ? REDACTED : value;
  if (Array.isArray(value)) return value.map(redactSecrets);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [name, member] of Object.entries(value)) {
      // null and booleans stay: they say whether a secret is set, never what it is.
      const hides = SECRET_NAME.test(name) && !onlySaysWhetherSet(member);
      out[name] = hides ? REDACTED : redactSecrets(member);
    }
    return out;
  }
  return value;
}
