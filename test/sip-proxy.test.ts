// The SIP trunk provider through a record-routing proxy with digest authentication (Kamailio from
// Debian) in front of the callee (SIPp), over UDP, TCP and TLS between Dialtone and the proxy, with
// the real dispatcher on both stores: calls complete and hang up from either side, and cancel.
// The route names the proxy as its outbound proxy; the proxy challenges the INVITE (407), routes
// the dialog's requests by the Record-Route it inserted and relays the CANCEL.
import assert from 'node:assert/strict';
import { connect, createServer } from 'node:net';
import type { TestContext } from 'node:test';
import { createTelephonyConfiguration } from '../src/telephony/configurations.js';
import { postJson } from './helpers/app.js';
import { buildWithDispatcher, ended, waitForRun, type DispatchEnv } from './helpers/dispatch.js';
import { createOrgFixture, PATHS, type OrgFixture } from './helpers/fixtures.js';
import { KAMAILIO_ADDRESS, kamailioSkip, PROXY_SERVER_NAME, startKamailio, testPki, type Kamailio } from './helpers/kamailio.js';
import { DIALTONE_SIP_ADDRESS, freeUdpPort, SIPP_ADDRESS, sippSkip, startSipp, strangerBye, type Sipp } from './helpers/sipp.js';
import { storeCases, type StoreKind } from './helpers/stores.js';
import { BARESIP_ADDRESS, baresipSkip, startBaresip } from './helpers/baresip.js';
import { describe, it } from './helpers/suite.js';

type Transport = 'udp' | 'tcp' | 'tls';

interface ProxyEnv extends DispatchEnv {
  f: OrgFixture;
  routeId: number;
  sipp: Sipp;
  kamailio: Kamailio;
}

interface ProxyOptions {
  password?: string;
  settings?: Record<string, unknown>;
  sipPort?: number;
}

/** A port free for both UDP and TCP on Dialtone's address (its SIP port serves both). */
async function freeSipPort(): Promise<number> {
  for (;;) {
    const port = await freeUdpPort(DIALTONE_SIP_ADDRESS);
    const server = createServer();
    const free = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, DIALTONE_SIP_ADDRESS, () => resolve(true));
    });
    if (free) await new Promise((resolve) => server.close(resolve));
    if (free) return port;
  }
}

function proxySettings(kamailio: Kamailio, transport: Transport): Record<string, unknown> {
  if (transport === 'tls') {
    return { transport, outbound_proxy: `sip:${KAMAILIO_ADDRESS}:${kamailio.tlsPort};transport=tls;lr`, tls_server_name: PROXY_SERVER_NAME, tls_ca_pem: testPki().caPem };
  }
  return { transport, outbound_proxy: `sip:${KAMAILIO_ADDRESS}:${kamailio.port}${transport === 'tcp' ? ';transport=tcp' : ''};lr` };
}

async function proxyEnv(t: TestContext, kind: StoreKind, scenario: string, transport: Transport, options: ProxyOptions = {}): Promise<ProxyEnv> {
  const kamailio = await startKamailio(t);
  const sipp = await startSipp(t, scenario);
  return { ...(await routeThroughProxy(t, kind, kamailio, { host: SIPP_ADDRESS, port: sipp.port }, transport, options)), sipp };
}

