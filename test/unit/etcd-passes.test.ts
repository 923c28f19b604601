// How often a large etcd load and a snapshot cache restore touch each row (src/sources/etcd/apply.ts, cache-rows.ts,
// row-hash.ts; docs/performance.md "Configuration at scale"): a lookup in a Map of a million keys misses the
// processor's caches, so each pass that looks every row up again costs about as much as the row's own work. The
// rows a pass needs are carried beside their keys, and a restore keeps the digests its check of the document took.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodeCache } from '../../src/sources/cache.ts';
import { EtcdRows } from '../../src/sources/etcd/apply.ts';
import { RestoredRows } from '../../src/sources/etcd/cache-rows.ts';
import type { EtcdKv } from '../../src/sources/etcd/client.ts';
import { ShardedMap } from '../../src/util/sharded-map.ts';
import { etcdKv } from '../support/etcd-kv.ts';
import { recordingSink } from '../support/recording-sink.ts';
import { until } from '../support/until.ts';

const P = '/aisix';
/** More than the keys a delivery changes in place: the range takes the path of a large load. */
const N = 6000;

const apiKey = (i: number, rev: number, hash = i.toString(16).padStart(64, '0')): EtcdKv =>
  etcdKv(`${P}/api_keys/k${String(i).padStart(6, '0')}`, { key_hash: hash, allowed_models: ['m'] }, rev);

/** A model, its provider key and `n` api keys written in no order of their keys. */
function rows(n: number): EtcdKv[] {
  const kvs = [
    etcdKv(`${P}/models/m`, { display_name: 'm', model_name: 'x', provider_key_id: 'pk' }, 2),
    etcdKv(`${P}/provider_keys/pk`, { display_name: 'pk', provider: 'openai', api_key: 'sk-up' }, 3),
  ];
  for (let i = 0; i < n; i++) kvs.push(apiKey(i, 10 + ((i * 7919) % 10_007)));
  return kvs.sort((a, b) => (a.key < b.key ? -1 : 1));
}

/** The calls `work` makes to every `ShardedMap`'s lookups (`get`, `has`) and writes (`set`). */
async function counted(work: () => Promise<void>): Promise<{ lookups: number; sets: number }> {
  const proto = ShardedMap.prototype;
  const { get, has, set } = proto;
  const n = { lookups: 0, sets: 0 };
  proto.get = function (this: ShardedMap<unknown>, key: string) {
    n.lookups++;
    return get.call(this, key);
  };
  proto.has = function (this: ShardedMap<unknown>, key: string) {
    n.lookups++;
    return has.call(this, key);
  };
  proto.set = function (this: ShardedMap<unknown>, key: string, value: unknown) {
    n.sets++;
    return set.call(this, key, value);
  };
  try {
    await work();
  } finally {
    Object.assign(proto, { get, has, set });
  }
  return n;
}

