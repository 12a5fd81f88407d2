// The SIP provider's call control on an answered call, against SIPp (a real SIP peer running
// test/sipp/ scenarios) and through Kamailio: a blind transfer by REFER followed through its NOTIFY
// sipfrag to the outcome reported by `emitTransfer` (answered, then Dialtone's BYE; busy; refused
// 405), and DTMF by INFO (the bodies checked by SIPp; a 501 refusal reported). The provider is built
// from its definition as deps.ts builds it; it does not touch the store, so no store is involved:
// the run side (the HTTP routes and the run's ending) is tested where it is built.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { TestContext } from 'node:test';
import pino from 'pino';
import { systemClock } from '../src/shared/clock.js';
import { CallControlRefusedError, type DecodedRoute, type LiveCall, type ProviderEvent, type TelephonyProvider, type TransferOutcome } from '../src/telephony/provider.js';
import { sipDefinition } from '../src/telephony/sip/definition.js';
import { decodeSipRoute } from '../src/telephony/sip/route.js';
import { KAMAILIO_ADDRESS, kamailioSkip, PROXY_SERVER_NAME, startKamailio, testPki, type Kamailio } from './helpers/kamailio.js';
import { DIALTONE_SIP_ADDRESS, freeUdpPort, SIPP_ADDRESS, sippSkip, startSipp, type Sipp, type SippOptions } from './helpers/sipp.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

interface Call {
  provider: TelephonyProvider;
  live: LiveCall;
  events: ProviderEvent[];
  transfers: TransferOutcome[];
  sipp: Sipp;
}

