// The event loop while the etcd source applies a large range or restores a large snapshot cache
// (src/sources/etcd/apply.ts, rows.ts, cache-rows.ts, ../cache.ts; docs/performance.md "Configuration at scale"):
// every pass over the rows runs in slices, so `/livez` answers during a load. The hold
// between two turns of the loop is taken as the lesser of its wall time and the CPU the main thread spent in it,
// less the collector's pauses: a machine busy with other work stretches the first, and the second is the main
// thread's alone (test/support/thread-cpu.ts), so a pass over every row is told from a slice on a loaded machine.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PerformanceObserver } from 'node:perf_hooks';
import { EtcdRows } from '../../src/sources/etcd/apply.ts';
import { sortSteps } from '../../src/sources/etcd/rows.ts';
import { decodeCache } from '../../src/sources/cache.ts';
import { RestoredRows } from '../../src/sources/etcd/cache-rows.ts';
import type { EtcdKv } from '../../src/sources/etcd/client.ts';
import { etcdKv } from '../support/etcd-kv.ts';
import { recordingSink } from '../support/recording-sink.ts';
import { mainThreadCpuMs } from '../support/thread-cpu.ts';

const KEYS = 200_000;
/** A piece of a page, as the client hands them. */
const PIECE = 512;

/** Revisions a stride apart modulo a prime: etcd's order of keys is not their order of writing (parallel seeding). */
const revOf = (i: number): number => 10 + ((i * 7919) % 200_003);

/** The rows of a SaaS's etcd: a model, its provider key and `KEYS` api keys, written in no order of their keys. */
function rows(): EtcdKv[] {
  const kvs: EtcdKv[] = [
    etcdKv('/aisix/models/m', { display_name: 'm', model_name: 'x', provider_key_id: 'pk' }, 2),
    etcdKv('/aisix/provider_keys/pk', { display_name: 'pk', provider: 'openai', api_key: 'sk-up' }, 3),
  ];
  for (let i = 0; i < KEYS; i++) {
    const hash = i.toString(16).padStart(64, '0');
    kvs.push(
      etcdKv(
        `/aisix/api_keys/k${String(i).padStart(7, '0')}`,
        { key_hash: hash, allowed_models: ['m'] },
        revOf(i),
      ),
    );
  }
  return kvs.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

async function* pieces(kvs: EtcdKv[]): AsyncGenerator<EtcdKv[]> {
  for (let i = 0; i < kvs.length; i += PIECE) yield kvs.slice(i, i + PIECE);
}

/**
 * The longest hold of the loop while `work` runs (ms): between two turns, the lesser of the wall time and the
 * main thread's CPU time, less the collector's pauses in it (its work, not Sluice's).
 */
async function longestHold(work: () => Promise<void>): Promise<{ holdMs: number; turns: number }> {
  const gcs: { start: number; ms: number }[] = [];
  const gc = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcs.push({ start: e.startTime, ms: e.duration });
  });
  gc.observe({ entryTypes: ['gc'] });
  const gaps: { from: number; to: number; cpuMs: number }[] = [];
  let stop = false;
  let wall = performance.now();
  let cpu = mainThreadCpuMs();
  const tick = (): void => {
    const w = performance.now();
    const c = mainThreadCpuMs();
    gaps.push({ from: wall, to: w, cpuMs: c - cpu });
    wall = w;
    cpu = c;
    if (!stop) setTimeout(tick, 0);
  };
  setTimeout(tick, 0);
  try {
    await work();
  } finally {
    stop = true;
  }
  await new Promise((r) => setTimeout(r, 10)); // the collector's entries arrive after it
  gc.disconnect();
  let holdMs = 0;
  for (const g of gaps) {
    const gcMs = gcs.filter((e) => e.start >= g.from && e.start < g.to).reduce((sum, e) => sum + e.ms, 0);
    holdMs = Math.max(holdMs, Math.min(g.to - g.from, g.cpuMs) - gcMs);
  }
  return { holdMs, turns: gaps.length };
}

describe('the event loop during a large etcd range', () => {
  test(`${KEYS} api keys: no pass over the rows holds the loop`, async (t) => {
    const kvs = rows();
    const sink = recordingSink();
    const applied = new EtcdRows(sink, '/aisix', () => {});
    const { holdMs, turns } = await longestHold(() => applied.applyPages({ revision: 300_000, pages: pieces(kvs) }));
    t.diagnostic(`longest hold ${holdMs.toFixed(1)} ms, ${turns} turns`);
    const snapshot = sink.applied.at(-1)!;
    assert.equal(snapshot.apiKeys.size, KEYS);
    assert.equal(
      snapshot.apiKeyByHash((KEYS - 1).toString(16).padStart(64, '0'))?.id,
      `k${String(KEYS - 1).padStart(7, '0')}`,
    );
    assert.equal(sink.metas.at(-1)!.revision, 300_000);
    // In write order (a hash belongs to the key written last): the sort in slices sorted them all.
    const revs = [...snapshot.apiKeys.values()].map((k) => revOf(Number(k.id.slice(1))));
    assert.ok(revs.every((r, i) => i === 0 || revs[i - 1]! < r), 'api keys in write order');
    // A slice is 10 ms; a pass over every row took 200 ms here.
    assert.ok(holdMs < 50, `the loop was held ${holdMs.toFixed(1)} ms at once (${turns} turns)`);
  });
});

describe('the event loop during a large snapshot cache restore', () => {
  test(`${KEYS} api keys restored at boot: no pass over the rows holds the loop`, async (t) => {
    const loaded = new EtcdRows(recordingSink(), '/aisix', () => {});
    await loaded.applyPages({ revision: 300_000, pages: pieces(rows()) });
    const bytes = (await loaded.cacheDocument(() => undefined))!;
    const sink = recordingSink();
    const restoring = new EtcdRows(sink, '/aisix', () => {});
    const { holdMs, turns } = await longestHold(async () => {
      const decoded = decodeCache(bytes, '/aisix');
      assert.ok(decoded.ok);
      const restored = new RestoredRows('/aisix');
      assert.equal(await restored.verify(decoded.doc), undefined);
      await restoring.applyRestored(restored, decoded.doc);
    });
    t.diagnostic(`longest hold ${holdMs.toFixed(1)} ms, ${turns} turns`);
    const snapshot = sink.applied.at(-1)!;
    assert.equal(snapshot.apiKeys.size, KEYS);
    assert.equal(sink.metas.at(-1)!.revision, 300_000);
    assert.ok(holdMs < 50, `the loop was held ${holdMs.toFixed(1)} ms at once (${turns} turns)`);
  });
});

describe('the sort in slices', () => {
  test('sorts as the native sort does, across its runs and merges', () => {
    for (const n of [0, 1, 4095, 4096, 4097, 3 * 4096 + 5, 50_000]) {
      const values = Float64Array.from({ length: n }, (_, i) => ((i * 7919) % 100_003) * 2 ** 21 + i);
      const want = values.slice().sort();
      const steps = sortSteps(values.slice());
      let r = steps.next();
      let yields = 0;
      for (; !r.done; r = steps.next()) yields++;
      assert.deepEqual(r.value, want, `${n} values`);
      assert.ok(n < 4096 * 4 || yields > 4, `${n} values sorted in ${yields} steps`);
    }
  });
});
