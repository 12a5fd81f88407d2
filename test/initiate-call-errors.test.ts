// Every refusal of docs/design.md, "Check order", that applies today, for each of the four Initiate Call
// operations and on both stores: the status, an RFC 9457 body with its `code` and the request id,
// and no run created. Cases are tables; each test gets its own organization on a database shared
// by the tests of one store (building a database per test would make this file slow).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { createApiKey, revokeApiKey } from '../src/auth/api-keys.js';
import type { Deps } from '../src/deps.js';
import type { ErrorCode } from '../src/errors.js';
import { createOrganization } from '../src/orgs/organizations.js';
import { createTelephonyConfiguration, setTelephonyStatus } from '../src/telephony/configurations.js';
import { archiveWorkflow, createWorkflow, saveDraft, showWorkflow } from '../src/workflows/workflows.js';
import { createTestEnv, getJson, postJson, type PostOptions, type TestEnv, type TestEnvOptions } from './helpers/app.js';
import { countRuns, createOrgFixture, definition, OPERATION_CASES, type OperationCase, type OrgFixture } from './helpers/fixtures.js';
import { assertProblem, type Problem } from './helpers/problems.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { after, before, describe, it } from './helpers/suite.js';

const PHONE = '+12025550123';
const OK_BODY = { phone_number: PHONE };
const UNKNOWN_KEY = `dt_live_${'A'.repeat(10)}_${'B'.repeat(32)}`;
const REQUIRES_CUSTOMER = definition({ variables: { customer: { required: true } } });

type Response = LightMyRequestResponse;

function pointersOf(body: Problem): string[] {
  return (body.errors ?? []).map((e) => e.pointer).sort();
}

/** One database per store for the whole file; every test makes its own organization in it. */
function sharedEnv(kind: StoreKind, options: TestEnvOptions = {}): () => TestEnv {
  let env: TestEnv | undefined;
  before(async () => {
    env = await createTestEnv(kind, options);
  });
  after(async () => {
    await env?.close();
  });
  return () => {
    if (!env) throw new Error('the shared test environment is not built yet');
    return env;
  };
}

interface Ctx {
  deps: Deps;
  env: TestEnv;
  f: OrgFixture;
  op: OperationCase;
  /** POSTs to this operation for the fixture's target, with the fixture's key unless overridden. */
  send(body: unknown, options?: PostOptions): Promise<Response>;
  /** POSTs to this operation for another target (path value given for either kind of UUID). */
  sendTo(uuid: string, body: unknown, options?: PostOptions): Promise<Response>;
}

function contextFor(env: TestEnv, op: OperationCase, f: OrgFixture): Ctx {
  const sendTo = (uuid: string, body: unknown, options: PostOptions = {}) =>
    postJson(env.app, op.path({ agentUuid: uuid, workflowUuid: uuid }), body, { key: f.apiKey, ...options });
  return {
    deps: env.deps,
    env,
    f,
    op,
    send: (body, options = {}) => postJson(env.app, op.path(f), body, { key: f.apiKey, ...options }),
    sendTo,
  };
}

interface RefusalCase {
  it: string;
  /** Only for the operations this returns true for (default: all four). */
  when?: (op: OperationCase) => boolean;
  /** The fixture's workflow definition (default: the helpers' one-trigger definition). */
  definition?: unknown;
  status: number;
  code: ErrorCode | ((op: OperationCase) => ErrorCode);
  /** The `errors` pointers expected, in any order. */
  pointers?: string[];
  request(ctx: Ctx): Promise<Response>;
  /** Further checks on the refusal, or on what still works afterwards. */
  afterwards?(body: Problem, ctx: Ctx): Promise<void> | void;
}

const targetNotFound = (op: OperationCase): ErrorCode => (op.target === 'agent' ? 'agent_not_found' : 'workflow_not_found');
const agentOnly = (op: OperationCase) => op.target === 'agent';
const publishedOnly = (op: OperationCase) => op.mode === 'published';