/** Waits until `probe` holds (polling), within a bound scaled to the machine's load. */
async function until(what: string, probe: () => boolean, diagnosis: () => string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + scaledTimeout(ms);
  while (!probe()) {
    if (Date.now() > deadline) assert.fail(`Timed out waiting for ${what}\n${diagnosis()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

type Transport = 'udp' | 'tcp' | 'tls';

/** A port free for both UDP and TCP on Dialtone's address (its SIP port serves both). */
async function freeSipPort(): Promise<number> {
  for (;;) {
    const port = await freeUdpPort(DIALTONE_SIP_ADDRESS);
    const server = createServer();
    const free = await new Promise<boolean>((resolve) => server.once('error', () => resolve(false)).listen(port, DIALTONE_SIP_ADDRESS, () => resolve(true)));
    if (free) await new Promise((resolve) => server.close(resolve));
    if (free) return port;
  }
}

/** The route's settings to reach Kamailio as its outbound proxy over `transport` (as test/sip-proxy.test.ts does). */
function proxySettings(kamailio: Kamailio, transport: Transport): Record<string, unknown> {
  if (transport === 'tls') {
    return { transport, outbound_proxy: `sip:${KAMAILIO_ADDRESS}:${kamailio.tlsPort};transport=tls;lr`, tls_server_name: PROXY_SERVER_NAME, tls_ca_pem: testPki().caPem };
  }
  return { transport, outbound_proxy: `sip:${KAMAILIO_ADDRESS}:${kamailio.port}${transport === 'tcp' ? ';transport=tcp' : ''};lr` };
}

/** A SIP provider dialing SIPp (directly, or through Kamailio as outbound proxy), once the call is answered. */
async function answeredCall(t: TestContext, scenario: string, options: SippOptions & { kamailio?: Kamailio; transport?: Transport; credentials?: Record<string, string> } = {}): Promise<Call> {
  const sipp = await startSipp(t, scenario, options);
  const events: ProviderEvent[] = [];
  const transfers: TransferOutcome[] = [];
  const port = await freeSipPort();
  const provider = sipDefinition.create({
    config: {
      SIP_BIND_ADDRESS: DIALTONE_SIP_ADDRESS,
      SIP_PORT: port,
      SIP_PUBLIC_ADDRESS: DIALTONE_SIP_ADDRESS,
      SIP_CONNECTION_IDLE_MS: 30_000,
      SIP_MAX_MESSAGE_BYTES: 65_535,
      SIP_TRANSFER_GRACE_MS: 15_000,
      SIP_RTP_PORT_MIN: 40_000,
      SIP_RTP_PORT_MAX: 49_999,
      SIP_MEDIA_STREAM_CONNECT_TIMEOUT_MS: 5_000,
      SIP_MEDIA_STREAM_MAX_MESSAGE_BYTES: 1_048_576,
      SIP_MEDIA_STREAM_MAX_QUEUED_MS: 120_000,
      SIP_MEDIA_STREAM_IDLE_TIMEOUT_MS: 15_000,
      SIP_MEDIA_STREAM_MAX_BUFFERED_BYTES: 1_048_576,
      SIP_RTP_REORDER_MS: 60,
      SIP_MEDIA_TIMEOUT_MS: 30_000,
      MAX_CALL_DURATION_MS: 60_000,
      DIAL_TIMEOUT_MS: 10_000,
    },
    clock: systemClock,
    logger: pino({ level: 'silent' }),
    emit: (event) => events.push(event),
    emitVerdict: () => undefined,
    emitTransfer: (outcome) => transfers.push(outcome),
    agentRuntime: undefined,
  });
  t.after(() => provider.close());
  const proxy = options.kamailio ? proxySettings(options.kamailio, options.transport ?? 'udp') : {};
  const decoded = decodeSipRoute({
    settings: { host: SIPP_ADDRESS, port: sipp.port, transport: 'udp', media_address: '127.0.0.1', media_port: 40000, ...proxy },
    credentials: options.credentials ?? (options.kamailio ? { username: 'alice', password: 's3cret' } : null),
  });
  assert.ok(decoded.ok);
  const route: DecodedRoute = { id: 1, orgId: 1, provider: 'sip', capabilities: sipDefinition.capabilities, callerIds: ['+12025550100'], ringTimeoutMs: undefined, config: decoded.config };
  const { providerCallId } = await provider.dial({ runId: 7, to: '+12025550123', from: '+12025550100', ringTimeoutMs: 10_000, route });
  const call: Call = { provider, live: { runId: 7, providerCallId, route }, events, transfers, sipp };
  await until('the answer', () => events.some((e) => e.kind === 'answered'), () => diagnosis(call, options.kamailio));
  return call;
}

const diagnosis = (call: Call, kamailio?: Kamailio) =>
  `events ${JSON.stringify(call.events)}\ntransfers ${JSON.stringify(call.transfers)}\n--- SIPp ---\n${call.sipp.output()}${kamailio ? `\n--- Kamailio ---\n${kamailio.output().slice(-3000)}` : ''}`;

const transfer = (call: Call) => {
  assert.ok(call.provider.transfer, 'the SIP provider transfers');
  return call.provider.transfer(call.live, { to: '+12025550199', callerId: null, timeoutSeconds: 30 });
};

const completed = (call: Call) => call.events.some((e) => e.kind === 'completed');

async function sippPassed(call: Call, kamailio?: Kamailio): Promise<void> {
  assert.equal(await call.sipp.exited, 0, `SIPp's scenario ran to its end:\n${diagnosis(call, kamailio)}`);
}

describe('SIP provider call control against SIPp: REFER and INFO', { skip: sippSkip() }, () => {
  it('transfers by REFER (Refer-To the target at the trunk, Referred-By, Contact), follows the NOTIFY sipfrag from 100 Trying to 200 OK, reports answered, and then leaves the call with BYE', async (t) => {
    const call = await answeredCall(t, 'refer-notify.template.xml', { replace: { FINAL_STATUS: '200 OK' } });
    await transfer(call);
    await until('the transfer outcome', () => call.transfers.length > 0, () => diagnosis(call));
    assert.deepEqual(
      call.transfers.map(({ runId, providerCallId, result, raw }) => ({ runId, providerCallId, result, raw })),
      [{ runId: 7, providerCallId: call.live.providerCallId, result: 'answered', raw: '200 OK' }],
    );
    // Dialtone hangs up by itself (RFC 5589): SIPp's scenario ends with the BYE it receives and answers.
    await until('the BYE after the transfer', () => completed(call), () => diagnosis(call));
    assert.equal(call.events.find((e) => e.kind === 'completed')?.rawStatus, 'BYE 200 OK');
    await sippPassed(call);
    assert.match(call.sipp.output(), /REFER Refer-To <sip:\+12025550199@127\.0\.0\.2:\d+> Referred-By <sip:\+12025550100@127\.0\.0\.1:\d+> Contact <sip:dialtone@127\.0\.0\.1:\d+/);
  });

  it('reports busy when the NOTIFY sipfrag says 486 Busy Here, and stays on the call (the run side decides)', async (t) => {
    const call = await answeredCall(t, 'refer-notify.template.xml', { replace: { FINAL_STATUS: '486 Busy Here' } });
    await transfer(call);
    await until('the transfer outcome', () => call.transfers.length > 0, () => diagnosis(call));
    assert.deepEqual(call.transfers.map(({ result, raw }) => ({ result, raw })), [{ result: 'busy', raw: '486 Busy Here' }]);
    assert.equal(completed(call), false, 'a transfer that failed leaves the callee with Dialtone');
    await call.provider.hangUp(call.live);
    await until('the hang-up', () => completed(call), () => diagnosis(call));
    await sippPassed(call);
  });

  it('throws CallControlRefusedError with the status line when the far end refuses the REFER with 405, reports no outcome, and the call goes on', async (t) => {
    const call = await answeredCall(t, 'refer-refused.xml');
    await assert.rejects(transfer(call), (error: unknown) => {
      assert.ok(error instanceof CallControlRefusedError, String(error));
      assert.equal(error.rawStatus, '405 Method Not Allowed');
      return true;
    });
    assert.deepEqual(call.transfers, []);
    assert.equal(completed(call), false);
    await call.provider.hangUp(call.live);
    await until('the hang-up', () => completed(call), () => diagnosis(call));
    await sippPassed(call);
  });

  it('answers a challenge to the REFER (401) once with the route\'s digest credentials, and the transfer goes on', async (t) => {
    const call = await answeredCall(t, 'refer-digest-auth.xml', { credentials: { username: 'alice', password: 's3cret' } });
    // SIPp checks the retried REFER's digest (a wrong one is answered 403, which would throw here).
    await transfer(call);
    await until('the transfer outcome', () => call.transfers.length > 0, () => diagnosis(call));
    assert.deepEqual(call.transfers.map(({ result, raw }) => ({ result, raw })), [{ result: 'answered', raw: '200 OK' }]);
    await until('the BYE after the transfer', () => completed(call), () => diagnosis(call));
    await sippPassed(call);
  });

  it('sends DTMF as one INFO per digit with an application/dtmf-relay body, in order, a w as a pause; an INFO refused 501 throws CallControlRefusedError', async (t) => {
    const call = await answeredCall(t, 'info-dtmf.xml');
    assert.ok(call.provider.sendDigits, 'the SIP provider sends digits');
    // SIPp checks each INFO's Content-Type and body in turn: 1, then #.
    await call.provider.sendDigits(call.live, '1w#');
    await assert.rejects(call.provider.sendDigits(call.live, '2'), (error: unknown) => {
      assert.ok(error instanceof CallControlRefusedError, String(error));
      assert.equal(error.rawStatus, '501 Not Implemented');
      return true;
    });
    await call.provider.hangUp(call.live);
    await until('the hang-up', () => completed(call), () => diagnosis(call));
    await sippPassed(call);
  });

  it('refuses transfer and digits on a call that is not up in this node, and targets or digits it cannot write', async (t) => {
    const call = await answeredCall(t, 'answer-local-bye.xml');
    await assert.rejects(call.provider.sendDigits?.(call.live, '1x') ?? Promise.resolve(), RangeError);
    await assert.rejects(call.provider.transfer?.(call.live, { to: 'sip:a@b>\r\nX: y', callerId: null, timeoutSeconds: 30 }) ?? Promise.resolve(), RangeError);
    await call.provider.hangUp(call.live);
    await until('the hang-up', () => completed(call), () => diagnosis(call));
    await assert.rejects(transfer(call), (error: unknown) => error instanceof CallControlRefusedError && error.rawStatus === 'no_dialog');
    // SIPp saw nothing but the answer's ACK and the BYE: neither a REFER nor an INFO left.
    await sippPassed(call);
  });
});

describe('SIP provider call control through Kamailio', { skip: sippSkip() || kamailioSkip() }, () => {
  for (const transport of ['udp', 'tcp', 'tls'] as const) {
    it(`over ${transport}: sends the REFER through the record-routing proxy, takes the NOTIFYs it relays, and sends the BYE after the transfer through the route set`, async (t) => {
      const kamailio = await startKamailio(t);
      const call = await answeredCall(t, 'proxy-refer.xml', { kamailio, transport });
      await transfer(call);
      await until('the transfer outcome', () => call.transfers.length > 0, () => diagnosis(call, kamailio));
      assert.deepEqual(call.transfers.map(({ result, raw }) => ({ result, raw })), [{ result: 'answered', raw: '200 OK' }]);
      await until('the BYE after the transfer', () => completed(call), () => diagnosis(call, kamailio));
      await sippPassed(call, kamailio);
      const seen = kamailio.requests();
      // Dialtone's REFER and BYE go over the route's transport; the callee's NOTIFYs reach the proxy over UDP.
      assert.ok(seen.includes(`REFER ${transport}`) && seen.includes(`BYE ${transport}`), seen.join(', '));
      assert.equal(seen.filter((r) => r === 'NOTIFY udp').length, 2, seen.join(', '));
    });
  }
});
