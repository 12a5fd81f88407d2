// The folder map of docs/design.md, "Folder map", read as rules, and the imports of a source file
// checked against them. The table is the one source of truth: nothing here lists a folder.
//
// Why TypeScript's own parser and not dependency-cruiser: dependency-cruiser is not a dependency of
// this project (the shared node_modules is not ours to change), while `typescript` is, and reading a
// file's imports with it is a short walk of the syntax tree that sees exactly what tsc sees,
// `.js` specifiers of `.ts` files included.
//
// What counts as an import: every relative module specifier of a file, in `import` and
// `export … from` declarations (side-effect imports too), dynamic `import()`, `require()` and
// `import x = require()`, and `import('…')` in a type position. Imports of packages and of node:
// modules are not folder rules and are not checked.
//
// Types: a row may allow a folder or file "(types)" only, and then only imports that vanish from
// the JavaScript are allowed: `import type`, `export type … from` and `import('…')` types. Under
// verbatimModuleSyntax (tsconfig.json) `import { type A } from '…'` still loads the module at run
// time, so it counts as a value import, like everything else.
import { readFileSync, readdirSync } from 'node:fs';
import { posix } from 'node:path';
import ts from 'typescript';

export interface Allowance {
  /** Relative to src/: a folder (`runs/`) or a file (`runs/states.ts`, `errors.ts`). */
  path: string;
  typesOnly: boolean;
}

export interface FolderRule {
  /** Relative to src/, ending in a slash: `runs/`, `store/engine/`. */
  folder: string;
  allowed: Allowance[];
}

export interface ImportEdge {
  /** The importing file, relative to src/. */
  file: string;
  line: number;
  specifier: string;
  /** The imported file relative to src/ (`.js` read as the `.ts` it stands for); `undefined` for a specifier that is not a string literal. */
  target: string | undefined;
  typeOnly: boolean;
}

const SRC = new URL('../../src/', import.meta.url);

/**
 * The allowances a "May import" text names: each path in backticks outside parentheses, and
 * "(types)" right after one when only its types may be imported. Everything else (words, and
 * parentheses with anything but "types" in them, backticks included) is commentary.
 */
export function parseAllowances(text: string): Allowance[] {
  const allowed: Allowance[] = [];
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '`') {
      const end = text.indexOf('`', i + 1);
      if (end === -1) break;
      allowed.push({ path: text.slice(i + 1, end), typesOnly: /^\s*\(types?\)/.test(text.slice(end + 1)) });
      i = end;
    } else if (text[i] === '(') {
      i = closingParenthesis(text, i);
    }
  }
  return allowed;
}

/** Where the parenthesis opened at `open` closes (nested ones and backticks inside skipped); the text's end if it never does. */
function closingParenthesis(text: string, open: number): number {
  let depth = 0;
  let quoted = false;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === '`') quoted = !quoted;
    else if (!quoted && c === '(') depth++;
    else if (!quoted && c === ')' && --depth === 0) return i;
  }
  return text.length;
}

/** The Folder map table of docs/design.md (its first table after the heading), as rules. */
export function parseFolderMap(markdown: string): FolderRule[] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((line) => line.trim() === '## Folder map');
  if (start === -1) throw new Error('docs/design.md has no "## Folder map" heading');
  const tableStart = lines.findIndex((line, i) => i > start && line.startsWith('|'));
  const table: string[] = [];
  for (let i = tableStart; i !== -1 && i < lines.length && (lines[i] as string).startsWith('|'); i++) table.push(lines[i] as string);
  const [header, separator, ...rows] = table;
  const columns = (header ?? '').split('|').map((cell) => cell.trim());
  const folderColumn = columns.indexOf('Folder');
  const importColumn = columns.indexOf('May import');
  if (folderColumn === -1 || importColumn === -1 || !/^\|[-| :]+\|$/.test(separator ?? '')) {
    throw new Error('the Folder map table must have the columns "Folder" and "May import"');
  }
  return rows.map((row) => {
    const cells = row.split('|').map((cell) => cell.trim());
    const folder = /^`([^`]+\/)`$/.exec(cells[folderColumn] ?? '')?.[1];
    if (folder === undefined) throw new Error(`a Folder map row names no folder in backticks (ending in /): ${row}`);
    return { folder, allowed: parseAllowances(cells[importColumn] ?? '') };
  });
}

/** The sentence of a folder README that starts with "May import", up to its full stop (one inside backticks or parentheses does not end it). */
export function mayImportSentence(readme: string): string | undefined {
  const start = readme.indexOf('May import');
  if (start === -1) return undefined;
  let quoted = false;
  let depth = 0;
  for (let i = start; i < readme.length; i++) {
    const c = readme[i];
    if (c === '`') quoted = !quoted;
    else if (!quoted && c === '(') depth++;
    else if (!quoted && c === ')') depth--;
    else if (!quoted && depth === 0 && c === '.' && /\s/.test(readme[i + 1] ?? ' ')) return readme.slice(start, i + 1);
  }
  return readme.slice(start);
}