/** Dialtone with a SIP route to `callee` through `kamailio` as its outbound proxy, alice's credentials. */
async function routeThroughProxy(
  t: TestContext,
  kind: StoreKind,
  kamailio: Kamailio,
  callee: { host: string; port: number },
  transport: Transport,
  options: ProxyOptions = {},
): Promise<Omit<ProxyEnv, 'sipp'>> {
  const env = await buildWithDispatcher(t, kind, {
    env: {
      SIP_BIND_ADDRESS: DIALTONE_SIP_ADDRESS,
      SIP_PUBLIC_ADDRESS: DIALTONE_SIP_ADDRESS,
      SIP_PORT: String(options.sipPort ?? (await freeSipPort())),
      RING_TIMEOUT_MS: '8000',
      MAX_CALL_DURATION_MS: '20000',
      REAPER_GRACE_MS: '5000',
    },
  });
  const f = await createOrgFixture(env.deps);
  const route = await createTelephonyConfiguration(
    env.deps.store,
    env.deps.cipher,
    {
      orgId: f.orgId,
      name: `Trunk over ${transport}`,
      provider: 'sip',
      callerIds: ['+12025550100'],
      settings: { host: callee.host, port: callee.port, media_address: '127.0.0.1', media_port: 40000, ...proxySettings(kamailio, transport), ...options.settings },
      credentials: { username: 'alice', password: options.password ?? 's3cret' },
    },
    Date.now(),
  );
  return { ...env, f, routeId: route.id, kamailio };
}

async function call(env: Omit<ProxyEnv, 'sipp'>): Promise<number> {
  const response = await postJson(env.app, PATHS.initiateCall(env.f.agentUuid), { phone_number: '+12025550123', telephony_configuration_id: env.routeId }, { key: env.f.apiKey });
  assert.equal(response.statusCode, 200, response.body);
  return response.json().workflow_run_id as number;
}

async function cancel(env: Omit<ProxyEnv, 'sipp'>, runId: number): Promise<void> {
  const response = await env.app.inject({ method: 'POST', url: `/api/v1/public/workflow-runs/${runId}/cancel`, headers: { 'x-api-key': env.f.apiKey } });
  assert.equal(response.statusCode, 200, response.body);
}

const diagnosis = (env: ProxyEnv, run?: unknown) => `${run ? JSON.stringify(run) : ''}\n--- SIPp ---\n${env.sipp.output()}\n--- Kamailio ---\n${env.kamailio.output().slice(-3000)}`;

async function sippPassed(env: ProxyEnv): Promise<void> {
  assert.equal(await env.sipp.exited, 0, `SIPp's scenario ran to its end:\n${diagnosis(env)}`);
}

/** The requests the proxy saw from Dialtone's side, over `transport`. */
const fromDialtone = (env: ProxyEnv, transport: Transport) => env.kamailio.requests().filter((r) => r.endsWith(` ${transport}`));

