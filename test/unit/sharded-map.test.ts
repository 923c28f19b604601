// The sharded Map (src/util/sharded-map.ts) and the api key index's write order kept in chunks beside it
// (src/resources/api-key-index.ts): what a million-key reload builds without a Map that grows by copying a
// million entries in one call (docs/performance.md "Configuration at scale").
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import { ApiKeyIndex } from '../../src/resources/api-key-index.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import type { ApiKey } from '../../src/resources/schema.ts';
import { HashKeyedMap, hashOf, keyedMap, ShardedMap } from '../../src/util/sharded-map.ts';

const key = (id: string, hash = `h-${id}`): ApiKey => ({ id, key_hash: hash, allowed_models: [], disabled: false });

describe('sharded map', () => {
  test('holds, replaces, deletes and lists what a Map would', () => {
    const m = new ShardedMap<number>();
    const ref = new Map<string, number>();
    const names = ['', 'a', 'ab', 'user-1', 'user-10', '0f'.repeat(32), 'ümlaut', '😀'];
    for (let i = 0; i < 5000; i++) names.push(`k${i}`, createHash('sha256').update(String(i)).digest('hex'));
    names.forEach((n, i) => {
      m.set(n, i);
      ref.set(n, i);
    });
    m.set('a', -1);
    ref.set('a', -1);
    for (const n of names.slice(0, 3000)) {
      assert.equal(m.delete(n), ref.delete(n));
      assert.equal(m.delete(n), false, 'deleted once');
    }
    assert.equal(m.size, ref.size);
    for (const n of names) {
      assert.equal(m.get(n), ref.get(n));
      assert.equal(m.has(n), ref.has(n));
    }
    const sorted = <T>(xs: Iterable<T>) => [...xs].sort();
    assert.deepEqual(sorted(m.keys()), sorted(ref.keys()));
    assert.deepEqual(sorted(m.values()), sorted(ref.values()));
    assert.deepEqual(sorted([...m].map(([k, v]) => `${k}=${v}`)), sorted([...ref].map(([k, v]) => `${k}=${v}`)));
  });
  test('spreads numbered names, hashes and UUIDs evenly over its shards', () => {
    const kinds: [string, (i: number) => string][] = [
      ['names', (i) => `user-b${i}`],
      ['hashes', (i) => createHash('sha256').update(String(i)).digest('hex')],
      [
        'uuids',
        (i) =>
          createHash('sha1').update(String(i)).digest('hex').replace(
            /^(.{8})(.{4})(.{4})(.{4})(.{12}).*$/,
            '$1-$2-$3-$4-$5',
          ),
      ],
    ];
    for (const [what, gen] of kinds) {
      const m = new ShardedMap<number>();
      for (let i = 0; i < 64_000; i++) m.set(gen(i), i);
      // Private: the shards are what this test is about.
      const shards = (m as unknown as { shards: (Map<string, number> | undefined)[] }).shards;
      const sizes = Array.from({ length: shards.length }, (_, i) => shards[i]?.size ?? 0);
      const even = 64_000 / shards.length;
      assert.ok(Math.min(...sizes) > even * 0.8 && Math.max(...sizes) < even * 1.2, `${what}: ${sizes.join(' ')}`);
    }
  });

  test('a hash-keyed map: keys whose numbers collide are held apart, through deletions and re-adds', () => {
    // Among 300,000 hashes a few share their number with another key (the second set goes to the `spill`).
    type Row = { key: string; n: number };
    const m = new HashKeyedMap<Row>((r) => r.key);
    const ref = new Map<string, Row>();
    const put = (key: string, n: number) => (m.set(key, { key, n }), ref.set(key, { key, n }));
    const names = Array.from({ length: 300_000 }, (_, i) => createHash('sha256').update(`c${i}`).digest('hex'));
    names.forEach((n, i) => put(n, i));
    const spilled = [...(m as unknown as { spill: Map<string, Row> }).spill.keys()];
    assert.ok(spilled.length > 0, 'no two of 300,000 keys shared a number: the test needs more keys');
    const holders = spilled.map((s) => names.find((n) => n !== s && hashOf(n) === hashOf(s)));
    assert.ok(holders.every((h) => h !== undefined));
    // The holder gone, its number is free; the spilled key is still found once, set where it is, and counted once.
    for (const [i, h] of holders.entries()) {
      assert.equal(m.delete(h!), ref.delete(h!));
      put(spilled[i]!, -i);
      assert.equal(m.get(spilled[i]!)?.n, -i);
      assert.equal(m.size, ref.size);
      put(h!, i);
    }
    for (const s of spilled) assert.equal(m.delete(s), ref.delete(s)), assert.equal(m.delete(s), false);
    for (const n of names.slice(0, 1000)) assert.equal(m.delete(n), ref.delete(n));
    for (const s of spilled) put(s, 9);
    assert.equal(m.size, ref.size);
    for (const n of names) assert.deepEqual(m.get(n), ref.get(n)), assert.equal(m.has(n), ref.has(n));
    assert.deepEqual([...m.keys()].sort(), [...ref.keys()].sort());
    assert.deepEqual([...m].map(([k, r]) => `${k}=${r.n}`).sort(), [...ref].map(([k, r]) => `${k}=${r.n}`).sort());
    // What it is for: no string keys a shard's Map (V8 puts such strings in its string table), and every number is
    // small enough to be held unboxed (a 31-bit small integer).
    const shards = (m as unknown as { shards: ({ values: Map<unknown, Row> } | undefined)[] }).shards;
    for (const shard of shards) {
      for (const k of shard!.values.keys()) assert.ok(typeof k === 'number' && k >= 0 && k < 2 ** 30, String(k));
    }
  });

  test('a hash-keyed map, keyed by number or by the string (keyMapsByString), holds what a Map would', () => {
    for (const byNumber of [true, false]) {
      type Row = { key: string; n: number };
      const m = keyedMap<Row>((r) => r.key, byNumber);
      const ref = new Map<string, Row>();
      const keys = Array.from(
        { length: 20_000 },
        (_, i) => (i % 2 ? `user-${i}` : createHash('md5').update(`${i}`).digest('hex')),
      );
      keys.forEach((key, n) => (m.set(key, { key, n }), ref.set(key, { key, n })));
      for (const key of keys.slice(0, 5000)) assert.equal(m.delete(key), ref.delete(key));
      for (const key of keys.slice(0, 2500)) m.set(key, { key, n: -1 }), ref.set(key, { key, n: -1 });
      assert.equal(m.size, ref.size);
      for (const key of keys) assert.deepEqual(m.get(key, hashOf(key)), ref.get(key));
      assert.deepEqual([...m.keys()].sort(), [...ref.keys()].sort());
      assert.equal(m instanceof HashKeyedMap, byNumber, 'keyed by number unless told otherwise');
    }
  });

  test('a hash-keyed map hashes names that differ at either end apart; a long middle is not hashed', () => {
    const m = new HashKeyedMap<string>((k) => k);
    const keys: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      keys.push(`${i}@a-rather-long-company-domain.example.com`, `user-${i}`, `${'x'.repeat(40)}${i}${'y'.repeat(40)}`);
    }
    for (const k of keys) m.set(k, k);
    const spill = (m as unknown as { spill: Map<string, string> }).spill.size;
    assert.equal(m.size, keys.length);
    // A long middle is not hashed: those 20,000 share one number, the rest spread.
    assert.ok(spill < 20_000 + 100, `${spill} keys spilled`);
    for (const k of keys) assert.equal(m.get(k), k);
  });
});

