// @dialtone/client outside Node. Its core (packages/client/src, and the JavaScript tsc builds from
// it) imports nothing from Node and uses no Node global. And it runs in a browser: the client is
// built into a temp dir and served, with its dependencies' own ESM files from node_modules and an
// import map (no bundler for the client), from a small local server that also proxies /api/ to a real
// Dialtone process, so the page is same-origin; Debian's chromium then places a call, reads and
// waits for its run, meets a typed refusal, reads the live stream and verifies a webhook message
// signed here with the standardwebhooks package.
//
// One finding is built in: standardwebhooks 1.1.1 (and its dependencies @stablelib/base64 and
// fast-sha256) ships CommonJS only, which a browser cannot import through an import map. The server
// converts it to one ESM file with esbuild (a pinned dev dependency), which is what any bundler does
// for a browser app; platform 'browser' makes it fail on a Node built-in, and no Buffer or process
// polyfill is added. A second page, with standardwebhooks' own file in its import map, shows the
// client then does not load at all. packages/client/README.md ("Where it runs") says so.
//
// The service runs on SQLite only: what is tested is the client in a browser, and the HTTP it speaks
// is the same on both stores (test/client.test.ts runs the client against both).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, readdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { Webhook } from 'standardwebhooks';
import { chromiumSkip, launchBrowser, watchProblems } from './helpers/browser.js';
import { nodeOnlyUses } from './helpers/node-only.js';
import { ROOT, stopOnTeardown } from './helpers/process.js';
import { prepareDatabase, startServiceProcess } from './helpers/service-process.js';
import { after, describe, it } from './helpers/suite.js';
import { scaledTimeout } from './helpers/timeouts.js';

const run = promisify(execFile);
const CLIENT = join(ROOT, 'packages', 'client');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

let building: Promise<string> | undefined;
after(async () => {
  if (building) await rm(await building, { recursive: true, force: true });
});

/** Builds the client as its package.json's build does, once per file, into a temp dir (packages/client/dist is not touched). */
function buildClient(): Promise<string> {
  building ??= buildInto();
  return building;
}

async function buildInto(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'dialtone-client-build-'));
  await run(process.execPath, [TSC, '-p', join(CLIENT, 'tsconfig.json'), '--outDir', dir], { cwd: CLIENT, timeout: scaledTimeout(120_000) }).catch(
    (error: { stdout?: string; stderr?: string }) => assert.fail(`building the client failed:\n${error.stdout ?? ''}${error.stderr ?? ''}`),
  );
  return dir;
}

async function filesIn(dir: string, suffix: string): Promise<string[]> {
  return (await readdir(dir)).filter((name) => name.endsWith(suffix) && !name.endsWith('.d.ts')).map((name) => join(dir, name));
}

describe('@dialtone/client core', () => {
  it('finds a Node import or a Node global where there is one, and none in the client source or the JavaScript built from it', async () => {
    // The check itself catches what it is for, and not words in comments, strings or property names.
    const planted = nodeOnlyUses('planted.js', "import { readFile } from 'node:fs';\nimport os from 'os';\nconst b = Buffer.from('x');\nconst e = process.env.X;\nconst m = await import('node:crypto');\n");
    assert.deepEqual(planted, ['planted.js:1: imports node:fs', 'planted.js:2: imports os', 'planted.js:3: uses the Node global Buffer', 'planted.js:4: uses the Node global process', 'planted.js:5: imports node:crypto']);
    assert.deepEqual(nodeOnlyUses('innocent.js', "// the process restarts; Buffer\nconst s = 'node:fs process';\nconst o = { process: 1 };\no.process;\n"), []);

    const built = await buildClient();
    const sources = await filesIn(join(CLIENT, 'src'), '.ts');
    const javascript = await filesIn(built, '.js');
    assert.ok(sources.length >= 7 && javascript.length === sources.length, `${sources.length} sources, ${javascript.length} built`);
    const found: string[] = [];
    for (const file of sources) found.push(...nodeOnlyUses(relative(ROOT, file), await readFile(file, 'utf8')));
    for (const file of javascript) found.push(...nodeOnlyUses(`(built) ${relative(built, file)}`, await readFile(file, 'utf8')));
    assert.deepEqual(found, [], 'the core must run on web-standard APIs only');
  });
});

