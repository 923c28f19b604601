// The api key index (src/resources/api-key-index.ts) and the etcd source's change of one key in place
// (src/sources/etcd/apply.ts; docs/performance.md "Configuration at scale"), with the source's row state fed
// directly: no etcd.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiKeyIndex } from '../../src/resources/api-key-index.ts';
import type { ApiKey } from '../../src/resources/schema.ts';
import { EtcdRows } from '../../src/sources/etcd/apply.ts';
import type { EtcdKv } from '../../src/sources/etcd/client.ts';
import { etcdKv } from '../support/etcd-kv.ts';
import { recordingSink } from '../support/recording-sink.ts';
import { until } from '../support/until.ts';

const key = (id: string, hash: string, extra: Partial<ApiKey> = {}): ApiKey => ({
  id,
  key_hash: hash,
  allowed_models: [],
  disabled: false,
  ...extra,
});

describe('api key index', () => {
  test('append, filling an index from a list, leaves what put leaves, an id written again included', () => {
    // 9,000 ids written three times each, a hash shared by pairs, bindings and budgets: enough repeats that the
    // order is compacted while the index fills.
    const list: ApiKey[] = [];
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 9000; i++) {
        list.push(key(`k${i}`, `h${(i >> 1) + round}`, {
          display_name: `r${round}`,
          ...(i % 7 === 0 ? { jwt_provider: 'p', jwt_subject: `s${i % 3}` } : {}),
          ...(i % 5 === round
            ? {
              budgets: [{ window: 'daily', limit_tokens: 1, time_zone: 'UTC', alert_thresholds: [], action: 'refuse' }],
            }
            : {}),
        }));
      }
    }
    list.push(key('solo', 'h-solo'));
    const put = new ApiKeyIndex();
    const appended = new ApiKeyIndex();
    for (const k of list) put.put(k);
    for (const k of list) appended.append(k);
    assert.equal(appended.size, 9001);
    assert.deepEqual(appended.list(), put.list());
    for (const id of ['k0', 'k1', 'k8999', 'solo']) assert.equal(appended.get(id), put.get(id));
    for (let h = 0; h < 4503; h++) assert.equal(appended.byHash(`h${h}`), put.byHash(`h${h}`), `h${h}`);
    for (const s of ['s0', 's1', 's2']) assert.deepEqual(appended.boundTo('p', s), put.boundTo('p', s));
    assert.equal(appended.anyBudgets(), put.anyBudgets());
    // Distinct ids: each appended at once, in list order.
    const fresh = new ApiKeyIndex();
    for (const k of list.slice(0, 9000)) fresh.append(k);
    assert.deepEqual(fresh.list(), list.slice(0, 9000));
  });

  test('a hash belongs to the key written last; removing it hands the hash back to the one before', () => {
    const ix = new ApiKeyIndex();
    ix.put(key('a', 'h'));
    ix.put(key('b', 'h'));
    ix.put(key('c', 'other'));
    assert.equal(ix.byHash('h')?.id, 'b');
    ix.remove('b');
    assert.equal(ix.byHash('h')?.id, 'a');
    ix.put(key('b', 'h'));
    assert.equal(ix.byHash('h')?.id, 'b', 'written again: last again');
    ix.put(key('a', 'h2'));
    assert.equal(ix.byHash('h')?.id, 'b');
    assert.equal(ix.byHash('h2')?.id, 'a');
    ix.remove('b');
    assert.equal(ix.byHash('h'), undefined);
    assert.deepEqual([...ix.values()].map((k) => k.id), ['c', 'a'], 'write order');
    assert.deepEqual(ix.list().map((k) => k.id), ['c', 'a']);
    assert.equal(ix.size, 2);
  });

  test('whether any key carries a budget follows puts and removes', () => {
    const ix = new ApiKeyIndex();
    ix.put(key('a', 'h'));
    assert.equal(ix.anyBudgets(), false);
    const budgets = [{ period: 'daily', limit_usd: 1 }] as unknown as ApiKey['budgets'];
    ix.put(key('b', 'h2', { budgets }));
    assert.equal(ix.anyBudgets(), true);
    ix.put(key('b', 'h2'));
    assert.equal(ix.anyBudgets(), false, 'written again without one');
    ix.put(key('c', 'h3', { budgets }));
    ix.remove('c');
    assert.equal(ix.anyBudgets(), false);
  });

  test("a rotated-out hash authenticates until the earlier expiry; any key's current hash wins over it", () => {
    const ix = new ApiKeyIndex();
    ix.put(key('a', 'new', { previous_key_hashes: [{ key_hash: 'old', expires_at: '2030-01-01T00:00:00Z' }] }));
    assert.equal(ix.byHash('old')?.id, 'a');
    assert.equal(ix.byHash('old')?.expires_at, '2030-01-01T00:00:00Z');
    assert.equal(ix.byHash('new')?.expires_at, undefined);
    ix.put(key('b', 'old'));
    assert.equal(ix.byHash('old')?.id, 'b');
    ix.remove('b');
    assert.equal(ix.byHash('old')?.id, 'a');
    ix.remove('a');
    assert.equal(ix.byHash('old'), undefined);
    assert.equal(ix.byHash('new'), undefined);
  });
});

