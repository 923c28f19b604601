// The snapshot cache's write at scale (src/sources/cache.ts, src/sources/etcd/apply.ts `cacheDocument`,
// src/sources/etcd/sorted-keys.ts `view`; docs/performance.md "Configuration at scale"): the document made in
// slices is byte for byte the one made at once, holds the rows of the moment it began however they change
// meanwhile, and a slow write spaces the next one while a flush writes the latest state at once.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PlatformFiles } from '../../src/platform.ts';
import { createLogger } from '../../src/observability/logger.ts';
import {
  CACHE_FORMAT,
  CACHE_VERSION,
  type CacheHeader,
  encodeCache,
  encodeCacheSliced,
  SnapshotCache,
} from '../../src/sources/cache.ts';
import { EtcdRows } from '../../src/sources/etcd/apply.ts';
import { etcdKv } from '../support/etcd-kv.ts';
import { SortedKeys } from '../../src/sources/etcd/sorted-keys.ts';
import { recordingSink } from '../support/recording-sink.ts';
import { until } from '../support/until.ts';

const header: CacheHeader = {
  format: CACHE_FORMAT,
  version: CACHE_VERSION,
  prefix: '/p',
  revision: 7,
  written_at: '2026-12-06T00:00:00Z',
  config_hash: 'a'.repeat(64),
  pins: {},
};

/** The document as encodeCache wrote it before it was made in pieces: the format the cache's readers know. */
function asBefore(h: CacheHeader, rows: [string, string][]): Uint8Array {
  const head = JSON.stringify(h);
  const parts = rows.map(([key, json]) => `${JSON.stringify(key)}:${json}`);
  return new TextEncoder().encode(`${head.slice(0, -1)},"rows":{${parts.join(',')}}}`);
}

describe('the cache document in slices', () => {
  test('the same bytes as made at once, across pieces, with every kind of character', async () => {
    for (const n of [0, 1, 3, 40_000]) {
      const rows: [string, string][] = [];
      for (let i = 0; i < n; i++) {
        const text = JSON.stringify({ display_name: `ü-${i} "q" \\ 🙂 ${'x'.repeat(i % 97)}`, key_hash: `h${i}` });
        rows.push([`/p/api_keys/k${i}-é`, JSON.stringify(text)]);
      }
      let paced = 0;
      const sliced = await encodeCacheSliced(
        header,
        rows,
        () => (++paced % 1000 === 0 ? Promise.resolve() : undefined),
      );
      const want = asBefore(header, rows);
      assert.deepEqual(Buffer.from(sliced), Buffer.from(want), `${n} rows`);
      assert.deepEqual(Buffer.from(encodeCache(header, rows)), Buffer.from(want), `${n} rows, at once`);
      // The size of the last document as a hint: the same bytes when it is right, short or far too long.
      for (const hint of [want.length, Math.floor(want.length / 3), 70_000, 4 * want.length]) {
        const hinted = await encodeCacheSliced(header, rows, () => undefined, hint);
        assert.deepEqual(Buffer.from(hinted), Buffer.from(want), `${n} rows, size hint ${hint}`);
      }
      assert.ok(paced >= n, 'paced between rows');
      if (n > 0) assert.equal(JSON.parse(new TextDecoder().decode(sliced)).rows[rows[0]![0]], JSON.parse(rows[0]![1]));
    }
  });

  test("a view of the sorted keys keeps its moment's keys through adds, deletes, splits and emptied chunks", () => {
    const all = [...Array(5000).keys()].map((i) => `/p/k${String(i).padStart(5, '0')}`);
    const keys = SortedKeys.from(all.filter((_, i) => i % 2 === 0));
    const before = [...keys];
    const view = keys.view();
    for (let i = 1; i < 5000; i += 2) keys.add(all[i]!); // splits chunks
    for (let i = 0; i < 1200; i++) keys.delete(all[i]!); // empties the first chunks
    assert.deepEqual([...view], before);
    const now = all.slice(1200);
    assert.deepEqual([...keys], now);
    const second = keys.view();
    keys.add('/p/a');
    keys.delete(all[4999]!);
    assert.deepEqual([...second], now);
    assert.deepEqual([...view], before, 'the first view still');
  });
});

const kv = etcdKv;
const apiKey = (i: number, rev: number, hash = `h${i}`) =>
  kv(`/p/api_keys/k${String(i).padStart(5, '0')}`, { key_hash: hash, allowed_models: [] }, rev);

