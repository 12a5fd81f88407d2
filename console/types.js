// The shapes of the API's answers as the console reads them: JSDoc types only, nothing at run time.
// Each is the part of the OpenAPI document's schema (GET /openapi.json; the schema or operation is
// named in brackets) that the console uses; the document is the reference and has every field.
// test/console-types.test.ts checks that each typedef named after one of the document's schemas
// names only that schema's properties. A run's state is a string here, not a closed union: the
// console learns the states from GET /run-states (run-states.js).
export {};

/**
 * A page of a cursor-paged list (`?after=&limit=` → `{ data, next_after }`).
 * @template T
 * @typedef {{ data: T[], next_after: number | null }} Page
 */

/** @typedef {{ data: RunStateInfo[] }} RunStateList [GET /run-states] */
/** @typedef {{ state: string, terminal: boolean, live: boolean }} RunStateInfo */

/**
 * A workflow run: one call [WorkflowRun].
 * @typedef {object} Run
 * @property {number} id
 * @property {string} name
 * @property {string} state
 * @property {'published' | 'test'} mode
 * @property {string} workflow_uuid
 * @property {string | null} agent_uuid
 * @property {number} definition_version
 * @property {string} phone_number
 * @property {string | null} caller_id
 * @property {number} telephony_configuration_id
 * @property {Record<string, unknown> | null} initial_context
 * @property {string | null} outcome_reason
 * @property {string | null} raw_provider_status
 * @property {string | null} provider_call_id
 * @property {string} created_at
 * @property {string} updated_at
 * @property {string | null} answered_at
 * @property {'human' | 'machine' | 'fax' | 'unknown' | null} answered_by who answered (answering-machine detection), null until known
 * @property {string | null} raw_answered_by the provider's own verdict (Twilio's machine_end_beep)
 * @property {string | null} ended_at
 * @property {string | null} cancel_requested_at
 * @property {number | null} campaign_id
 * @property {Record<string, unknown> | null} result
 */

/**
 * A state a run entered [WorkflowRunEvent].
 * @typedef {object} RunEvent
 * @property {number} seq
 * @property {string} type
 * @property {string} at
 * @property {Record<string, unknown>} data
 */

/**
 * A workflow (agent) [Workflow].
 * @typedef {object} Workflow
 * @property {string} workflow_uuid
 * @property {string} name
 * @property {'active' | 'archived'} status
 * @property {number | null} published_version
 * @property {number | null} draft_version
 * @property {string[]} agent_uuids
 * @property {string[]} draft_agent_uuids
 * @property {string[]} variables
 * @property {string[]} draft_variables
 * @property {string} created_at
 * @property {string} updated_at
 */

/**
 * One version of a workflow, without its definition [WorkflowVersion].
 * @typedef {object} WorkflowVersion
 * @property {number} version
 * @property {'draft' | 'published' | 'archived'} status
 * @property {string} created_at
 * @property {string | null} published_at
 * @property {string[]} agent_uuids
 */

/**
 * A workflow with its published version and its draft [WorkflowWithVersions].
 * @typedef {object} WorkflowWithVersionsOwn
 * @property {WorkflowVersion | null} published
 * @property {WorkflowVersion | null} draft
 */
/** @typedef {Workflow & WorkflowWithVersionsOwn} WorkflowWithVersions */

/**
 * One version's definition [WorkflowDefinitionVersion].
 * @typedef {object} WorkflowDefinitionVersion
 * @property {string} workflow_uuid
 * @property {number} version
 * @property {'draft' | 'published' | 'archived'} status
 * @property {Record<string, unknown>} definition
 */

/** @typedef {{ id: number, name: string, provider: string, caller_ids: string[], is_default: boolean, status: 'active' | 'inactive', has_credentials: boolean }} TelephonyConfiguration [GET /telephony-configurations] */

