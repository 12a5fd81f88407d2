// The import graph of src/: every module and the modules it imports (static, type-only, re-exports
// and dynamic `import()` alike), read with TypeScript's own pre-processor rather than a regular
// expression, so strings and comments that look like imports do not count.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

export type ImportGraph = Map<string, string[]>;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|js)$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The graph of the modules under `root`, named by their path relative to it; imports leaving it are dropped. */
export function importGraph(root: string): ImportGraph {
  const files = sourceFiles(root);
  const known = new Set(files.map((file) => relative(root, file)));
  const graph: ImportGraph = new Map();
  for (const file of files) {
    const imports = ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles.map((f) => f.fileName);
    const targets = imports
      .filter((name) => name.startsWith('.'))
      // Sources import each other by their emitted name (`./x.js` for `./x.ts`).
      .map((name) => relative(root, resolve(dirname(file), name)).replace(/\.js$/, '.ts'))
      .filter((name) => known.has(name));
    graph.set(relative(root, file), [...new Set(targets)]);
  }
  return graph;
}

/**
 * Every cycle's modules, one list per strongly connected component of more than one module (or a
 * module importing itself), found with Tarjan's algorithm; empty when the graph has none.
 */
export function importCycles(graph: ImportGraph): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter);
    counter += 1;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    for (;;) {
      const member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
      if (member === node) break;
    }
    if (component.length > 1 || (graph.get(node) ?? []).includes(node)) cycles.push(component.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return cycles;
}
