// A ready organization: key, default simulator route, and a workflow with an API trigger.
import { createApiKey } from '../../src/auth/api-keys.js';
import type { Deps } from '../../src/deps.js';
import { createOrganization } from '../../src/orgs/organizations.js';
import { createTelephonyConfiguration } from '../../src/telephony/configurations.js';
import { createWorkflow } from '../../src/workflows/workflows.js';

export function definition(options: { greeting?: string; triggerUuid?: string; enabled?: boolean; variables?: Record<string, unknown> } = {}) {
  return {
    nodes: [
      { id: 'trigger', type: 'api_trigger', data: { ...(options.triggerUuid ? { trigger_uuid: options.triggerUuid } : {}), enabled: options.enabled ?? true } },
      { id: 'start', type: 'start', data: { greeting: options.greeting ?? 'Hello {{name | there}}' } },
      { id: 'end', type: 'end', data: {} },
    ],
    edges: [
      { source: 'trigger', target: 'start' },
      { source: 'start', target: 'end' },
    ],
    ...(options.variables ? { variables: options.variables } : {}),
  };
}

export interface OrgFixture {
  orgId: number;
  apiKey: string;
  apiKeyId: number;
  telephonyId: number;
  workflowUuid: string;
  agentUuid: string;
}

export async function createOrgFixture(deps: Deps, name = 'Acme', def: unknown = definition()): Promise<OrgFixture> {
  const now = deps.clock.now();
  const org = await createOrganization(deps.store, name, now);
  const key = await createApiKey(deps.store, org.id, 'test key', now);
  const telephony = await createTelephonyConfiguration(
    deps.store,
    deps.cipher,
    { orgId: org.id, name: 'Simulator', provider: 'simulator', callerIds: ['+12025550100'], isDefault: true, callsPerSecond: 100, maxConcurrentCalls: 50 },
    now,
  );
  const workflow = await createWorkflow(deps.store, { orgId: org.id, name: `${name} agent`, definition: def }, now);
  return {
    orgId: org.id,
    apiKey: key.key,
    apiKeyId: key.id,
    telephonyId: telephony.id,
    workflowUuid: workflow.workflow_uuid,
    agentUuid: workflow.agent_uuids[0] ?? '',
  };
}

export const PATHS = {
  initiateCall: (uuid: string) => `/api/v1/public/agent/${uuid}`,
  initiateCallTest: (uuid: string) => `/api/v1/public/agent/test/${uuid}`,
  initiateCallByWorkflowUuid: (uuid: string) => `/api/v1/public/agent/workflow/${uuid}`,
  initiateCallTestByWorkflowUuid: (uuid: string) => `/api/v1/public/agent/test/workflow/${uuid}`,
} as const;

export type OperationName = keyof typeof PATHS;

export interface OperationCase {
  name: OperationName;
  mode: 'published' | 'test';
  target: 'agent' | 'workflow';
  path(fixture: Pick<OrgFixture, 'agentUuid' | 'workflowUuid'>): string;
}

export const OPERATION_CASES: OperationCase[] = [
  { name: 'initiateCall', mode: 'published', target: 'agent', path: (f) => PATHS.initiateCall(f.agentUuid) },
  { name: 'initiateCallTest', mode: 'test', target: 'agent', path: (f) => PATHS.initiateCallTest(f.agentUuid) },
  { name: 'initiateCallByWorkflowUuid', mode: 'published', target: 'workflow', path: (f) => PATHS.initiateCallByWorkflowUuid(f.workflowUuid) },
  { name: 'initiateCallTestByWorkflowUuid', mode: 'test', target: 'workflow', path: (f) => PATHS.initiateCallTestByWorkflowUuid(f.workflowUuid) },
];

export async function countRuns(deps: Deps): Promise<number> {
  const row = await deps.store.db.selectFrom('workflow_runs').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}