const skip = sippSkip() || kamailioSkip();
for (const store of await storeCases()) {
  describe(`SIP trunk provider through Kamailio with digest authentication (${store.kind})`, { skip: store.skip || skip }, () => {
    for (const transport of ['udp', 'tcp', 'tls'] as const) {
      it(`over ${transport}: authenticates at the proxy, and the callee's BYE reaches Dialtone through the proxy; the run completes`, async (t) => {
        const env = await proxyEnv(t, store.kind, 'proxy-answer-remote-bye.xml', transport);
        const runId = await call(env);
        const run = await waitForRun(env, runId, ended, 15_000);
        assert.equal(run.state, 'completed', diagnosis(env, run));
        assert.equal(run.raw_provider_status, 'BYE');
        await sippPassed(env);
        // The INVITE twice (407, then with credentials), then the ACK, all over the route's transport.
        assert.deepEqual(fromDialtone(env, transport).slice(0, 3), ['INVITE ' + transport, 'INVITE ' + transport, 'ACK ' + transport]);
      });

      it(`over ${transport}: hangs up an answered call with BYE through the proxy when the run is canceled`, async (t) => {
        const env = await proxyEnv(t, store.kind, 'proxy-answer-local-bye.xml', transport);
        const runId = await call(env);
        await waitForRun(env, runId, (r) => r.state === 'in_progress', 15_000).catch((error: Error) => assert.fail(`${error.message}\n${diagnosis(env)}`));
        await cancel(env, runId);
        const run = await waitForRun(env, runId, ended, 15_000);
        assert.equal(run.state, 'completed', diagnosis(env, run));
        assert.equal(run.outcome_reason, 'canceled_by_request');
        await sippPassed(env);
        assert.ok(fromDialtone(env, transport).includes(`BYE ${transport}`), env.kamailio.requests().join(', '));
      });

      it(`over ${transport}: cancels a ringing call with CANCEL along the INVITE's path`, async (t) => {
        const env = await proxyEnv(t, store.kind, 'proxy-ring-no-answer.xml', transport);
        const runId = await call(env);
        await waitForRun(env, runId, (r) => r.state === 'ringing', 15_000).catch((error: Error) => assert.fail(`${error.message}\n${diagnosis(env)}`));
        await cancel(env, runId);
        const run = await waitForRun(env, runId, ended, 15_000);
        assert.equal(run.state, 'canceled', diagnosis(env, run));
        await sippPassed(env);
        assert.ok(fromDialtone(env, transport).includes(`CANCEL ${transport}`), env.kamailio.requests().join(', '));
      });
    }

    if (store.kind === 'postgres') return;

    it('ends the run failed with the proxy\'s 407 when the credentials are wrong, after one authenticated try', async (t) => {
      const env = await proxyEnv(t, store.kind, 'proxy-ring-no-answer.xml', 'tcp', { password: 'wrong' });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, 15_000);
      assert.equal(run.state, 'failed');
      assert.equal(run.raw_provider_status, '407 Proxy Authentication Required');
      assert.deepEqual(fromDialtone(env, 'tcp'), ['INVITE tcp', 'INVITE tcp'], 'two INVITEs: the first, and one with credentials');
    });

    it('fails the dial when the proxy\'s certificate does not carry the expected TLS server name, and sends it nothing', async (t) => {
      const env = await proxyEnv(t, store.kind, 'proxy-ring-no-answer.xml', 'tls', { settings: { tls_server_name: 'other.dialtone.test' } });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, 15_000);
      assert.equal(run.state, 'failed');
      assert.match(String(run.raw_provider_status), /^503 .*other\.dialtone\.test/);
      assert.deepEqual(env.kamailio.requests(), []);
    });

    it('fails the dial when the proxy\'s certificate is not signed by a trusted CA (no tls_ca_pem: Node\'s bundled CAs)', async (t) => {
      const env = await proxyEnv(t, store.kind, 'proxy-ring-no-answer.xml', 'tls', { settings: { tls_ca_pem: undefined } });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, 15_000);
      assert.equal(run.state, 'failed');
      assert.match(String(run.raw_provider_status), /^503 .*certificate/i);
      assert.deepEqual(env.kamailio.requests(), []);
    });

    it('answers a request that arrives on a connection a peer opened to its TCP listener, over that connection (481 for no call of its own), and the live call goes on', async (t) => {
      const env = await proxyEnv(t, store.kind, 'proxy-answer-local-bye.xml', 'tcp');
      const runId = await call(env);
      await waitForRun(env, runId, (r) => r.state === 'in_progress', 15_000).catch((error: Error) => assert.fail(`${error.message}\n${diagnosis(env)}`));
      const peer = connect(env.deps.config.SIP_PORT, DIALTONE_SIP_ADDRESS);
      t.after(() => peer.destroy());
      await new Promise<void>((resolve, reject) => peer.once('connect', resolve).once('error', reject));
      let received = '';
      const answer = new Promise<string>((resolve) => peer.on('data', (chunk) => (received += chunk.toString()).includes('\r\n\r\n') && resolve(received)));
      peer.write(strangerBye({ transport: 'tcp', dialtonePort: env.deps.config.SIP_PORT, strangerPort: peer.localPort ?? 0, branch: 'z9hG4bKtcpstranger' }));
      assert.match(await answer, /^SIP\/2\.0 481 .*\r\nVia: SIP\/2\.0\/TCP 127\.0\.0\.3:\d+;branch=z9hG4bKtcpstranger/s);
      assert.equal((await waitForRun(env, runId, () => true)).state, 'in_progress');
      await cancel(env, runId);
      assert.equal((await waitForRun(env, runId, ended, 15_000)).state, 'completed');
      await sippPassed(env);
    });

    it('fails the dial, not the process, when the SIP TCP port is already taken', async (t) => {
      const squatter = createServer();
      t.after(() => squatter.close());
      await new Promise<void>((resolve) => squatter.listen(0, DIALTONE_SIP_ADDRESS, resolve));
      const port = (squatter.address() as { port: number }).port;
      const env = await proxyEnv(t, store.kind, 'proxy-ring-no-answer.xml', 'tcp', { sipPort: port });
      const runId = await call(env);
      const run = await waitForRun(env, runId, ended, 15_000);
      assert.equal(run.state, 'failed');
      assert.equal(run.outcome_reason, 'dial_refused');
      assert.equal(run.raw_provider_status, 'sip_stack_unavailable');
      const failed = await env.deps.store.db.selectFrom('run_events').select('data').where('run_id', '=', runId).where('type', '=', 'failed').executeTakeFirstOrThrow();
      assert.match(JSON.stringify(failed.data), new RegExp(`The SIP TCP port 127\\.0\\.0\\.1:${port} cannot be bound: .*EADDRINUSE`));
      assert.deepEqual(env.kamailio.requests(), []);
    });
  });
}