/** Leaves the workflow with a draft and nothing published (the domain never unpublishes). */
async function unpublish(deps: Deps, workflowUuid: string): Promise<void> {
  const workflow = await deps.store.db.selectFrom('workflows').select('id').where('workflow_uuid', '=', workflowUuid).executeTakeFirstOrThrow();
  await deps.store.db.updateTable('workflow_definitions').set({ status: 'draft', published_at: null }).where('workflow_id', '=', workflow.id).execute();
}

async function clearDefaultTelephony(deps: Deps, orgId: number): Promise<void> {
  await deps.store.db.updateTable('telephony_configurations').set({ is_default: 0 }).where('org_id', '=', orgId).execute();
}

async function addTelephony(ctx: Ctx, provider: string, extra: { callerIds?: string[]; credentials?: Record<string, unknown>; isDefault?: boolean } = {}) {
  return createTelephonyConfiguration(ctx.deps.store, ctx.deps.cipher, { orgId: ctx.f.orgId, name: `${provider} route`, provider, ...extra }, ctx.deps.clock.now());
}

/** A JSON object nested `depth` levels deep (`{"leaf":1}` is depth 1). */
function nested(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = { leaf: 1 };
  for (let i = 1; i < depth; i++) value = { next: value };
  return value;
}

async function runDetails(ctx: Ctx, response: Response) {
  assert.equal(response.statusCode, 200, response.body);
  return (await getJson(ctx.env.app, `/api/v1/public/workflow-runs/${response.json().workflow_run_id}`, ctx.f.apiKey)).json();
}

const MALFORMED_BODY: RefusalCase[] = [
  { it: 'answers 400 malformed_json for a body that is not JSON', status: 400, code: 'malformed_json', request: (c) => c.send(undefined, { raw: '{"phone_number": "+12025550123",' }) },
  { it: 'answers 400 malformed_json for an empty body declared as JSON', status: 400, code: 'malformed_json', request: (c) => c.send(undefined, { raw: '' }) },
];

const AUTHENTICATION: RefusalCase[] = [
  { it: 'answers 401 missing_api_key when no X-API-Key header is sent', status: 401, code: 'missing_api_key', request: (c) => c.send(OK_BODY, { key: undefined }) },
  { it: 'answers 401 missing_api_key for a blank X-API-Key header', status: 401, code: 'missing_api_key', request: (c) => c.send(OK_BODY, { key: '   ' }) },
  { it: 'answers 401 invalid_api_key for a well-formed key that does not exist', status: 401, code: 'invalid_api_key', request: (c) => c.send(OK_BODY, { key: UNKNOWN_KEY }) },
  { it: 'answers 401 invalid_api_key for a malformed key', status: 401, code: 'invalid_api_key', request: (c) => c.send(OK_BODY, { key: 'not-an-api-key' }) },
  {
    it: 'answers 401 invalid_api_key for a real key prefix with the wrong secret',
    status: 401,
    code: 'invalid_api_key',
    request: (c) => c.send(OK_BODY, { key: `${c.f.apiKey.slice(0, -1)}${c.f.apiKey.endsWith('A') ? 'B' : 'A'}` }),
  },
  {
    it: 'answers 401 invalid_api_key for a revoked key, with the same body as for an unknown key',
    status: 401,
    code: 'invalid_api_key',
    request: async (c) => {
      await revokeApiKey(c.deps.store, c.f.apiKeyId, c.deps.clock.now());
      return c.send(OK_BODY);
    },
    afterwards: async (revoked, c) => {
      const unknown = assertProblem(await c.send(OK_BODY, { key: UNKNOWN_KEY }), 401, 'invalid_api_key');
      const { request_id: _a, ...revokedRest } = revoked;
      const { request_id: _b, ...unknownRest } = unknown;
      assert.deepEqual(revokedRest, unknownRest, 'a revoked key is indistinguishable from an unknown one');
    },
  },
];

