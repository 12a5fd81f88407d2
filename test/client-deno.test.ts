// @dialtone/client under Deno: the client as built (packages/client/dist, ESM, which starting the
// service builds when stale) is imported by a small Deno script that places a call against a real
// Dialtone process, reads and waits for its run, reads the live stream, meets typed refusals (a 404
// problem, a 422 with its field pointers) and verifies a webhook message signed here with the
// standardwebhooks package (CommonJS: Deno's Node compatibility loads it from node_modules), and
// refuses it tampered.
//
// Deno is the `deno` dev dependency (its binary comes from the npm registry with `npm ci`), and it
// runs offline and boxed in: DENO_DIR is a fresh temp dir, --no-remote and --cached-only forbid
// fetching any module (every npm package comes from the repository's node_modules, through
// --node-modules-dir=manual), and the only permission is the network to the service's own
// 127.0.0.1:port. The script checks that box itself: a request elsewhere and a file read are refused.
//
// Once per store: the client is the same, the service's answers come from each store.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Webhook } from 'standardwebhooks';
import { ROOT, stopOnTeardown } from './helpers/process.js';
import { prepareDatabase, startServiceProcess } from './helpers/service-process.js';
import { storeCases } from './helpers/stores.js';
import { describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

const DENO = join(ROOT, 'node_modules', '.bin', 'deno');
const CLIENT_ENTRY = pathToFileURL(join(ROOT, 'packages', 'client', 'dist', 'index.js')).href;

const QUICK_CALLS = { SIMULATOR_LATENCY_MS: '5', SIMULATOR_RING_MS: '20', SIMULATOR_TALK_MS: '30', SIMULATOR_SECOND_MS: '10', DISPATCH_POLL_INTERVAL_MS: '20', STREAM_POLL_INTERVAL_MS: '50' };

/** The Deno program: its configuration is its one argument (JSON); it prints what it saw as JSON, or exits 1 with the error. */
const SCRIPT = `
import { createDialtone, DialtoneApiError } from ${JSON.stringify(CLIENT_ENTRY)};
const config = JSON.parse(Deno.args[0]);
const outcome = { runtime: typeof Deno.version?.deno === 'string' ? 'deno ' + Deno.version.deno : 'not deno' };
const refusal = async (pending) => {
  try {
    await pending;
    return 'none';
  } catch (error) {
    return { typed: error instanceof DialtoneApiError, status: error.status, code: error.code, pointers: error.errors?.map((e) => e.pointer) };
  }
};
const dialtone = createDialtone({ baseUrl: config.baseUrl, apiKey: config.apiKey });

const stopStream = new AbortController();
const stream = dialtone.stream.events({ signal: stopStream.signal });
outcome.firstStreamEvent = (await stream.next()).value.event;

const started = await dialtone.calls.start(config.agentUuid, { phone_number: '+12025550100', initial_context: { name: 'Ada' } }, { idempotencyKey: 'deno-start-1' });
outcome.status = started.status;
outcome.got = (await dialtone.runs.get(started.workflow_run_id)).name === started.workflow_run_name;
const ended = await dialtone.runs.wait(started.workflow_run_id, { timeoutMs: config.waitMs, pollIntervalMs: 20 });
outcome.endedState = ended.state;
outcome.initialContext = ended.initial_context;
for (;;) {
  const next = await stream.next();
  if (next.done) break;
  if (next.value.event === 'run' && next.value.data.run_id === started.workflow_run_id && next.value.data.type === 'completed') {
    outcome.streamSawCompleted = true;
    break;
  }
}
stopStream.abort();

outcome.missingRun = await refusal(dialtone.runs.get(started.workflow_run_id + 1000));
outcome.badCall = await refusal(dialtone.calls.start(config.agentUuid, { phone_number: 42 }));

const hook = config.webhook;
outcome.verified = dialtone.webhooks.verify(hook.headers, hook.body, hook.secret);
try {
  dialtone.webhooks.verify(hook.headers, hook.body.replace('completed', 'failed'), hook.secret);
  outcome.tampered = 'accepted';
} catch (error) {
  outcome.tampered = error.name;
}

// The box it runs in: no other host, no file.
const refusedAs = async (attempt) => {
  try {
    await attempt();
    return 'allowed';
  } catch (error) {
    return error.name;
  }
};
outcome.otherHost = await refusedAs(() => fetch('http://example.com/'));
outcome.fileRead = await refusedAs(() => Deno.readTextFile(config.aFile));
console.log(JSON.stringify(outcome));
`;

function runDeno(args: string[], env: Record<string, string>, cwd: string): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(DENO, args, { cwd, env, timeout: scaledTimeout(120_000), maxBuffer: 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`deno failed (${error.message}):\n${stdout}\n${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
}

for (const store of await storeCases()) {
  describe(`@dialtone/client under Deno (service on ${store.kind})`, { skip: store.skip }, () => {
    it('places a call, reads and waits for its run, reads the live stream, gets typed 404 and 422 refusals and verifies a signed webhook, from the built client, offline and with network access to the service alone', async (t) => {
      assert.ok(existsSync(DENO), `the deno dev dependency is installed (${DENO}): npm ci`);
      const db = await prepareDatabase(t, store.kind);
      // Starting the service builds dist/ (packages/client/dist with it) when a source is newer.
      const service = await startServiceProcess({ DATABASE_URL: db.url, ...QUICK_CALLS });
      stopOnTeardown(t, service.child);
      const port = new URL(service.url).port;

      const dir = mkdtempSync(join(tmpdir(), 'dialtone-deno-'));
      t.after(() => rmSync(dir, { recursive: true, force: true }));
      const denoDir = join(dir, 'deno-dir');
      const script = join(dir, 'client.mjs');
      writeFileSync(script, SCRIPT);

      const secret = `whsec_${randomBytes(24).toString('base64')}`;
      const body = JSON.stringify({ type: 'run.completed', data: { run_id: 7, state: 'completed' } });
      const signedAt = new Date();
      const webhook = {
        secret,
        body,
        headers: { 'webhook-id': 'msg_deno_1', 'webhook-timestamp': String(Math.floor(signedAt.getTime() / 1000)), 'webhook-signature': new Webhook(secret).sign('msg_deno_1', signedAt, body) },
      };
      const config = { baseUrl: service.url, apiKey: db.fixture.apiKey, agentUuid: db.fixture.agentUuid, waitMs: scaledTimeout(20_000), webhook, aFile: join(ROOT, 'package.json') };

      const { stdout } = await runDeno(
        ['run', '--node-modules-dir=manual', '--no-remote', '--cached-only', '--no-prompt', '--no-config', `--allow-net=127.0.0.1:${port}`, script, JSON.stringify(config)],
        // Nothing of this process's environment (no proxy, no token): only where Deno keeps its cache, and no update check.
        { DENO_DIR: denoDir, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1', PATH: process.env.PATH ?? '' },
        dir,
      );
      const outcome = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
      assert.match(String(outcome.runtime), /^deno 2\./);
      assert.equal(outcome.firstStreamEvent, 'ready');
      assert.equal(outcome.status, 'queued');
      assert.equal(outcome.got, true);
      assert.equal(outcome.endedState, 'completed');
      assert.deepEqual(outcome.initialContext, { name: 'Ada' });
      assert.equal(outcome.streamSawCompleted, true, 'the stream carried the run to its end');
      assert.deepEqual(outcome.missingRun, { typed: true, status: 404, code: 'workflow_run_not_found', pointers: [] });
      assert.deepEqual(outcome.badCall, { typed: true, status: 422, code: 'validation_failed', pointers: ['/phone_number'] });
      assert.deepEqual(outcome.verified, JSON.parse(body));
      assert.equal(outcome.tampered, 'WebhookVerificationError');
      assert.equal(outcome.otherHost, 'NotCapable', 'no network beyond the service');
      assert.equal(outcome.fileRead, 'NotCapable', 'no file read');
      // Nothing was fetched from outside: Deno's cache holds no remote module and no npm package.
      const cached = existsSync(denoDir) ? readdirSync(denoDir) : [];
      assert.ok(!cached.includes('remote') && !cached.includes('deps'), `no remote module cached: ${cached.join(', ')}`);
      assert.deepEqual(existsSync(join(denoDir, 'npm')) ? readdirSync(join(denoDir, 'npm')) : [], [], 'no npm package downloaded');
    });
  });
}
