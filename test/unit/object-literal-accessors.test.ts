// No object literal in src/ or runtimes/ has a getter or a setter (docs/performance.md "Budgets on the request
// path"): V8 makes such a literal in dictionary mode, and what its getter's closure reaches survived every young
// collection until a full one; a class with the accessor on its prototype has neither cost. A literal made once
// per process may keep one, named below with its reason.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

const ROOT = resolve(import.meta.dirname, '..', '..');

/** file:accessor → why it may stay a literal's. */
const ALLOWED = new Map([
  ['src/lifecycle/signals.ts:stopRequested', 'made once per process, by listenForSignals'],
]);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? sourceFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Every getter and setter written in an object literal of `sf`. */
function literalAccessorsIn(sf: ts.SourceFile): ts.AccessorDeclaration[] {
  const found: ts.AccessorDeclaration[] = [];
  const visit = (n: ts.Node): void => {
    if ((ts.isGetAccessor(n) || ts.isSetAccessor(n)) && ts.isObjectLiteralExpression(n.parent)) found.push(n);
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return found;
}

/** `file:line` and `file:accessor` of each literal's accessor in `file`. */
function literalAccessors(file: string): { at: string; key: string }[] {
  const name = relative(ROOT, file);
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  return literalAccessorsIn(sf).map((a) => ({
    at: `${name}:${sf.getLineAndCharacterOfPosition(a.getStart()).line + 1}`,
    key: `${name}:${a.name.getText()}`,
  }));
}

test('no object literal in src/ or runtimes/ has a getter or a setter', () => {
  const files = [...sourceFiles(join(ROOT, 'src')), ...sourceFiles(join(ROOT, 'runtimes'))];
  assert.ok(files.length > 100, `only ${files.length} source files found`);
  const found = files.flatMap(literalAccessors);
  const offending = found.filter((a) => !ALLOWED.has(a.key)).map((a) => a.at);
  assert.deepEqual(offending, [], 'write these as a class with the accessor on its prototype');
  // Each allowance still names a literal that exists, so the list cannot outlive its reason.
  for (const key of ALLOWED.keys()) assert.ok(found.some((a) => a.key === key), `${key} is no longer a literal's`);
});

test('the check finds a getter and a setter in a literal, and none in a class', () => {
  const sf = ts.createSourceFile(
    'x.ts',
    'const a = { get x() { return 1; }, set y(v: number) {} }; class C { get z() { return 2; } }',
    ts.ScriptTarget.Latest,
    true,
  );
  const names = literalAccessorsIn(sf).map((a) => a.name.getText());
  assert.deepEqual(names, ['x', 'y']);
});
