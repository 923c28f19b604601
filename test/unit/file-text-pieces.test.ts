// The file source's decoder (src/sources/file.ts `TextPieces`): a file's bytes, as the reader hands them,
// decoded to the text one decode of the whole gives, in pieces that end after a line break, without Node's
// external strings (docs/performance.md "Configuration at scale").
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TextPieces } from '../../src/sources/file.ts';

/** `bytes` handed to a `TextPieces` in pieces of `size` bytes (copied, as the reader reuses its buffer). */
function decodeIn(bytes: Uint8Array, size: number, whole = false): string | string[] {
  const t = new TextPieces();
  const buf = new Uint8Array(size);
  for (let at = 0; at < bytes.length; at += size) {
    const n = Math.min(size, bytes.length - at);
    buf.set(bytes.subarray(at, at + n));
    t.add(buf.subarray(0, n));
  }
  return t.end(whole);
}

const FEFF = '\ufeff';

test('pieces of any size: the text one fatal decode gives, a leading byte order mark dropped, a later one kept', () => {
  const lines = [`${FEFF}a: é€😀`, 'b: x', `${FEFF}c: 😀😀`, '', 'no line break at the end: €'];
  const text = lines.join('\n');
  const bytes = new TextEncoder().encode(text);
  const want = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  assert.equal(want[0], 'a', 'the decoder drops the leading mark');
  for (const size of [1, 2, 3, 5, 7, 11, bytes.length, bytes.length + 1]) {
    const pieces = decodeIn(bytes, size) as string[];
    assert.equal(pieces.join(''), want, `pieces of ${size} bytes`);
    assert.ok(pieces.slice(0, -1).every((p) => p.endsWith('\n')), `each piece but the last ends a line (${size})`);
    assert.equal(decodeIn(bytes, size, true), want);
  }
});

test('a malformed or unfinished sequence throws, at the line it is in or at the end', () => {
  const bytes = new TextEncoder().encode('a: 1\nb: é\nc: 3\n');
  const bad = bytes.slice();
  bad[9] = 0xff; // the second byte of é
  for (const size of [1, 4, 64]) assert.throws(() => decodeIn(bad, size), TypeError);
  const cut = new TextEncoder().encode('a: 1\nb: €').slice(0, -1);
  for (const size of [1, 4, 64]) assert.throws(() => decodeIn(cut, size), TypeError);
  assert.equal(decodeIn(new Uint8Array(0), 4, true), '');
  assert.deepEqual(decodeIn(new Uint8Array(0), 4), []);
});

test('megabyte pieces leave no external memory behind (Node hands back a streamed megabyte as an external string)', () => {
  const line = `  - { display_name: user-123456, key_hash: ${'a'.repeat(64)} }\n`;
  const bytes = new TextEncoder().encode(line.repeat(Math.ceil((16 << 20) / line.length)));
  const before = process.memoryUsage().external;
  const t = new TextPieces();
  for (let at = 0; at < bytes.length; at += 1 << 20) t.add(bytes.subarray(at, at + (1 << 20)));
  const pieces = t.end(false) as string[];
  const grown = process.memoryUsage().external - before;
  assert.equal(pieces.join('').length, bytes.length);
  assert.ok(grown < 4 << 20, `external memory grew ${(grown / 2 ** 20).toFixed(1)} MiB for 16 MiB of text`);
});
