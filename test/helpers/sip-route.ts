// Dialtone with a dispatcher and a SIP route to a real peer on loopback (SIPp, baresip): the setup
// the SIP media, peer and machine-detection tests share, and the call they place over it.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { createTelephonyConfiguration } from '../../src/telephony/configurations.js';
import { postJson } from './app.js';
import { buildWithDispatcher, type DispatchEnv } from './dispatch.js';
import { createOrgFixture, definition, PATHS, type OrgFixture } from './fixtures.js';
import { DIALTONE_SIP_ADDRESS, freeUdpPort } from './sipp.js';
import type { StoreKind } from './stores.js';

export interface SipRouteEnv extends DispatchEnv {
  f: OrgFixture;
  routeId: number;
  /** The RTP port range Dialtone was given. */
  rtpPorts: { min: number; max: number };
}

export interface SipRouteOptions {
  /** More environment (AGENT_RUNTIME_URL, SIP_MEDIA_TIMEOUT_MS, …). */
  env?: Record<string, string>;
  /** More route settings (media_address, media_port). */
  settings?: Record<string, unknown>;
  credentials?: Record<string, string>;
  /** The agent's definition (default: fixtures' definition()). */
  definition?: unknown;
  /** Start the webhook delivery worker (default true, as buildWithDispatcher). */
  webhooks?: boolean;
}

/** Dialtone with a SIP route (no media_address unless `settings` has one) to `callee` over UDP. */
export async function sipRouteEnv(t: TestContext, kind: StoreKind, callee: { host: string; port: number }, options: SipRouteOptions = {}): Promise<SipRouteEnv> {
  // A range of its own per test, so parallel test files rarely meet (a port taken is skipped anyway).
  const rtpBase = 20_000 + 2 * Math.floor(Math.random() * 10_000);
  const env = await buildWithDispatcher(t, kind, {
    ...(options.webhooks === undefined ? {} : { webhooks: options.webhooks }),
    env: {
      SIP_BIND_ADDRESS: DIALTONE_SIP_ADDRESS,
      SIP_PUBLIC_ADDRESS: DIALTONE_SIP_ADDRESS,
      SIP_PORT: String(await freeUdpPort(DIALTONE_SIP_ADDRESS)),
      SIP_RTP_PORT_MIN: String(rtpBase),
      SIP_RTP_PORT_MAX: String(rtpBase + 99),
      RING_TIMEOUT_MS: '8000',
      MAX_CALL_DURATION_MS: '60000',
      REAPER_GRACE_MS: '5000',
      ...options.env,
    },
  });
  const f = await createOrgFixture(env.deps, 'Acme', options.definition ?? definition());
  const route = await createTelephonyConfiguration(
    env.deps.store,
    env.deps.cipher,
    {
      orgId: f.orgId,
      name: 'Trunk',
      provider: 'sip',
      callerIds: ['+12025550100'],
      settings: { host: callee.host, port: callee.port, transport: 'udp', ...options.settings },
      ...(options.credentials ? { credentials: options.credentials } : {}),
    },
    Date.now(),
  );
  return { ...env, f, routeId: route.id, rtpPorts: { min: rtpBase, max: rtpBase + 99 } };
}

/** Places a call over the env's route; returns its run id. */
export async function callOverRoute(env: SipRouteEnv, to = '+12025550123'): Promise<number> {
  const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: to, telephony_configuration_id: env.routeId }, { key: env.f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return response.json().workflow_run_id as number;
}
