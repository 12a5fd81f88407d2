// The real service over a real socket: `npm start`'s entry point as a child process, its first-run
// banner, the printed curl command run by curl itself, a graceful stop, and a second start.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { npmStartArgs, startProcess, startService, STARTUP_TIMEOUT_MS, type RunningProcess } from './helpers/process.js';
import { parseResponses, rawSocket, untilClosed } from './helpers/raw-http.js';
import { scaledTimeout } from './helpers/timeouts.js';

const run = promisify(execFile);

/** The banner ends with the API reference's address. */
const BANNER_END = /\n {2}API reference +\S+\n/;
const BANNER_TEXT = 'Dialtone created a demo organization';
const LISTENING = /"msg":"Server listening at (http:\/\/127\.0\.0\.1:\d+)"/;

function tempDatabase(t: TestContext): { dir: string; url: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-server-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'dialtone.db');
  return { dir, url: `sqlite:${path}`, path };
}

function serviceEnv(databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  // A short drain: the demo call may still be up when the test stops the service.
  return { PORT: '0', HOST: '127.0.0.1', DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn', NODE_ENV: 'test', DISPATCH_SHUTDOWN_MS: '500', ...extra };
}

interface Banner {
  apiKey: string;
  agentUuid: string;
  workflowUuid: string;
  baseUrl: string;
  /** The curl command exactly as printed, continuation lines included. */
  curl: string;
}

function parseBanner(stdout: string): Banner {
  const field = (label: string) => {
    const match = new RegExp(`^  ${label} +(\\S+)$`, 'm').exec(stdout);
    assert.ok(match?.[1], `banner has "${label}":\n${stdout}`);
    return match[1];
  };
  const lines = stdout.split('\n');
  const first = lines.findIndex((line) => line.startsWith('  curl '));
  assert.ok(first >= 0, `banner has a curl command:\n${stdout}`);
  let last = first;
  while (lines[last]?.endsWith('\\')) last++;
  const curl = lines.slice(first, last + 1).join('\n');
  const baseUrl = /curl .*? (http:\/\/[^/\s]+)\/api\/v1\/public\/agent\//.exec(curl)?.[1];
  assert.ok(baseUrl, `the curl command names the service's URL:\n${curl}`);
  return { apiKey: field('API key'), agentUuid: field('Agent UUID'), workflowUuid: field('Workflow UUID'), baseUrl, curl };
}

async function stopGracefully(service: RunningProcess): Promise<void> {
  const exit = await service.stop('SIGTERM', scaledTimeout(5_000));
  assert.deepEqual(exit, { code: 0, signal: null }, `clean exit on SIGTERM\nstderr:\n${service.stderr()}`);
}

async function getJson(url: string, key?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url, { headers: key ? { 'x-api-key': key } : {} });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/**
 * The production command of docs/operations.md (its Procfile line, `web: node …`) as node
 * arguments; its systemd unit's ExecStart and `npm start` run the same.
 */
function documentedNodeArgs(): string[] {
  const doc = readFileSync(new URL('../docs/operations.md', import.meta.url), 'utf8');
  const procfile = /^web: node (.+)$/m.exec(doc)?.[1];
  const execStart = /^ExecStart=\/usr\/bin\/node (.+)$/m.exec(doc)?.[1];
  assert.ok(procfile, 'docs/operations.md has a Procfile line');
  assert.equal(execStart, procfile, 'the systemd unit runs the Procfile\'s command');
  const args = procfile.split(/\s+/);
  assert.deepEqual(args, npmStartArgs(), 'the documented command has npm start\'s V8 flags');
  return args;
}

/** Whether this process can listen on `port` (loopback), that is, whether nothing else holds it. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => (error.code === 'EADDRINUSE' ? resolve(false) : reject(error)));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

function countOrganizations(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare('select count(*) as n from organizations').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe('The service process (npm start)', () => {
  it('prints a first-run banner whose curl command places a call, serves the run it created, and exits 0 on SIGTERM; a restart never seeds again', async (t) => {
    const database = tempDatabase(t);
    const first = startService(t, serviceEnv(database.url));
    await first.waitForStdout(BANNER_END);
    const banner = parseBanner(first.stdout());
    assert.match(banner.apiKey, /^dt_live_[A-Za-z0-9]{10}_[A-Za-z0-9]{32}$/);
    assert.match(banner.curl, new RegExp(`-H 'X-API-Key: ${banner.apiKey}'`));
    // The banner says where the console and the API reference are, and both answer there.
    const consoleUrl = /^ {2}Console +(\S+)$/m.exec(first.stdout())?.[1];
    const docsUrl = /^ {2}API reference +(\S+)$/m.exec(first.stdout())?.[1];
    assert.equal(consoleUrl, `${banner.baseUrl}/console/`, first.stdout());
    assert.equal(docsUrl, `${banner.baseUrl}/docs`, first.stdout());
    for (const url of [consoleUrl, docsUrl]) {
      const page = await fetch(url, { headers: { accept: 'text/html' } });
      assert.equal(page.status, 200, url);
      assert.match(page.headers.get('content-type') ?? '', /^text\/html/, url);
    }

    // The printed command, run by a shell exactly as pasted, plus an option that prints the status.
    const curl = await run('bash', ['-c', `${banner.curl} --write-out '\\n%{http_code}'`]);
    const [body = '', status] = curl.stdout.split(/\n(?=\d{3}$)/);
    assert.equal(status, '200', curl.stdout + curl.stderr);
    const created = JSON.parse(body) as { status: string; workflow_run_id: number; workflow_run_name: string };
    assert.equal(created.status, 'queued');
    assert.equal(typeof created.workflow_run_id, 'number');
    assert.equal(created.workflow_run_name, `WR-API-${created.workflow_run_id}`);

    const runUrl = `${banner.baseUrl}/api/v1/public/workflow-runs/${created.workflow_run_id}`;
    const fetched = await getJson(runUrl, banner.apiKey);
    assert.equal(fetched.status, 200, JSON.stringify(fetched.body));
    assert.equal(fetched.body.id, created.workflow_run_id);
    assert.equal(fetched.body.name, created.workflow_run_name);
    assert.equal(fetched.body.agent_uuid, banner.agentUuid);
    assert.equal(fetched.body.workflow_uuid, banner.workflowUuid);
    assert.equal(fetched.body.phone_number, '+12025550123');
    assert.deepEqual(fetched.body.initial_context, { customer_name: 'Ada' });
    assert.equal((await getJson(runUrl)).status, 401, 'the run is not readable without the key');

    await stopGracefully(first);
    assert.equal(first.stdout().split(BANNER_TEXT).length - 1, 1, 'the banner is printed once');

    // Same database again: no banner, no second organization, the demo data still serves.
    const second = startService(t, serviceEnv(database.url, { LOG_LEVEL: 'info' }));
    const baseUrl = (await second.waitForStdout(LISTENING))[1] ?? '';
    // No banner this time, but the log still says where the console and the API reference are.
    const addresses = JSON.parse((await second.waitForStdout(/^.*"msg":"console and API reference".*$/m))[0]) as { console: string; docs: string };
    assert.deepEqual({ console: addresses.console, docs: addresses.docs }, { console: `${baseUrl}/console/`, docs: `${baseUrl}/docs` });
    assert.deepEqual(await getJson(`${baseUrl}/healthz`), { status: 200, body: { status: 'ok' } });
    assert.deepEqual(await getJson(`${baseUrl}/readyz`), { status: 200, body: { status: 'ready' } });
    const again = await getJson(`${baseUrl}/api/v1/public/workflow-runs/${created.workflow_run_id}`, banner.apiKey);
    assert.equal(again.status, 200, 'the first run and the demo key survive the restart');
    await stopGracefully(second);
    assert.ok(!second.stdout().includes(BANNER_TEXT), `no banner on a non-empty database:\n${second.stdout()}`);
    assert.equal(countOrganizations(database.path), 1, 'never seeds a non-empty database');
  });

  it('takes webhook endpoints on a plain start (NODE_ENV=development, no DIALTONE_SECRET_KEY): a key generated 0600 beside the database and never printed, loopback URLs refused; a restart reads the key again, and a start with another key is refused in one line', async (t) => {
    const database = tempDatabase(t);
    // As `npm start` with nothing set: the defaults' NODE_ENV (development), no key, no private networks.
    const env = serviceEnv(database.url, { LOG_LEVEL: 'info', NODE_ENV: 'development' });
    const first = startService(t, env);
    await first.waitForStdout(BANNER_END);
    const { apiKey, baseUrl } = parseBanner(first.stdout());
    const register = (url: string) =>
      fetch(`${baseUrl}/api/v1/public/webhook-endpoints`, { method: 'POST', headers: { 'x-api-key': apiKey, 'content-type': 'application/json' }, body: JSON.stringify({ url }) });
    const created = await register('https://93.184.216.34/hooks');
    assert.equal(created.status, 201, await created.clone().text());
    for (const url of ['http://127.0.0.1:3000/hooks', 'https://169.254.169.254/latest/meta-data', 'https://localhost/hooks']) {
      const refused = await register(url);
      assert.equal(refused.status, 422, url);
      assert.equal(((await refused.json()) as { code: string }).code, 'webhook_url_not_allowed', url);
    }
    const keyFile = `${database.path}.key`;
    assert.equal((statSync(keyFile).mode & 0o777).toString(8), '600');
    const key = readFileSync(keyFile, 'utf8').trim();
    assert.match(first.stdout(), /generated the secret key/);
    await stopGracefully(first);
    assert.ok(!`${first.stdout()}${first.stderr()}`.includes(key), 'the key is never logged');

    const second = startService(t, env);
    const again = (await second.waitForStdout(LISTENING))[1] ?? '';
    const rotated = await fetch(`${again}/api/v1/public/webhook-endpoints/${((await created.json()) as { id: number }).id}/rotate-secret`, { method: 'POST', headers: { 'x-api-key': apiKey } });
    assert.equal(rotated.status, 200);
    await stopGracefully(second);
    assert.equal(readFileSync(keyFile, 'utf8').trim(), key, 'the same key, read again');

    const wrong = startService(t, { ...env, DIALTONE_SECRET_KEY: Buffer.alloc(32, 3).toString('base64') });
    const exit = await wrong.waitForExit(60_000);
    assert.notEqual(exit.code, 0);
    assert.match(wrong.stderr(), /^DIALTONE_SECRET_KEY is not the key this database's secrets were written with/);
    assert.doesNotMatch(wrong.stderr(), /^\s+at /m, 'no stack trace');
    assert.doesNotMatch(wrong.stdout(), /Server listening/, 'nothing was served');
  });

  it('warns at start-up while WEBHOOK_ALLOW_PRIVATE_NETWORKS=true, and only then', async (t) => {
    const database = tempDatabase(t);
    const quiet = startService(t, serviceEnv(database.url, { LOG_LEVEL: 'info', DIALTONE_FIRST_RUN_DEMO: 'false' }));
    await quiet.waitForStdout(LISTENING);
    await stopGracefully(quiet);
    assert.doesNotMatch(quiet.stdout(), /WEBHOOK_ALLOW_PRIVATE_NETWORKS/);
    const open = startService(t, serviceEnv(database.url, { LOG_LEVEL: 'info', DIALTONE_FIRST_RUN_DEMO: 'false', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }));
    await open.waitForStdout(LISTENING);
    await stopGracefully(open);
    const warning = open.stdout().split('\n').find((line) => line.includes('WEBHOOK_ALLOW_PRIVATE_NETWORKS=true'));
    assert.ok(warning, open.stdout());
    assert.equal((JSON.parse(warning) as { level: number }).level, 40);
  });

  it('prints no banner and seeds nothing on an empty database when DIALTONE_FIRST_RUN_DEMO=false', async (t) => {
    const database = tempDatabase(t);
    const service = startService(t, serviceEnv(database.url, { LOG_LEVEL: 'info', DIALTONE_FIRST_RUN_DEMO: 'false' }));
    const baseUrl = (await service.waitForStdout(LISTENING))[1] ?? '';
    assert.deepEqual(await getJson(`${baseUrl}/healthz`), { status: 200, body: { status: 'ok' } });
    assert.deepEqual(await getJson(`${baseUrl}/readyz`), { status: 200, body: { status: 'ready' } });
    await stopGracefully(service);
    assert.ok(!service.stdout().includes(BANNER_TEXT), `no banner:\n${service.stdout()}`);
    assert.equal(countOrganizations(database.path), 0);
  });

  it('reports a port already in use in one line and creates nothing, so the next start still prints the demo key once', async (t) => {
    const database = tempDatabase(t);
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    t.after(() => taken.close());
    const port = String((taken.address() as AddressInfo).port);

    const refused = startService(t, serviceEnv(database.url, { PORT: port }));
    const exit = await refused.waitForExit(scaledTimeout(20_000));
    assert.notEqual(exit.code, 0);
    assert.equal(refused.stderr().trim(), `Port ${port} on 127.0.0.1 is already in use: stop what uses it, or set PORT to another port.`);
    assert.equal(refused.stdout(), '', 'no banner: nothing was created');
    assert.equal(countOrganizations(database.path), 0, 'the demo organization and its key were not created');

    const next = startService(t, serviceEnv(database.url));
    await next.waitForStdout(BANNER_END);
    parseBanner(next.stdout());
    await stopGracefully(next);
  });

  // What a process manager does (systemd, a Procfile runner): SIGTERM to the process it started,
  // then wait for it to exit. Both ways of starting the service must end with nothing left holding
  // the port, after the requests already being served have had their answers.
  for (const [how, command, args] of [
    ['npm start', 'npm', () => ['start', '--silent']],
    ['the documented node command', process.execPath, documentedNodeArgs],
  ] as const) {
    it(`stops on a SIGTERM sent to ${how}: a request in flight gets its answer, the process exits 0, and the port is free`, async (t) => {
      const database = tempDatabase(t);
      const env = serviceEnv(database.url, { LOG_LEVEL: 'info', DIALTONE_FIRST_RUN_DEMO: 'true' });
      // Its own process group, so that a node npm failed to stop is killed with it when the test ends.
      const service = startProcess(t, command, args(), { ...env, npm_config_update_notifier: 'false' }, { processGroup: true });
      const baseUrl = (await service.waitForStdout(LISTENING, scaledTimeout(STARTUP_TIMEOUT_MS)))[1] ?? '';
      await service.waitForStdout(BANNER_END, scaledTimeout(STARTUP_TIMEOUT_MS));
      const banner = parseBanner(service.stdout());
      const port = Number(new URL(baseUrl).port);

      // A request in flight: its headers are in (the server's 100 Continue says the request was
      // handed to the application), its body is not, so it cannot be answered before the stop.
      const body = JSON.stringify({ phone_number: '+12025550123' });
      const socket = rawSocket(t, port);
      const answered = untilClosed(socket);
      socket.write(
        `POST /api/v1/public/agent/${banner.agentUuid} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${banner.apiKey}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n`,
      );
      await new Promise<void>((resolve) => {
        const onData = (chunk: Buffer) => {
          if (!chunk.toString().startsWith('HTTP/1.1 100 Continue')) return;
          socket.off('data', onData);
          resolve();
        };
        socket.on('data', onData);
      });

      assert.ok(service.child.kill('SIGTERM'));
      await service.waitForStdout(/"msg":"shutting down"/, scaledTimeout(20_000));
      socket.write(body);
      const [response] = parseResponses((await answered).text).filter((r) => r.status !== 100);
      assert.equal(response?.status, 200, `the request in flight was answered:\n${(await answered).text}`);
      assert.equal((JSON.parse(response.body) as { status: string }).status, 'queued');

      const exit = await service.waitForExit(scaledTimeout(20_000));
      assert.deepEqual(exit, { code: 0, signal: null }, `clean exit\n${service.stderr()}`);
      assert.equal(await portIsFree(port), true, `nothing holds port ${port} once ${how} has exited`);
    });
  }

  it('creates the SQLite database 0600 (and its WAL and shared-memory files) in a 0700 directory', async (t) => {
    const database = tempDatabase(t);
    const dataDir = join(database.dir, 'data');
    const path = join(dataDir, 'dialtone.db');
    const service = startService(t, serviceEnv(`sqlite:${path}`, { LOG_LEVEL: 'info', DIALTONE_FIRST_RUN_DEMO: 'false' }));
    await service.waitForStdout(LISTENING);
    const mode = (file: string) => (statSync(file).mode & 0o777).toString(8);
    assert.equal(mode(dataDir), '700');
    for (const file of [path, `${path}-wal`, `${path}-shm`]) assert.equal(mode(file), '600', file);
    await stopGracefully(service);
  });

  it('pretty-prints its logs in development when the output is a terminal, and writes JSON lines otherwise', async (t) => {
    const database = tempDatabase(t);
    const env = serviceEnv(database.url, { LOG_LEVEL: 'info', NODE_ENV: 'development', DIALTONE_FIRST_RUN_DEMO: 'false' });
    // script(1) from util-linux gives the service a pseudo-terminal as its standard output.
    const command = [process.execPath, ...npmStartArgs()].map((part) => `'${part}'`).join(' ');
    const onTerminal = startProcess(t, 'script', ['-qefc', command, '/dev/null'], env);
    const line = (await onTerminal.waitForStdout(/^.*Server listening at.*$/m))[0];
    assert.doesNotMatch(line, /^\s*\{/, `a readable line, not JSON: ${line}`);
    assert.match(line, /INFO/);
    onTerminal.child.kill('SIGTERM');
    await onTerminal.exited;

    const piped = startService(t, env);
    await piped.waitForStdout(LISTENING);
    await stopGracefully(piped);
  });

  for (const [variable, value] of [
    ['PORT', 'notanumber'],
    ['DATABASE_URL', 'mysql://x'],
  ] as const) {
    it(`exits non-zero at boot, naming ${variable}, when ${variable}=${value}`, async (t) => {
      const database = tempDatabase(t);
      const service = startService(t, { ...serviceEnv(database.url), [variable]: value });
      const exit = await service.waitForExit(scaledTimeout(20_000));
      assert.equal(exit.signal, null);
      assert.notEqual(exit.code, 0);
      assert.match(service.stderr(), new RegExp(`^Invalid configuration:\\n {2}${variable}: `), service.stderr());
      assert.doesNotMatch(service.stderr(), /^\s+at /m, 'a configuration mistake is reported without a stack trace');
      assert.equal(service.stdout(), '', 'nothing was started');
    });
  }
});
