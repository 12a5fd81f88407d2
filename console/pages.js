// The console's pages: each is one module exporting its component, and one entry here (its path,
// the scopes a key needs to see it, and its label when the navigation lists it). A new page is one
// more module and one more entry. A key without a page's scopes sees neither its link nor the page
// (the API would refuse its reads anyway: this spares the operator the refusals). Labels are short
// (Webhooks, not Webhook endpoints): every link a full-scope key sees fits one line at 1280 px.
import { AgentPage } from './agent.js';
import { AgentsPage } from './agents.js';
import { ApiKeysPage } from './api-keys.js';
import { AuditLogPage } from './audit-log.js';
import { CallPage } from './call.js';
import { CallsPage } from './calls.js';
import { CampaignPage } from './campaign.js';
import { CampaignsPage } from './campaigns.js';
import { NewAgentPage } from './new-agent.js';
import { NewCampaignPage } from './new-campaign.js';
import { NewRoutePage } from './new-route.js';
import { OrganizationPage } from './organization.js';
import { OverviewPage } from './overview.js';
import { RoutePage } from './route.js';
import { RoutesPage } from './routes.js';
import { SuppressionsPage } from './suppressions.js';
import { TestCallPage } from './test-call.js';
import { WebhooksPage } from './webhooks.js';
/** @import { EventStream } from './api.js' */
/** @import { Scope } from './types.js' */
/** @import { VNode } from './vendor-htm-preact.js' */

/**
 * What the shell gives every page.
 * @typedef {object} PageProps
 * @property {string[]} params the path pattern's groups (a call's id)
 * @property {EventStream} stream the organization's event stream, shared by the pages
 * @property {Scope[]} scopes what the signed-in key may do (GET /api-keys/current)
 */

/**
 * @typedef {object} PageEntry
 * @property {RegExp} path matched against the whole path
 * @property {(props: PageProps) => VNode | null} component
 * @property {Scope[]} [scopes] the scopes its reads and actions need: a key lacking any of them does not see the page
 * @property {{ href: string, label: string }} [nav] its link in the navigation, in this order
 */

/** @type {PageEntry[]} */
export const PAGES = [
  { path: /^\/console\/?$/, scopes: ['calls'], nav: { href: '/console', label: 'Calls' }, component: CallsPage },
  { path: /^\/console\/runs\/(\d+)$/, scopes: ['calls'], component: CallPage },
  { path: /^\/console\/test-call$/, scopes: ['calls'], nav: { href: '/console/test-call', label: 'Test call' }, component: TestCallPage },
  { path: /^\/console\/overview$/, scopes: ['calls'], nav: { href: '/console/overview', label: 'Overview' }, component: OverviewPage },
  { path: /^\/console\/webhooks$/, scopes: ['webhooks'], nav: { href: '/console/webhooks', label: 'Webhooks' }, component: WebhooksPage },
  { path: /^\/console\/campaigns$/, scopes: ['campaigns'], nav: { href: '/console/campaigns', label: 'Campaigns' }, component: CampaignsPage },
  { path: /^\/console\/campaigns\/new$/, scopes: ['campaigns'], component: NewCampaignPage },
  { path: /^\/console\/campaigns\/(\d+)$/, scopes: ['campaigns'], component: CampaignPage },
  { path: /^\/console\/suppressions$/, scopes: ['campaigns'], nav: { href: '/console/suppressions', label: 'Suppressions' }, component: SuppressionsPage },
  { path: /^\/console\/agents$/, scopes: ['calls', 'admin'], nav: { href: '/console/agents', label: 'Agents' }, component: AgentsPage },
  { path: /^\/console\/agents\/new$/, scopes: ['calls', 'admin'], component: NewAgentPage },
  { path: /^\/console\/agents\/([0-9a-fA-F-]{36})$/, scopes: ['calls', 'admin'], component: AgentPage },
  { path: /^\/console\/routes$/, scopes: ['calls', 'admin'], nav: { href: '/console/routes', label: 'Routes' }, component: RoutesPage },
  { path: /^\/console\/routes\/new$/, scopes: ['calls', 'admin'], component: NewRoutePage },
  { path: /^\/console\/routes\/(\d+)$/, scopes: ['calls', 'admin'], component: RoutePage },
  { path: /^\/console\/api-keys$/, scopes: ['admin'], nav: { href: '/console/api-keys', label: 'API keys' }, component: ApiKeysPage },
  { path: /^\/console\/organization$/, scopes: ['admin'], nav: { href: '/console/organization', label: 'Organization' }, component: OrganizationPage },
  { path: /^\/console\/audit-log$/, scopes: ['admin'], nav: { href: '/console/audit-log', label: 'Audit log' }, component: AuditLogPage },
];
