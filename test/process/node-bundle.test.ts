// The Node bundle (build.mjs) is ASCII: one character outside Latin-1 anywhere in it makes V8 hold the whole
// source, for the life of the process, at two bytes per character (docs/performance.md "The Node bundle's source,
// one byte per character"). What the escapes keep meaning is checked where it shows: the status page's title in
// test/process/status-page.test.ts, run from this bundle.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'node:test';

const BUNDLE = resolve(import.meta.dirname, '..', '..', 'dist', 'node.mjs');

test('dist/node.mjs holds only ASCII bytes', () => {
  if (!existsSync(BUNDLE)) throw new Error('dist/node.mjs is missing: run `npm run build` (the test command does)');
  const bytes = readFileSync(BUNDLE);
  const at = bytes.findIndex((b) => b > 0x7f);
  const line = at < 0 ? 0 : bytes.subarray(0, at).toString('latin1').split('\n').length;
  assert.equal(at, -1, `dist/node.mjs has a non-ASCII byte on line ${line}`);
  // Built by build.mjs, not by hand: the status page's title is in it, escaped.
  assert.ok(bytes.toString('latin1').includes('<title>Sluice \\u00b7 '), 'the status page title is not escaped');
});