/**
 * A telephony configuration (route) as an `admin` key reads it: its settings, and only whether each
 * credential is set, never a credential [TelephonyConfigurationDetails].
 * @typedef {object} TelephonyConfigurationDetails
 * @property {number} id
 * @property {string} name
 * @property {string} provider
 * @property {string[]} caller_ids
 * @property {boolean} is_default
 * @property {number} calls_per_second
 * @property {number} max_concurrent_calls
 * @property {'active' | 'inactive'} status
 * @property {Record<string, unknown>} settings
 * @property {boolean} has_credentials
 * @property {Record<string, boolean>} credentials_set
 * @property {string} created_at
 * @property {string} updated_at
 */

/**
 * Whether a route can place calls now, and every reason it cannot [TelephonyConfigurationReadiness].
 * @typedef {object} TelephonyConfigurationReadiness
 * @property {number} id
 * @property {boolean} ready
 * @property {{ pointer: string, detail: string }[]} problems
 */

/** One setting or credential a provider's routes take. @typedef {{ name: string, description: string, type: 'string' | 'integer', required: boolean }} RouteField */
/** A provider a route can use [GET /telephony-providers]. @typedef {{ name: string, summary: string, settings: RouteField[], credentials: RouteField[] }} TelephonyProvider */

/**
 * The overview's numbers [GET /stats].
 * @typedef {object} Stats
 * @property {string} since
 * @property {number} total
 * @property {Record<string, number>} by_state
 * @property {{ state: string, outcome_reason: string | null, count: number }[]} by_outcome
 * @property {{ telephony_configuration_id: number, name: string, provider: string, queued: number, live: number }[]} routes
 */

/**
 * The overview's charts: runs per hour or day [StatsSeries] (GET /stats/series).
 * @typedef {object} StatsSeries
 * @property {string} since
 * @property {string} until
 * @property {'hour' | 'day'} bucket
 * @property {number} bucket_seconds
 * @property {StatsSeriesBucket[]} buckets
 */

/**
 * [StatsSeriesBucket]
 * @typedef {object} StatsSeriesBucket
 * @property {string} start
 * @property {string} end
 * @property {number} total
 * @property {Record<string, number>} by_state
 * @property {number} answered
 * @property {number | null} answer_rate
 * @property {{ p50: number | null, p95: number | null }} time_to_answer_ms
 */

/**
 * [WebhookEndpoint]
 * @typedef {object} WebhookEndpoint
 * @property {number} id
 * @property {string} url
 * @property {string[]} events
 * @property {boolean} enabled
 * @property {'request' | 'gone' | 'failing' | null} disabled_reason
 * @property {string | null} description
 */

/** @typedef {{ at: string, http_status: number | null, error: string | null }} DeliveryAttempt */

/**
 * A webhook delivery [GET /webhook-deliveries].
 * @typedef {object} Delivery
 * @property {number} id
 * @property {number} endpoint_id
 * @property {string} event_type
 * @property {number | null} run_id
 * @property {'pending' | 'succeeded' | 'failed'} status
 * @property {DeliveryAttempt[]} attempts
 * @property {string | null} next_attempt_at
 * @property {string} created_at
 */

/**
 * A campaign's contacts by where they are [Campaign.progress].
 * @typedef {object} CampaignProgress
 * @property {number} total
 * @property {number} pending
 * @property {number} in_progress
 * @property {number} reached
 * @property {number} exhausted
 * @property {number} suppressed
 * @property {number} invalid
 * @property {number} canceled
 * @property {number} attempts runs created
 * @property {Record<string, number>} outcomes ended runs per terminal state
 * @property {Record<string, number>} answered_by runs by who answered
 */

/** @typedef {'draft' | 'running' | 'paused' | 'completed' | 'canceled'} CampaignState */
/** Where a contact is; each is one of CampaignProgress's counts. @typedef {'pending' | 'in_progress' | 'reached' | 'exhausted' | 'suppressed' | 'invalid' | 'canceled'} ContactStatus */

