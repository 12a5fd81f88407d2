// npm 11 lists, after every install, the dependencies whose install scripts package.json's
// allowScripts does not cover, and a later npm blocks them (npm help approve-scripts). The lockfile
// says which packages have install scripts (hasInstallScript), so coverage is checked offline here:
// a dependency update that brings a new install script fails this test instead of a stricter npm.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';

const readJson = <T>(path: string): T => JSON.parse(readFileSync(new URL(`../${path}`, import.meta.url), 'utf8')) as T;

interface LockedPackage {
  version?: string;
  hasInstallScript?: boolean;
}

/** The package name from a lockfile key: the part after the last node_modules/ (scoped names keep their scope). */
const packageName = (key: string) => key.slice(key.lastIndexOf('node_modules/') + 'node_modules/'.length);

describe('Install scripts (npm allowScripts)', () => {
  it('decides in package.json\'s allowScripts, by name, for every package in the lockfile that has an install script', () => {
    const pkg = readJson<{ allowScripts?: Record<string, boolean> }>('package.json');
    const lock = readJson<{ packages: Record<string, LockedPackage> }>('package-lock.json');
    const withScripts = Object.entries(lock.packages)
      .filter(([key, locked]) => key !== '' && locked.hasInstallScript === true)
      .map(([key]) => packageName(key));
    assert.ok(withScripts.length > 0, 'the lockfile marks install scripts (better-sqlite3 has one)');
    const decided = new Set(Object.keys(pkg.allowScripts ?? {}));
    assert.deepEqual([...new Set(withScripts)].filter((name) => !decided.has(name)).sort(), [], 'packages whose install scripts allowScripts does not decide');
  });

  it('allows the install scripts the service cannot run without: better-sqlite3\'s native binding and esbuild\'s binary (tsx)', () => {
    const { allowScripts = {} } = readJson<{ allowScripts?: Record<string, boolean> }>('package.json');
    assert.equal(allowScripts['better-sqlite3'], true);
    assert.equal(allowScripts.esbuild, true);
  });
});
