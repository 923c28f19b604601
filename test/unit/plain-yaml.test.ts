// The resources file's fast YAML path (src/util/plain-yaml.ts) against the `yaml` package it stands in for:
// on every text it either gives up or gives the value `yaml` gives, keys in the same order; it never accepts
// a text `yaml` refuses. Checked on the repository's YAML files, on hand-picked edges and on generated texts.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { parseDocument } from 'yaml';
import { parsePlainYaml } from '../../src/util/plain-yaml.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');

/** What `parseYaml` (src/util/report.ts) makes of `text`: its value, or `refused` on any error. */
function viaYaml(text: string): { refused: true } | { refused: false; value: unknown } {
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true });
  return doc.errors.length > 0 ? { refused: true } : { refused: false, value: doc.toJS({ maxAliasCount: 100 }) };
}

/** Deep equality that also compares key order and tells `NaN`, `-0` and `undefined` apart. */
function same(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => same(x, b[i]));
  if (a && b && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b)) {
    if (Object.getPrototypeOf(a) !== Object.prototype || Object.getPrototypeOf(b) !== Object.prototype) return false;
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k, i) => k === kb[i] && same(a[k as never], b[k as never]));
  }
  return false;
}

/** Whether the fast path agrees with `yaml` on `text`; `accepted`: it did not give up. */
async function agrees(text: string): Promise<{ ok: boolean; accepted: boolean; why?: string }> {
  const fast = await parsePlainYaml(text);
  if (fast === undefined) return { ok: true, accepted: false };
  const slow = viaYaml(text);
  if (slow.refused) return { ok: false, accepted: true, why: 'accepted a text yaml refuses' };
  return same(fast, slow.value)
    ? { ok: true, accepted: true }
    : { ok: false, accepted: true, why: `${JSON.stringify(fast)} ≠ ${JSON.stringify(slow.value)}` };
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    if (f === 'node_modules' || f.startsWith('.')) return [];
    const p = join(dir, f);
    return statSync(p).isDirectory() ? yamlFiles(p) : /\.ya?ml$/.test(f) ? [p] : [];
  });
}

test("the repository's YAML files: the same values, and the resources files take the fast path", async () => {
  const files = yamlFiles(ROOT);
  assert.ok(files.length >= 10, `found ${files.length} YAML files`);
  for (const f of files) {
    const r = await agrees(readFileSync(f, 'utf8'));
    assert.ok(r.ok, `${f}: ${r.why}`);
  }
  for (const f of ['examples/resources.yaml', 'bench/config/resources.yaml']) {
    assert.ok((await agrees(readFileSync(join(ROOT, f), 'utf8'))).accepted, `${f} takes the fast path`);
  }
});

/** Texts at the subset's edges: each either agrees with `yaml` or is left to it. */
const EDGES = [
  'a: 1\nb: -2\nc: +3\nd: 007\ne: 0o17\nf: 0x1F\ng: 1.5\nh: .5\ni: 1e3\nj: -.inf\nk: .NaN\nl: 1_000\nm: 0b11\n',
  'a: ~\nb: null\nc: Null\nd: NULL\ne:\nf: true\ng: True\nh: FALSE\ni: yes\nj: off\nk: nULL\n',
  'a: "x # y"\nb: \'it\'\'s\'\nc: x # comment\nd: x#y\ne: "q"#c\nf: "a\\nb"\ng: \'\'\nh: ""\n',
  'a: [x, "y", \'z\', 1, true, ~]\nb: []\nc: [ ]\nd: {}\ne: [a,]\nf: [a, [b]]\ng: [a: b]\nh: [a #c]\ni: [a:b]\n',
  'a:\n- x\n- y\nb:\n  - z\nc: 1\n',
  'a:\n  - name: x\n    v: 1\n  -   name: y\n      v: 2\n  -\n    name: z\n  - - nested\n',
  'a:\n  b:\n    c: 1\n  d: 2\ne: 3\n',
  'a: 1\n  b: 2\n',
  'a: x\n  y\n',
  'a:\n  x\n',
  'a: 1\na: 2\n',
  '- a\n- b\n',
  'just a scalar\n',
  '---\na: 1\n',
  '%YAML 1.2\n---\na: 1\n',
  'a: &x 1\nb: *x\n',
  'a: !!str 1\n',
  'a: |\n  text\n',
  'a: >\n  text\n',
  'a:\tb\n',
  'a: b\r\nc: d\r\n',
  'a: b\u00a0\n',
  '"a": 1\n',
  'a : 1\n',
  'a:1\n',
  '__proto__: 1\n',
  'null: 1\ntrue: 2\n',
  '? a\n: 1\n',
  'a: b: c\n',
  'a: b:\n',
  'a: -\n',
  'a: - b\n',
  'a: -1x\n',
  'a: @x\n',
  'a: `x\n',
  'a: %x\n',
  'a: http://h:80/p?q=1#frag\n',
  'a: [http://h:80/p]\n',
  '# only a comment\n',
  '',
  'a: 1\n# c\n  # indented comment\nb: 2\n',
  'a:\n  - x\n   - y\n',
  'a:\n  - x\n b: 1\n',
  'a:\n  b: 1\n c: 2\n',
  `a: ${'k'.repeat(1100)}\n${'k'.repeat(1100)}: 1\n`,
  'a: "unterminated\n',
  "a: 'unterminated\n",
  'a: [1, 2\n',
  'a: "x" y\n',
  'a: [x] y\n',
  'a: {b: 1}\n',
  'a:\n-\n- x\n',
  'a:\n  -\n  - x\n',
  'a:\n  - b:\n    - x\n    c: 1\n',
  'a: x\n...\n',
  'a: 1 #c\nb: [1, 2] # c\nc: [1, 2]#c\n',
  'a: "é ü ∑ 😀"\nb: é\n',
  'k.x-y/z: 1\n_u: 2\n',
];