describe('the passes over a large etcd load', () => {
  test('a first range looks each row up once and writes it four times, from the first page to ready', async () => {
    const kvs = rows(N);
    const sink = recordingSink();
    const applied = new EtcdRows(sink, P, () => {});
    const n = await counted(() =>
      applied.applyPages({ revision: 20_000, pages: [kvs.slice(0, 2500), kvs.slice(2500)] })
    );
    // The key index's id (is it there already?); the writes: observed, served, the key index's id and hash. Ten
    // lookups and five writes a row before (the judging, the vanished-key scan, the lists and each hash looked every
    // row up again).
    assert.ok(n.lookups <= N + 100, `${n.lookups} lookups for ${N} rows`);
    assert.ok(n.sets <= 4 * N + 100, `${n.sets} writes for ${N} rows`);
    const snapshot = sink.applied.at(-1)!;
    assert.equal(snapshot.apiKeys.size, N);
    assert.equal(
      snapshot.apiKeyByHash((N - 1).toString(16).padStart(64, '0'))?.id,
      `k${String(N - 1).padStart(6, '0')}`,
    );
    // Write order: the key written last of a hash wins it, whatever the key order.
    const revs = [...snapshot.apiKeys.values()].map((k) => 10 + ((Number(k.id.slice(1)) * 7919) % 10_007));
    assert.ok(revs.every((r, i) => i === 0 || revs[i - 1]! < r), 'api keys in write order');
    assert.equal(sink.facts.sourceHash, sink.metas.at(-1)!.configHash, 'every row serves: the hashes agree');
  });

  test('a second range of the same rows and one that changes some give the hashes of a fresh load', async () => {
    const kvs = rows(N);
    const sink = recordingSink();
    const applied = new EtcdRows(sink, P, () => {});
    await applied.applyPages({ revision: 20_000, pages: [kvs] });
    const first = { config: sink.metas.at(-1)!.configHash, source: sink.facts.sourceHash };
    await applied.applyPages({ revision: 20_001, pages: [kvs] });
    assert.deepEqual({ config: sink.metas.at(-1)!.configHash, source: sink.facts.sourceHash }, first);
    // One key gone, one rewritten, one refused (an api key fails closed: it serves nothing), one new.
    const next = kvs.filter((_, i) => i !== 7); // k000007
    next[7] = apiKey(8, 20_002, 'rewritten');
    next[8] = etcdKv(next[8]!.key, 'not json', 20_003);
    next.push(etcdKv(`${P}/routes/late`, { name: 'r' }, 20_004));
    await applied.applyPages({ revision: 20_004, pages: [next] });
    const fresh = recordingSink();
    await new EtcdRows(fresh, P, () => {}).applyPages({ revision: 20_004, pages: [next] });
    assert.equal(sink.metas.at(-1)!.configHash, fresh.metas.at(-1)!.configHash);
    assert.equal(sink.facts.sourceHash, fresh.facts.sourceHash);
    assert.notEqual(sink.facts.sourceHash, sink.metas.at(-1)!.configHash, 'a refused row: the hashes differ');
    // A model refused keeps serving its last value (pinned): source_hash is of what etcd holds, config_hash moves
    // only by the row the fresh load refused.
    const before = sink.metas.at(-1)!.configHash;
    const pinned = next.map((x) => (x.key === `${P}/models/m` ? etcdKv(x.key, '{"display_name": 1}', 20_005) : x));
    await applied.applyPages({ revision: 20_005, pages: [pinned] });
    const again = recordingSink();
    await new EtcdRows(again, P, () => {}).applyPages({ revision: 20_005, pages: [pinned] });
    assert.equal(sink.facts.sourceHash, again.facts.sourceHash);
    assert.equal(sink.metas.at(-1)!.configHash, before, 'the pinned model serves as before');
    assert.notEqual(again.metas.at(-1)!.configHash, before, 'a fresh load serves no model');
  });
});

describe('a snapshot cache restore', () => {
  test('hashes its rows once: what serves keeps the digests the check of the document took', async () => {
    const loaded = new EtcdRows(recordingSink(), P, () => {});
    await loaded.applyPages({ revision: 20_000, pages: [rows(N)] });
    const bytes = (await loaded.cacheDocument(() => undefined))!;
    const decoded = decodeCache(bytes, P);
    assert.ok(decoded.ok);
    const sink = recordingSink();
    const restoring = new EtcdRows(sink, P, () => {});
    const restored = new RestoredRows(P);
    let n = { lookups: 0, sets: 0 };
    n = await counted(async () => {
      assert.equal(await restored.verify(decoded.doc), undefined);
      await restoring.applyRestored(restored, decoded.doc);
    });
    assert.equal(restoring.rowsDigested, 0, 'no row digested again for config_hash');
    assert.equal(sink.metas.at(-1)!.configHash, decoded.doc.config_hash);
    // The key index's id; the writes: the restored rows, the key index's id and hash.
    assert.ok(n.lookups <= N + 100, `${n.lookups} lookups for ${N} rows`);
    assert.ok(n.sets <= 3 * N + 100, `${n.sets} writes for ${N} rows`);
    assert.equal(sink.applied.at(-1)!.apiKeys.size, N);
    // The buckets it took over follow a change as their own would: one bucket, and the hash of a fresh load.
    const changed = apiKey(5, 20_001, 'changed');
    const range = rows(N).map((x) => (x.key === changed.key ? changed : x));
    await restoring.applyEvents({ revision: 20_001, events: [{ type: 'put', ...changed }] });
    await until(() => sink.metas.at(-1)!.revision === 20_001, 10_000, 'the change applied');
    assert.ok(restoring.rowsDigested > 0 && restoring.rowsDigested < N / 100, `${restoring.rowsDigested} rows`);
    const fresh = recordingSink();
    await new EtcdRows(fresh, P, () => {}).applyPages({ revision: 20_001, pages: [range] });
    assert.equal(sink.metas.at(-1)!.configHash, fresh.metas.at(-1)!.configHash);
    // etcd read at last: the range holds the same rows, and the restored rows are observed.
    await restoring.applyPages({ revision: 20_001, pages: [range] });
    assert.equal(sink.metas.at(-1)!.configHash, fresh.metas.at(-1)!.configHash);
    assert.equal(sink.facts.sourceHash, fresh.facts.sourceHash);
  });
});
