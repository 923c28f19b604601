// The etcd source's hashes kept by bucket (docs/etcd.md "Hashes and status", src/sources/etcd/row-hash.ts) and its
// keys in etcd order (src/sources/etcd/sorted-keys.ts): a set of rows has one hash whatever the history that made
// it, and one key's change re-digests its bucket, not every row.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import type { CacheDocument } from '../../src/sources/cache.ts';
import { EtcdRows } from '../../src/sources/etcd/apply.ts';
import { RestoredRows } from '../../src/sources/etcd/cache-rows.ts';
import type { EtcdKv } from '../../src/sources/etcd/client.ts';
import { etcdKv } from '../support/etcd-kv.ts';
import { BucketHashes, bucketOf, BUCKETS, hashRowSet } from '../../src/sources/etcd/row-hash.ts';
import { compareKeys, type RowValue, rowValue } from '../../src/sources/etcd/rows.ts';
import { SortedKeys } from '../../src/sources/etcd/sorted-keys.ts';
import { recordingSink } from '../support/recording-sink.ts';
import { until } from '../support/until.ts';

const P = '/aisix';

const sink = recordingSink;

const kv = etcdKv;

const apiKey = (i: number | string, rev: number, hash = `h${i}`) =>
  kv(`${P}/api_keys/k${i}`, { key_hash: hash, allowed_models: [] }, rev);

