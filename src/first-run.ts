// First run on an empty embedded database: a demo organization, key, simulator route and agent,
// so a newcomer can place a (simulated) call with one pasted curl line. Never touches a database
// that already has an organization.
import type { Deps } from './deps.js';
import { createApiKey } from './auth/api-keys.js';
import { SYSTEM_ACTOR } from './audit/audit-log.js';
import { createOrganization } from './orgs/organizations.js';
import { selectAnyOrganizationExists } from './store/statements/organization-statements.js';
import { createTelephonyConfiguration } from './telephony/configurations.js';
import { createWorkflow } from './workflows/workflows.js';
import { CONSOLE_PATH, DOCS_PATH } from './http/routes/root.js';

export const DEMO_DEFINITION = {
  nodes: [
    { id: 'trigger', type: 'api_trigger', data: { enabled: true } },
    {
      id: 'start',
      type: 'start',
      data: {
        greeting: 'Hello {{customer_name | there}}, this is the Dialtone demo calling about {{topic}}.',
        prompt: 'You are a friendly assistant confirming {{topic}} with {{customer_name | the customer}}.',
      },
    },
    { id: 'end', type: 'end', data: {} },
  ],
  edges: [
    { source: 'trigger', target: 'start' },
    { source: 'start', target: 'end' },
  ],
  variables: {
    customer_name: { description: 'Name to greet the person with' },
    topic: { default: 'your appointment', description: 'What the call is about' },
  },
};

export interface DemoSeed {
  orgId: number;
  apiKey: string;
  agentUuid: string;
  workflowUuid: string;
  telephonyConfigurationId: number;
}

function shouldSeed(deps: Deps): boolean {
  const setting = deps.config.DIALTONE_FIRST_RUN_DEMO;
  return setting === 'true' || (setting === 'auto' && deps.store.embedded);
}

export async function seedDemoIfEmpty(deps: Deps): Promise<DemoSeed | undefined> {
  if (!shouldSeed(deps)) return undefined;
  if (await selectAnyOrganizationExists(deps.store)) return undefined;
  const now = deps.clock.now();
  const org = await createOrganization(deps.store, 'Demo organization', now);
  const key = await createApiKey(deps.store, org.id, 'demo key', now, { actor: SYSTEM_ACTOR });
  const telephony = await createTelephonyConfiguration(
    deps.store,
    deps.cipher,
    { orgId: org.id, name: 'Simulator', provider: 'simulator', callerIds: ['+12025550100'], isDefault: true, callsPerSecond: 5, maxConcurrentCalls: 10 },
    now,
  );
  const workflow = await createWorkflow(deps.store, { orgId: org.id, name: 'Demo agent', definition: DEMO_DEFINITION }, now);
  return {
    orgId: org.id,
    apiKey: key.key,
    agentUuid: workflow.agent_uuids[0] ?? '',
    workflowUuid: workflow.workflow_uuid,
    telephonyConfigurationId: telephony.id,
  };
}

export function demoBanner(seed: DemoSeed, baseUrl: string): string {
  const body = JSON.stringify({ phone_number: '+12025550123', initial_context: { customer_name: 'Ada' } });
  return [
    '',
    'Dialtone created a demo organization on this empty database. The key is shown only now:',
    '',
    `  API key         ${seed.apiKey}`,
    `  Agent UUID      ${seed.agentUuid}`,
    `  Workflow UUID   ${seed.workflowUuid}`,
    `  Telephony       simulator (configuration ${seed.telephonyConfigurationId}, default)`,
    '',
    'Place a simulated call:',
    '',
    `  curl -sS -X POST ${baseUrl}/api/v1/public/agent/${seed.agentUuid} \\`,
    `    -H 'X-API-Key: ${seed.apiKey}' -H 'Content-Type: application/json' \\`,
    `    -d '${body}'`,
    '',
    'In a browser (sign in to the console with the API key):',
    '',
    ...serviceAddresses(baseUrl),
    '',
  ].join('\n');
}

/** Where a person goes next: the console and the API reference. */
export function serviceAddresses(baseUrl: string): string[] {
  return [`  Console         ${baseUrl}${CONSOLE_PATH}`, `  API reference   ${baseUrl}${DOCS_PATH}`];
}
