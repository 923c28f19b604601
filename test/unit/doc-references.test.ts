// The references between the code and docs/ stay true (README "Layout", docs/performance.md): every section a
// file names as a doc path followed by a quoted section title exists in that doc (a heading that starts with the
// title, ignoring case, or a bullet or table row labelled with it), every src/, runtimes/ and test/ path the docs
// name exists, every doc is listed in the README's "Documentation", and no code cites the dated runs of docs/lab/.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { test } from 'node:test';

const ROOT = resolve(import.meta.dirname, '..', '..');
const LAB = 'docs/lab/';

function files(dir: string, keep: (path: string) => boolean): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((f) => {
    const path = `${dir}/${f}`;
    if (f === 'node_modules' || `${path}/` === LAB) return [];
    return statSync(join(ROOT, path)).isDirectory() ? files(path, keep) : keep(path) ? [path] : [];
  });
}

const CODE = ['src', 'runtimes', 'test', 'bench'].flatMap((d) => files(d, (p) => /\.(ts|mjs|yaml)$/.test(p)));
const DOCS = ['README.md', 'bench/README.md', ...files('docs', (p) => p.endsWith('.md'))];

/** A file's text with line breaks and the comment markers that continue a line (`//`, ` * `, `#`) made spaces. */
function flowing(path: string): string {
  return readFileSync(join(ROOT, path), 'utf8').replace(/\n\s*(?:\/\/+|\*(?!\*)|#(?!#))?[ \t]*/g, ' ');
}

interface Citation {
  from: string;
  doc: string;
  section: string;
}

/** A doc's path (backquoted or not), a quoted section title, then any further titles of a comma list. */
const CITATION =
  /\b(docs\/[\w/-]+\.md|(?:bench\/)?README(?:\.md)?)`?\s+"([^"]{1,160})"((?:,\s*(?:and\s+)?"[^"]{1,160}")*)/g;

/** Each section `path` cites. */
function citations(path: string): Citation[] {
  const out: Citation[] = [];
  for (const m of flowing(path).matchAll(CITATION)) {
    const doc = m[1]!.endsWith('.md') ? m[1]! : `${m[1]!}.md`;
    for (const section of [m[2]!, ...[...m[3]!.matchAll(/"([^"]+)"/g)].map((s) => s[1]!)]) {
      out.push({ from: path, doc, section });
    }
  }
  return out;
}

/** What a doc offers to be cited by: its headings, and the labels of its bullets and table rows. */
function labels(doc: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of readFileSync(join(ROOT, doc), 'utf8').split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const heading = /^#{1,6}\s+(.*)$/.exec(line);
    const bullet = /^\s*(?:[-*]|\d+\.)\s+(.*)$/.exec(line);
    const row = /^\|([^|]+)\|/.exec(line);
    if (heading) out.push(heading[1]!);
    else if (bullet) out.push(bullet[1]!.replace(/^\*\*([^*]+)\*\*.*$/, '$1'));
    else if (row) out.push(row[1]!.trim());
  }
  return out.map(plain);
}

/** A title as compared: lower case, without bold or code marks. */
function plain(title: string): string {
  return title.replace(/\*\*|`/g, '').toLowerCase();
}

function offers(labelsOfDoc: string[], section: string): boolean {
  const want = plain(section).replace(/[.:]$/, '');
  return labelsOfDoc.some((l) => l === want || (l.startsWith(want) && /^[^\p{L}\p{N}]/u.test(l.slice(want.length))));
}

test('every doc section the code and the docs cite exists', () => {
  const cited = [...CODE, ...DOCS].flatMap(citations);
  assert.ok(cited.length > 200, `only ${cited.length} citations found: the pattern no longer matches the code`);
  const byDoc = new Map<string, string[]>();
  const missing: string[] = [];
  for (const c of cited) {
    if (!existsSync(join(ROOT, c.doc))) {
      missing.push(`${c.from}: ${c.doc} does not exist`);
      continue;
    }
    const l = byDoc.get(c.doc) ?? labels(c.doc);
    byDoc.set(c.doc, l);
    if (!offers(l, c.section)) missing.push(`${c.from}: ${c.doc} has no section "${c.section}"`);
  }
  assert.deepEqual(missing, [], 'a cited section is gone: cite the section that says it now, or restore the heading');
});

test('every src/, runtimes/ and test/ path the docs name exists', () => {
  const missing: string[] = [];
  for (const doc of DOCS) {
    const text = readFileSync(join(ROOT, doc), 'utf8');
    for (const m of text.matchAll(/(?<![\w./-])(?:src|runtimes|test)\/[\w./*-]*[\w/*]/g)) {
      const path = m[0];
      if (!exists(path)) missing.push(`${doc}: ${path}`);
    }
  }
  assert.deepEqual(missing, [], 'a doc names a file that is not there: name where the thing lives now');
});

/** A path, or a glob with `*` in its last segment, that matches at least one file. */
function exists(path: string): boolean {
  if (!path.includes('*')) return existsSync(join(ROOT, path));
  const slash = path.lastIndexOf('/');
  const [dir, pattern] = [path.slice(0, slash), path.slice(slash + 1)];
  const re = new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`);
  return existsSync(join(ROOT, dir)) && readdirSync(join(ROOT, dir)).some((f) => re.test(f));
}

test("every doc is listed in the README's Documentation", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('## Documentation');
  const listed = readme.slice(start, readme.indexOf('\n## ', start + 1));
  const docs = files('docs', (p) => p.endsWith('.md'));
  assert.deepEqual(docs.filter((d) => !listed.includes(`\`${d}\``)), []);
});

test('no code cites the dated runs under docs/lab/', () => {
  const self = relative(ROOT, import.meta.filename);
  const citing = [...CODE, 'README.md'].filter((p) => p !== self && readFileSync(join(ROOT, p), 'utf8').includes(LAB));
  assert.deepEqual(citing, []);
});
