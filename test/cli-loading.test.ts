// What the `dialtone` command loads (src/cli/README.md): its help only the command declarations, and
// a command only its own group's domain modules, so that every command starts fast.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { before, describe, it, type TestContext } from 'node:test';
import { TEST_SECRET_KEY } from './helpers/app.js';
import { ensureBuilt, ROOT, runToCompletion } from './helpers/process.js';

const BIN = join(ROOT, 'bin', 'dialtone');

// A module hook sees every ES module as it loads (packages imported from ESM too); the CommonJS
// cache, read as the process exits, adds the packages required from CommonJS.
const HOOKS = `import { appendFileSync } from 'node:fs';
export async function load(url, context, next) {
  if (url.startsWith('file:')) appendFileSync(process.env.PROBE_OUT, url + '\\n');
  return next(url, context);
}`;
const PROBE = (hooks: string) => `import { createRequire, register } from 'node:module';
import { appendFileSync } from 'node:fs';
register(${JSON.stringify(hooks)});
const cache = createRequire(import.meta.url).cache;
process.on('exit', () => appendFileSync(process.env.PROBE_OUT, Object.keys(cache).join('\\n') + '\\n'));`;

interface Loaded {
  /** Package names, from node_modules paths (and @dialtone/client from its workspace's). */
  packages: Set<string>;
  /** The project's own modules, relative to dist/ (or src/), without extension: `cli/main`. */
  modules: Set<string>;
}

/** A directory with the probe and a SQLite database, removed after the test. */
function workspace(t: TestContext): { dir: string; env: Record<string, string> } {
  const dir = mkdtempSync(join(tmpdir(), 'dialtone-cli-loading-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const hooks = join(dir, 'hooks.mjs');
  writeFileSync(hooks, HOOKS);
  writeFileSync(join(dir, 'probe.mjs'), PROBE(pathToFileURL(hooks).href));
  return { dir, env: { DATABASE_URL: `sqlite:${join(dir, 'cli.db')}`, DIALTONE_SECRET_KEY: TEST_SECRET_KEY } };
}

let runs = 0;

async function loadedBy(ws: { dir: string; env: Record<string, string> }, args: string[], extraEnv: Record<string, string> = {}): Promise<Loaded> {
  const out = join(ws.dir, `loaded-${++runs}.txt`);
  const probe = join(ws.dir, 'probe.mjs');
  const env = { ...ws.env, ...extraEnv, PROBE_OUT: out };
  const result = await runToCompletion(process.execPath, ['--import', probe, BIN, ...args], env);
  assert.equal(result.code, 0, result.stderr);
  const lines = readFileSync(out, 'utf8').split('\n').map((line) => (line.startsWith('file:') ? decodeURIComponent(new URL(line).pathname) : line));
  // The client workspace is linked, so its files load under their real path (packages/client/), not node_modules/.
  const client = (path: string) => /\/packages\/client\/(?:dist|src)\//.test(path);
  const packages = new Set(lines.flatMap((path) => (client(path) ? ['@dialtone/client'] : (path.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/)?.[1] ?? []))));
  const modules = new Set(lines.flatMap((path) => (path.includes('node_modules') || client(path) ? [] : (path.match(/\/(?:dist|src)\/(.+)\.(?:js|ts)$/)?.[1] ?? []))));
  return { packages, modules };
}

describe('dialtone (CLI) loading', () => {
  // The command runs the compiled code, as after `npm ci` (helpers/process.ts, ensureBuilt).
  before(ensureBuilt);

  it('prints its help with only commander and ms loaded: no store, configuration, logging or domain module', async (t) => {
    const { packages, modules } = await loadedBy(workspace(t), ['--help']);
    assert.deepEqual([...packages].sort(), ['commander', 'ms']);
    for (const heavy of ['deps', 'config', 'logging', 'orgs/organizations', 'webhooks/endpoints', 'policy/suppressions', 'campaigns/campaigns']) {
      assert.ok(!modules.has(heavy), `dialtone --help loads ${heavy}`);
    }
  });

  it('runs a command in remote mode with @dialtone/client loaded and no store, configuration or domain module', async (t) => {
    // A stand-in for the service that answers the one request with an empty page.
    const service = createServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[],"next_after":null}'));
    await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => service.close(() => resolve())));
    const url = `http://127.0.0.1:${(service.address() as AddressInfo).port}`;
    const { packages, modules } = await loadedBy(workspace(t), ['run', 'list'], { DIALTONE_URL: url, DIALTONE_API_KEY: 'dt_live_whatever' });
    assert.ok(packages.has('@dialtone/client'), [...packages].join(', '));
    for (const heavy of ['deps', 'config', 'logging', 'store/engine/store', 'runs/read-run', 'runs/list-runs', 'orgs/organizations']) {
      assert.ok(!modules.has(heavy), `dialtone run list in remote mode loads ${heavy}`);
    }
  });

  it("runs a command with its own group's domain module loaded and not the other groups'", async (t) => {
    const ws = workspace(t);
    const created = await runToCompletion(process.execPath, [BIN, 'org', 'create', '--name', 'Loading'], ws.env);
    assert.equal(created.code, 0, created.stderr);
    const groups = ['orgs/organizations', 'auth/api-keys', 'telephony/configurations', 'workflows/workflows', 'runs/cancel-run', 'policy/suppressions', 'webhooks/endpoints', 'campaigns/campaigns', 'audit/audit-events'];
    for (const [args, own] of [
      [['org', 'list'], 'orgs/organizations'],
      [['webhook', 'list', '--org', '1'], 'webhooks/endpoints'],
      [['suppression', 'list', '--org', '1'], 'policy/suppressions'],
      [['audit', 'list', '--org', '1'], 'audit/audit-events'],
    ] as const) {
      const { modules } = await loadedBy(ws, [...args]);
      assert.ok(modules.has(own), `dialtone ${args.join(' ')} loads ${own}: ${[...modules].join(', ')}`);
      // Every command but `org` checks the organization it is given, through orgs/organizations.
      const others = groups.filter((module) => module !== own && module !== 'orgs/organizations');
      assert.deepEqual(others.filter((module) => modules.has(module)), [], `dialtone ${args.join(' ')} loads other groups' modules`);
    }
  });
});
