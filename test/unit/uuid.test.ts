// Request ids minted by src/util/uuid.ts: random (version 4) UUIDs in `crypto.randomUUID()`'s form, fresh on
// every call across the batches of random bytes they are cut from.
// Run: node --import tsx --test test/unit/uuid.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { requestIdFrom } from '../../src/proxy/request-id.ts';
import { randomUuid } from '../../src/util/uuid.ts';

const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test('every id is a lowercase version 4 UUID, and none repeats over several batches of random bytes', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 2000; i++) {
    const id = randomUuid();
    assert.match(id, V4);
    seen.add(id);
  }
  assert.equal(seen.size, 2000);
});

test('every hex digit turns up in every free position: the bytes are spread over the whole id', () => {
  const digits = Array.from({ length: 36 }, () => new Set<string>());
  for (let i = 0; i < 2000; i++) [...randomUuid()].forEach((ch, at) => digits[at]!.add(ch));
  digits.forEach((d, at) => {
    const expected = [8, 13, 18, 23].includes(at) ? 1 : at === 14 ? 1 : at === 19 ? 4 : 16;
    assert.equal(d.size, expected, `position ${at}: ${[...d].sort().join('')}`);
  });
});

test('a request without an accepted id header gets a minted UUID, one with it keeps its own', () => {
  assert.match(requestIdFrom(new Headers(), ['x-request-id']), V4);
  assert.equal(requestIdFrom(new Headers({ 'x-request-id': 'abc-1' }), ['x-request-id']), 'abc-1');
});