describe('api key index write order', () => {
  test('survives removals and rewrites past the compaction of its order', () => {
    const ix = new ApiKeyIndex();
    const n = 30_000;
    for (let i = 0; i < n; i++) ix.put(key(`k${i}`));
    // Every even key removed and every third rewritten: more holes than keys, so the order is compacted.
    const want: string[] = [];
    for (let i = 0; i < n; i++) if (i % 2 === 0) ix.remove(`k${i}`);
    for (let i = 0; i < n; i++) if (i % 2 === 1 && i % 3 !== 0) want.push(`k${i}`);
    for (let i = 0; i < n; i++) {
      if (i % 2 === 1 && i % 3 === 0) {
        ix.put(key(`k${i}`, `new-${i}`));
        want.push(`k${i}`);
      }
    }
    for (let i = 0; i < n; i += 2) ix.put(key(`k${i}`)), ix.remove(`k${i}`);
    assert.equal(ix.size, want.length);
    assert.deepEqual([...ix.values()].map((k) => k.id), want);
    assert.deepEqual(ix.list().map((k) => k.id), want);
    assert.equal(ix.get('k3')?.key_hash, 'new-3');
    assert.equal(ix.byHash('new-3')?.id, 'k3');
    assert.equal(ix.byHash('h-k3'), undefined, 'the rewritten key no longer carries its old hash');
    assert.equal(ix.get('k2'), undefined);
    assert.equal(ix.byHash('h-k1')?.id, 'k1');
  });
});

test('a load of 100,000 api keys grows no Map past a sixth of them', async () => {
  const lines = [
    '_format_version: "1"',
    'provider_keys:',
    '  - { display_name: pk, provider: openai, api_key: sk-x, api_base: "http://127.0.0.1:9" }',
    'models:',
    '  - { display_name: m, provider_key: pk, model_name: up }',
    'api_keys:',
  ];
  const n = 100_000;
  for (let i = 0; i < n; i++) {
    const hash = createHash('sha256').update(`k${i}`).digest('hex');
    lines.push(`  - display_name: user-${i}`, `    key_hash: ${hash}`, '    allowed_models: [m]');
  }
  const text = lines.join('\n') + '\n';
  // Every Map the pipeline and the snapshot create while this load runs, by its largest size.
  const Native = globalThis.Map;
  let largest = 0;
  globalThis.Map = class extends Native<unknown, unknown> {
    override set(k: unknown, v: unknown): this {
      super.set(k, v);
      if (this.size > largest) largest = this.size;
      return this;
    }
  } as MapConstructor;
  try {
    const r = await loadResourcesFile('resources.yaml', text, {});
    assert.equal(r.ok, true);
    assert.equal(r.ok && r.snapshot.apiKeys.size, n);
  } finally {
    globalThis.Map = Native;
  }
  assert.ok(largest <= 16_000, `the largest Map held ${largest} entries`);
});