const skipBaresip = skip || baresipSkip();
for (const store of await storeCases()) {
  describe(`SIP trunk provider through Kamailio to baresip, a real user agent (${store.kind})`, { skip: store.skip || skipBaresip }, () => {
    it('over tls: baresip answers, Dialtone hangs up when the run is canceled, and baresip sees the BYE', async (t) => {
      const kamailio = await startKamailio(t);
      const baresip = await startBaresip(t);
      const env = await routeThroughProxy(t, store.kind, kamailio, { host: BARESIP_ADDRESS, port: baresip.port }, 'tls');
      const runId = await call(env);
      await waitForRun(env, runId, (r) => r.state === 'in_progress', 15_000).catch((error: Error) => assert.fail(`${error.message}\n${baresip.output().slice(-3000)}\n${kamailio.output()}`));
      await cancel(env, runId);
      const run = await waitForRun(env, runId, ended, 15_000);
      assert.equal(run.state, 'completed');
      assert.equal(run.outcome_reason, 'canceled_by_request');
      // baresip reports the far end's BYE as the session closed by the peer (ECONNRESET).
      await baresip.waitFor(/Call established[\s\S]*session closed: Connection reset by peer/);
      assert.deepEqual(kamailio.requests().filter((r) => r.endsWith(' tls')).map((r) => r.split(' ')[0]), ['INVITE', 'INVITE', 'ACK', 'BYE']);
    });

    if (store.kind === 'postgres') return;

    it('over tcp: baresip answers and hangs up, its BYE reaches Dialtone through the proxy, and the run completes', async (t) => {
      const kamailio = await startKamailio(t);
      const baresip = await startBaresip(t);
      const env = await routeThroughProxy(t, store.kind, kamailio, { host: BARESIP_ADDRESS, port: baresip.port }, 'tcp');
      const runId = await call(env);
      await waitForRun(env, runId, (r) => r.state === 'in_progress', 15_000).catch((error: Error) => assert.fail(`${error.message}\n${baresip.output().slice(-3000)}\n${kamailio.output()}`));
      await baresip.hangUp();
      const run = await waitForRun(env, runId, ended, 15_000).catch((error: Error) => assert.fail(`${error.message}\n${baresip.output().slice(-3000)}\n${kamailio.output()}`));
      assert.equal(run.state, 'completed');
      assert.equal(run.raw_provider_status, 'BYE');
      assert.ok(kamailio.requests().includes('BYE udp'), kamailio.requests().join(', '));
      assert.match(baresip.output(), /Call established/);
    });
  });
}
