// Measures the source's shape against the limits the code keeps (docs/decisions.md, "Structure"):
// file length, function length and the `'x' in y` tests that tell unions apart.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

export interface Shape {
  /** Files over the line limit: path → lines. */
  files: Map<string, number>;
  /** Functions over the line limit: `path:line name` → lines. */
  functions: Map<string, number>;
  /** `'x' in y` tests: `path:line`. */
  inTests: string[];
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

function functionName(node: ts.Node): string {
  if ((ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node)) && node.name) return node.name.getText();
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent)) return parent.name.getText();
  if (parent && ts.isPropertyAssignment(parent)) return parent.name.getText();
  return '(anonymous)';
}

export function measure(root: string, limits: { fileLines: number; functionLines: number }): Shape {
  const shape: Shape = { files: new Map(), functions: new Map(), inTests: [] };
  for (const path of sourceFiles(join(root, 'src'))) {
    const text = readFileSync(path, 'utf8');
    const name = relative(root, path);
    const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    if (lines > limits.fileLines) shape.files.set(name, lines);
    const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
    const lineOf = (pos: number): number => file.getLineAndCharacterOfPosition(pos).line + 1;
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        const length = lineOf(node.getEnd()) - lineOf(node.getStart()) + 1;
        if (length > limits.functionLines) shape.functions.set(`${name}:${lineOf(node.getStart())} ${functionName(node)}`, length);
      }
      if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.InKeyword && ts.isStringLiteral(node.left)) {
        shape.inTests.push(`${name}:${lineOf(node.getStart())}`);
      }
      ts.forEachChild(node, visit);
    };
    visit(file);
  }
  return shape;
}
