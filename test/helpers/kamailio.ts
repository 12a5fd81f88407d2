// Kamailio (Debian packages kamailio and kamailio-tls-modules) as a record-routing SIP proxy with
// digest authentication between Dialtone and SIPp: a real proxy nobody here wrote. Each test starts
// its own, with a configuration written into a temporary directory and ephemeral ports on
// 127.0.0.4 (UDP and TCP on one port, TLS on another), and stops it when the test ends. TLS uses a
// CA and a server certificate for proxy.dialtone.test (and 127.0.0.4) made with the openssl
// command for this test process. Without kamailio the tests are skipped with the reason, unless
// DIALTONE_TEST_REQUIRE_KAMAILIO=1 (set by .ci/run) turns the skip into a failure.
import { spawn, spawnSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { stopOnTeardown } from './process.js';

export const KAMAILIO_ADDRESS = '127.0.0.4';
export const PROXY_REALM = 'dialtone.test';
export const PROXY_SERVER_NAME = 'proxy.dialtone.test';

export function kamailioSkip(): string | false {
  const probe = spawnSync('kamailio', ['-v'], { encoding: 'utf8' });
  let reason: string | false = probe.error ? `kamailio is not installed (${probe.error.message}); install the Debian packages kamailio and kamailio-tls-modules` : false;
  if (!reason && spawnSync('openssl', ['version']).error) reason = 'openssl is not installed (the TLS tests make their CA with it)';
  if (reason && process.env.DIALTONE_TEST_REQUIRE_KAMAILIO === '1') throw new Error(`${reason}; DIALTONE_TEST_REQUIRE_KAMAILIO=1 forbids skipping the SIP proxy tests`);
  if (reason) process.stderr.write(`# skipping SIP proxy tests: ${reason}\n`);
  return reason;
}

export interface TestPki {
  caPem: string;
  certFile: string;
  keyFile: string;
}

let pki: TestPki | undefined;

/** A CA and a server certificate it signed (for proxy.dialtone.test and 127.0.0.4), made once per test process. */
export function testPki(): TestPki {
  if (pki) return pki;
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-pki-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const openssl = (...args: string[]) => {
    const result = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`openssl ${args[0]} failed: ${result.stderr}`);
  };
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=Dialtone Test CA');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', `/CN=${PROXY_SERVER_NAME}`);
  writeFileSync(join(dir, 'ext.cnf'), `subjectAltName=DNS:${PROXY_SERVER_NAME},IP:${KAMAILIO_ADDRESS}\n`);
  openssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'ext.cnf');
  pki = { caPem: readFileSync(join(dir, 'ca.pem'), 'utf8'), certFile: join(dir, 'server.pem'), keyFile: join(dir, 'server.key') };
  return pki;
}

/** A port free for both UDP and TCP on `address` right now. */
async function freeUdpTcpPort(address: string): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, address, resolve));
    const { port } = server.address() as { port: number };
    const socket = createSocket('udp4');
    const free = await new Promise<boolean>((resolve) => {
      socket.once('error', () => resolve(false));
      socket.bind(port, address, () => resolve(true));
    });
    socket.close();
    await new Promise((resolve) => server.close(resolve));
    if (free) return port;
  }
  throw new Error('no port free for both UDP and TCP');
}

export interface Kamailio {
  /** UDP and TCP. */
  port: number;
  tlsPort: number;
  /** Kamailio's script log and errors: one "IN <method> <uri> from <address> proto <transport>" line per request. */
  output(): string;
  /** The requests it received, as "METHOD transport" (e.g. "INVITE tls"), in order. */
  requests(): string[];
}

export interface KamailioOptions {
  /** The account the proxy challenges for (user alice). */
  password?: string;
}

/**
 * Record-routes every INVITE it lets through (double Record-Route when the two sides use different
 * transports), challenges INVITEs with 407 until they carry alice's digest, routes in-dialog
 * requests by their Route header (loose routing) and relays CANCEL along the INVITE's transaction.
 */