const TYPES: Record<string, string> = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.html': 'text/html; charset=utf-8' };

/** A bare specifier's ESM entry file, as Node resolves it with the `import` condition (from the repository's node_modules). */
function esmEntry(specifier: string): string {
  return fileURLToPath(import.meta.resolve(specifier));
}

/** The package directory holding a resolved file (the nearest node_modules/<name> or node_modules/@scope/name). */
function packageRoot(file: string, name: string): string {
  const marker = `${sep}node_modules${sep}${name.split('/').join(sep)}${sep}`;
  const at = file.lastIndexOf(marker);
  assert.ok(at >= 0, `${file} is not inside node_modules/${name}`);
  return file.slice(0, at + marker.length - 1);
}

// The page: its import map, then the scenario, run in the page itself against the client it imported.
// It records what it saw in window.outcome (or the error in window.failure).
const SCENARIO = `
import { createDialtone, DialtoneApiError } from '@dialtone/client';
const config = JSON.parse(document.getElementById('config').textContent);
try {
  const outcome = {};
  const dialtone = createDialtone({ baseUrl: location.origin, apiKey: config.apiKey });
  const stopStream = new AbortController();
  const stream = dialtone.stream.events({ signal: stopStream.signal });
  const ready = await stream.next();
  outcome.firstStreamEvent = ready.value.event;

  const started = await dialtone.calls.start(config.agentUuid, { phone_number: '+12025550100', initial_context: { name: 'Ada' } }, { idempotencyKey: 'browser-start-1' });
  outcome.workflowRunId = started.workflow_run_id;
  outcome.got = (await dialtone.runs.get(started.workflow_run_id)).id;
  const ended = await dialtone.runs.wait(started.workflow_run_id, { timeoutMs: config.waitMs, pollIntervalMs: 20 });
  outcome.endedState = ended.state;

  for (;;) {
    const next = await stream.next();
    if (next.done) break;
    if (next.value.event === 'run' && next.value.data.run_id === started.workflow_run_id) {
      outcome.streamRunEvent = next.value.data.type;
      break;
    }
  }
  stopStream.abort();

  try {
    await dialtone.calls.start(config.agentUuid, { phone_number: 42 });
    outcome.refusal = 'none';
  } catch (error) {
    outcome.refusal = { typed: error instanceof DialtoneApiError, code: error.code, status: error.status, pointers: error.errors.map((e) => e.pointer) };
  }

  const hook = config.webhook;
  outcome.verified = dialtone.webhooks.verify(hook.headers, hook.body, hook.secret);
  outcome.verifiedBytes = dialtone.webhooks.verify(new Headers(hook.headers), new TextEncoder().encode(hook.body), hook.secret);
  try {
    dialtone.webhooks.verify(hook.headers, hook.body.replace('completed', 'failed'), hook.secret);
    outcome.tampered = 'accepted';
  } catch (error) {
    outcome.tampered = error.name;
  }
  outcome.nodeGlobals = [typeof globalThis.Buffer, typeof globalThis.process];
  window.outcome = outcome;
} catch (error) {
  window.failure = String(error && error.stack || error);
}
`;

/** A page that only imports the client, and records whether it loaded or why not. */
function rawPage(importMap: Record<string, string>): string {
  return `<!doctype html><html><head><meta charset="utf-8">
<script>window.addEventListener('error', (event) => { window.failure = String(event.message); });</script>
<script type="importmap">${JSON.stringify({ imports: importMap }).replace(/</g, '\\u003c')}</script>
<script type="module">import { createDialtone } from '@dialtone/client'; window.outcome = typeof createDialtone;</script></head><body></body></html>`;
}