test('edge texts: the same value as `yaml`, or left to it', async () => {
  for (const text of EDGES) {
    const r = await agrees(text);
    assert.ok(r.ok, `${JSON.stringify(text)}: ${r.why}`);
  }
});

/** A small deterministic generator (mulberry32), so a failure reproduces. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KEYS = ['a', 'b', 'key_hash', 'display_name', 'x.y', 'null', 'true', 'a b', '"q"', '-k', 'k:'];
const VALUES = [
  'x',
  'user-1',
  '1',
  '-1',
  '0x1F',
  '1.0',
  '.5',
  '1e3',
  '~',
  'true',
  'no',
  '"s"',
  "'it''s'",
  '"a\\"b"',
  '[a, "b"]',
  '[]',
  '{}',
  '[a,]',
  'x # c',
  'x#c',
  'a: b',
  '&x y',
  '*x',
  '|',
  '-',
  '- a',
  'http://h:1/p',
  '0o17',
  '+5',
  '.inf',
  'é',
  '{ rpm: 10, tags: [a, "b"] }',
  '[{ window: monthly, limit: 5 }]',
  '{a: 1, a: 2}',
  '{a}',
  '{ "a": 1 }',
  ' x',
  'x ',
  '',
  '# c',
  '[a, [b]]',
  '"unterminated',
];

/** A block mapping or sequence at `col`, a few entries deep, written the ways the subset allows. */
function tree(
  next: () => number,
  pick: <T>(xs: readonly T[]) => T,
  col: number,
  depth: number,
  seq: boolean,
): string[] {
  const pad = ' '.repeat(col);
  const out: string[] = [];
  const n = 1 + Math.floor(next() * 4);
  for (let i = 0; i < n; i++) {
    const r = next();
    if (seq) {
      if (r < 0.5 || depth > 2) out.push(`${pad}- ${pick(VALUES)}`);
      else {
        // `- key: value` then the rest of the mapping at the key's column.
        const dash = pick(['- ', '-   ']);
        const inner = tree(next, pick, col + dash.length, depth + 1, false);
        out.push(pad + dash + inner[0]!.trimStart(), ...inner.slice(1));
      }
      continue;
    }
    const key = next() < 0.9 ? pick(KEYS.slice(0, 5)) + (next() < 0.5 ? String(i) : '') : pick(KEYS);
    if (r < 0.6 || depth > 2) out.push(`${pad}${key}:${pick([' ', ' ', '  '])}${pick(VALUES)}`);
    else {
      out.push(`${pad}${key}:`);
      const nested = next() < 0.5;
      out.push(...tree(next, pick, nested ? col : col + pick([1, 2, 4]), depth + 1, nested || next() < 0.4));
    }
  }
  return out;
}

/** A generated text, mostly in the subset; one in four has a line shifted or replaced. */
function generated(next: () => number): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
  const lines = tree(next, pick, 0, 0, false);
  if (next() < 0.25) {
    const i = Math.floor(next() * lines.length);
    lines[i] = next() < 0.5 ? ' '.repeat(pick([1, 2, 3])) + lines[i] : lines[i]!.replace(/\S.*$/, pick(VALUES));
  }
  if (next() < 0.1) lines.splice(Math.floor(next() * lines.length), 0, pick(['# c', '  # c', '', '   ']));
  return lines.join('\n') + (next() < 0.9 ? '\n' : '');
}

test('generated texts: the same value as `yaml`, or left to it', async () => {
  const next = random(51);
  let accepted = 0;
  const N = 20_000;
  for (let i = 0; i < N; i++) {
    const text = generated(next);
    const r = await agrees(text);
    assert.ok(r.ok, `${JSON.stringify(text)}: ${r.why}`);
    if (r.accepted) accepted++;
  }
  // The generator exercises the fast path, not only its refusals.
  assert.ok(accepted > N / 10, `${accepted} of ${N} taken by the fast path`);
});

/** `text` as pieces that each end just after a line break (the last one may not): how a large file arrives. */
function piecesOf(text: string, next: () => number): string[] {
  const pieces: string[] = [];
  let from = 0;
  for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) {
    if (next() < 0.5) continue;
    pieces.push(text.slice(from, at + 1));
    from = at + 1;
  }
  if (from < text.length) pieces.push(text.slice(from));
  return pieces;
}

test('a text in pieces split after line breaks: the same verdict and value as the whole text', async () => {
  const next = random(7);
  const texts = [...EDGES, ...Array.from({ length: 5_000 }, () => generated(next))];
  for (const text of texts) {
    const whole = await parsePlainYaml(text);
    const pieces = piecesOf(text, next);
    const split = await parsePlainYaml(pieces);
    assert.ok(
      whole === undefined ? split === undefined : same(whole, split),
      `${JSON.stringify(pieces)}: ${JSON.stringify(split)} ≠ ${JSON.stringify(whole)}`,
    );
  }
});

test('a large file: the same value, with `between` awaited as it goes', async () => {
  const lines = ['_format_version: "1"', 'api_keys:'];
  for (let i = 0; i < 8_000; i++) {
    lines.push(
      `  - display_name: user-${i}`,
      `    key_hash: ${i.toString(16).padStart(64, '0')}`,
      '    allowed_models: [m]',
    );
  }
  const text = lines.join('\n') + '\n';
  let turns = 0;
  const fast = await parsePlainYaml(text, () => {
    turns++;
    return Promise.resolve();
  });
  const slow = viaYaml(text);
  assert.ok(!slow.refused && same(fast, slow.value));
  assert.ok(turns >= 10, `between awaited ${turns} times`);
});
