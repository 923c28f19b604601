// Each feature's per-call state (src/proxy/call-state.ts, docs/architecture.md "A request"): typed slots on the
// call, let go on an unhandled throw; and no module-level side table keyed by a call left in src/proxy.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { CallState, slotKey } from '../../src/proxy/call-state.ts';

const PROXY = resolve(import.meta.dirname, '..', '..', 'src', 'proxy');

describe('CallState', () => {
  test('a slot holds its value under its own key only', () => {
    const a = slotKey<number>('a');
    const b = slotKey<number>('a'); // the same name is another key
    const s = new CallState();
    assert.equal(s.get(a), undefined);
    s.set(a, 1);
    assert.equal(s.get(a), 1);
    assert.equal(s.get(b), undefined);
  });

  test('take empties the slot: its onThrow no longer applies', () => {
    const k = slotKey<string>('k');
    const thrown: string[] = [];
    const s = new CallState();
    s.set(k, 'miss', (v) => thrown.push(v));
    assert.equal(s.take(k), 'miss');
    assert.equal(s.get(k), undefined);
    assert.equal(s.take(k), undefined);
    s.thrown();
    assert.deepEqual(thrown, []);
  });

  test('thrown calls the onThrow of each slot still held, once', () => {
    const held = slotKey<string>('held');
    const plain = slotKey<string>('plain');
    const thrown: string[] = [];
    const s = new CallState();
    s.set(held, 'miss', (v) => thrown.push(v));
    s.set(plain, 'chain');
    s.thrown();
    s.thrown();
    assert.deepEqual(thrown, ['miss']);
    assert.equal(s.get(plain), undefined);
  });
});

test('no module-level WeakMap or WeakSet in src/proxy: per-call state is a slot on the call', () => {
  const found: string[] = [];
  for (const f of readdirSync(PROXY).filter((f) => f.endsWith('.ts'))) {
    const lines = readFileSync(join(PROXY, f), 'utf8').split('\n');
    lines.forEach((line, i) => {
      // At column 0: a declaration in a function or a class field is indented (per-snapshot caches are).
      if (/^(?:export\s+)?(?:const|let|var)\b.*\bnew\s+Weak(?:Map|Set)\b/.test(line)) found.push(`${f}:${i + 1}`);
    });
  }
  assert.deepEqual(found, [], 'use a slot on the call (call-state.ts) instead');
});
