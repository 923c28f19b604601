// Utf8Stream gives a streaming TextDecoder's text for any split of the bytes; per-stream decoding keeps
// concurrent traced streams apart (CompletionCollector).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CompletionCollector } from '../../src/telemetry/content.ts';
import { Utf8Stream } from '../../src/util/utf8-stream.ts';

const enc = new TextEncoder();
const bytes = (...parts: (string | number[])[]) => {
  const arrays = parts.map((p) => (typeof p === 'string' ? enc.encode(p) : Uint8Array.from(p)));
  const out = new Uint8Array(arrays.reduce((n, a) => n + a.length, 0));
  let at = 0;
  for (const a of arrays) {
    out.set(a, at);
    at += a.length;
  }
  return out;
};

/** The reference: one streaming TextDecoder over the same split, then its flush. */
function reference(chunks: Uint8Array[]): string {
  const d = new TextDecoder();
  return chunks.map((c) => d.decode(c, { stream: true })).join('') + d.decode();
}

function decoded(chunks: Uint8Array[]): string {
  const d = new Utf8Stream();
  return chunks.map((c) => d.decode(c)).join('') + d.end();
}

/** `b` cut at `cuts` (sorted offsets). */
function split(b: Uint8Array, cuts: number[]): Uint8Array[] {
  const out: Uint8Array[] = [];
  let from = 0;
  for (const c of [...cuts, b.length]) {
    out.push(b.subarray(from, c));
    from = c;
  }
  return out;
}

const BOM = [0xef, 0xbb, 0xbf];
const SAMPLES: [string, Uint8Array][] = [
  ['ascii events', bytes('data: {"a":1}\n\n', 'data: [DONE]\n\n')],
  ['2-, 3- and 4-byte characters', bytes('data: {"t":"é 你好 😀 ü"}\n\n', 'data: {"t":"ß→€"}\n\n')],
  ['a byte order mark first', bytes(BOM, 'data: {"t":"é"}\n\n')],
  ['a byte order mark later', bytes('data: x\n\n', BOM, 'data: y\n\n')],
  ['invalid bytes', bytes('a', [0xff], 'b', [0x80], 'c', [0xe4, 0xbd], 'd\n', [0xf0, 0x9f, 0x98], '\n')],
  ['cut inside the last character', bytes('data: 你', [0xe5, 0xa5])],
  ['only a byte order mark', bytes(BOM)],
];

test('every split of every sample decodes as a streaming TextDecoder does', () => {
  for (const [name, b] of SAMPLES) {
    // Every single cut, every pair of cuts: each boundary lands inside and between characters.
    for (let i = 0; i <= b.length; i++) {
      assert.equal(decoded(split(b, [i])), reference(split(b, [i])), `${name}, cut at ${i}`);
      for (let j = i; j <= b.length; j++) {
        assert.equal(decoded(split(b, [i, j])), reference(split(b, [i, j])), `${name}, cuts at ${i} and ${j}`);
      }
    }
    // One byte at a time.
    const bytewise = Array.from({ length: b.length - 1 }, (_, i) => i + 1);
    assert.equal(decoded(split(b, bytewise)), reference(split(b, bytewise)), `${name}, byte by byte`);
  }
});

test('a leading byte order mark is dropped once, a later one kept', () => {
  assert.equal(decoded([bytes(BOM, 'a'), bytes(BOM, 'b')]), 'a\ufeffb');
  assert.equal(decoded([bytes('a'), bytes(BOM, 'b')]), 'a\ufeffb');
  assert.equal(decoded([new Uint8Array(0), bytes(BOM, 'a')]), 'a');
});

test('a stream cut inside a character ends with U+FFFD, once', () => {
  const d = new Utf8Stream();
  assert.equal(d.decode(bytes('x', [0xe4, 0xbd])), 'x');
  assert.equal(d.end(), '\ufffd');
  assert.equal(d.end(), '');
});

test('two traced streams split inside characters each collect their own text', () => {
  const event = (text: string) => bytes(`data: ${JSON.stringify({ choices: [{ delta: { content: text } }] })}\n\n`);
  const a = new CompletionCollector(1024);
  const b = new CompletionCollector(1024);
  const ea = event('你好');
  const eb = event('é ü');
  // Each stream's event cut inside its first non-ASCII character, the two streams' chunks interleaved.
  const cutA = ea.indexOf(0xe4) + 1;
  const cutB = eb.indexOf(0xc3) + 1;
  a.push(ea.subarray(0, cutA));
  b.push(eb.subarray(0, cutB));
  a.push(ea.subarray(cutA));
  b.push(eb.subarray(cutB));
  assert.equal(a.completion, '你好');
  assert.equal(b.completion, 'é ü');
});
