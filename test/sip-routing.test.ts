// Routing of the SIP provider's requests (RFC 3261 sections 8.1.2, 12.1.2, 12.2.1.1) and the SIP
// route settings, as pure functions: loose and strict routing, an outbound proxy as a pre-existing
// route set, the hop a URI names, and every problem of a route's settings listed at once.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import type * as sip from 'sip';
import { hopOf, isLooseRouter, preloadedRouteSet, routeRequest, routeSetOfResponse } from '../src/telephony/sip/route-set.js';
import { sipSettingsProblems, sipTrunkOf } from '../src/telephony/sip/settings.js';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, waitForRun } from './helpers/dispatch.js';
import { createOrgFixture, PATHS } from './helpers/fixtures.js';
import { describe, it } from './helpers/suite.js';
import { testPki } from './helpers/kamailio.js';
import { spawnSync } from 'node:child_process';

const sipLibrary = createRequire(import.meta.url)('sip') as typeof sip;
const route = (...uris: string[]) => uris.map((uri) => ({ uri, params: {} }));
const target = 'sip:callee@192.0.2.9:5070;transport=udp';

describe('SIP request routing (RFC 3261 12.2.1.1)', () => {
  it('sends a request without a route set to the remote target, with no Route header', () => {
    assert.deepEqual(routeRequest(target, []), { requestUri: target, route: [], nextHop: target });
  });

  it('loose routing: keeps the remote target as Request-URI, the route set as Route, and sends to the first route', () => {
    const set = route('sip:p1.example.net;lr', 'sip:p2.example.net;lr;ftag=x');
    assert.deepEqual(routeRequest(target, set), { requestUri: target, route: set, nextHop: 'sip:p1.example.net;lr' });
  });

  it('strict routing: the first route becomes the Request-URI, the remote target the last Route, and the request goes to that Request-URI', () => {
    const set = route('sip:strict.example.net:5080;maddr=192.0.2.1', 'sip:p2.example.net;lr');
    assert.deepEqual(routeRequest(target, set), {
      requestUri: 'sip:strict.example.net:5080;maddr=192.0.2.1',
      route: route('sip:p2.example.net;lr', target),
      nextHop: 'sip:strict.example.net:5080;maddr=192.0.2.1',
    });
  });

  it('strict routing drops from the Request-URI what a Request-URI may not carry (method parameter, headers)', () => {
    const routed = routeRequest(target, route('sip:strict.example.net;method=INVITE?Subject=x'));
    assert.equal(routed.requestUri, 'sip:strict.example.net');
    assert.deepEqual(routed.route, route(target));
  });

  it('tells a loose router by its lr parameter inside the URI, not by a name-addr parameter or a user part that says lr', () => {
    assert.equal(isLooseRouter('sip:proxy.example.net;lr'), true);
    assert.equal(isLooseRouter('sip:proxy.example.net;transport=tcp;lr=on'), true);
    assert.equal(isLooseRouter('sip:lr@proxy.example.net'), false);
    assert.equal(isLooseRouter('sip:proxy.example.net;lrx'), false);
  });

  it('routes an initial request through an outbound proxy as a pre-existing route set, strict when the proxy URI lacks lr', () => {
    assert.deepEqual(routeRequest(target, preloadedRouteSet('sip:proxy.example.net:5060;lr')), { requestUri: target, route: route('sip:proxy.example.net:5060;lr'), nextHop: 'sip:proxy.example.net:5060;lr' });
    assert.deepEqual(routeRequest(target, preloadedRouteSet('sip:proxy.example.net')), { requestUri: 'sip:proxy.example.net', route: route(target), nextHop: 'sip:proxy.example.net' });
    assert.deepEqual(preloadedRouteSet(undefined), []);
  });

  it('builds the caller\'s route set from a 2xx\'s Record-Route entries, last first, across repeated headers', () => {
    const response = sipLibrary.parse('SIP/2.0 200 OK\r\nRecord-Route: <sip:p3.example.net;lr>, <sip:p2.example.net;lr;ftag=a>\r\nRecord-Route: <sip:p1.example.net;lr>\r\nContent-Length: 0\r\n\r\n');
    assert.ok(response);
    assert.deepEqual(
      routeSetOfResponse(response, sipLibrary.stringifyUri).map((r) => r.uri),
      ['sip:p1.example.net;lr', 'sip:p2.example.net;lr;ftag=a', 'sip:p3.example.net;lr'],
    );
    assert.deepEqual(routeSetOfResponse({ headers: {} }, sipLibrary.stringifyUri), []);
  });

  it('takes the hop\'s transport from the URI\'s transport parameter, then sips:, then the route\'s transport, with the transport\'s default port', () => {
    const parse = sipLibrary.parseUri;
    assert.deepEqual(hopOf('sip:127.0.0.4:5070;transport=tcp;lr', 'udp', parse), { transport: 'tcp', host: '127.0.0.4', port: 5070 });
    assert.deepEqual(hopOf('sips:proxy.example.net;lr', 'udp', parse), { transport: 'tls', host: 'proxy.example.net', port: 5061 });
    assert.deepEqual(hopOf('sip:callee@192.0.2.9', 'tcp', parse), { transport: 'tcp', host: '192.0.2.9', port: 5060 });
    assert.deepEqual(hopOf('sip:callee@192.0.2.9', 'tls', parse), { transport: 'tls', host: '192.0.2.9', port: 5061 });
    assert.throws(() => hopOf('not a uri', 'udp', parse), /Not a SIP URI/);
  });
});

