// What each problem code means for the person who meets it: when the service answers it and what to
// do about it. The service serves these as the page each problem's `type` URI names
// (routes/problem-pages.ts), so a problem's `type` resolves to its own documentation (RFC 9457,
// section 3.1.1). A Record over every code: a code added to errors.ts fails the type check until
// it is described here.
import type { ErrorCode } from '../errors.js';

export interface ProblemGuide {
  /** When the service answers with this code. */
  when: string;
  /** What the client (or the operator) can do about it. */
  action: string;
}

export const PROBLEM_GUIDE: Record<ErrorCode, ProblemGuide> = {
  malformed_json: {
    when: 'The request body is empty or is not valid JSON (UTF-8, uncompressed), or nests deeper than the service reads.',
    action: 'Send one JSON object (or, where an operation says so, an array) encoded as UTF-8, with Content-Type: application/json.',
  },
  bad_request: {
    when: 'The request is not valid HTTP: a header name or value Node refuses, an HTTP/1.1 request without a Host header, an upload cut off before its end.',
    action: 'Fix the client or proxy that sends the request; send the request again in full.',
  },
  request_timeout: {
    when: 'The headers or the body were not received within HEADERS_TIMEOUT_MS or REQUEST_TIMEOUT_MS.',
    action: 'Retry; if it keeps happening, send the request faster or ask the operator to raise the timeouts.',
  },
  request_header_fields_too_large: {
    when: 'The request headers are larger than MAX_HEADER_BYTES.',
    action: 'Send fewer or smaller headers (cookies and long tokens are the usual cause).',
  },
  missing_api_key: {
    when: 'A public API operation was called without an X-API-Key header.',
    action: 'Send your organization\'s API key in the X-API-Key header.',
  },
  invalid_api_key: {
    when: 'The X-API-Key header does not name an active API key.',
    action: 'Check the key (it may have been revoked or mistyped) and send a current one.',
  },
  invalid_run_token: {
    when: 'An agent runtime operation (the read of a run, or an action on its call) was called without a valid, unexpired run token for that run.',
    action: 'Send the run token handed over with the answered call as "Authorization: Bearer <token>", before it expires.',
  },
  invalid_signature: {
    when: 'A provider callback (Twilio) is not signed for this run.',
    action: 'Only the provider calls these URLs; check that PUBLIC_BASE_URL is the URL the provider sees and that its credentials are current.',
  },
  invalid_metrics_token: {
    when: 'GET /metrics was called without the METRICS_TOKEN the operator set.',
    action: 'Send "Authorization: Bearer <METRICS_TOKEN>" from your Prometheus scrape configuration.',
  },
  forbidden: {
    when: 'A request for the interactive reference\'s static files was refused (for example a path that leaves its folder).',
    action: 'Request only the files the page at /docs refers to.',
  },
  api_key_not_found: {
    when: 'No API key of your organization has this id (another organization\'s keys are not found either).',
    action: 'Check the id against GET /api/v1/public/api-keys.',
  },
  insufficient_scope: {
    when: 'The API key is valid but lacks the scope the operation requires (`required_scope` names it; the reference lists each operation\'s scope under its security requirement).',
    action: 'Use a key that holds the scope, or have an administrator create one with it (`POST /api/v1/public/api-keys` with an admin key, or `npx dialtone key create --scopes`).',
  },
  agent_not_found: {
    when: 'No agent of your organization has this agent UUID (the trigger UUID of an API trigger).',
    action: 'Check the UUID in the URL against GET /api/v1/public/workflows (agent_uuids, draft_agent_uuids).',
  },
  workflow_not_found: {
    when: 'No workflow of your organization has this workflow UUID.',
    action: 'Check the UUID against GET /api/v1/public/workflows.',
  },
  telephony_configuration_not_found: {
    when: 'The telephony_configuration_id is not an active telephony configuration of your organization (to place a call), or not one of its configurations at all (to manage it; another organization\'s are not found either).',
    action: 'Pick an id from GET /api/v1/public/telephony-configurations, or omit it to use the default.',
  },
  workflow_run_not_found: {
    when: 'No run of your organization has this id.',
    action: 'Check the id; runs of other organizations are answered the same way as absent ones.',
  },
  webhook_endpoint_not_found: {
    when: 'No webhook endpoint of your organization has this id.',
    action: 'Check the id against GET /api/v1/public/webhook-endpoints.',
  },
  webhook_delivery_not_found: {
    when: 'The endpoint has no delivery with this id.',
    action: 'Check the id against the endpoint\'s deliveries list.',
  },
  suppression_not_found: {
    when: 'The number is not on your organization\'s suppression list.',
    action: 'Nothing to remove or read; check the number (URL-encoded E.164, %2B12025550123).',
  },
  campaign_not_found: {
    when: 'No campaign of your organization has this id.',
    action: 'Check the id against GET /api/v1/public/campaigns.',
  },
  not_found: {
    when: 'No route matches the URL, or the URL cannot be decoded (bad percent-encoding, a segment too long).',
    action: 'Check the path against the OpenAPI document at /openapi.json.',
  },
  method_not_allowed: {
    when: 'The path exists but does not answer this HTTP method.',
    action: 'Use one of the methods the Allow header lists.',
  },
  not_acceptable: {
    when: 'A static file of the interactive reference cannot be served in a form the Accept headers allow.',
    action: 'Relax the Accept or Accept-Encoding headers.',
  },
  precondition_failed: {
    when: 'A conditional request for a static file of the interactive reference (If-Match, If-Unmodified-Since) failed.',
    action: 'Fetch the file again without the condition.',
  },
  range_not_satisfiable: {
    when: 'A Range request for a static file of the interactive reference asks for bytes the file does not have.',
    action: 'Fetch the file without a Range header.',
  },
  expectation_failed: {
    when: 'The request carries an Expect header other than 100-continue.',
    action: 'Send no Expect header, or Expect: 100-continue.',
  },
  uri_too_long: {
    when: 'The request URL is longer than the service accepts.',
    action: 'Shorten the URL; send large inputs in the body.',
  },
  workflow_not_published: {
    when: 'A non-test operation names a workflow that has no published definition.',
    action: 'Publish the workflow, or call the test operation, which runs the draft.',
  },
  idempotency_key_in_use: {
    when: 'Another request with the same Idempotency-Key is still being processed.',
    action: 'Wait for Retry-After seconds and send the same request again: it then gets the first request\'s answer.',
  },
  run_already_ended: {
    when: 'A cancel was asked for a run that has already ended, or the agent runtime asked to hang up, report a result or append an event on a run that has ended (its `state` is in the problem).',
    action: 'Nothing to do: the run\'s state says how it ended.',
  },
  result_invalid: {
    when: 'The result the agent runtime reported does not satisfy the result_schema of the run\'s definition (`errors` lists every problem, each with a JSON Pointer into the request body).',
    action: 'Fix the data so it satisfies the schema (GET /api/v1/runtime/runs/{id} returns the definition with it) and report it again.',
  },
  transfer_in_progress: {
    when: 'The agent runtime asked for a transfer while another transfer of the same call is under way.',
    action: 'Wait for its outcome (a `transfer` event, or the run ending `transferred`), then ask again if the call came back to the agent.',
  },
  call_control_unsupported: {
    when: 'The agent runtime asked for a transfer or DTMF digits, and the provider of the run\'s telephony configuration cannot do that (its capabilities, GET /api/v1/public/providers, say so; `provider` and `operation` are in the problem).',
    action: 'Place calls that need it through a telephony configuration whose provider can (the problem names them).',
  },
  transfer_target_refused: {
    when: 'The target of a transfer is refused by the organization\'s calling policy, as a direct call to it would be (`reason`: number_suppressed, number_frequency_capped, outside_calling_hours).',
    action: 'Transfer to another destination, or change the policy (remove the suppression, raise the cap, widen the calling hours) if the refusal is wrong.',
  },
  call_not_held_here: {
    when: 'The call of the run lives in the process of another Dialtone node (a simulated or SIP call), and this node cannot act on it.',
    action: 'Send the request again (with the same Idempotency-Key); route the runtime\'s requests to the node that placed the call, or run one node for such calls.',
  },
  call_control_refused: {
    when: 'The call\'s provider did not take a transfer or DTMF digits (a SIP trunk answering 405 or 501 to REFER or INFO, a Twilio error); `provider_status` holds its words. A refused transfer is recorded as such, and the call stays with the agent.',
    action: 'Check the provider\'s words; a trunk that refuses REFER cannot transfer calls through Dialtone.',
  },
  run_not_answered: {
    when: 'The agent runtime asked to hang up, transfer or send digits on a run whose call has not been answered (its `state` is in the problem).',
    action: 'Only an answered call is the runtime\'s to end; to stop a call before it is answered, cancel the run with the API key.',
  },
  campaign_limit: {
    when: 'The organization already has CAMPAIGN_MAX_OPEN_PER_ORGANIZATION campaigns open (draft, running or paused).',
    action: 'Complete or cancel a campaign you no longer need, then create this one again.',
  },
  runs_not_ended: {
    when: 'An erasure of a phone number was asked while runs of your organization to that number have not ended (queued, scheduled or on a call); `runs` lists them. Nothing was erased.',
    action: 'Cancel those runs (POST /api/v1/public/workflow-runs/{id}/cancel) or wait for them to end, then ask for the erasure again.',
  },
  campaign_state_conflict: {
    when: 'The campaign\'s state does not allow the action (for example resuming a running campaign, adding contacts to a canceled one, resuming after ends_at).',
    action: 'Read the campaign (its `state` is in the problem) and choose an action its state allows.',
  },
  telephony_configuration_disabled: {
    when: 'A disabled telephony configuration was to be made the organization\'s default: only an active one can be.',
    action: 'Enable it first (POST /api/v1/public/telephony-configurations/{id}/enable), then make it the default.',
  },
  workflow_state_conflict: {
    when: 'The workflow\'s state does not allow the change: it is archived (nothing changes it any more), it has no draft to publish, or its draft is not the `version` the publish named (someone saved another draft meanwhile); `draft_version` in the problem says which draft it has.',
    action: 'Read the workflow (GET /api/v1/public/workflows/{workflow_uuid}) and its draft, then publish the version you mean, or save a draft first.',
  },
  webhook_delivery_pending: {
    when: 'A retry was asked for a delivery that is still pending (it will be tried again on its own).',
    action: 'Wait until it succeeds or fails, then retry it if needed.',
  },
  payload_too_large: {
    when: 'The request body is larger than the limit of the operation (BODY_LIMIT_BYTES, CAMPAIGN_CONTACTS_MAX_BYTES, SUPPRESSION_IMPORT_MAX_BYTES).',
    action: 'Send a smaller body, or split it across requests.',
  },
  unsupported_media_type: {
    when: 'The body is not in a media type the operation reads (application/json; text/csv where an operation says so), or is compressed.',
    action: 'Send the body with the Content-Type the operation documents, uncompressed.',
  },
  validation_failed: {
    when: 'The request does not match the operation\'s schema: a missing or unknown field, a wrong type, a value out of range.',
    action: 'Fix each field the `errors` member points at (JSON Pointers into the body), then send again.',
  },
  invalid_phone_number: {
    when: 'The phone number is not a valid number in international format (E.164).',
    action: 'Send the number with + and the country code, for example +12025550123.',
  },
  missing_template_variables: {
    when: 'The agent requires template variables that neither initial_context nor a default provides.',
    action: 'Add the variables listed in `missing_variables` to initial_context.',
  },
  number_suppressed: {
    when: 'The number is on your organization\'s suppression (do-not-call) list.',
    action: 'Do not call it; remove the suppression only if the person asked to be called again.',
  },
  invalid_webhook_url: {
    when: 'The webhook URL is not an absolute https URL the service can send to.',
    action: 'Give an https URL with a host name (http and private addresses only when the operator allows them).',
  },
  webhook_url_not_allowed: {
    when: 'The webhook URL resolves to an address webhooks may not reach (private, loopback, link-local and the like).',
    action: 'Use a URL that resolves to public addresses only, or ask the operator about WEBHOOK_ALLOW_PRIVATE_NETWORKS.',
  },
  webhook_endpoint_limit: {
    when: 'Your organization already has WEBHOOK_MAX_ENDPOINTS endpoints.',
    action: 'Delete an endpoint you no longer use (one endpoint can subscribe to several event types).',
  },
  telephony_not_configured: {
    when: 'No telephony configuration was given and the organization has no default active one.',
    action: 'Pass telephony_configuration_id, or have the operator mark a configuration as the default.',
  },
  telephony_not_ready: {
    when: 'The telephony configuration cannot place calls as it is set up (for example Twilio without PUBLIC_BASE_URL).',
    action: 'The detail says what is missing; the operator fixes the configuration or the service\'s settings.',
  },
  machine_detection_unsupported: {
    when: 'The agent (or the campaign) asks who answered (answering_machine.detect "on" or "message_end") through a telephony configuration that cannot do what it asks: its provider cannot tell a machine from a person, a SIP route sends its media elsewhere (media_address), or a message is to be left on a SIP call while the service has no speech command (SIP_SPEECH_COMMAND).',
    action: 'The detail says which. Call through a route that can (twilio, simulator, a SIP route without media_address), have the operator set SIP_SPEECH_COMMAND, change on_machine, or set answering_machine.detect to "off" for this agent or campaign.',
  },
  idempotency_key_reused: {
    when: 'The Idempotency-Key was already used with a different request (another operation, target or body).',
    action: 'Use a new key for a new request; reuse a key only to retry exactly the same request.',
  },
  outside_calling_hours: {
    when: 'It is outside the organization\'s calling hours in a time zone of the number, and the policy refuses such calls.',
    action: 'Send the request again at `next_allowed_at`, or ask for the policy to defer such calls instead.',
  },
  rate_limited: {
    when: 'The API key or the organization sent more requests than its rate limit allows in the window.',
    action: 'Wait for Retry-After seconds; the RateLimit headers say how much quota is left.',
  },
  queue_full: {
    when: 'The organization has MAX_QUEUED_RUNS_PER_ORG runs queued.',
    action: 'Wait for Retry-After seconds while queued runs are dialed; the operator can raise the cap.',
  },
  number_frequency_capped: {
    when: 'The number was already called the organization\'s maximum number of times within its window.',
    action: 'Wait for Retry-After seconds before calling the number again.',
  },
  too_many_streams: {
    when: 'The API key (STREAM_MAX_CONNECTIONS_PER_KEY) or the organization (STREAM_MAX_CONNECTIONS_PER_ORG) already holds its most open event streams on this node.',
    action: 'Close a stream you no longer read (browser tabs of one console share one), or retry after Retry-After seconds.',
  },
  unavailable: {
    when: 'The node is shutting down, its store is unreachable, or it serves its maximum of event streams.',
    action: 'Retry after Retry-After seconds, on this node or another.',
  },
  webhooks_not_configured: {
    when: 'Webhook secrets cannot be stored because the operator has not set DIALTONE_SECRET_KEY.',
    action: 'The operator sets DIALTONE_SECRET_KEY; then register the endpoint again.',
  },
  internal_error: {
    when: 'The service failed in a way it did not expect.',
    action: 'Retry later; if it persists, give the operator the request_id, under which the cause is logged.',
  },
};
