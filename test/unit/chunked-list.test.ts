// src/util/chunked-list.ts: places across chunk boundaries, items put by place, and the order they are listed in.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CHUNK, ChunkedList } from '../../src/util/chunked-list.ts';

test('a chunked list: push returns consecutive places across chunks; at, set and values agree with an array', () => {
  const l = new ChunkedList<number | undefined>();
  const ref: (number | undefined)[] = [];
  for (let i = 0; i < CHUNK * 2 + 5; i++) assert.equal(l.push(i * 3), ref.push(i * 3) - 1);
  for (const i of [0, CHUNK - 1, CHUNK, CHUNK * 2 + 4]) l.set(i, undefined), ref[i] = undefined;
  for (const i of [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, CHUNK * 2 + 4]) assert.equal(l.at(i), ref[i]);
  assert.equal(l.at(CHUNK * 5), undefined);
  assert.deepEqual([...l.values()], ref);
  const sparse = new ChunkedList<string>();
  sparse.set(CHUNK * 3 + 2, 'far');
  assert.equal(sparse.at(CHUNK * 3 + 2), 'far');
  assert.equal(sparse.at(2), undefined);
  assert.deepEqual([...sparse.values()], [undefined, undefined, 'far']);
});