describe('SIP: a next hop Dialtone cannot send to', () => {
  it('ends the run failed (sip_route_unusable) with the callee\'s number masked in the detail the organization reads', async (t) => {
    const env = await buildWithDispatcher(t, 'sqlite');
    const f = await createOrgFixture(env.deps);
    // An IPv6 literal (no brackets) as the trunk's host: the remote target sip:+1…@2001:db8::1 names no host the SIP library can parse.
    const route = await createTelephonyConfiguration(
      env.deps.store,
      env.deps.cipher,
      { orgId: f.orgId, name: 'Trunk', provider: 'sip', callerIds: ['+12025550100'], settings: { host: '2001:db8::1', port: 5060, transport: 'udp', media_address: '127.0.0.1', media_port: 40000 } },
      Date.now(),
    );
    const response = await postJson(env.app, PATHS.initiateCall(f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: route.id }, { key: f.apiKey });
    assert.equal(response.statusCode, 200, response.body);
    const runId = response.json().workflow_run_id as number;
    const run = await waitForRun(env, runId, ended);
    assert.equal(run.state, 'failed');
    assert.equal(run.raw_provider_status, 'sip_route_unusable');
    const events = await env.app.inject({ method: 'GET', url: `/api/v1/public/workflow-runs/${runId}/events`, headers: { 'x-api-key': f.apiKey } });
    assert.equal(events.statusCode, 200, events.body);
    assert.match(events.body, /Not a SIP URI Dialtone can send to: sip:\+1202555\*\*\*\*@/, 'the detail still names the URI, its number masked');
    assert.doesNotMatch(events.body, /2025550123/, 'the callee\'s full number is in no event the organization reads');
  });
});

const skipPki = spawnSync('openssl', ['version']).error ? 'openssl is not installed' : false;

describe('SIP route settings', () => {
  it('lists every problem of a route\'s settings at once', () => {
    const problems = sipSettingsProblems({ port: 70000, transport: 'sctp', outbound_proxy: 'http://proxy', tls_server_name: 'not a name', tls_ca_pem: 'not pem' });
    assert.deepEqual(
      problems.map((p) => p.pointer),
      ['/settings/host', '/settings/port', '/settings/transport', '/settings/outbound_proxy', '/settings/tls_server_name', '/settings/tls_ca_pem', '/settings/tls_server_name', '/settings/tls_ca_pem'],
    );
    assert.match(problems.find((p) => p.pointer === '/settings/transport')?.detail ?? '', /"udp", "tcp" or "tls"/);
  });

  it('refuses TLS settings on a route that does not use TLS, and accepts them with a TLS outbound proxy', () => {
    assert.deepEqual(sipSettingsProblems({ host: 'trunk.example.net', transport: 'tcp', tls_server_name: 'trunk.example.net' }).map((p) => p.pointer), ['/settings/tls_server_name']);
    assert.deepEqual(sipSettingsProblems({ host: 'trunk.example.net', outbound_proxy: 'sips:proxy.example.net;lr', tls_server_name: 'proxy.example.net' }), []);
    assert.deepEqual(sipSettingsProblems({ host: 'trunk.example.net', outbound_proxy: 'sip:proxy.example.net;transport=tls;lr', tls_server_name: 'proxy.example.net' }), []);
  });

  it('refuses an outbound proxy that is not a SIP URI with a usable host and port', () => {
    for (const bad of ['proxy.example.net', 'sip:', 'sip:proxy.example.net:99999;lr', 'sip:[2001:db8::1]:5060;lr', 'sip:proxy example;lr', 'sip:proxy.example.net;lr?Route=x', 42]) {
      assert.deepEqual(sipSettingsProblems({ host: 'trunk.example.net', outbound_proxy: bad }).map((p) => p.pointer), ['/settings/outbound_proxy'], String(bad));
    }
    for (const good of ['sip:proxy.example.net:5060;lr', 'sip:192.0.2.1', 'sips:edge@proxy.example.net;lr', 'sip:proxy.example.net;transport=tcp;lr']) {
      assert.deepEqual(sipSettingsProblems({ host: 'trunk.example.net', outbound_proxy: good }), [], good);
    }
  });

  it('accepts a CA bundle of real PEM certificates and names the one that cannot be read', { skip: skipPki }, () => {
    const { caPem } = testPki();
    assert.deepEqual(sipSettingsProblems({ host: 'trunk.example.net', transport: 'tls', tls_ca_pem: `${caPem}\n${caPem}` }), []);
    const broken = `${caPem}\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n`;
    assert.deepEqual(sipSettingsProblems({ host: 'trunk.example.net', transport: 'tls', tls_ca_pem: broken }), [{ pointer: '/settings/tls_ca_pem', detail: 'Certificate 2 of the PEM text cannot be read.' }]);
  });

  it('reads a trunk with the transport\'s default port and the TLS settings', () => {
    assert.deepEqual(sipTrunkOf({ host: 'trunk.example.net', transport: 'tls', tls_server_name: 'trunk.example.net', outbound_proxy: 'sips:proxy.example.net;lr' }), {
      host: 'trunk.example.net',
      port: 5061,
      transport: 'tls',
      outboundProxy: 'sips:proxy.example.net;lr',
      tlsServerName: 'trunk.example.net',
      tlsCaPem: undefined,
      mediaAddress: undefined,
      mediaPort: 4000,
    });
    assert.equal(sipTrunkOf({ host: 'trunk.example.net' }).transport, 'udp');
    assert.equal(sipTrunkOf({ host: 'trunk.example.net' }).port, 5060);
  });
});
