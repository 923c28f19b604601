// The keys the stream edits look for in an event (src/providers/event-keys.ts), against a plain search of the bytes
// at every offset, whatever else they hold: other characters, malformed UTF-8, a key inside a string, cut short or
// sharing its closing quote with the next one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { eventKeys, HAS_QUIRK, HAS_USAGE_OBJECT } from '../../src/providers/event-keys.ts';

const enc = new TextEncoder();

/** The keys as a search of the bytes finds them: each `"` followed by a key's bytes (and, for usage, `: {`). */
function byteKeys(b: Uint8Array): number {
  const has = (at: number, key: string) => enc.encode(key).every((c, i) => b[at + i] === c);
  const space = (i: number) => {
    while (b[i] === 0x20 || b[i] === 0x09 || b[i] === 0x0a || b[i] === 0x0d) i++;
    return i;
  };
  let keys = 0;
  for (let i = 0; i < b.length; i++) {
    if (has(i, '"usage"')) {
      const colon = space(i + 7);
      if (b[colon] === 0x3a && b[space(colon + 1)] === 0x7b) keys |= HAS_USAGE_OBJECT;
    }
    if (has(i, '"reasoning"') || has(i, '"prompt_cache_hit_tokens"')) keys |= HAS_QUIRK;
  }
  return keys;
}

test('the same keys as a search of the bytes, for events of every kind', () => {
  const pieces = [
    '"usage"',
    '"usage":{',
    '"usage" :\n\t{',
    '"usage":null',
    '"usage"\r\n: {',
    '"usag"',
    '"reasoning"',
    '"reasoning',
    '"prompt_cache_hit_tokens"',
    '"prompt_cache"',
    'é',
    '😀',
    '\\"usage\\":{',
    ' ',
    ':',
    '{',
    '"',
    'data: ',
    '\n\n',
  ];
  const odd = [new Uint8Array([0xff]), new Uint8Array([0xe2, 0x82]), new Uint8Array([0xc3])];
  let seed = 7;
  const next = (n: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  const seen = new Set<number>();
  for (let round = 0; round < 20000; round++) {
    const parts: Uint8Array[] = [];
    for (let k = 1 + next(12); k > 0; k--) {
      parts.push(next(10) === 0 ? odd[next(odd.length)]! : enc.encode(pieces[next(pieces.length)]!));
    }
    const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    parts.reduce((at, p) => (bytes.set(p, at), at + p.length), 0);
    const want = byteKeys(bytes);
    seen.add(want);
    assert.equal(eventKeys(bytes), want, new TextDecoder().decode(bytes));
  }
  assert.deepEqual([...seen].sort(), [0, 1, 2, 3]);
});