describe("the etcd source's cache document", () => {
  test('holds the rows of the moment it began while keys change under it; the next one holds the changes', async () => {
    const s = { ...recordingSink(), clock: () => Date.parse('2026-12-06T00:00:00Z') };
    const rows = new EtcdRows(s, '/p', () => {});
    const kvs = [...Array(3000).keys()].map((i) => apiKey(i, 10 + i));
    await rows.applyRange({ revision: 5000, kvs });
    await until(() => s.metas.at(-1)?.revision === 5000, 10_000, 'the range applied');
    const atOnce = await rows.cacheDocument(() => undefined);
    assert.ok(atOnce);

    // Between rows of the next document: a key added before the rows read so far, one deleted ahead of them,
    // one changed ahead of them, and enough new keys to split a chunk of the sorted keys.
    let step = 0;
    let rev = 5000;
    const changes = async () => {
      step++;
      if (step === 100) {
        const events = [
          { type: 'put' as const, ...kv('/p/api_keys/a-first', { key_hash: 'ha', allowed_models: [] }, ++rev) },
          { type: 'delete' as const, ...kv('/p/api_keys/k02999', '', ++rev) },
          { type: 'put' as const, ...apiKey(2000, ++rev, 'changed') },
        ];
        for (let i = 0; i < 2500; i++) {
          events.push({
            type: 'put',
            ...kv(`/p/api_keys/k01500-${i}`, { key_hash: `n${i}`, allowed_models: [] }, ++rev),
          });
        }
        await rows.applyEvents({ revision: rev, events });
      }
      if (step % 50 === 0) await new Promise((r) => setTimeout(r, 0));
    };
    const during = await rows.cacheDocument(changes);
    assert.ok(step >= 3000, 'the document yielded between rows');
    assert.deepEqual(Buffer.from(during!), Buffer.from(atOnce), 'the rows of the moment it began');

    await until(() => s.metas.at(-1)?.revision === rev, 10_000, 'the changes applied');
    const after = JSON.parse(new TextDecoder().decode((await rows.cacheDocument(() => undefined))!));
    assert.equal(Object.keys(after.rows).length, 3000 + 1 - 1 + 2500);
    assert.equal(after.rows['/p/api_keys/k02999'], undefined);
    assert.equal(JSON.parse(after.rows['/p/api_keys/k02000']).key_hash, 'changed');
    assert.equal(after.revision, rev);
    assert.equal(Object.keys(after.rows)[0], '/p/api_keys/a-first', 'etcd order');
  });
});

describe('the snapshot cache file', () => {
  const log = createLogger({ level: 'error', format: 'json', write: () => {} });
  const recording = () => {
    const writes: { at: number; text: string }[] = [];
    const files: PlatformFiles = {
      read: () => Promise.reject(new Error('unused')),
      writeAtomic: (_path, data) => {
        writes.push({ at: performance.now(), text: new TextDecoder().decode(data) });
        return Promise.resolve();
      },
    };
    return { writes, files };
  };
  /** A producer that takes `ms` to make its document (what a large one costs, in slices). */
  const slow = (text: string, ms: number) => async () => {
    await new Promise((r) => setTimeout(r, ms));
    return new TextEncoder().encode(text);
  };

  test('a write that took long spaces the next one by four times its duration; a flush writes at once', async () => {
    const { writes, files } = recording();
    const cache = new SnapshotCache(files, '/c.json', log);
    cache.schedule(slow('one', 100));
    await until(() => writes.length === 1, 10_000, 'the first write');
    cache.schedule(slow('two', 1));
    await until(() => writes.length === 2, 10_000, 'the second write');
    // Four times the first write's 100 ms; a timer can end up to a millisecond early by `performance.now()`, and the
    // duration is measured with it, so a little less than 400 (without the spacing: a few ms).
    assert.ok(writes[1]!.at - writes[0]!.at >= 390, `spaced ${writes[1]!.at - writes[0]!.at} ms`);

    // The second took a few ms: the third follows soon; a flush cuts even the coalescing wait short.
    cache.schedule(slow('three', 300));
    await until(() => writes.length === 3, 10_000, 'the third write');
    cache.schedule(slow('four', 1));
    const t = performance.now();
    await cache.flush();
    assert.equal(writes.at(-1)!.text, 'four', 'the latest state is written by the flush');
    assert.ok(performance.now() - t < 1000, `not held for the gap (${performance.now() - t} ms)`);
  });

  test('a burst while a document is made costs one more write, of the latest state', async () => {
    const { writes, files } = recording();
    const cache = new SnapshotCache(files, '/c.json', log);
    let began!: () => void;
    const making = new Promise<void>((r) => (began = r));
    const first = slow('first', 50);
    cache.schedule(() => (began(), first()));
    await making;
    for (let i = 0; i < 20; i++) cache.schedule(slow(`burst-${i}`, 1));
    await cache.flush();
    assert.deepEqual(writes.map((w) => w.text), ['first', 'burst-19']);
  });
});
