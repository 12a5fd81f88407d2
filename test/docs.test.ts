import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ConfigSchema, loadConfig } from '../src/config.js';
import { scriptFor } from '../src/telephony/simulator.js';

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');

describe('Documentation stays true to the code', () => {
  it('shows the CLI one way throughout, as npx dialtone, and the package\'s bin is what npx runs', () => {
    const files = ['README.md', '.env.example', ...readdirSync(new URL('../docs', import.meta.url)).map((f) => `docs/${f}`), ...readdirSync(new URL('../src', import.meta.url)).map((d) => `src/${d}/README.md`).filter((f) => existsSync(new URL(`../${f}`, import.meta.url)))];
    const otherForms: string[] = [];
    for (const file of files) {
      read(file).split('\n').forEach((line, i) => {
        if (/npm run dialtone|bin\/dialtone (?:org|key|telephony|workflow|run|migrate|serve)\b|(?<!npx )\bdialtone (?:org|key|telephony|workflow|run|migrate|serve)\b/.test(line)) otherForms.push(`${file}:${i + 1}: ${line.trim()}`);
      });
    }
    assert.deepEqual(otherForms, []);
    const pkg = JSON.parse(read('package.json')) as { name: string; bin: Record<string, string> };
    assert.equal(pkg.bin.dialtone, 'bin/dialtone', 'npx dialtone runs the root package\'s own bin');
    assert.ok(statSync(new URL('../bin/dialtone', import.meta.url)).mode & 0o111, 'bin/dialtone is executable');
    assert.match(read('bin/dialtone'), /^#!\/usr\/bin\/env node\n/);
  });

  it('documents every configuration variable in .env.example, and nothing else', () => {
    const documented = [...read('.env.example').matchAll(/^#? ?([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]).sort();
    assert.deepEqual(documented, Object.keys(ConfigSchema.properties).sort());
  });

  it('gives in .env.example the defaults the service really uses', () => {
    const defaults = loadConfig({}) as Record<string, unknown>;
    for (const [, name, value] of read('.env.example').matchAll(/^([A-Z][A-Z0-9_]+)=(.*)$/gm)) {
      assert.equal(String(defaults[name as string]), value, `${name} default`);
    }
  });

  it('describes every reserved simulator number in docs/simulator.md with the behaviour the simulator has', () => {
    const doc = read('docs/simulator.md');
    const timings = { latencyMs: 1, ringMs: 1, talkMs: 1, secondMs: 1 };
    for (const suffix of ['00', '01', '02', '03', '04', '05', '06', '07']) {
      const number = `+12025550${suffix.padStart(3, '1')}`;
      const row = doc.split('\n').find((line) => line.includes(number));
      assert.ok(row, `${number} is documented`);
      assert.ok(row.includes(scriptFor(number, timings).description), `${number}: "${scriptFor(number, timings).description}" in ${row}`);
    }
  });
});