/** Nothing about the body or the target is revealed to a caller who is not authenticated. */
const AUTHENTICATION_FIRST: RefusalCase[] = [
  { it: 'answers 401 before parsing a body that is not JSON', status: 401, code: 'missing_api_key', request: (c) => c.send(undefined, { key: undefined, raw: '{oops' }) },
  { it: 'answers 401 before checking the content type', status: 401, code: 'missing_api_key', request: (c) => c.send(undefined, { key: undefined, raw: 'hello', headers: { 'content-type': 'text/plain' } }) },
  { it: 'answers 401 before validating the body', status: 401, code: 'missing_api_key', request: (c) => c.send({ foo: 1 }, { key: undefined }) },
  { it: 'answers 401 before resolving an unknown UUID', status: 401, code: 'invalid_api_key', request: (c) => c.sendTo(randomUUID(), OK_BODY, { key: UNKNOWN_KEY }) },
  { it: 'answers 401 before looking at a path value that is not a UUID', status: 401, code: 'missing_api_key', request: (c) => c.sendTo('not-a-uuid', OK_BODY, { key: undefined }) },
  {
    it: 'answers 401 to a revoked key even when the body and the target are both wrong',
    status: 401,
    code: 'invalid_api_key',
    request: async (c) => {
      await revokeApiKey(c.deps.store, c.f.apiKeyId, c.deps.clock.now());
      return c.sendTo(randomUUID(), { phone_number: 'nope', foo: 1 });
    },
  },
];

const TARGET_NOT_FOUND: RefusalCase[] = [
  { it: 'answers 404 for an unknown UUID', status: 404, code: targetNotFound, request: (c) => c.sendTo(randomUUID(), OK_BODY) },
  { it: 'answers 404 for a path value that is not a UUID', status: 404, code: targetNotFound, request: (c) => c.sendTo('not-a-uuid', OK_BODY) },
  {
    it: 'answers 404 for the other kind of UUID (a workflow UUID is not an agent UUID, and the reverse)',
    status: 404,
    code: targetNotFound,
    request: (c) => c.sendTo(c.op.target === 'agent' ? c.f.workflowUuid : c.f.agentUuid, OK_BODY),
  },
  {
    it: 'answers 404 for an archived workflow',
    status: 404,
    code: targetNotFound,
    request: async (c) => {
      await archiveWorkflow(c.deps.store, c.f.workflowUuid, c.deps.clock.now());
      return c.send(OK_BODY);
    },
  },
  {
    it: 'answers 404 agent_not_found when the trigger is disabled in the definition being run',
    when: agentOnly,
    definition: definition({ enabled: false }),
    status: 404,
    code: 'agent_not_found',
    request: (c) => c.send(OK_BODY),
  },
  {
    it: 'answers 404 agent_not_found when the draft being tested disables a trigger the published definition enables',
    when: (op) => op.target === 'agent' && op.mode === 'test',
    status: 404,
    code: 'agent_not_found',
    request: async (c) => {
      await saveDraft(c.deps.store, c.f.workflowUuid, definition({ triggerUuid: c.f.agentUuid, enabled: false }), c.deps.clock.now());
      return c.send(OK_BODY);
    },
  },
  {
    it: 'answers 404 agent_not_found when the draft being tested lacks the trigger, while the published operation still runs it',
    when: (op) => op.target === 'agent' && op.mode === 'test',
    status: 404,
    code: 'agent_not_found',
    request: async (c) => {
      await saveDraft(c.deps.store, c.f.workflowUuid, definition({ triggerUuid: randomUUID() }), c.deps.clock.now()); // another trigger UUID than the published one
      return c.send(OK_BODY);
    },
    afterwards: async (_body, c) => {
      const published = await postJson(c.env.app, `/api/v1/public/agent/${c.f.agentUuid}`, OK_BODY, { key: c.f.apiKey });
      assert.equal((await runDetails(c, published)).definition_version, 1);
    },
  },
  {
    it: 'answers 404 agent_not_found for a trigger that exists only in the draft, while the test operation runs it',
    when: (op) => op.target === 'agent' && op.mode === 'published',
    status: 404,
    code: 'agent_not_found',
    request: async (c) => {
      const draft = await saveDraft(c.deps.store, c.f.workflowUuid, definition({ triggerUuid: randomUUID() }), c.deps.clock.now());
      return c.sendTo(draft.agent_uuids[0] ?? '', OK_BODY);
    },
    afterwards: async (_body, c) => {
      const draft = (await showWorkflow(c.deps.store, c.f.workflowUuid)).definitions.find((d) => d.status === 'draft');
      const test = await postJson(c.env.app, `/api/v1/public/agent/test/${draft?.agent_uuids[0]}`, OK_BODY, { key: c.f.apiKey });
      assert.equal((await runDetails(c, test)).definition_version, 2);
    },
  },
];