function configuration(port: number, tlsPort: number, password: string, tls: TestPki): string {
  return `#!KAMAILIO
debug=2
log_stderror=yes
children=1
tcp_children=1
enable_tls=yes
tcp_accept_aliases=yes
auto_aliases=no
listen=udp:${KAMAILIO_ADDRESS}:${port}
listen=tcp:${KAMAILIO_ADDRESS}:${port}
listen=tls:${KAMAILIO_ADDRESS}:${tlsPort}
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "rr.so"
loadmodule "pv.so"
loadmodule "maxfwd.so"
loadmodule "textops.so"
loadmodule "siputils.so"
loadmodule "xlog.so"
loadmodule "auth.so"
loadmodule "tls.so"
modparam("tls", "certificate", "${tls.certFile}")
modparam("tls", "private_key", "${tls.keyFile}")
modparam("tls", "tls_method", "TLSv1.2+")
modparam("tls", "verify_certificate", 0)
modparam("tls", "require_certificate", 0)
modparam("auth", "secret", "${Math.random().toString(36).slice(2)}")
request_route {
  xlog("L_NOTICE", "IN $rm $ru from $si proto $pr\\n");
  if (!mf_process_maxfwd_header("10")) { sl_send_reply("483", "Too Many Hops"); exit; }
  if (has_totag()) {
    if (loose_route()) { t_relay(); exit; }
    if (is_method("ACK")) { if (t_check_trans()) { t_relay(); } exit; }
    sl_send_reply("404", "Not here");
    exit;
  }
  if (is_method("CANCEL")) { if (t_check_trans()) { t_relay(); } exit; }
  if (!is_method("INVITE")) { sl_send_reply("405", "Method Not Allowed"); exit; }
  t_check_trans();
  if (!pv_proxy_authenticate("${PROXY_REALM}", "${password}", "0") || $au != "alice") {
    xlog("L_NOTICE", "CHALLENGE $rm (credentials of '$au')\n");
    proxy_challenge("${PROXY_REALM}", "0");
    exit;
  }
  consume_credentials();
  # The caller's pre-loaded Route (its outbound proxy setting) named this proxy: it is done.
  remove_hf("Route");
  record_route();
  xlog("L_NOTICE", "RELAY $rm to $ru\n");
  if (!t_relay()) { xlog("L_NOTICE", "RELAY FAILED\n"); sl_reply_error(); }
}
`;
}

export async function startKamailio(t: TestContext, options: KamailioOptions = {}): Promise<Kamailio> {
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-kamailio-'));
  const port = await freeUdpTcpPort(KAMAILIO_ADDRESS);
  // Each check frees its port before returning, so a second one may be handed the same port again:
  // Kamailio then fails to bind its TLS listener where its TCP one already is (seen in CI).
  let tlsPort = await freeUdpTcpPort(KAMAILIO_ADDRESS);
  while (tlsPort === port) tlsPort = await freeUdpTcpPort(KAMAILIO_ADDRESS);
  const file = join(dir, 'kamailio.cfg');
  writeFileSync(file, configuration(port, tlsPort, options.password ?? 's3cret', testPki()));
  // -DD: stay in the foreground (its children are its own processes); -E: log to stderr; small memory.
  const child = spawn('kamailio', ['-f', file, '-DD', '-E', '-Y', dir, '-w', dir, '-m', '32', '-M', '4'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (chunk: Buffer) => (log = (log + chunk.toString()).slice(-200_000)));
  child.stderr.on('data', (chunk: Buffer) => (log = (log + chunk.toString()).slice(-200_000)));
  stopOnTeardown(t, child, { dir });
  // Listening once its TCP port accepts a connection (it opens every listener before that).
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`kamailio exited with ${child.exitCode}:\n${log.slice(-3000)}`);
    const up = await new Promise<boolean>((resolve) => {
      const probe = connect(port, KAMAILIO_ADDRESS, () => {
        probe.destroy();
        resolve(true);
      });
      probe.on('error', () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline) throw new Error(`kamailio did not start listening:\n${log.slice(-3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    port,
    tlsPort,
    output: () => log.split('\n').filter((line) => /<script>|ERROR|CRITICAL|ALERT/.test(line)).join('\n'),
    requests: () => [...log.matchAll(/IN (\S+) \S+ from \S+ proto (\w+)/g)].map((m) => `${m[1]} ${m[2]}`),
  };
}
