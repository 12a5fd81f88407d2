import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ConfigSchema, loadConfig } from '../src/config.js';
import { scriptFor } from '../src/telephony/simulator/provider.js';

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const exists = (path: string) => existsSync(new URL(`../${path}`, import.meta.url));

/** README.md and every markdown file of docs/: the documentation a reader follows links through. */
const markdownDocs = () => ['README.md', ...readdirSync(new URL('../docs', import.meta.url)).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** A markdown file's lines outside fenced code blocks (a `# →` comment in a shell example is no heading). */
function proseLines(markdown: string): string[] {
  let fenced = false;
  return markdown.split('\n').filter((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/** The headings of a markdown file, as written (inline code marks removed). */
function headings(markdown: string): string[] {
  return proseLines(markdown).flatMap((line) => /^#{1,6} +(.+?) *#*$/.exec(line)?.[1]?.replaceAll('`', '') ?? []);
}

/**
 * The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces as hyphens,
 * a repeated one suffixed -1, -2… Hand-written because it is four lines and no slugger is a
 * dependency of this project; a heading whose anchor this gets wrong fails the link test loudly.
 */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  return new Set(
    headings(markdown).map((heading) => {
      const slug = heading.toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replaceAll(' ', '-');
      const count = seen.get(slug) ?? 0;
      seen.set(slug, count + 1);
      return count === 0 ? slug : `${slug}-${count}`;
    }),
  );
}

/** Every file under these folders that may cite the docs (source, tests, scripts, the console), skipping generated output. */
function citingFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(new URL(`../${dir}`, import.meta.url), { withFileTypes: true }).flatMap((entry) => {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) return entry.name === 'results' || entry.name === 'node_modules' ? [] : walk(path);
      return /\.(?:ts|js|mjs|md|json|html|css|xml)$|^[^.]+$/.test(entry.name) ? [path] : [];
    });
  return [...['src', 'test', 'console', 'bench', 'scripts', 'bin', '.ci'].filter(exists).flatMap(walk), '.env.example', 'package.json'];
}

describe('Documentation stays true to the code', () => {
  it('shows the CLI one way throughout, as npx dialtone, and the package\'s bin is what npx runs', () => {
    const files = ['README.md', '.env.example', ...readdirSync(new URL('../docs', import.meta.url)).map((f) => `docs/${f}`), ...readdirSync(new URL('../src', import.meta.url)).map((d) => `src/${d}/README.md`).filter((f) => existsSync(new URL(`../${f}`, import.meta.url)))];
    const otherForms: string[] = [];
    for (const file of files) {
      read(file).split('\n').forEach((line, i) => {
        if (/npm run dialtone|bin\/dialtone (?:org|key|telephony|workflow|run|audit|migrate|serve)\b|(?<!npx )\bdialtone (?:org|key|telephony|workflow|run|audit|migrate|serve)\b/.test(line)) otherForms.push(`${file}:${i + 1}: ${line.trim()}`);
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

  it('resolves every relative link of README.md and docs/ to a file, and every #fragment to a heading of it', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of markdownDocs()) {
      const dir = file.includes('/') ? file.slice(0, file.lastIndexOf('/') + 1) : '';
      for (const line of proseLines(read(file))) {
        for (const [, target] of line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)(?: "[^"]*")?\)/g)) {
          if (/^[a-z][a-z0-9+.-]*:/i.test(target as string)) continue; // https:, mailto:: not a file of this repository
          checked += 1;
          const [path, fragment] = (target as string).split('#') as [string, string | undefined];
          const linked = path === '' ? file : new URL(path, new URL(`file:///${dir}`)).pathname.slice(1);
          if (!exists(linked)) {
            broken.push(`${file}: ${target} (no file ${linked})`);
          } else if (fragment !== undefined && !(linked.endsWith('.md') && anchors(read(linked)).has(fragment))) {
            broken.push(`${file}: ${target} (no heading #${fragment} in ${linked})`);
          }
        }
      }
    }
    assert.deepEqual(broken, []);
    assert.ok(checked > 50, `only ${checked} relative links found: is the link pattern still right?`);
  });

  it('finds every docs/ section the code and tests cite, and cites no design document but docs/design.md', () => {
    // A citation is `docs/<file>.md`, optionally followed by `, "<heading>"` (a line break and a
    // comment leader may come between the two; quotes may be escaped inside a string literal).
    const citation = /docs\/([\w-]+\.md)(?:,(?:\s|\/\/|\*|#)*\\?"([^"\\\n]+)\\?")?/g;
    const problems: string[] = [];
    const cited = new Set<string>();
    for (const file of citingFiles()) {
      const text = read(file);
      for (const [, doc, heading] of text.matchAll(citation)) {
        const path = `docs/${doc}`;
        if (!exists(path)) {
          problems.push(`${file}: cites ${path}, which does not exist`);
          continue;
        }
        if (heading === undefined) continue;
        cited.add(`${path}, "${heading}"`);
        if (!headings(read(path)).includes(heading)) problems.push(`${file}: cites ${path}, "${heading}", which has no such heading`);
      }
      text.split('\n').forEach((line, i) => {
        const founding = /(?<!docs\/)\bDESIGN\.md\b/.exec(line);
        if (founding) problems.push(`${file}:${i + 1}: cites ${founding[0]}, which is not in the repository (docs/design.md is)`);
      });
    }
    assert.deepEqual(problems, []);
    const designSections = [...cited].filter((c) => c.startsWith('docs/design.md'));
    assert.ok(designSections.length >= 5, `the code cites docs/design.md by section: found ${designSections.join('; ')}`);
  });
});