/** Every .ts file under src/, relative to it. */
export function sourceFiles(dir = ''): string[] {
  return readdirSync(new URL(dir, SRC), { withFileTypes: true }).flatMap((entry) => {
    if (entry.isDirectory()) return sourceFiles(`${dir}${entry.name}/`);
    return entry.name.endsWith('.ts') ? [`${dir}${entry.name}`] : [];
  });
}

export const readSource = (file: string): string => readFileSync(new URL(file, SRC), 'utf8');

/** Where a relative specifier of `file` leads, relative to src/ (`../…` when it leaves src/). */
function resolve(file: string, specifier: string): string {
  const path = posix.normalize(posix.join(posix.dirname(file), specifier));
  return path.endsWith('.js') ? `${path.slice(0, -'.js'.length)}.ts` : path;
}

/** The relative imports of one source file (`file` relative to src/, `text` its content). */
export function importsOf(file: string, text: string): ImportEdge[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const edges: ImportEdge[] = [];
  const add = (node: ts.Node, argument: ts.Node | undefined, typeOnly: boolean) => {
    const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
    if (argument === undefined || !ts.isStringLiteralLike(argument)) {
      // A computed specifier cannot be checked: the rule is that there is none.
      edges.push({ file, line, specifier: argument?.getText(source) ?? '', target: undefined, typeOnly });
      return;
    }
    if (argument.text.startsWith('.')) edges.push({ file, line, specifier: argument.text, target: resolve(file, argument.text), typeOnly });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) add(node, node.moduleSpecifier, node.importClause?.isTypeOnly === true);
    else if (ts.isExportDeclaration(node) && node.moduleSpecifier) add(node, node.moduleSpecifier, node.isTypeOnly);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) add(node, node.moduleReference.expression, node.isTypeOnly);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node, node.argument.literal, true);
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node, node.arguments[0], false);
    else if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'require') {
      // require() of a package is the common case (lazy loading); only a relative one is a folder's import.
      const argument = node.arguments[0];
      if (argument !== undefined && ts.isStringLiteralLike(argument)) add(node, argument, false);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return edges;
}

/** The row that governs a file: the longest folder that holds it; none for the top-level files. */
export function ruleOf(rules: readonly FolderRule[], file: string): FolderRule | undefined {
  return rules.filter((rule) => file.startsWith(rule.folder)).sort((a, b) => b.folder.length - a.folder.length)[0];
}

const covers = (path: string, target: string) => (path.endsWith('/') ? target.startsWith(path) : target === path);

/** A row as one line, for messages. */
export const describeRule = (rule: FolderRule) =>
  `${rule.folder} may import ${rule.allowed.length === 0 ? 'nothing of src/' : rule.allowed.map((a) => `${a.path}${a.typesOnly ? ' (types)' : ''}`).join(', ')}`;

/**
 * What is wrong with an import, in one line naming the file, the import and the rule; `undefined`
 * when it is allowed. Top-level files of src/ (main.ts, server.ts, app.ts, deps.ts and the few
 * every folder uses) are the composition root and have no row: their own imports are not checked.
 */
export function violationOf(rules: readonly FolderRule[], edge: ImportEdge): string | undefined {
  if (!edge.file.includes('/')) return undefined;
  const where = `src/${edge.file}:${edge.line} imports '${edge.specifier}'`;
  const rule = ruleOf(rules, edge.file);
  if (rule === undefined) return `${where}, but src/${posix.dirname(edge.file)}/ has no row in docs/design.md, "Folder map"`;
  if (edge.target === undefined) return `${where}: a computed specifier, which no rule can check (write the path as a string)`;
  if (edge.target.startsWith('../')) return `${where}, which leaves src/`;
  // A file's own folder is free, unless the target is in a subfolder with a row of its own.
  if (ruleOf(rules, edge.target) === rule) return undefined;
  const matching = rule.allowed.filter((a) => covers(a.path, edge.target as string));
  if (matching.some((a) => !a.typesOnly)) return undefined;
  if (matching.length > 0) {
    if (edge.typeOnly) return undefined;
    return `${where} (${edge.target}) as a value, but ${rule.folder} may import it only with \`import type\` (docs/design.md, "Folder map": ${describeRule(rule)})`;
  }
  return `${where} (${edge.target}), which is not allowed (docs/design.md, "Folder map": ${describeRule(rule)})`;
}