const sink = recordingSink;

const kv = etcdKv;

describe('etcd source: one api key changes in place', () => {
  test('a put and a delete are served at once, without rebuilding the snapshot; the facts follow', async () => {
    const s = sink();
    let published = 0;
    const rows = new EtcdRows(s, '/aisix', () => published++);
    const kvs = [kv('/aisix/models/m', { display_name: 'm', model_name: 'x', provider_key_id: 'pk' }, 2)];
    for (let i = 0; i < 100; i++) {
      kvs.push(kv(`/aisix/api_keys/k${i}`, { key_hash: `h${i}`, allowed_models: [] }, 3 + i));
    }
    await rows.applyRange({ revision: 200, kvs });
    const first = s.applied.at(-1)!;
    assert.equal(first.apiKeys.size, 100);
    const hash = s.metas.at(-1)!.configHash;

    await rows.applyEvents({
      revision: 201,
      events: [{ type: 'put', ...kv('/aisix/api_keys/new', { key_hash: 'hnew', allowed_models: [] }, 201) }],
    });
    // Served before its facts are applied: the key index the gateway reads changed in place.
    assert.equal(first.apiKeyByHash('hnew')?.id, 'new');
    await until(() => s.metas.at(-1)!.configHash !== hash, 10_000, 'the put applied');
    const second = s.applied.at(-1)!;
    assert.notEqual(second, first, 'a new snapshot object, so per-snapshot views are derived again');
    assert.equal(second.models, first.models, 'the other indexes are not rebuilt');
    assert.deepEqual(second.counts(), { models: 1, api_keys: 101 });

    await rows.applyEvents({ revision: 202, events: [{ type: 'delete', ...kv('/aisix/api_keys/k7', '', 202) }] });
    assert.equal(second.apiKeyByHash('h7'), undefined, 'a revoked key stops at once');
    await until(() => published === 3, 10_000, 'the delete applied');
    assert.deepEqual(s.applied.at(-1)!.counts(), { models: 1, api_keys: 100 });
    assert.notEqual(s.metas.at(-1)!.configHash, s.metas.at(-2)!.configHash);
  });

  test('a snapshot served anew after a key changed in place does not list every key', async () => {
    const s = sink();
    const rows = new EtcdRows(s, '/aisix', () => {});
    const kvs: EtcdKv[] = [];
    for (let i = 0; i < 1000; i++) {
      kvs.push(kv(`/aisix/api_keys/k${i}`, { key_hash: `h${i}`, allowed_models: [] }, 3 + i));
    }
    await rows.applyRange({ revision: 2000, kvs });
    const index = s.applied.at(-1)!.apiKeys;
    let listed = 0;
    const list = index.list.bind(index);
    index.list = () => {
      listed++;
      return list();
    };
    await rows.applyEvents({
      revision: 2001,
      events: [{ type: 'put', ...kv('/aisix/api_keys/new', { key_hash: 'hnew', allowed_models: [] }, 2001) }],
    });
    await until(() => s.metas.at(-1)!.revision === 2001, 10_000, 'the put applied');
    assert.equal(listed, 0, 'a list of a million keys per change is what the change must not cost');
    assert.equal(s.applied.at(-1)!.resources.api_keys.length, 1001, 'the list is still there when read');
    assert.equal(listed, 1);
  });

  test('changes that arrive while the hashes run end in the hash of what serves last', async () => {
    const s = sink();
    const rows = new EtcdRows(s, '/aisix', () => {});
    const kvs: EtcdKv[] = [];
    for (let i = 0; i < 20_000; i++) {
      kvs.push(kv(`/aisix/api_keys/k${i}`, { key_hash: `h${i}`, allowed_models: [] }, 3 + i));
    }
    await rows.applyRange({ revision: 30_000, kvs });
    const final = new Map(kvs.map((x) => [x.key, x]));
    // A burst: each batch is served at once and its hashes follow, batches overlapping the hash in progress.
    for (let n = 0; n < 40; n++) {
      const rev = 30_001 + n;
      const put = kv(`/aisix/api_keys/k${n * 7}`, { key_hash: `changed${n}`, allowed_models: [] }, rev);
      final.set(put.key, put);
      await rows.applyEvents({ revision: rev, events: [{ type: 'put', ...put }] });
      if (n % 3 === 0) {
        final.delete(`/aisix/api_keys/k${n * 11 + 1}`);
        await rows.applyEvents({
          revision: rev,
          events: [{ type: 'delete', ...kv(`/aisix/api_keys/k${n * 11 + 1}`, '', rev) }],
        });
      }
      await new Promise((r) => setTimeout(r, n % 5));
    }
    await until(() => s.metas.at(-1)!.revision === 30_040, 30_000, 'the last batch applied');
    const fresh = sink();
    await new EtcdRows(fresh, '/aisix', () => {}).applyRange({ revision: 30_040, kvs: [...final.values()] });
    assert.equal(s.metas.at(-1)!.configHash, fresh.metas.at(-1)!.configHash);
    assert.equal(s.applied.at(-1)!.apiKeys.size, final.size);
  });

  test('a key the range no longer holds is gone, even one only restored and never observed', async () => {
    const s = sink();
    const rows = new EtcdRows(s, '/aisix', () => {});
    await rows.applyRange({
      revision: 10,
      kvs: [kv('/aisix/api_keys/a', { key_hash: 'ha', allowed_models: [] }, 2)],
    });
    await rows.applyRange({ revision: 11, kvs: [kv('/aisix/api_keys/b', { key_hash: 'hb', allowed_models: [] }, 11)] });
    const now = s.applied.at(-1)!;
    assert.equal(now.apiKeyByHash('ha'), undefined);
    assert.equal(now.apiKeyByHash('hb')?.id, 'b');
  });
});