const TELEPHONY_NOT_FOUND: RefusalCase[] = [
  {
    it: 'answers 404 telephony_configuration_not_found for an unknown configuration id',
    status: 404,
    code: 'telephony_configuration_not_found',
    request: (c) => c.send({ ...OK_BODY, telephony_configuration_id: c.f.telephonyId + 1000 }),
  },
  {
    it: 'answers 404 telephony_configuration_not_found for the largest id the schema accepts',
    status: 404,
    code: 'telephony_configuration_not_found',
    request: (c) => c.send({ ...OK_BODY, telephony_configuration_id: Number.MAX_SAFE_INTEGER }),
  },
  {
    it: 'answers 404 telephony_configuration_not_found for an inactive configuration',
    status: 404,
    code: 'telephony_configuration_not_found',
    request: async (c) => {
      await setTelephonyStatus(c.deps.store, c.f.telephonyId, 'inactive', c.deps.clock.now());
      return c.send({ ...OK_BODY, telephony_configuration_id: c.f.telephonyId });
    },
  },
  {
    it: 'answers 404 telephony_configuration_not_found for another organization\'s configuration',
    status: 404,
    code: 'telephony_configuration_not_found',
    request: async (c) => {
      const other = await createOrgFixture(c.deps, 'Other');
      return c.send({ ...OK_BODY, telephony_configuration_id: other.telephonyId });
    },
  },
];

const NOT_PUBLISHED: RefusalCase[] = [
  {
    it: 'answers 409 workflow_not_published when the workflow has only a draft',
    when: publishedOnly,
    status: 409,
    code: 'workflow_not_published',
    request: async (c) => {
      await unpublish(c.deps, c.f.workflowUuid);
      return c.send(OK_BODY);
    },
  },
];