function page(importMap: Record<string, string>, config: unknown): string {
  // JSON in a script element: "<" escaped so no value can close the element.
  const json = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c');
  return `<!doctype html><html><head><meta charset="utf-8"><title>@dialtone/client in a browser</title>
<script type="importmap">${json({ imports: importMap })}</script>
<script type="application/json" id="config">${json(config)}</script>
<script type="module">${SCENARIO}</script></head><body></body></html>`;
}

/** Sends a request on to the service as it came (method, headers, body streamed both ways: the event stream stays open). */
function proxy(target: URL, req: IncomingMessage, res: ServerResponse): void {
  const upstream = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host } }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  upstream.on('error', () => res.destroy());
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
}

const QUICK_CALLS = { SIMULATOR_LATENCY_MS: '5', SIMULATOR_RING_MS: '20', SIMULATOR_TALK_MS: '30', SIMULATOR_SECOND_MS: '10', DISPATCH_POLL_INTERVAL_MS: '20', STREAM_POLL_INTERVAL_MS: '50' };

describe('@dialtone/client in a browser (chromium, service on SQLite)', { skip: chromiumSkip() }, () => {
  it('places a call, reads and waits for its run, gets a typed refusal, reads the live stream and verifies a signed webhook, from a page importing the built client through an import map', async (t) => {
    const built = await buildClient();
    const db = await prepareDatabase(t, 'sqlite');
    const service = await startServiceProcess({ DATABASE_URL: db.url, ...QUICK_CALLS });
    stopOnTeardown(t, service.child);

    // Files the page may load: the built client, and each dependency's package directory.
    const roots: Record<string, string> = { '/client/': built };
    const importMap: Record<string, string> = { '@dialtone/client': '/client/index.js' };
    for (const name of ['openapi-fetch', 'eventsource-parser']) {
      const entry = esmEntry(name);
      const root = packageRoot(entry, name);
      roots[`/node_modules/${name}/`] = root;
      importMap[name] = `/node_modules/${name}/${relative(root, entry).split(sep).join('/')}`;
    }
    // standardwebhooks is CommonJS only (see the top of this file): the one module converted, as a bundler would.
    const webhooksMain = fileURLToPath(import.meta.resolve('standardwebhooks'));
    const webhooksRoot = packageRoot(webhooksMain, 'standardwebhooks');
    roots['/node_modules/standardwebhooks/'] = webhooksRoot;
    const webhooksPackage = JSON.parse(await readFile(join(webhooksRoot, 'package.json'), 'utf8')) as { type?: string };
    assert.equal(webhooksPackage.type ?? 'commonjs', 'commonjs', 'standardwebhooks now ships ESM: serve it as it is and drop the conversion (and the README limitation)');
    const converted = await build({
      stdin: { contents: "export { Webhook, WebhookVerificationError } from 'standardwebhooks';", resolveDir: ROOT, loader: 'js' },
      bundle: true,
      format: 'esm',
      platform: 'browser',
      write: false,
      logLevel: 'silent',
    });
    const standardwebhooksEsm = converted.outputFiles[0]?.text ?? '';
    importMap.standardwebhooks = '/converted/standardwebhooks.js';

    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    const body = JSON.stringify({ type: 'run.completed', data: { run_id: 7, state: 'completed' } });
    const messageId = 'msg_browser_1';
    const signedAt = new Date();
    const webhook = {
      secret,
      body,
      headers: { 'webhook-id': messageId, 'webhook-timestamp': String(Math.floor(signedAt.getTime() / 1000)), 'webhook-signature': new Webhook(secret).sign(messageId, signedAt, body) },
    };
    const html = page(importMap, { apiKey: db.fixture.apiKey, agentUuid: db.fixture.agentUuid, waitMs: scaledTimeout(20_000), webhook });
    // The same client with standardwebhooks' own (CommonJS) file in the import map, as the README says cannot work.
    const rawWebhooks = `/node_modules/standardwebhooks/${relative(webhooksRoot, webhooksMain).split(sep).join('/')}`;
    const raw = rawPage({ ...importMap, standardwebhooks: rawWebhooks });

    const served: string[] = [];
    const target = new URL(service.url);
    const server = createServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://page').pathname;
      if (path.startsWith('/api/')) return proxy(target, req, res);
      const send = (status: number, type: string, text: string) => res.writeHead(status, { 'content-type': type }).end(text);
      if (path === '/') return send(200, TYPES['.html'] as string, html);
      if (path === '/raw') return send(200, TYPES['.html'] as string, raw);
      if (path === '/favicon.ico') return res.writeHead(204).end();
      if (path === '/converted/standardwebhooks.js') return send(200, 'text/javascript', standardwebhooksEsm);
      const prefix = Object.keys(roots).find((p) => path.startsWith(p));
      if (!prefix) return send(404, 'text/plain', `not served: ${path}`);
      const root = roots[prefix] as string;
      const file = join(root, decodeURIComponent(path.slice(prefix.length)));
      const type = TYPES[extname(file)];
      // Only script files inside the directory served; nothing climbs out of it.
      if (!type || relative(root, file).startsWith('..')) return send(404, 'text/plain', 'not served');
      readFile(file, 'utf8').then(
        (text) => {
          served.push(path);
          send(200, type, text);
        },
        () => send(404, 'text/plain', 'not found'),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
    server.on('connection', (socket) => t.after(() => socket.destroy()));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const chrome = await launchBrowser();
    t.after(() => chrome.close());
    const tab = await chrome.browser.newPage();
    tab.setDefaultTimeout(scaledTimeout(30_000));
    const problems = watchProblems(tab);
    await tab.goto(`${origin}/`);
    await tab.waitForFunction('window.outcome !== undefined || window.failure !== undefined', { timeout: scaledTimeout(60_000) });
    assert.equal(await tab.evaluate('window.failure'), undefined);
    const outcome = (await tab.evaluate('window.outcome')) as Record<string, unknown>;

    assert.equal(outcome.firstStreamEvent, 'ready');
    assert.equal(typeof outcome.workflowRunId, 'number');
    assert.equal(outcome.got, outcome.workflowRunId);
    assert.equal(outcome.endedState, 'completed');
    assert.equal(typeof outcome.streamRunEvent, 'string', 'a run event of the call came through the stream');
    assert.deepEqual(outcome.refusal, { typed: true, code: 'validation_failed', status: 422, pointers: ['/phone_number'] });
    assert.deepEqual(outcome.verified, JSON.parse(body));
    assert.deepEqual(outcome.verifiedBytes, JSON.parse(body));
    assert.equal(outcome.tampered, 'WebhookVerificationError');
    assert.deepEqual(outcome.nodeGlobals, ['undefined', 'undefined'], 'the page had no Buffer or process to lean on');

    // Without the conversion the client does not load at all: the limitation the README states is real.
    const rawTab = await chrome.browser.newPage();
    rawTab.setDefaultTimeout(scaledTimeout(30_000));
    await rawTab.goto(`${origin}/raw`);
    await rawTab.waitForFunction('window.outcome !== undefined || window.failure !== undefined', { timeout: scaledTimeout(60_000) });
    assert.equal(await rawTab.evaluate('window.outcome'), undefined);
    assert.match(String(await rawTab.evaluate('window.failure')), /export named 'Webhook'|exports is not defined|require is not defined/);
    assert.ok(served.includes(rawWebhooks), served.join(' '));

    // The client and its dependencies came from the files served here, not from anywhere else.
    assert.ok(served.includes('/client/index.js') && served.includes('/client/webhooks.js') && served.includes('/client/stream.js'), served.join(' '));
    assert.ok(served.some((p) => p.startsWith('/node_modules/openapi-fetch/')) && served.some((p) => p.startsWith('/node_modules/eventsource-parser/')), served.join(' '));
    // The 422 asked for is logged by chromium as a failed load; anything else is a problem.
    assert.deepEqual(problems.filter((p) => !/status of 422/.test(p)), []);
  });
});
