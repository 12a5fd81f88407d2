// Row types of every table, as Kysely sees them. Times are epoch milliseconds (BIGINT) in both
// stores so that comparisons (leases, expiry) and ordering are the same code on SQLite and
// PostgreSQL; the API renders them as RFC 3339. Flags are 0/1 integers for the same reason
// (better-sqlite3 cannot bind booleans). JSON columns are TEXT on SQLite and JSONB on PostgreSQL:
// read them through `decodeJson`.
import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';
import type { RunState } from '../../runs/states.js';

/** A JSON column: written as a serialized string, read back as a string (SQLite) or a value (PostgreSQL). */
export type JsonColumn = ColumnType<unknown, string, string>;
export type Flag = 0 | 1;

export interface OrganizationsTable {
  id: Generated<number>;
  name: string;
  created_at: number;
  /** Overrides of the service-wide limits; null means the configuration's default. */
  rate_limit_per_second: number | null;
  key_rate_limit_per_second: number | null;
  max_queued_runs: number | null;
  /** Calling hours (policy/calling-hours.ts's CallingHours, JSON); null when off. */
  calling_hours: ColumnType<unknown, string | null | undefined, string | null>;
  /** The per-number frequency cap (calling policy): both set, or both null (off). */
  number_max_calls: number | null;
  number_window_seconds: number | null;
  /** Its own retention window in days (migration 023): null means RETENTION_DAYS, 0 keeps its runs forever. */
  retention_days: Generated<number | null>;
}