describe('jwt bindings in the api key index', () => {
  /** The bindings as authenticate.ts built them before the index kept them: one pass over every key. */
  const scanned = (ix: ApiKeyIndex): Map<string, string[]> => {
    const m = new Map<string, string[]>();
    for (const k of ix.values()) {
      if (k.jwt_subject === undefined || k.jwt_provider === undefined) continue;
      const id = `${k.jwt_provider}\u0000${k.jwt_subject}`;
      m.set(id, [...(m.get(id) ?? []), k.id]);
    }
    return m;
  };
  const PROVIDERS = ['p', 'q'];
  const SUBJECTS = ['s1', 's2', 's3'];
  /** What `boundTo` answers for every pair, as ids: the same shape as `scanned`. */
  const answers = (ix: ApiKeyIndex): Map<string, string[]> => {
    const m = new Map<string, string[]>();
    for (const p of PROVIDERS) {
      for (const s of SUBJECTS) {
        const ks = ix.boundTo(p, s);
        if (ks !== undefined) m.set(`${p}\u0000${s}`, ks.map((k) => k.id));
      }
    }
    return m;
  };

  test('put, remove and rebind give the answers of a fresh build and of a scan, in write order', () => {
    const ix = new ApiKeyIndex();
    // A small deterministic generator: every op mixes ids, bindings, half bindings and disabled keys.
    let seed = 7;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let step = 0; step < 2000; step++) {
      const id = `k${next(8)}`;
      const op = next(5);
      if (op === 0) ix.remove(id);
      else {
        const extra: Partial<ApiKey> = { disabled: next(3) === 0 };
        if (op !== 1) extra.jwt_provider = PROVIDERS[next(2)]!;
        if (op !== 2) extra.jwt_subject = SUBJECTS[next(3)]!;
        ix.put(key(id, `h${next(4)}`, extra));
      }
      const fresh = new ApiKeyIndex();
      for (const k of ix.values()) fresh.put(k);
      assert.deepEqual(answers(ix), scanned(ix), `step ${step}: against a scan`);
      assert.deepEqual(answers(ix), answers(fresh), `step ${step}: against a fresh build`);
    }
  });

  test('an ambiguous binding lists both keys; removing one leaves the other, a rebind moves the key', () => {
    const ix = new ApiKeyIndex();
    ix.put(key('a', 'ha', { jwt_provider: 'p', jwt_subject: 's', disabled: true }));
    ix.put(key('b', 'hb', { jwt_provider: 'p', jwt_subject: 's' }));
    assert.deepEqual(ix.boundTo('p', 's')?.map((k) => k.id), ['a', 'b']);
    ix.put(key('a', 'ha', { jwt_provider: 'p', jwt_subject: 's' }));
    assert.deepEqual(ix.boundTo('p', 's')?.map((k) => k.id), ['b', 'a'], 'written again: last again');
    ix.put(key('b', 'hb', { jwt_provider: 'p', jwt_subject: 't' }));
    assert.deepEqual(ix.boundTo('p', 's')?.map((k) => k.id), ['a']);
    assert.deepEqual(ix.boundTo('p', 't')?.map((k) => k.id), ['b']);
    ix.remove('a');
    assert.equal(ix.boundTo('p', 's'), undefined);
    assert.equal(ix.boundTo('q', 't'), undefined, 'another provider');
  });
});
