// The folder map of docs/design.md, "Folder map", holds: every import of every file under src/ is
// one its folder's row allows, and each folder's README says the same as its row. How the table
// is read and what counts as an import: test/helpers/import-rules.ts.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { describe, it } from 'node:test';
import { describeRule, importsOf, mayImportSentence, parseAllowances, parseFolderMap, readSource, sourceFiles, violationOf, type FolderRule } from './helpers/import-rules.js';

const rules = parseFolderMap(readFileSync(new URL('../docs/design.md', import.meta.url), 'utf8'));
const runsRule = rules.find((rule) => rule.folder === 'runs/') as FolderRule;
const inSrc = (path: string) => existsSync(new URL(`../src/${path}`, import.meta.url));

/** The violations of a made-up file's imports, through the same checker as the real files'. */
const check = (file: string, text: string, map: readonly FolderRule[] = rules) =>
  importsOf(file, text).flatMap((edge) => violationOf(map, edge) ?? []);

describe('Folder boundaries (docs/design.md, "Folder map")', () => {
  it('allows every import of every file under src/ by its folder\'s row', () => {
    const files = sourceFiles();
    assert.ok(files.length > 100, `walked ${files.length} files of src/`);
    const edges = files.flatMap((file) => importsOf(file, readSource(file)));
    assert.ok(edges.some((edge) => edge.typeOnly) && edges.some((edge) => !edge.typeOnly), 'saw type and value imports');
    assert.deepEqual(edges.flatMap((edge) => violationOf(rules, edge) ?? []), []);
  });

  it('has a row for every folder of src/ that holds source files, and names only paths that exist', () => {
    const folders = new Set(sourceFiles().filter((file) => file.includes('/')).map((file) => file.slice(0, file.lastIndexOf('/') + 1)));
    const unruled = [...folders].filter((folder) => !rules.some((rule) => folder.startsWith(rule.folder)));
    assert.deepEqual(unruled, [], 'folders without a row in the Folder map');
    const rows = rules.map((rule) => rule.folder);
    assert.deepEqual(rows, [...new Set(rows)], 'no folder has two rows');
    const missing = rules.flatMap((rule) => [rule.folder, ...rule.allowed.map((a) => a.path)].filter((path) => !inSrc(path)).map((path) => `${rule.folder}: ${path}`));
    assert.deepEqual(missing, [], 'paths in the Folder map that are not in src/');
  });

  it('says in each folder\'s README what it may import, exactly as its row does', () => {
    const drift: string[] = [];
    for (const rule of rules) {
      const readme = new URL(`../src/${rule.folder}README.md`, import.meta.url);
      if (!existsSync(readme)) continue;
      const sentence = mayImportSentence(readFileSync(readme, 'utf8'));
      if (sentence === undefined) {
        drift.push(`src/${rule.folder}README.md has no "May import" sentence`);
        continue;
      }
      const said = (allowed: ReturnType<typeof parseAllowances>) => allowed.map((a) => `${a.path}${a.typesOnly ? ' (types)' : ''}`).sort();
      const readmeSays = said(parseAllowances(sentence).filter((a) => a.path.endsWith('/') || a.path.endsWith('.ts')));
      if (JSON.stringify(readmeSays) !== JSON.stringify(said(rule.allowed))) {
        drift.push(`src/${rule.folder}README.md says ${readmeSays.join(', ') || 'nothing'}; docs/design.md says ${said(rule.allowed).join(', ') || 'nothing'}`);
      }
    }
    assert.deepEqual(drift, []);
    const topFolders = readdirSync(new URL('../src/', import.meta.url), { withFileTypes: true }).filter((entry) => entry.isDirectory()).map((entry) => `${entry.name}/`);
    assert.deepEqual(topFolders.filter((folder) => !inSrc(`${folder}README.md`)), [], 'every folder of src/ has a README');
  });

  it('reports a forbidden import with its file, line, specifier and the rule it breaks', () => {
    const text = "import { isTerminal } from './states.js';\nimport { startDispatcher } from '../dispatch/dispatcher.js';\n";
    assert.deepEqual(check('runs/new-file.ts', text), [
      `src/runs/new-file.ts:2 imports '../dispatch/dispatcher.js' (dispatch/dispatcher.ts), which is not allowed (docs/design.md, "Folder map": ${describeRule(runsRule)})`,
    ]);
  });

  it('counts dynamic import(), re-exports, side-effect imports and relative require() as imports', () => {
    const forbidden = ['await import(\'../http/app.js\');', "export { x } from '../http/problems.js';", "import '../http/problems.js';", "require('../http/problems.js');"];
    for (const line of forbidden) assert.equal(check('runs/new-file.ts', line).length, 1, line);
    assert.match(check('runs/new-file.ts', 'await import(name);')[0] ?? '', /computed specifier/);
    assert.match(check('runs/new-file.ts', "import { x } from '../../bench/bench.js';")[0] ?? '', /leaves src\//);
  });

  it('lets a row allowing a file "(types)" import its types only, and an inline type import is a value import', () => {
    assert.deepEqual(check('runs/new-file.ts', "import type { Deps } from '../deps.js';\nexport type { Deps as D } from '../deps.js';\ntype C = import('../deps.js').Deps;\n"), []);
    for (const line of ["import { type Deps } from '../deps.js';", "import { buildDeps } from '../deps.js';"]) {
      assert.match(check('runs/new-file.ts', line)[0] ?? '', /may import it only with `import type`/, line);
    }
  });

  it('holds each layer of a folder split in rows to its own row, and refuses a folder with no row', () => {
    const map = parseFolderMap('## Folder map\n\n| Folder | May import |\n|---|---|\n| `store/engine/` | `errors.ts` |\n| `store/statements/` | `store/engine/` |\n');
    assert.deepEqual(check('store/statements/a.ts', "import { x } from '../engine/store.js';", map), []);
    assert.equal(check('store/engine/a.ts', "import { x } from '../statements/run-writes.js';", map).length, 1);
    assert.match(check('store/engine/a.ts', "import { x } from '../../runs/states.js';", map)[0] ?? '', /store\/engine\/ may import errors\.ts/);
    assert.match(check('admission/a.ts', "import { x } from '../errors.js';", map)[0] ?? '', /src\/admission\/ has no row/);
  });
});