export interface ApiKeysTable {
  id: Generated<number>;
  org_id: number;
  name: string;
  prefix: string;
  hash: string;
  /** The key's scopes, comma-separated (auth/scopes.ts; migration 026 gave every earlier key all of them). */
  scopes: ColumnType<string, string | undefined, string>;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

export type WorkflowStatus = 'active' | 'archived';
export interface WorkflowsTable {
  id: Generated<number>;
  workflow_uuid: string;
  org_id: number;
  name: string;
  status: WorkflowStatus;
  created_at: number;
  updated_at: number;
}

export type DefinitionStatus = 'draft' | 'published' | 'archived';
export interface WorkflowDefinitionsTable {
  id: Generated<number>;
  workflow_id: number;
  version: number;
  status: DefinitionStatus;
  graph: JsonColumn;
  created_at: number;
  published_at: number | null;
}

/** Global registry of agent UUIDs: which workflow owns each trigger UUID, across all its versions. */
export interface ApiTriggersTable {
  trigger_uuid: string;
  workflow_id: number;
  org_id: number;
  created_at: number;
}

/**
 * A registered provider's name. The store keeps it as text and checks nothing (migration 018):
 * which names exist is the provider registry's to say (telephony/registry.ts), so adding a provider
 * touches no schema.
 */
export type ProviderName = string;
export type TelephonyStatus = 'active' | 'inactive';
export interface TelephonyConfigurationsTable {
  id: Generated<number>;
  org_id: number;
  name: string;
  provider: ProviderName;
  /** AES-256-GCM envelope of the provider credentials; null when the provider needs none. */
  credentials_encrypted: string | null;
  /** Non-secret provider settings (trunk host, media address, …). */
  settings: JsonColumn;
  caller_ids: JsonColumn;
  is_default: Flag;
  calls_per_second: number;
  max_concurrent_calls: number;
  status: TelephonyStatus;
  created_at: number;
  updated_at: number;
  /** Pacing: the earliest time the next call may be dialed through this configuration (all nodes). */
  pacing_next_at: Generated<number | null>;
}

export type RunMode = 'published' | 'test';
// The lifecycle (runs/states.ts) owns the list of states; the column's type is derived from it.
export type { RunState };

export interface WorkflowRunsTable {
  id: Generated<number>;
  /** `WR-API-<id>` / `WR-TEST-<id>`; null only inside the creating transaction. */
  name: string | null;
  org_id: number;
  workflow_id: number;
  definition_id: number;
  mode: RunMode;
  /** Trigger UUID the run was started through, null when started by workflow UUID. */
  trigger_uuid: string | null;
  phone_number: string;
  caller_id: string | null;
  telephony_configuration_id: number;
  /** The caller's `initial_context`, stored exactly as received (TEXT in both stores). */
  initial_context: string | null;
  state: RunState;
  outcome_reason: string | null;
  provider_call_id: string | null;
  created_at: number;
  updated_at: number;
  ended_at: number | null;
  /** Node holding the run: the claim lease while dialing, then the node tracking the live call. */
  lease_owner: string | null;
  lease_expires_at: number | null;
  /**
   * When the reaper ends the run if nothing has moved it on. Set exactly while the run is live
   * (dialing, ringing, in progress): null when queued or ended. Indexes rely on this.
   */
  deadline_at: number | null;
  claimed_at: number | null;
  dial_sent_at: number | null;
  ringing_at: number | null;
  answered_at: number | null;
  /** The provider's own words for the latest status (SIP status line, Twilio CallStatus). */
  raw_provider_status: string | null;
  cancel_requested_at: number | null;
  last_event_seq: Generated<number>;
  /** When a node last asked the provider about this run's call (reconciliation); null: never. */
  reconciled_at: Generated<number | null>;
  /** When a run queued outside calling hours becomes due; null for a run due at once. */
  scheduled_for: Generated<number | null>;
  /** A campaign's attempt: its campaign, contact and attempt number (1, 2, …); null for a direct run. */
  campaign_id: Generated<number | null>;
  contact_id: Generated<number | null>;
  attempt: Generated<number | null>;
  /** Who answered (answering-machine detection): null until a provider decides. */
  answered_by: Generated<AnsweredBy | null>;
  /** The provider's own words for that verdict (Twilio's AnsweredBy, e.g. `machine_end_beep`). */
  raw_answered_by: Generated<string | null>;
  /** What the agent runtime reported the call concluded: its JSON text (TEXT in both stores); null until reported. */
  result: Generated<string | null>;
  /** The agent runtime's transfer: `pending` until its outcome, then the outcome (answered, busy, no_answer, failed, refused); null when none was asked. */
  transfer_status: Generated<string | null>;
}

/** Who answered a call, as every provider's verdict is normalized. */
export const ANSWERED_BY = ['human', 'machine', 'fax', 'unknown'] as const;
export type AnsweredBy = (typeof ANSWERED_BY)[number];

export interface RunEventsTable {
  id: Generated<number>;
  run_id: number;
  seq: number;
  type: string;
  at: number;
  data: JsonColumn;
}

export type IdempotencyState = 'in_flight' | 'completed';
export interface IdempotencyKeysTable {
  org_id: number;
  key: string;
  /** SHA-256 of method, path and the canonical JSON body of the first request. */
  fingerprint: string;
  state: IdempotencyState;
  /** The claim's holder: a random token per request. */
  owner: string;
  /** An in-flight claim older than this is presumed dead and may be taken over. */
  locked_until: number;
  response_status: number | null;
  /** The response body exactly as first sent (JSON text). */
  response_body: string | null;
  run_id: number | null;
  created_at: number;
  expires_at: number;
}

export interface DispatcherNodesTable {
  node_id: string;
  started_at: number;
  /** Written every REAPER_INTERVAL_MS by a running dispatcher. */
  heartbeat_at: number;
}

export interface WebhookEndpointsTable {
  id: Generated<number>;
  org_id: number;
  url: string;
  description: string | null;
  /** `,type,type,` or '' for every type (see the migration). */
  event_filter: string;
  enabled: Flag;
  /** Why it was disabled: `request`, `gone` (410), `failing`; null while enabled. */
  disabled_reason: string | null;
  secret_encrypted: string;
  previous_secret_encrypted: string | null;
  previous_secret_expires_at: number | null;
  failing_since: number | null;
  created_at: number;
  updated_at: number;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';
export interface WebhookDeliveriesTable {
  id: Generated<number>;
  endpoint_id: number;
  message_id: string;
  event_type: string;
  run_id: number | null;
  seq: number | null;
  payload: string;
  status: DeliveryStatus;
  attempt_count: number;
  next_attempt_at: number | null;
  locked_by: string | null;
  locked_until: number | null;
  created_at: number;
  updated_at: number;
}

export interface WebhookAttemptsTable {
  id: Generated<number>;
  delivery_id: number;
  at: number;
  http_status: number | null;
  error: string | null;
  duration_ms: number;
  response_body: string | null;
}

/**
 * One recorded webhook delivery attempt, for the organization's event stream (migration 011). Its
 * id comes from run_events' sequence: one order for both.
 */
export interface WebhookDeliveryEventsTable {
  id: Generated<number>;
  org_id: number;
  endpoint_id: number;
  delivery_id: number;
  message_id: string;
  event_type: string;
  run_id: number | null;
  /** The attempt's number since the delivery was last (re)queued, from 1. */
  attempt: number;
  /** The delivery's status after the attempt: `pending` means it will be tried again at next_attempt_at. */
  status: DeliveryStatus;
  http_status: number | null;
  error: string | null;
  next_attempt_at: number | null;
  /** Why this attempt disabled the endpoint, if it did. */
  endpoint_disabled: 'gone' | 'failing' | null;
  at: number;
}

export interface Database {
  dispatcher_nodes: DispatcherNodesTable;
  idempotency_keys: IdempotencyKeysTable;
  organizations: OrganizationsTable;
  api_keys: ApiKeysTable;
  workflows: WorkflowsTable;
  workflow_definitions: WorkflowDefinitionsTable;
  api_triggers: ApiTriggersTable;
  telephony_configurations: TelephonyConfigurationsTable;
  workflow_runs: WorkflowRunsTable;
  run_events: RunEventsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  webhook_delivery_events: WebhookDeliveryEventsTable;
  suppressions: SuppressionsTable;
  campaigns: CampaignsTable;
  campaign_contacts: CampaignContactsTable;
  campaign_events: CampaignEventsTable;
  audit_events: AuditEventsTable;
  campaign_dial_pacing: CampaignDialPacingTable;
  secret_key_check: SecretKeyCheckTable;
}

/** The check value of DIALTONE_SECRET_KEY (migration 017, secret-key.ts): one row, id 1. */
export interface SecretKeyCheckTable {
  id: number;
  value: string;
  created_at: number;
}

export const CAMPAIGN_STATES = ['draft', 'running', 'paused', 'completed', 'canceled'] as const;
export type CampaignState = (typeof CAMPAIGN_STATES)[number];
export const PAUSED_REASONS = ['request', 'circuit_breaker', 'ends_at'] as const;
export type PausedReason = (typeof PAUSED_REASONS)[number];

/** A campaign (campaigns/campaigns.ts); its JSON columns are decoded there. */
export interface CampaignsTable {
  id: Generated<number>;
  org_id: number;
  name: string;
  workflow_id: number;
  trigger_uuid: string | null;
  mode: RunMode;
  telephony_configuration_id: number;
  max_concurrent_calls: number;
  calls_per_second: number | null;
  starts_at: number | null;
  ends_at: number | null;
  schedule: ColumnType<unknown, string | null, string | null>;
  retry: JsonColumn;
  circuit_breaker: JsonColumn;
  state: CampaignState;
  paused_reason: PausedReason | null;
  contacts_version: Generated<number>;
  breaker_since: number | null;
  pacing_next_at: number | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  created_at: number;
  updated_at: number;
  started_at: number | null;
  finished_at: number | null;
  /** The campaign's own answering_machine settings (JSON text), in place of its agent's; null: the agent's. */
  answering_machine: Generated<string | null>;
}

/** The changes of a campaign's state that the event stream reports (`event: campaign.<change>`). */
export const CAMPAIGN_STREAM_EVENTS = ['campaign.created', 'campaign.started', 'campaign.paused', 'campaign.resumed', 'campaign.completed', 'campaign.canceled'] as const;
export type CampaignStreamEvent = (typeof CAMPAIGN_STREAM_EVENTS)[number];

/**
 * One change of a campaign's state, for the organization's event stream (migration 012): what the
 * change fixed, in its transaction. Its id comes from run_events' sequence, like a delivery event's.
 */
export interface CampaignEventsTable {
  id: Generated<number>;
  org_id: number;
  campaign_id: number;
  type: CampaignStreamEvent;
  /** The campaign's name, state and paused reason as the change left them. */
  name: string;
  state: CampaignState;
  paused_reason: PausedReason | null;
  at: number;
}

export const CONTACT_STATUSES = ['pending', 'in_progress', 'reached', 'exhausted', 'suppressed', 'invalid', 'canceled'] as const;
export type ContactStatus = (typeof CONTACT_STATUSES)[number];

export interface CampaignContactsTable {
  id: Generated<number>;
  campaign_id: number;
  phone_number: string;
  initial_context: string | null;
  timezone: string | null;
  status: ContactStatus;
  attempts: Generated<number>;
  refunded: Generated<number>;
  next_attempt_at: number;
  last_run_id: number | null;
  created_at: number;
  updated_at: number;
}

export type CampaignRow = Selectable<CampaignsTable>;
export type CampaignContactRow = Selectable<CampaignContactsTable>;

/** One number an organization must not call (until `expires_at`, when set). */
export interface SuppressionsTable {
  org_id: number;
  phone_number: string;
  reason: string | null;
  expires_at: number | null;
  created_at: number;
  updated_at: number;
}

export type SuppressionRow = Selectable<SuppressionsTable>;
export type OrganizationRow = Selectable<OrganizationsTable>;
export type ApiKeyRow = Selectable<ApiKeysTable>;
export type WorkflowRow = Selectable<WorkflowsTable>;
export type DefinitionRow = Selectable<WorkflowDefinitionsTable>;
export type TelephonyConfigurationRow = Selectable<TelephonyConfigurationsTable>;
export type WorkflowRunRow = Selectable<WorkflowRunsTable>;
export type NewWorkflowRun = Insertable<WorkflowRunsTable>;
export type RunEventRow = Selectable<RunEventsTable>;
export type WebhookEndpointRow = Selectable<WebhookEndpointsTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type WebhookAttemptRow = Selectable<WebhookAttemptsTable>;
export type WebhookDeliveryEventRow = Selectable<WebhookDeliveryEventsTable>;
export type CampaignEventRow = Selectable<CampaignEventsTable>;

/** A paced campaign's next free dial slot (migration 014), taken under its route's configuration row lock. */
export interface CampaignDialPacingTable {
  campaign_id: number;
  telephony_configuration_id: number;
  next_at: number;
}

/** Who made an audited change: an API key, the CLI on the database, or the service itself (migration 025). */
export type AuditActorKind = 'api_key' | 'cli' | 'system';

/** One entry of an organization's audit log (migration 025): append-only, secrets redacted before it is written. */
export interface AuditEventsTable {
  id: Generated<number>;
  org_id: number;
  actor: AuditActorKind;
  /** The key that acted, and its name then; null unless `actor` is 'api_key'. */
  actor_key_id: number | null;
  actor_key_name: string | null;
  action: string;
  target_type: string;
  target_id: string | null;
  /** JSON text, redacted; null when there was nothing before (a creation) or after (a deletion). */
  before: string | null;
  after: string | null;
  created_at: number;
}

export type AuditEventRow = Selectable<AuditEventsTable>;