/** A deterministic shuffle (a seeded LCG), so a failure replays. */
function shuffled<T>(xs: readonly T[], seed: number): T[] {
  const out = [...xs];
  let s = seed >>> 0;
  for (let i = out.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** The hashes a fresh source shows for exactly `kvs`, read as one range. */
async function freshHashes(kvs: EtcdKv[], revision: number): Promise<{ config: string; source: string | undefined }> {
  const s = sink();
  await new EtcdRows(s, P, () => {}).applyRange({ revision, kvs });
  return { config: s.metas.at(-1)!.configHash, source: s.facts.sourceHash };
}

const sha256 = (data: string | Uint8Array) => createHash('sha256').update(data).digest();

describe('etcd hashes by bucket', () => {
  test('a bucket is the top 12 bits of FNV-1a over the key as UTF-8, lone surrogates as U+FFFD', () => {
    const fnv = (bytes: Uint8Array) => {
      let h = 0x811c9dc5;
      for (const b of bytes) h = Math.imul(h ^ b, 0x01000193);
      return (h >>> 0) >>> 20;
    };
    for (
      const key of [
        `${P}/api_keys/k1`,
        `${P}/models/\u00e9t\u00e9`,
        `${P}/models/\uFF21`,
        `${P}/m/\u{1F600}`,
        'x\uD800y',
      ]
    ) {
      assert.equal(bucketOf(key), fnv(new TextEncoder().encode(key)), key);
    }
    const counts = new Array<number>(BUCKETS).fill(0);
    for (let i = 0; i < 100_000; i++) counts[bucketOf(`${P}/api_keys/k${i}`)]!++;
    assert.ok(Math.max(...counts) < 3 * (100_000 / BUCKETS), `keys spread over the buckets (${Math.max(...counts)})`);
  });

  test('the hash is SHA-256 over the non-empty buckets’ digests, each over its rows in code point order', async () => {
    assert.equal(await hashRowSet([], () => undefined), sha256('').toString('hex'), 'no rows: the digest of nothing');
    // Two keys in one bucket whose order by code point differs from their order by UTF-16 unit.
    const a = `${P}/models/\uFF21`;
    let b = '';
    for (let i = 0; !b; i++) {
      const k = `${P}/models/\u{1F600}${i}`;
      if (bucketOf(k) === bucketOf(a)) b = k;
    }
    assert.ok(compareKeys(a, b) < 0 && b < a, 'code point order is not UTF-16 order here');
    const rows = new Map<string, RowValue>([
      [b, rowValue(P, b, 'emoji')],
      [a, rowValue(P, a, '{"b": 1, "a": [2]}')],
    ]);
    const c = `${P}/models/other`;
    rows.set(c, rowValue(P, c, 'x'));
    const digests = [[a, b], [c]]
      .sort(([x], [y]) => bucketOf(x!) - bucketOf(y!))
      .map((keys) => sha256(keys.map((k) => `${k}\0${rows.get(k)!.text}\n`).join('')));
    assert.equal(rows.get(a)!.text, '{"a":[2],"b":1}', 'canonical JSON');
    const want = sha256(Buffer.concat(digests)).toString('hex');
    assert.equal(await hashRowSet([a, b, c], (k) => rows.get(k)), want);
  });

  test('one set of rows has one hash, whatever order its keys were put and deleted in', async () => {
    const base: EtcdKv[] = [];
    for (let i = 0; i < 300; i++) base.push(apiKey(i, 10 + i));
    base.push(kv(`${P}/models/m`, { display_name: 'm', model_name: 'x', provider_key_id: 'pk' }, 5));
    base.push(kv(`${P}/models/broken`, 'not json', 6));
    const puts = [...Array(60).keys()].map((i) => apiKey(`new${i}`, 1000, `hn${i}`));
    // Each key changes once, so that the final set does not depend on the order.
    const changes = [...Array(40).keys()].map((i) => apiKey(i * 2, 1000, `changed${i}`));
    const deletes = [...Array(40).keys()].map((i) => `${P}/api_keys/k${i * 2 + 1}`);
    const final = new Map(base.map((x) => [x.key, x]));
    for (const x of [...puts, ...changes]) final.set(x.key, x);
    for (const key of deletes) final.delete(key);
    const want = await freshHashes([...final.values()].sort((x, y) => compareKeys(x.key, y.key)), 2000);

    for (const seed of [1, 2, 3]) {
      const s = sink();
      const rows = new EtcdRows(s, P, () => {});
      await rows.applyRange({ revision: 900, kvs: base });
      type Ev = { type: 'put' | 'delete' } & EtcdKv;
      const events: Ev[] = [
        ...puts.map((x) => ({ type: 'put' as const, ...x })),
        ...changes.map((x) => ({ type: 'put' as const, ...x })),
        ...deletes.map((key) => ({ type: 'delete' as const, ...kv(key, '', 1000) })),
        // Detours that end where they began: a key put then deleted, one deleted then put back as it was.
        { type: 'put', ...apiKey('detour', 1000) },
        { type: 'delete', ...kv(`${P}/api_keys/kdetour`, '', 1000) },
      ];
      const back = base[299]!;
      events.push({ type: 'delete', ...kv(back.key, '', 1000) }, { type: 'put', ...back });
      const order = shuffled(events.slice(0, -4), seed).concat(events.slice(-4));
      for (let i = 0; i < order.length; i += 7) {
        await rows.applyEvents({ revision: 1000 + i, events: order.slice(i, i + 7) });
      }
      await rows.applyEvents({ revision: 2000, events: [] });
      await until(() => s.metas.at(-1)?.revision === 2000, 10_000, 'the last batch applied');
      assert.equal(s.metas.at(-1)!.configHash, want.config, `config_hash, order ${seed}`);
      assert.equal(s.facts.sourceHash, want.source, `source_hash, order ${seed}`);
    }
  });

  test('a change and its undo give back the first hashes; a row that does not serve moves only source_hash', async () => {
    const s = sink();
    const rows = new EtcdRows(s, P, () => {});
    const kvs = [...Array(200).keys()].map((i) => apiKey(i, 10 + i));
    await rows.applyRange({ revision: 300, kvs });
    const first = { config: s.metas.at(-1)!.configHash, source: s.facts.sourceHash };
    await rows.applyEvents({ revision: 301, events: [{ type: 'put', ...apiKey(7, 301, 'other') }] });
    await until(() => s.metas.at(-1)!.revision === 301, 10_000, 'the change applied');
    assert.notEqual(s.metas.at(-1)!.configHash, first.config);
    await rows.applyEvents({ revision: 302, events: [{ type: 'put', ...apiKey(7, 302) }] });
    await until(() => s.metas.at(-1)!.revision === 302, 10_000, 'the undo applied');
    assert.equal(s.metas.at(-1)!.configHash, first.config);
    assert.equal(s.facts.sourceHash, first.source);
    // A value that does not serve: source_hash covers it, config_hash does not move.
    await rows.applyEvents({ revision: 303, events: [{ type: 'put', ...kv(`${P}/models/bad`, 'not json', 303) }] });
    await until(() => s.metas.at(-1)!.revision === 303, 10_000, 'the rejected put applied');
    assert.equal(s.metas.at(-1)!.configHash, first.config);
    assert.notEqual(s.facts.sourceHash, first.source);
    await rows.applyEvents({ revision: 304, events: [{ type: 'delete', ...kv(`${P}/models/bad`, '', 304) }] });
    await until(() => s.metas.at(-1)!.revision === 304, 10_000, 'the delete applied');
    assert.equal(s.facts.sourceHash, first.source);
  });

  test('one key’s change re-digests its bucket only; a batch digests each touched bucket once', async () => {
    const n = 50_000;
    const s = sink();
    const rows = new EtcdRows(s, P, () => {});
    const kvs = [...Array(n).keys()].map((i) => apiKey(i, 10 + i));
    await rows.applyRange({ revision: n + 100, kvs });
    const size = new Array<number>(BUCKETS).fill(0);
    for (const x of kvs) size[bucketOf(x.key)]!++;
    assert.equal(rows.rowsDigested, n, 'the range digests every row once (both hashes: the same rows)');

    let rev = n + 100;
    const step = async (events: Parameters<EtcdRows['applyEvents']>[0]['events']) => {
      const before = rows.rowsDigested;
      await rows.applyEvents({ revision: ++rev, events });
      await until(() => s.metas.at(-1)!.revision === rev, 10_000, `batch ${rev} applied`);
      return rows.rowsDigested - before;
    };
    // A changed key: its bucket's rows, in one hash (every row serves its latest value).
    const changed = apiKey(123, rev + 1, 'changed');
    assert.equal(await step([{ type: 'put', ...changed }]), size[bucketOf(changed.key)]);
    // A new key: its bucket with it; a delete: its bucket without it.
    const added = apiKey('new', rev + 1);
    const b = bucketOf(added.key);
    assert.equal(await step([{ type: 'put', ...added }]), size[b]! + 1);
    const gone = kvs[4567]!;
    assert.equal(await step([{ type: 'delete', ...kv(gone.key, '', 0) }]), size[bucketOf(gone.key)]! - 1);
    size[bucketOf(gone.key)]!--;
    size[b]!++;
    // Ten keys of one bucket changed in one batch: the bucket is digested once.
    const same = kvs.filter((x) => bucketOf(x.key) === bucketOf(kvs[9]!.key)).slice(0, 10);
    const burst = same.map((x, i) => ({
      type: 'put' as const,
      ...kv(x.key, { key_hash: `b${i}`, allowed_models: [] }, 0),
    }));
    assert.equal(await step(burst), size[bucketOf(kvs[9]!.key)]);
    assert.ok(size.every((x) => x < 3 * (n / BUCKETS)), 'every bucket is a small share of the rows');
  });

  test('a range changing rows while a batch’s hashes run: only hashes of whole states are published', async () => {
    const s = sink();
    const rows = new EtcdRows(s, P, () => {});
    const a = [...Array(20_000).keys()].map((i) => apiKey(i, 10 + i));
    await rows.applyRange({ revision: 30_000, kvs: a });
    const put = apiKey('x', 30_001);
    const b = a.map((x, i) => (i % 3 === 0 ? apiKey(i, 30_002, `r${i}`) : x));
    const states = [
      (await freshHashes(a, 1)).config,
      (await freshHashes([...a, put].sort((x, y) => compareKeys(x.key, y.key)), 1)).config,
      (await freshHashes(b, 1)).config,
    ];
    const from = s.metas.length;
    await rows.applyEvents({ revision: 30_001, events: [{ type: 'put', ...put }] });
    await rows.applyRange({ revision: 30_002, kvs: b });
    await until(() => s.metas.at(-1)!.revision === 30_002, 30_000, 'the range applied');
    for (const m of s.metas.slice(from)) assert.ok(states.includes(m.configHash), `published ${m.configHash}`);
    assert.equal(s.metas.at(-1)!.configHash, states[2]);
  });
});

describe('etcd keys in order, in chunks', () => {
  test('adds and deletes keep etcd order across chunk splits; between() bounds a block', () => {
    const s = new SortedKeys();
    const ref = new Set<string>();
    const keys = shuffled([...Array(6000).keys()].map((i) => `${P}/${i % 3 ? 'api_keys' : 'models'}/k${i}`), 7);
    for (const k of keys) {
      assert.equal(s.add(k), !ref.has(k));
      ref.add(k);
    }
    assert.equal(s.add(keys[0]!), false, 'a key already there');
    for (const k of keys.slice(0, 2500)) {
      assert.equal(s.delete(k), true);
      ref.delete(k);
    }
    assert.equal(s.delete(keys[0]!), false, 'a key not there');
    s.add('\u{1F600}');
    s.add('\uFF21');
    ref.add('\u{1F600}').add('\uFF21');
    const want = [...ref].sort(compareKeys);
    assert.deepEqual([...s], want);
    assert.equal(s.size, want.length);
    const inner = want.filter((k) => compareKeys(k, `${P}/api_keys/`) >= 0 && compareKeys(k, `${P}/api_keys0`) < 0);
    assert.deepEqual([...s.between(`${P}/api_keys/`, `${P}/api_keys0`)], inner);
    assert.deepEqual(
      [...s.between(undefined, `${P}/api_keys/`)],
      want.filter((k) => compareKeys(k, `${P}/api_keys/`) < 0),
    );
    assert.deepEqual([...SortedKeys.from(want)], want, 'from a sorted list');
  });
});

describe('BucketHashes alone', () => {
  test('a view whose rows are the first view’s shares its digests; a bucket changed while digested is digested again', async () => {
    const served = new Map<string, RowValue>();
    const observed = new Map<string, RowValue>();
    const h = new BucketHashes([(k) => served.get(k), (k) => observed.get(k)]);
    const settle = async () => {
      while (h.pending > 0) await h.digestSome();
      return h.hashes([0, 1]);
    };
    for (let i = 0; i < 100; i++) {
      const key = `${P}/api_keys/k${i}`;
      const v = rowValue(P, key, JSON.stringify({ key_hash: `h${i}`, allowed_models: [] }));
      served.set(key, v);
      observed.set(key, v);
      h.touch(key, true);
    }
    let [config, source] = await settle();
    assert.equal(source, config);
    assert.equal(h.rowsDigested, 100, 'each row once: the second view is the first');
    const bad = `${P}/api_keys/k5`;
    observed.set(bad, rowValue(P, bad, 'nope'));
    h.touch(bad, true);
    // A change while the bucket's digest is in flight: that digest is dropped, the bucket digested again.
    const inFlight = h.digestSome();
    let other = '';
    for (let i = 0; !other; i++) if (bucketOf(`${P}/api_keys/x${i}`) === bucketOf(bad)) other = `${P}/api_keys/x${i}`;
    observed.set(other, rowValue(P, other, 'nope either'));
    h.touch(other, true);
    await inFlight;
    assert.equal(h.pending, 1, 'the bucket is changed again');
    [config, source] = await settle();
    assert.notEqual(source, config);
    assert.equal(config, await hashRowSet([...served.keys()].sort(compareKeys), (k) => served.get(k)));
    assert.equal(source, await hashRowSet([...observed.keys()].sort(compareKeys), (k) => observed.get(k)));
    assert.throws(() => {
      h.touch(bad, true);
      return h.hashes([0]);
    }, /changed and not digested/);
  });
});

describe('BucketHashes given the rows', () => {
  test('rows given as keys are appended are digested as looked up; a change of the bucket drops them', async () => {
    const rows = new Map<string, RowValue>();
    const keys = [...Array(300).keys()].map((i) => `${P}/api_keys/k${String(i).padStart(3, '0')}`);
    for (const key of keys) rows.set(key, rowValue(P, key, JSON.stringify({ key_hash: key, allowed_models: [] })));
    let lookups = 0;
    const h = new BucketHashes([(k) => (lookups++, rows.get(k))]);
    h.clear();
    for (const key of keys) h.appendWith(key, rows.get(key));
    // A row changed after it was given: its bucket is touched, as every change of the source's rows is.
    const changed = keys[7]!;
    rows.set(changed, rowValue(P, changed, JSON.stringify({ key_hash: 'new', allowed_models: [] })));
    h.touch(changed, true);
    while (h.pending > 0) await h.digestSome();
    const [hash] = await h.hashes([0]);
    assert.equal(hash, await hashRowSet(keys, (k) => rows.get(k)));
    const bucket = keys.filter((k) => bucketOf(k) === bucketOf(changed)).length;
    assert.equal(lookups, bucket, 'only the changed bucket looked its rows up');
  });
});

describe('the snapshot cache and the hash by bucket', () => {
  test('a cache whose config_hash is of the earlier definition (every row in key order) still restores', async () => {
    const rows: Record<string, string> = {};
    for (let i = 0; i < 50; i++) {
      rows[`${P}/api_keys/k${i}`] = JSON.stringify({ key_hash: `h${i}`, allowed_models: [] });
    }
    const keys = Object.keys(rows).sort(compareKeys);
    const lines = keys.map((k) => `${k}\0${rowValue(P, k, rows[k]!).text}\n`).join('');
    const earlier = createHash('sha256').update(lines).digest('hex');
    const doc = (config_hash: string) => ({ rows: Object.entries(rows), config_hash }) as unknown as CacheDocument;
    const restored = new RestoredRows(P);
    assert.equal(await restored.verify(doc(earlier)), undefined, 'the earlier definition');
    const now = await hashRowSet(keys, (k) => restored.values.get(k));
    assert.notEqual(now, earlier);
    assert.equal(await restored.verify(doc(now)), undefined, 'the bucket definition');
    rows[keys[3]!] = JSON.stringify({ key_hash: 'tampered', allowed_models: [] });
    assert.match(String(await new RestoredRows(P).verify(doc(earlier))), /config_hash does not match/);
    assert.match(String(await new RestoredRows(P).verify(doc(now))), /config_hash does not match/);
  });
});

describe('hashes while batches keep arriving', () => {
  test('a batch applied at any point of a publish, down to one microtask, never fails a delivery', async () => {
    const s = sink();
    const rows = new EtcdRows(s, P, () => {});
    const kvs = [...Array(2000).keys()].map((i) => apiKey(i, 10 + i));
    await rows.applyRange({ revision: 5000, kvs });
    const final = new Map(kvs.map((x) => [x.key, x]));
    let rev = 5000;
    const deliveries: Promise<void>[] = [];
    const deliver = (x: EtcdKv) =>
      deliveries.push(rows.applyEvents({ revision: x.modRevision, events: [{ type: 'put', ...x }] }));
    for (let n = 0; n < 200; n++) {
      const x = apiKey(n % 50, ++rev, `m${n}`);
      final.set(x.key, x);
      // After 0 to 40 microtasks, or a macrotask: somewhere inside the publish the previous batch started.
      const depth = n % 41;
      if (depth === 40) await new Promise((r) => setTimeout(r, 0));
      else for (let i = 0; i < depth; i++) await Promise.resolve();
      deliver(x);
    }
    await Promise.all(deliveries);
    await until(() => s.metas.at(-1)?.revision === rev, 10_000, 'the last batch applied');
    // A delivery after a failed apply throws that failure: none did.
    await rows.applyEvents({ revision: rev + 1, events: [] });
    const want = await freshHashes([...final.values()].sort((x, y) => compareKeys(x.key, y.key)), 1);
    await until(() => s.metas.at(-1)?.configHash === want.config, 10_000, 'the hash of what serves last');
  });
});
