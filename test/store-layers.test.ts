// The store's one connection convention (docs/design.md, "The data path"): every statement in
// src/store/statements/ takes `on: Connection` (the store or one of its transactions, each carrying
// its dialect) as its first parameter, and nothing outside src/store/ reads the dialect: what
// differs between the stores is asked of the store by what it means (Store.embedded,
// Store.idsCommitOutOfOrder, Store.transactionsAtOnce) or hidden in a store/ function. Both are
// read with the TypeScript compiler, not with patterns over the text.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { readSource, sourceFiles } from './helpers/import-rules.js';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));
const DIALECTS = new Set(['sqlite', 'postgres']);
const EQUALITY = new Set([ts.SyntaxKind.EqualsEqualsEqualsToken, ts.SyntaxKind.ExclamationEqualsEqualsToken, ts.SyntaxKind.EqualsEqualsToken, ts.SyntaxKind.ExclamationEqualsToken]);

/** Where a file reads a dialect: `.dialect`, `['dialect']`, `{ dialect }` taken apart, `DialectName`, or a value compared with 'sqlite' / 'postgres'. */
function dialectReads(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const at = (node: ts.Node, what: string) => found.push(`${file}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}: ${what}`);
  const isDialect = (node: ts.Expression) => ts.isStringLiteralLike(node) && DIALECTS.has(node.text);
  const visit = (node: ts.Node): void => {
    if (ts.isPropertyAccessExpression(node) && node.name.text === 'dialect') at(node, node.getText(source));
    else if (ts.isElementAccessExpression(node) && ts.isStringLiteralLike(node.argumentExpression) && node.argumentExpression.text === 'dialect') at(node, node.getText(source));
    else if (ts.isBindingElement(node) && (node.propertyName ?? node.name).getText(source) === 'dialect') at(node, `{ ${node.getText(source)} }`);
    else if (ts.isIdentifier(node) && node.text === 'DialectName') at(node, 'DialectName');
    else if (ts.isBinaryExpression(node) && EQUALITY.has(node.operatorToken.kind) && (isDialect(node.left) || isDialect(node.right))) at(node, node.getText(source));
    else if (ts.isCaseClause(node) && isDialect(node.expression)) at(node, `case ${node.expression.getText(source)}`);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Exported functions of store/statements/ that run no statement: they take no connection. */
const NOT_STATEMENTS = new Set(['nearestRank', 'subscribedEndpoints', 'transitionShape']);

/** Each exported function of store/statements/ whose first parameter is not declared `Connection` (store/engine/store.ts's), or that takes a connection elsewhere. */
function statementsNotOnConnection(): { checked: number; wrong: string[] } {
  const files = sourceFiles('store/statements/').map((file) => `${SRC}${file}`);
  const program = ts.createProgram(files, { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, strict: true, noEmit: true, skipLibCheck: true });
  const checker = program.getTypeChecker();
  const connection = `${SRC}store/engine/store.ts`;
  /** The declaration a type annotation names, through imports. */
  const declared = (type: ts.TypeNode | undefined): { name: string; file: string } | undefined => {
    if (!type || !ts.isTypeReferenceNode(type)) return undefined;
    let symbol = checker.getSymbolAtLocation(type.typeName);
    if (symbol && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
    const declaration = symbol?.declarations?.[0];
    return declaration && symbol ? { name: symbol.name, file: declaration.getSourceFile().fileName } : undefined;
  };
  const isConnection = (type: ts.TypeNode | undefined) => {
    const target = declared(type);
    return target?.name === 'Connection' && target.file === connection;
  };
  /** A parameter through which a statement could reach the database: its type mentions the store, a transaction or Kysely. */
  const reachesDatabase = (parameter: ts.ParameterDeclaration) => /\b(Store|StoreTransaction|Transaction|Kysely|Connection)\b/.test(checker.typeToString(checker.getTypeAtLocation(parameter), parameter, ts.TypeFormatFlags.NoTruncation));
  let checked = 0;
  const wrong: string[] = [];
  for (const file of files) {
    const source = program.getSourceFile(file);
    assert.ok(source, `the compiler read ${file}`);
    for (const statement of source.statements) {
      if (!ts.isFunctionDeclaration(statement) || !statement.name) continue;
      if (!statement.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) continue;
      const name = `${file.slice(SRC.length)}: ${statement.name.text}`;
      const [first, ...rest] = statement.parameters;
      if (NOT_STATEMENTS.has(statement.name.text)) {
        if (statement.parameters.some(reachesDatabase)) wrong.push(`${name} is listed as running no statement but takes a connection`);
        continue;
      }
      checked++;
      if (!first || first.name.getText(source) !== 'on' || !isConnection(first.type)) wrong.push(`${name}(${first ? first.getText(source) : ''}, ...)`);
      for (const parameter of rest) if (reachesDatabase(parameter)) wrong.push(`${name}: ${parameter.getText(source)} (a second connection)`);
    }
  }
  return { checked, wrong };
}

describe('The store in layers: one way to hand a statement its connection, no dialect outside store/', () => {
  it('finds no file outside src/store/ that reads the dialect', () => {
    const outside = sourceFiles().filter((file) => !file.startsWith('store/'));
    assert.ok(outside.length > 100, `walked ${outside.length} files of src/`);
    assert.deepEqual(outside.flatMap((file) => dialectReads(file, readSource(file))), []);
  });

  it('catches each way of reading the dialect (the check above can fail)', () => {
    const reads = dialectReads(
      'x.ts',
      [
        "if (deps.store.dialect === 'postgres') go();",
        "const a = store['dialect'];",
        'const { dialect } = store;',
        "const b = kind !== 'sqlite';",
        "switch (k) { case 'postgres': break; }",
        "type D = import('./store.js').DialectName;",
        "const fine = { url: 'postgres://x' }; log('sqlite');",
      ].join('\n'),
    );
    assert.deepEqual(
      reads.map((read) => read.split(': ')[0]),
      ['x.ts:1', 'x.ts:1', 'x.ts:2', 'x.ts:3', 'x.ts:4', 'x.ts:5', 'x.ts:6'],
      reads.join('\n'),
    );
    // Inside store/ the dialect is read, as it must be somewhere: the walk above leaves it out on purpose.
    assert.ok(dialectReads('store/engine/store.ts', readSource('store/engine/store.ts')).length > 0);
  });

  it('has every statement function in src/store/statements/ take `on: Connection` first, and no connection after it', () => {
    const { checked, wrong } = statementsNotOnConnection();
    assert.ok(checked > 150, `checked ${checked} statement functions`);
    assert.deepEqual(wrong, []);
  });
});
