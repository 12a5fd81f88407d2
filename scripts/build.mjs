// `npm run build`, and npm's prepare hook (so `npm ci` builds too): compiles src/ to dist/, which
// bin/dialtone runs so that a command starts without compiling TypeScript first. dist/ is removed
// first (no output of a deleted source survives) and stamped last (bin/dialtone trusts dist/ only
// while no source is newer than the stamp). Without TypeScript installed (`npm ci --omit=dev`) it
// builds nothing: bin/dialtone then runs the sources through tsx, only slower.
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
let tsc;
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  process.stderr.write('dialtone build: TypeScript is not installed; skipping (bin/dialtone will run the sources through tsx).\n');
  process.exit(0);
}
rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true });
const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
if (result.status !== 0) process.exit(result.status ?? 1);
writeFileSync(new URL('../dist/.built', import.meta.url), `${new Date().toISOString()}\n`);
