// What in a module would tie it to Node: an import of a Node built-in (`node:fs`, or `fs` by its
// bare name) and a use of a Node global (`Buffer`, `process`, CommonJS's `require` and friends).
// Read with TypeScript's parser, so a word in a comment or a string, or a property that happens to
// be called `process`, is not mistaken for a use. The @dialtone/client core must have none
// (packages/client/README.md, "Where it runs").
import { builtinModules } from 'node:module';
import ts from 'typescript';

const NODE_GLOBALS = new Set(['Buffer', 'process', 'require', 'module', 'exports', 'global', '__dirname', '__filename', 'setImmediate']);
const BUILTINS = new Set(builtinModules);

/** Is this identifier a name in its own right (a read of a variable), not a property or a declaration's name? */
function isFreeUse(node: ts.Identifier): boolean {
  const parent = node.parent;
  if (ts.isPropertyAccessExpression(parent) && parent.name === node) return false;
  if (ts.isQualifiedName(parent) && parent.right === node) return false;
  if ((ts.isPropertyAssignment(parent) || ts.isPropertySignature(parent) || ts.isPropertyDeclaration(parent) || ts.isMethodDeclaration(parent) || ts.isMethodSignature(parent)) && parent.name === node) return false;
  if ((ts.isVariableDeclaration(parent) || ts.isParameter(parent) || ts.isBindingElement(parent)) && parent.name === node) return false;
  return true;
}

/** Every Node-only import and global use in a module's text, as `file:line: what` lines (none is good). */
export function nodeOnlyUses(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const at = (node: ts.Node) => `${fileName}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}`;
  const visit = (node: ts.Node): void => {
    const specifier =
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)
        ? node.moduleSpecifier.text
        : ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])
          ? node.arguments[0].text
          : undefined;
    if (specifier !== undefined && (specifier.startsWith('node:') || BUILTINS.has(specifier.split('/')[0] ?? ''))) found.push(`${at(node)}: imports ${specifier}`);
    if (ts.isIdentifier(node) && NODE_GLOBALS.has(node.text) && isFreeUse(node)) found.push(`${at(node)}: uses the Node global ${node.text}`);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}
