// The console's pages: each is one module exporting its component, and one entry here (its path,
// and its label when the navigation lists it). A new page is one more module and one more entry.
import { CallPage } from './call.js';
import { CallsPage } from './calls.js';
import { CampaignsPage } from './campaigns.js';
import { OverviewPage } from './overview.js';
import { SuppressionsPage } from './suppressions.js';
import { TestCallPage } from './test-call.js';
import { WebhooksPage } from './webhooks.js';
/** @import { EventStream } from './api.js' */
/** @import { VNode } from './vendor-htm-preact.js' */

/**
 * What the shell gives every page.
 * @typedef {object} PageProps
 * @property {string[]} params the path pattern's groups (a call's id)
 * @property {EventStream} stream the organization's event stream, shared by the pages
 */

/**
 * @typedef {object} PageEntry
 * @property {RegExp} path matched against the whole path
 * @property {(props: PageProps) => VNode | null} component
 * @property {{ href: string, label: string }} [nav] its link in the navigation, in this order
 */

/** @type {PageEntry[]} */
export const PAGES = [
  { path: /^\/console\/?$/, nav: { href: '/console', label: 'Calls' }, component: CallsPage },
  { path: /^\/console\/runs\/(\d+)$/, component: CallPage },
  { path: /^\/console\/test-call$/, nav: { href: '/console/test-call', label: 'Test call' }, component: TestCallPage },
  { path: /^\/console\/overview$/, nav: { href: '/console/overview', label: 'Overview' }, component: OverviewPage },
  { path: /^\/console\/webhooks$/, nav: { href: '/console/webhooks', label: 'Webhook endpoints' }, component: WebhooksPage },
  { path: /^\/console\/campaigns$/, nav: { href: '/console/campaigns', label: 'Campaigns' }, component: CampaignsPage },
  { path: /^\/console\/suppressions$/, nav: { href: '/console/suppressions', label: 'Suppressions' }, component: SuppressionsPage },
];