/**
 * [Campaign]
 * @typedef {object} Campaign
 * @property {number} id
 * @property {string} name
 * @property {CampaignState} state
 * @property {string | null} paused_reason
 * @property {'published' | 'test'} mode
 * @property {string | null} agent_uuid
 * @property {string} workflow_uuid
 * @property {number} telephony_configuration_id
 * @property {number} max_concurrent_calls
 * @property {number | null} calls_per_second
 * @property {string | null} starts_at
 * @property {string | null} ends_at
 * @property {CampaignSchedule | null} schedule
 * @property {{ max_attempts: number, delay_seconds: number, on: string[] }} retry
 * @property {CampaignProgress} progress
 * @property {string} created_at
 * @property {string | null} started_at
 */

/** @typedef {{ timezone: string, windows: Record<string, string[]> }} CampaignSchedule [CampaignSchedule] */

/**
 * A campaign's contact with its attempts [GET /campaigns/{id}/contacts].
 * @typedef {object} Contact
 * @property {number} id
 * @property {string} phone_number
 * @property {ContactStatus} status
 * @property {string | null} timezone
 * @property {{ attempt: number, run_id: number, state: string }[]} attempts
 * @property {string | null} next_attempt_at
 */

/** What a key may do (docs/api.md, "Scopes"). @typedef {'calls' | 'campaigns' | 'webhooks' | 'admin'} Scope */

/**
 * An API key, never with its secret [ApiKey]; `key` only in the answer that created it.
 * @typedef {object} ApiKey
 * @property {number} id
 * @property {string} name
 * @property {string} prefix
 * @property {Scope[]} scopes
 * @property {string} created_at
 * @property {string | null} last_used_at
 * @property {string | null} revoked_at
 */

/**
 * One entry of the audit log [AuditEvent].
 * @typedef {object} AuditEvent
 * @property {number} id
 * @property {string} action
 * @property {'api_key' | 'cli' | 'system'} actor
 * @property {number | null} actor_key_id
 * @property {string | null} actor_key_name
 * @property {string} target_type
 * @property {string | null} target_id
 * @property {unknown} before
 * @property {unknown} after
 * @property {string} created_at
 */

/** @typedef {{ timezone: string, outside: 'defer' | 'refuse', windows: Partial<Record<'mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat' | 'sun', string[]>> }} CallingHours [CallingHours] */

/**
 * The organization's own settings, null following the service's default [OrganizationSettings].
 * @typedef {object} OrganizationSettings
 * @property {number} id
 * @property {string} name
 * @property {number | null} rate_limit_per_second
 * @property {number | null} key_rate_limit_per_second
 * @property {number | null} max_queued_runs
 * @property {{ max_calls: number, window_seconds: number } | null} number_cap
 * @property {number | null} retention_days
 * @property {CallingHours | null} calling_hours
 * @property {{ rate_limit_per_second: number, key_rate_limit_per_second: number, max_queued_runs: number, retention_days: number }} defaults
 */

/**
 * What adding contacts from a file answers [POST /campaigns/{id}/contacts].
 * @typedef {{ added: number, duplicates: number, invalid: { index?: number, line?: number, detail: string }[], invalid_count: number }} ContactsReport
 */

/**
 * [Suppression]
 * @typedef {object} Suppression
 * @property {string} phone_number
 * @property {string | null} reason
 * @property {string | null} expires_at
 * @property {boolean} active
 * @property {string} created_at
 */

/** @typedef {{ imported: number, invalid: { line: number, value: string, detail: string }[], invalid_count: number }} SuppressionReport [POST /suppressions/import] */

/** A problem+json answer's members the console shows. @typedef {{ code?: string, title?: string, detail?: string, errors?: ProblemError[] }} Problem */
/** @typedef {{ pointer?: string, detail: string }} ProblemError */

/** The event stream's `run` message: a state a run entered. @typedef {{ run_id: number, campaign_id: number | null, type: string, at: string, data: Record<string, unknown> }} RunMessage */
/** The event stream's `webhook.delivery` message. @typedef {{ delivery_id: number, run_id: number | null, status: Delivery['status'], next_attempt_at: string | null }} DeliveryMessage */
/** The event stream's `campaign.<change>` message. @typedef {{ type: string, campaign: { id: number, name: string, state: CampaignState, paused_reason: string | null } }} CampaignMessage */
/** The event stream's `reset` message. @typedef {Record<string, unknown>} ResetMessage */