const PAYLOAD_AND_MEDIA: RefusalCase[] = [
  {
    it: 'answers 413 payload_too_large for a body over the default 64 KiB limit',
    status: 413,
    code: 'payload_too_large',
    request: (c) => c.send({ ...OK_BODY, initial_context: { blob: 'x'.repeat(64 * 1024) } }),
  },
  {
    it: 'answers 415 unsupported_media_type for text/plain',
    status: 415,
    code: 'unsupported_media_type',
    request: (c) => c.send(undefined, { raw: JSON.stringify(OK_BODY), headers: { 'content-type': 'text/plain' } }),
  },
  {
    it: 'answers 415 unsupported_media_type for application/x-www-form-urlencoded',
    status: 415,
    code: 'unsupported_media_type',
    request: (c) => c.send(undefined, { raw: 'phone_number=%2B12025550123', headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
  },
  {
    it: 'answers 415 unsupported_media_type for a JSON body sent without a content type',
    status: 415,
    code: 'unsupported_media_type',
    request: (c) => c.env.app.inject({ method: 'POST', url: c.op.path(c.f), headers: { 'x-api-key': c.f.apiKey }, payload: JSON.stringify(OK_BODY) }),
  },
  {
    it: 'answers 415 unsupported_media_type for an empty body without a content type',
    status: 415,
    code: 'unsupported_media_type',
    request: (c) => c.env.app.inject({ method: 'POST', url: c.op.path(c.f), headers: { 'x-api-key': c.f.apiKey } }),
  },
];

/** Bodies the schema (or the initial_context bounds) refuses, and where each problem is pointed at. */
const INVALID_BODIES: { it: string; body: unknown; pointers: string[] }[] = [
  { it: 'an unknown field, instead of ignoring it', body: { ...OK_BODY, foo: 1 }, pointers: ['/foo'] },
  { it: 'a missing phone_number', body: { initial_context: {} }, pointers: ['/phone_number'] },
  { it: 'a phone_number that is not a string', body: { phone_number: 12025550123 }, pointers: ['/phone_number'] },
  { it: 'an empty phone_number', body: { phone_number: '' }, pointers: ['/phone_number'] },
  { it: 'a phone_number over 256 characters', body: { phone_number: `+1${'2'.repeat(300)}` }, pointers: ['/phone_number'] },
  { it: 'a telephony_configuration_id given as the string "1", without coercion', body: { ...OK_BODY, telephony_configuration_id: '1' }, pointers: ['/telephony_configuration_id'] },
  { it: 'a negative telephony_configuration_id', body: { ...OK_BODY, telephony_configuration_id: -1 }, pointers: ['/telephony_configuration_id'] },
  { it: 'a zero telephony_configuration_id', body: { ...OK_BODY, telephony_configuration_id: 0 }, pointers: ['/telephony_configuration_id'] },
  { it: 'a fractional telephony_configuration_id', body: { ...OK_BODY, telephony_configuration_id: 1.5 }, pointers: ['/telephony_configuration_id'] },
  { it: 'a telephony_configuration_id beyond the largest safe integer', body: { ...OK_BODY, telephony_configuration_id: 2 ** 53 }, pointers: ['/telephony_configuration_id'] },
  { it: 'an initial_context that is an array', body: { ...OK_BODY, initial_context: [{ name: 'Ada' }] }, pointers: ['/initial_context'] },
  { it: 'an initial_context that is a string', body: { ...OK_BODY, initial_context: '{"name":"Ada"}' }, pointers: ['/initial_context'] },
  { it: 'an initial_context over the default 16 KiB', body: { ...OK_BODY, initial_context: { blob: 'x'.repeat(16 * 1024) } }, pointers: ['/initial_context'] },
  { it: 'an initial_context nested deeper than the default depth of 8', body: { ...OK_BODY, initial_context: nested(9) }, pointers: ['/initial_context'] },
  { it: 'a JSON body that is not an object, pointing at the document root', body: [OK_BODY], pointers: [''] },
  {
    it: 'several problems at once, listing every one',
    body: { phone_number: 5, foo: 1, telephony_configuration_id: '1' },
    pointers: ['/foo', '/phone_number', '/telephony_configuration_id'],
  },
];

const VALIDATION: RefusalCase[] = INVALID_BODIES.map(({ it, body, pointers }) => ({
  it: `answers 422 validation_failed for ${it}`,
  status: 422,
  code: 'validation_failed',
  pointers,
  request: (c: Ctx) => c.send(body),
}));

const INVALID_PHONE_NUMBERS: { it: string; phone: string }[] = [
  { it: 'a number without the leading + (not E.164)', phone: '12025550123' },
  { it: 'a number too short for its country', phone: '+1555' },
  { it: 'a number with an unassigned country code', phone: '+999123456' },
  { it: 'letters', phone: 'call me maybe' },
  { it: 'a number with letters in it', phone: '+1 800 FLOWERS' },
  { it: 'a SIP URI that is not well formed', phone: 'sip:' },
];

const PHONE_NUMBER: RefusalCase[] = [
  ...INVALID_PHONE_NUMBERS.map(({ it, phone }): RefusalCase => ({
    it: `answers 422 invalid_phone_number for ${it}`,
    status: 422,
    code: 'invalid_phone_number',
    pointers: ['/phone_number'],
    request: (c) => c.send({ phone_number: phone }),
  })),
  {
    it: 'answers 422 invalid_phone_number for a SIP URI on a simulator configuration',
    status: 422,
    code: 'invalid_phone_number',
    pointers: ['/phone_number'],
    request: (c) => c.send({ phone_number: 'sip:alice@example.com' }),
  },
];

const TEMPLATE_VARIABLES: RefusalCase[] = [
  {
    it: 'answers 422 missing_template_variables, naming the variable, when a required variable without default is absent',
    definition: REQUIRES_CUSTOMER,
    status: 422,
    code: 'missing_template_variables',
    pointers: ['/initial_context/customer'],
    request: (c) => c.send({ ...OK_BODY, initial_context: { other: 'x' } }),
    afterwards: (body) => assert.deepEqual(body.missing_variables, ['customer']),
  },
  {
    it: 'answers 422 missing_template_variables when there is no initial_context at all',
    definition: REQUIRES_CUSTOMER,
    status: 422,
    code: 'missing_template_variables',
    request: (c) => c.send(OK_BODY),
    afterwards: (body) => assert.deepEqual(body.missing_variables, ['customer']),
  },
  {
    it: 'answers 422 missing_template_variables when the required variable is null',
    definition: REQUIRES_CUSTOMER,
    status: 422,
    code: 'missing_template_variables',
    request: (c) => c.send({ ...OK_BODY, initial_context: { customer: null } }),
    afterwards: (body) => assert.deepEqual(body.missing_variables, ['customer']),
  },
  {
    it: 'answers 422 missing_template_variables listing every missing variable',
    definition: definition({ variables: { customer: { required: true }, topic: { required: true }, tone: { required: true, default: 'warm' } } }),
    status: 422,
    code: 'missing_template_variables',
    pointers: ['/initial_context/customer', '/initial_context/topic'],
    request: (c) => c.send(OK_BODY),
    afterwards: (body) => assert.deepEqual([...(body.missing_variables as string[])].sort(), ['customer', 'topic']),
  },
];

const TELEPHONY: RefusalCase[] = [
  {
    it: 'answers 422 telephony_not_configured when the organization has no default configuration',
    status: 422,
    code: 'telephony_not_configured',
    request: async (c) => {
      await clearDefaultTelephony(c.deps, c.f.orgId);
      return c.send(OK_BODY);
    },
  },
  {
    it: 'answers 422 telephony_not_configured when the default configuration is inactive',
    status: 422,
    code: 'telephony_not_configured',
    request: async (c) => {
      await setTelephonyStatus(c.deps.store, c.f.telephonyId, 'inactive', c.deps.clock.now());
      return c.send(OK_BODY);
    },
  },
  {
    it: 'answers 422 telephony_not_configured when the organization has no telephony configuration at all',
    status: 422,
    code: 'telephony_not_configured',
    request: async (c) => {
      const now = c.deps.clock.now();
      const org = await createOrganization(c.deps.store, 'No telephony', now);
      const key = await createApiKey(c.deps.store, org.id, 'key', now);
      const workflow = await createWorkflow(c.deps.store, { orgId: org.id, name: 'Agent', definition: definition() }, now);
      return postJson(c.env.app, c.op.path({ agentUuid: workflow.agent_uuids[0] ?? '', workflowUuid: workflow.workflow_uuid }), OK_BODY, { key: key.key });
    },
  },
  {
    it: 'answers 422 telephony_not_ready for a Twilio configuration with neither credentials nor caller ID',
    status: 422,
    code: 'telephony_not_ready',
    request: async (c) => c.send({ ...OK_BODY, telephony_configuration_id: (await addTelephony(c, 'twilio')).id }),
  },
  {
    it: 'answers 422 telephony_not_ready for a Twilio configuration without credentials',
    status: 422,
    code: 'telephony_not_ready',
    request: async (c) => c.send({ ...OK_BODY, telephony_configuration_id: (await addTelephony(c, 'twilio', { callerIds: ['+12025550100'] })).id }),
  },
  {
    it: 'answers 422 telephony_not_ready when the default is a Twilio configuration without a caller ID',
    status: 422,
    code: 'telephony_not_ready',
    request: async (c) => {
      await addTelephony(c, 'twilio', { credentials: { account_sid: `AC${'0'.repeat(32)}`, auth_token: 'secret' }, isDefault: true });
      return c.send(OK_BODY);
    },
  },
  {
    // Creation refuses such a configuration now; a row stored before that check was added (or
    // written around it) must still be refused at request time, before anything is dialed.
    it: 'answers 422 telephony_not_ready for a stored SIP configuration without a trunk host',
    status: 422,
    code: 'telephony_not_ready',
    request: async (c) => {
      const route = await createTelephonyConfiguration(c.deps.store, c.deps.cipher, { orgId: c.f.orgId, name: 'sip route', provider: 'sip', settings: { host: 'trunk.example' } }, c.deps.clock.now());
      await c.deps.store.db.updateTable('telephony_configurations').set({ settings: JSON.stringify({}) }).where('id', '=', route.id).execute();
      return c.send({ phone_number: 'sip:alice@example.com', telephony_configuration_id: route.id });
    },
  },
];

/**
 * Where two rows of the table apply, the earlier check wins: authentication → content type and
 * body (phone number included) → schema → target resolution → telephony → template variables.
 */
const CHECK_ORDER: RefusalCase[] = [
  {
    it: 'refuses the content type before resolving an unknown target',
    status: 415,
    code: 'unsupported_media_type',
    request: (c) => c.sendTo(randomUUID(), undefined, { raw: 'hello', headers: { 'content-type': 'text/plain' } }),
  },
  {
    it: 'refuses malformed JSON before resolving an unknown target',
    status: 400,
    code: 'malformed_json',
    request: (c) => c.sendTo(randomUUID(), undefined, { raw: '{' }),
  },
  {
    it: 'refuses a schema violation before resolving an unknown target',
    status: 422,
    code: 'validation_failed',
    pointers: ['/foo'],
    request: (c) => c.sendTo(randomUUID(), { ...OK_BODY, foo: 1 }),
  },
  {
    it: 'refuses an invalid phone number before resolving an unknown target',
    status: 422,
    code: 'invalid_phone_number',
    request: (c) => c.sendTo(randomUUID(), { phone_number: '+1555' }),
  },
  {
    it: 'refuses an initial_context nested too deep before resolving an unknown target',
    status: 422,
    code: 'validation_failed',
    pointers: ['/initial_context'],
    request: (c) => c.sendTo(randomUUID(), { ...OK_BODY, initial_context: nested(20) }),
  },
  {
    it: 'refuses an invalid phone number before looking up an unknown telephony configuration',
    status: 422,
    code: 'invalid_phone_number',
    request: (c) => c.send({ phone_number: '12025550123', telephony_configuration_id: c.f.telephonyId + 1000 }),
  },
  {
    it: 'resolves the target before the telephony configuration',
    status: 404,
    code: targetNotFound,
    request: (c) => c.sendTo(randomUUID(), { ...OK_BODY, telephony_configuration_id: c.f.telephonyId + 1000 }),
  },
  {
    it: 'refuses an archived workflow before noticing there is no telephony',
    status: 404,
    code: targetNotFound,
    request: async (c) => {
      await archiveWorkflow(c.deps.store, c.f.workflowUuid, c.deps.clock.now());
      await clearDefaultTelephony(c.deps, c.f.orgId);
      return c.send(OK_BODY);
    },
  },
  {
    it: 'refuses an unpublished workflow before looking up the telephony configuration',
    when: publishedOnly,
    status: 409,
    code: 'workflow_not_published',
    request: async (c) => {
      await unpublish(c.deps, c.f.workflowUuid);
      return c.send({ ...OK_BODY, telephony_configuration_id: c.f.telephonyId + 1000 });
    },
  },
  {
    it: 'looks up the telephony configuration before the template variables',
    definition: REQUIRES_CUSTOMER,
    status: 404,
    code: 'telephony_configuration_not_found',
    request: (c) => c.send({ ...OK_BODY, telephony_configuration_id: c.f.telephonyId + 1000 }),
  },
  {
    it: 'refuses missing telephony before missing template variables',
    definition: REQUIRES_CUSTOMER,
    status: 422,
    code: 'telephony_not_configured',
    request: async (c) => {
      await clearDefaultTelephony(c.deps, c.f.orgId);
      return c.send(OK_BODY);
    },
  },
  {
    it: 'refuses telephony that is not ready before missing template variables',
    definition: REQUIRES_CUSTOMER,
    status: 422,
    code: 'telephony_not_ready',
    request: async (c) => c.send({ ...OK_BODY, telephony_configuration_id: (await addTelephony(c, 'twilio')).id }),
  },
  {
    it: 'refuses a SIP URI the configuration cannot dial before missing template variables',
    definition: REQUIRES_CUSTOMER,
    status: 422,
    code: 'invalid_phone_number',
    request: (c) => c.send({ phone_number: 'sip:alice@example.com' }),
  },
];

const GROUPS: [string, RefusalCase[]][] = [
  ['400 malformed body', MALFORMED_BODY],
  ['401 authentication', AUTHENTICATION],
  ['401 comes before every other check', AUTHENTICATION_FIRST],
  ['404 target not found', TARGET_NOT_FOUND],
  ['404 telephony configuration not found', TELEPHONY_NOT_FOUND],
  ['409 nothing published', NOT_PUBLISHED],
  ['413 and 415 body size and media type', PAYLOAD_AND_MEDIA],
  ['422 validation', VALIDATION],
  ['422 phone number', PHONE_NUMBER],
  ['422 template variables', TEMPLATE_VARIABLES],
  ['422 telephony', TELEPHONY],
  ['check order', CHECK_ORDER],
];

for (const store of await storeCases()) {
  describe(`Initiate Call refusals (${store.kind})`, { skip: store.skip }, () => {
    const env = sharedEnv(store.kind);
    const smallBodyEnv = sharedEnv(store.kind, { env: { BODY_LIMIT_BYTES: '2048' } });

    for (const op of OPERATION_CASES) {
      describe(op.name, () => {
        for (const [title, cases] of GROUPS) {
          const applicable = cases.filter((c) => !c.when || c.when(op));
          if (applicable.length === 0) continue;
          describe(title, () => {
            for (const refusal of applicable) {
              it(refusal.it, async () => {
                const shared = env();
                const f = await createOrgFixture(shared.deps, 'Acme', refusal.definition ?? definition());
                const ctx = contextFor(shared, op, f);
                const runsBefore = await countRuns(shared.deps);
                const response = await refusal.request(ctx);
                const code = typeof refusal.code === 'function' ? refusal.code(op) : refusal.code;
                const body = assertProblem(response, refusal.status, code);
                if (refusal.pointers) assert.deepEqual(pointersOf(body), [...refusal.pointers].sort());
                assert.equal(await countRuns(shared.deps), runsBefore, 'a refused request creates no run');
                await refusal.afterwards?.(body, ctx);
              });
            }
          });
        }

        if (op.mode === 'test') {
          it('runs the only draft when nothing is published', async () => {
            const shared = env();
            const f = await createOrgFixture(shared.deps);
            await unpublish(shared.deps, f.workflowUuid);
            const ctx = contextFor(shared, op, f);
            const run = await runDetails(ctx, await ctx.send(OK_BODY));
            assert.equal(run.mode, 'test');
            assert.equal(run.definition_version, 1);
          });
        }

        it('answers 413 payload_too_large for a body over a configured BODY_LIMIT_BYTES, and 401 first without a key', async () => {
          const own = smallBodyEnv();
          const f = await createOrgFixture(own.deps);
          const big = { ...OK_BODY, initial_context: { blob: 'x'.repeat(3000) } };
          const ctx = contextFor(own, op, f);
          const runsBefore = await countRuns(own.deps);

          assertProblem(await ctx.send(big, { key: undefined }), 401, 'missing_api_key');
          assertProblem(await ctx.send(big), 413, 'payload_too_large');
          assert.equal(await countRuns(own.deps), runsBefore, 'a refused request creates no run');
          const small = await ctx.send({ ...OK_BODY, initial_context: { blob: 'x'.repeat(1500) } });
          assert.equal(small.statusCode, 200, 'a body under the limit is accepted');
        });
      });
    }

    it('accepts an initial_context exactly at the default size and depth limits', async () => {
      const shared = env();
      const f = await createOrgFixture(shared.deps);
      const ctx = contextFor(shared, OPERATION_CASES[0], f);
      const atSize = { blob: 'x'.repeat(16 * 1024 - '{"blob":""}'.length) };
      assert.equal(Buffer.byteLength(JSON.stringify(atSize)), 16 * 1024);
      assert.equal((await ctx.send({ ...OK_BODY, initial_context: atSize })).statusCode, 200);
      assert.equal((await ctx.send({ ...OK_BODY, initial_context: nested(8) })).statusCode, 200);
    });
  });
}
