// The import graph of src/ (docs/architecture.md "Who owns which question"): no cycle among its folders and
// top-level files nor among its files, the configuration sources and the lifecycle never import the Gateway,
// the platform contract imports nothing above it, and nothing in src/ imports a runtime module.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';

const SRC = resolve(import.meta.dirname, '..', '..', 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? sourceFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** A folder of src/ (`sources/`) or a top-level file (`gateway.ts`). */
function unit(path: string): string {
  const parts = relative(SRC, path).split('/');
  return parts.length > 1 ? `${parts[0]}/` : parts[0]!;
}

/** unit → unit → one import that makes the edge (`file → file`), relative imports inside src/ only. */
function importGraph(unitOf: (path: string) => string = unit): Map<string, Map<string, string>> {
  const edges = new Map<string, Map<string, string>>();
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^\s*(?:import|export)\b[^'"]*?\bfrom\s+['"](\.[^'"]+)['"]/gm)) {
      const target = resolve(dirname(file), m[1]!);
      if (!target.startsWith(SRC)) continue;
      const [a, b] = [unitOf(file), unitOf(target)];
      if (a === b) continue;
      const out = edges.get(a) ?? new Map<string, string>();
      edges.set(a, out);
      out.set(b, `${relative(SRC, file)} → ${relative(SRC, target)}`);
    }
  }
  return edges;
}

/** Strongly connected components of more than one unit (Tarjan). */
function cycles(edges: Map<string, Map<string, string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1) out.push(scc);
  };
  const units = new Set([...edges.keys(), ...[...edges.values()].flatMap((m) => [...m.keys()])]);
  for (const v of units) if (!index.has(v)) visit(v);
  return out;
}

test('no import cycle among the folders and top-level files of src/', () => {
  const edges = importGraph();
  const found = cycles(edges).map((scc) => {
    const why = scc.flatMap((a) => [...(edges.get(a) ?? [])].filter(([b]) => scc.includes(b)).map(([, e]) => e));
    return `${scc.join(' ↔ ')}: ${why.join('; ')}`;
  });
  assert.deepEqual(found, []);
});

test('no import cycle among the files of src/, type-only imports included', () => {
  // Erased at run time, but a cycle leaves no file to read first.
  const edges = importGraph((path) => relative(SRC, path));
  assert.deepEqual(cycles(edges).map((scc) => scc.sort().join(' ↔ ')), []);
});

test('sources/ and lifecycle/ take narrow inputs, never the Gateway; platform.ts imports nothing above it', () => {
  const edges = importGraph();
  for (const from of ['sources/', 'lifecycle/']) {
    assert.equal(edges.get(from)?.get('gateway.ts'), undefined, `${from} imports gateway.ts`);
  }
  assert.deepEqual([...(edges.get('platform.ts')?.keys() ?? [])].filter((u) => u !== 'util/'), []);
});

test('nothing in src/ imports runtimes/', () => {
  for (const file of sourceFiles(SRC)) {
    assert.doesNotMatch(readFileSync(file, 'utf8'), /from\s+['"][./]*runtimes\//, relative(SRC, file));
  }
});
