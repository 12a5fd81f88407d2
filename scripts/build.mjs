// `npm run build`, and npm's prepare hook (so `npm ci` builds too): compiles src/ to dist/, which
// `npm start` and bin/dialtone run, so that nothing compiles TypeScript at run time. It compiles
// the @dialtone/client workspace (packages/client/src to packages/client/dist) first: the CLI
// imports it, and its package `exports` point at dist/, which the root build's types and the
// compiled CLI resolve through node_modules/@dialtone/client. With --if-stale (prestart, the
// tests) it does nothing when dist/ is a build of the current sources (both trees: dist-freshness.mjs).
// Builds take a lock (dist.lock), so two processes that find dist/ stale do not build at once. dist/ is removed
// first (no output of a deleted source survives) and stamped last (bin/dialtone trusts dist/ only
// while no source is newer than the stamp). Without TypeScript installed (`npm ci --omit=dev`) it
// builds nothing: bin/dialtone then runs the sources through tsx, only slower.
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { distIsFresh } from './dist-freshness.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
let tsc;
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  process.stderr.write('dialtone build: TypeScript is not installed; skipping (bin/dialtone will run the sources through tsx).\n');
  process.exit(0);
}
const rootUrl = new URL('..', import.meta.url);
const ifStale = process.argv.includes('--if-stale');
const lock = new URL('../dist.lock', import.meta.url);
// Another build running: wait for it (up to two minutes), then look again.
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
for (let waited = 0; ; waited += 100) {
  if (ifStale && distIsFresh(rootUrl)) process.exit(0);
  try {
    mkdirSync(lock);
    break;
  } catch (error) {
    if (error.code !== 'EEXIST') throw error;
    // A lock older than the wait was left by a build that died: take it over.
    if (waited >= 120_000) rmSync(lock, { recursive: true, force: true });
    sleep(100);
  }
}
try {
  if (!(ifStale && distIsFresh(rootUrl))) {
    rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true });
    // The client's dist/ is rewritten in place, not removed first: test/client-package.test.ts
    // compiles the same files, and removing them under it would fail it for nothing.
    const client = spawnSync(process.execPath, [tsc, '-p', 'packages/client/tsconfig.json'], { cwd: root, stdio: 'inherit' });
    const result = client.status === 0 ? spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' }) : client;
    if (result.status !== 0) process.exitCode = result.status ?? 1;
    else writeFileSync(new URL('../dist/.built', import.meta.url), `${new Date().toISOString()}\n`);
  }
} finally {
  rmSync(lock, { recursive: true, force: true });
}
