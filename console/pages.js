// The console's pages: each is one module exporting its component, and one entry here (its path,
// the scope a key needs to see it, and its label when the navigation lists it). A new page is one
// more module and one more entry. A key without a page's scope sees neither its link nor the page
// (the API would refuse its reads anyway: this spares the operator the refusals).
import { ApiKeysPage } from './api-keys.js';
import { AuditLogPage } from './audit-log.js';
import { CallPage } from './call.js';
import { CallsPage } from './calls.js';
import { CampaignPage } from './campaign.js';
import { CampaignsPage } from './campaigns.js';
import { NewCampaignPage } from './new-campaign.js';
import { OrganizationPage } from './organization.js';
import { OverviewPage } from './overview.js';
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
 * @property {Scope} [scope] the scope the page's reads need: a key without it does not see the page
 * @property {{ href: string, label: string }} [nav] its link in the navigation, in this order
 */

/** @type {PageEntry[]} */
export const PAGES = [
  { path: /^\/console\/?$/, scope: 'calls', nav: { href: '/console', label: 'Calls' }, component: CallsPage },
  { path: /^\/console\/runs\/(\d+)$/, scope: 'calls', component: CallPage },
  { path: /^\/console\/test-call$/, scope: 'calls', nav: { href: '/console/test-call', label: 'Test call' }, component: TestCallPage },
  { path: /^\/console\/overview$/, scope: 'calls', nav: { href: '/console/overview', label: 'Overview' }, component: OverviewPage },
  { path: /^\/console\/webhooks$/, scope: 'webhooks', nav: { href: '/console/webhooks', label: 'Webhook endpoints' }, component: WebhooksPage },
  { path: /^\/console\/campaigns$/, scope: 'campaigns', nav: { href: '/console/campaigns', label: 'Campaigns' }, component: CampaignsPage },
  { path: /^\/console\/campaigns\/new$/, scope: 'campaigns', component: NewCampaignPage },
  { path: /^\/console\/campaigns\/(\d+)$/, scope: 'campaigns', component: CampaignPage },
  { path: /^\/console\/suppressions$/, scope: 'campaigns', nav: { href: '/console/suppressions', label: 'Suppressions' }, component: SuppressionsPage },
  { path: /^\/console\/api-keys$/, scope: 'admin', nav: { href: '/console/api-keys', label: 'API keys' }, component: ApiKeysPage },
  { path: /^\/console\/organization$/, scope: 'admin', nav: { href: '/console/organization', label: 'Organization' }, component: OrganizationPage },
  { path: /^\/console\/audit-log$/, scope: 'admin', nav: { href: '/console/audit-log', label: 'Audit log' }, component: AuditLogPage },
];
