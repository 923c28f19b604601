// etcd source layer: client (range/put/delete/auth/timeouts/failover), watch (stream parsing, idle
// re-watch, compaction) and supervisor (snapshot → events, resync, backoff, stop), against a real etcd.
// Run: node --import tsx --test test/integration/etcd-client.test.ts

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { base64Encode } from '../../src/util/bytes.ts';
import {
  encodeUtf8,
  EtcdClient,
  EtcdError,
  type EtcdFetch,
  parseInt64,
  prefixRange,
  prefixRangeEnd,
} from '../../src/sources/etcd/client.ts';
import {
  interpretWatchResponse,
  JsonObjectSplitter,
  type WatchMessage,
  watchPrefix,
} from '../../src/sources/etcd/watch.ts';
import {
  backoffDelay,
  type EtcdEventBatch,
  type EtcdSnapshot,
  EtcdSupervisor,
  type EtcdSupervisorOptions,
} from '../../src/sources/etcd/supervisor.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { deadEndpoint } from '../support/process.ts';
import { latch, until, within } from '../support/until.ts';

// ---------------------------------------------------------------------------------------------------
// helpers

/** Records everything a supervisor reports and keeps a key → value view; `until` waits on a condition. */
class Recorder {
  snapshots: EtcdSnapshot[] = [];
  batches: EtcdEventBatch[] = [];
  errors: EtcdError[] = [];
  backoffs: { error: EtcdError; ms: number }[] = [];
  connected: boolean[] = [];
  rewatches: number[] = [];
  view = new Map<string, string>();
  eventCount = new Map<string, number>();
  private waiters = new Set<() => void>();

  private bump(): void {
    for (const w of [...this.waiters]) w();
  }

  callbacks(): Pick<
    EtcdSupervisorOptions,
    'onSnapshot' | 'onEvents' | 'onError' | 'onBackoff' | 'onConnected' | 'onRewatch'
  > {
    return {
      onSnapshot: (s) => {
        this.snapshots.push(s);
        this.view = new Map(s.kvs.map((kv) => [kv.key, kv.value]));
        this.bump();
      },
      onEvents: (b) => {
        this.batches.push(b);
        for (const e of b.events) {
          this.eventCount.set(`${e.type} ${e.key}`, (this.eventCount.get(`${e.type} ${e.key}`) ?? 0) + 1);
          if (e.type === 'put') this.view.set(e.key, e.value);
          else this.view.delete(e.key);
        }
        this.bump();
      },
      onError: (e) => {
        this.errors.push(e);
        this.bump();
      },
      onBackoff: (error, ms) => {
        this.backoffs.push({ error, ms });
        this.bump();
      },
      onConnected: (c) => {
        this.connected.push(c);
        this.bump();
      },
      onRewatch: (rev) => {
        this.rewatches.push(rev);
        this.bump();
      },
    };
  }

  until(pred: () => boolean, ms: number, what: string): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (!pred()) return;
        this.waiters.delete(check);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(
          new Error(
            `timed out after ${ms} ms waiting for ${what}; snapshots=${this.snapshots.length} batches=${this.batches.length} ` +
              `errors=${JSON.stringify(this.errors.map((e) => e.message))} rewatches=${JSON.stringify(this.rewatches)}`,
          ),
        );
      }, ms);
      this.waiters.add(check);
    });
  }
}

/** Bulk puts through /v3/kv/txn (etcd's default --max-txn-ops is 128). */
async function bulkPut(endpoint: string, entries: [string, string][]): Promise<void> {
  for (let i = 0; i < entries.length; i += 128) {
    const success = entries.slice(i, i + 128).map(([k, v]) => ({
      request_put: { key: base64Encode(encodeUtf8(k)), value: base64Encode(encodeUtf8(v)) },
    }));
    const res = await fetch(`${endpoint}/v3/kv/txn`, { method: 'POST', body: JSON.stringify({ success }) });
    const text = await res.text();
    assert.equal(res.status, 200, text);
  }
}

async function gateway(endpoint: string, path: string, body: unknown, token?: string): Promise<unknown> {
  const headers: Record<string, string> = token ? { authorization: token } : {};
  const res = await fetch(`${endpoint}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  const text = await res.text();
  assert.equal(res.status, 200, `${path}: ${text}`);
  return JSON.parse(text);
}

/** A fetch whose Nth call to `path` (1-based) waits for `release` before going out. */
function gatedFetch(path: string, n: number) {
  let calls = 0;
  const reached = latch();
  const release = latch();
  const f: EtcdFetch = async (url, init) => {
    if (url.endsWith(path) && ++calls === n) {
      reached.resolve();
      await release.promise;
    }
    return fetch(url, init);
  };
  return { fetch: f, reached: reached.promise, release: () => release.resolve(), calls: () => calls };
}

/** A TCP server that accepts connections and then behaves badly. */
async function badServer(behaviour: 'silent' | 'headers-only'): Promise<{ endpoint: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const srv: Server = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    if (behaviour === 'headers-only') {
      s.once(
        'data',
        () =>
          s.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n1\r\n{\r\n'),
      );
    }
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const addr = srv.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        srv.close(() => r());
      }),
  };
}

async function collect(
  gen: AsyncGenerator<WatchMessage>,
  until: (m: WatchMessage, all: WatchMessage[]) => boolean,
): Promise<WatchMessage[]> {
  const out: WatchMessage[] = [];
  for await (const m of gen) {
    out.push(m);
    if (until(m, out)) break;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// pure parts

describe('codecs and parsing (no etcd)', () => {
  test('prefix range end follows etcd (last byte + 1, trailing 0xff dropped)', () => {
    assert.deepEqual([...prefixRangeEnd(encodeUtf8('/aisix/'))], [...encodeUtf8('/aisix0')]);
    assert.deepEqual([...prefixRangeEnd(new Uint8Array([0x61, 0xff, 0xff]))], [0x62]);
    assert.deepEqual([...prefixRangeEnd(new Uint8Array([0xff]))], [0]);
    assert.deepEqual(prefixRange('/a/'), { key: btoa('/a/'), range_end: btoa('/a0') });
    assert.deepEqual(prefixRange(''), { key: 'AA==', range_end: 'AA==' });
  });

  test('64-bit integers arrive as strings (or numbers, or absent)', () => {
    assert.equal(parseInt64('12345', 'r'), 12345);
    assert.equal(parseInt64(7, 'r'), 7);
    assert.equal(parseInt64(undefined, 'r'), 0);
    assert.throws(() => parseInt64('9007199254740993', 'r'), EtcdError);
    assert.throws(() => parseInt64('x', 'r'), EtcdError);
  });

  test('splitter: objects spanning chunks, several per chunk, braces inside strings', () => {
    const objs = [{ a: 1 }, { b: '}{"\\' }, { c: [{ d: 'é😀' }] }, { e: {} }];
    const text = objs.map((o) => JSON.stringify(o)).join('\n') + '\n';
    for (let size = 1; size <= text.length; size++) {
      const s = new JsonObjectSplitter();
      const out: unknown[] = [];
      for (let i = 0; i < text.length; i += size) {
        out.push(...s.push(text.slice(i, i + size)).map((t) => JSON.parse(t)));
      }
      assert.deepEqual(out, objs, `chunk size ${size}`);
    }
    // No newline between objects is fine too.
    assert.deepEqual(new JsonObjectSplitter().push('{"x":1}{"y":2}').map((t) => JSON.parse(t)), [{ x: 1 }, { y: 2 }]);
    assert.throws(() => new JsonObjectSplitter().push('garbage'), EtcdError);
  });

  test('watch responses: created, PUT without type, DELETE, progress, compaction, cancel, error', () => {
    const k = btoa('/p/k');
    assert.deepEqual(interpretWatchResponse({ result: { header: { revision: '5' }, created: true } }), {
      kind: 'created',
      headerRevision: 5,
    });
    const ev = interpretWatchResponse({
      result: {
        header: { revision: '7' },
        events: [
          { kv: { key: k, mod_revision: '6', create_revision: '6', version: '1', value: btoa('v') } },
          { type: 'DELETE', kv: { key: k, mod_revision: '7' } },
        ],
      },
    });
    assert.equal(ev.kind, 'events');
    if (ev.kind === 'events') {
      assert.deepEqual(
        ev.events.map((e) => [e.type, e.key, e.value, e.modRevision]),
        [
          ['put', '/p/k', 'v', 6],
          ['delete', '/p/k', '', 7],
        ],
      );
    }
    assert.deepEqual(interpretWatchResponse({ result: { header: { revision: '9' } } }), {
      kind: 'progress',
      revision: 9,
    });
    assert.deepEqual(interpretWatchResponse({ result: { header: {}, canceled: true, compact_revision: '3' } }), {
      kind: 'compacted',
      compactRevision: 3,
    });
    assert.deepEqual(interpretWatchResponse({ result: { canceled: true, cancel_reason: 'boom' } }), {
      kind: 'canceled',
      reason: 'boom',
      created: false,
    });
    assert.deepEqual(interpretWatchResponse({ error: { grpc_code: 14, message: 'unavailable' } }), {
      kind: 'error',
      message: 'unavailable',
      code: 14,
    });
  });

  test('watch parses a chunked stream whose UTF-8 characters straddle chunk boundaries', async () => {
    const enc = new TextEncoder();
    const key = (s: string): string => base64Encode(encodeUtf8(s));
    const lines = [
      { result: { header: { revision: '10' }, watch_id: '0', created: true } },
      {
        result: {
          header: { revision: '11' },
          events: [{
            kv: { key: key('/p/é'), mod_revision: '11', create_revision: '11', version: '1', value: key('{"v":"😀"}') },
          }],
        },
      },
      {
        result: {
          header: { revision: '13' },
          events: [{ type: 'DELETE', kv: { key: key('/p/é'), mod_revision: '12' } }, {
            kv: { key: key('/p/x'), mod_revision: '13' },
          }],
        },
      },
      { result: { header: { revision: '20' } } },
      { result: { header: {}, canceled: true, compact_revision: '15' } },
    ];
    const bytes = enc.encode(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    let requestBody: unknown;
    const fakeFetch: EtcdFetch = async (_url, init) => {
      requestBody = JSON.parse(String(init.body));
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          for (let i = 0; i < bytes.length; i += 5) c.enqueue(bytes.slice(i, i + 5));
          c.close();
        },
      });
      return new Response(body, { status: 200 });
    };
    const client = new EtcdClient({ endpoints: ['http://fake:1'], fetch: fakeFetch });
    const msgs = await collect(watchPrefix(client, { prefix: '/p/', startRevision: 11 }), () => false);
    assert.deepEqual(requestBody, {
      create_request: { key: btoa('/p/'), range_end: btoa('/p0'), start_revision: '11', progress_notify: true },
    });
    assert.deepEqual(
      msgs.map((
        m,
      ) => (m.type === 'events'
        ? { type: m.type, revision: m.revision, ev: m.events.map((e) => `${e.type} ${e.key} ${e.value}`) }
        : m)
      ),
      [
        { type: 'created', startRevision: 11, headerRevision: 10 },
        { type: 'events', revision: 11, ev: ['put /p/é {"v":"😀"}'] },
        { type: 'events', revision: 13, ev: ['delete /p/é ', 'put /p/x '] },
        { type: 'progress', revision: 20 },
        { type: 'compacted', compactRevision: 15 },
      ],
    );
  });

  test('backoff: 1 s, 2 s, 4 s … capped at 60 s', () => {
    assert.deepEqual(
      Array.from({ length: 9 }, (_, i) => backoffDelay(i)),
      [1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000],
    );
    assert.equal(backoffDelay(10_000), 60_000);
  });
});

// ---------------------------------------------------------------------------------------------------
// against a real etcd

describe('etcd client, watch and supervisor (real etcd)', { timeout: 180_000 }, () => {
  let etcd: EtcdServer;
  let client: EtcdClient;
  before(async () => {
    etcd = await startEtcd();
    client = new EtcdClient({ endpoints: [etcd.endpoint] });
  });
  after(async () => {
    await etcd?.stop();
  });

  test('range over a prefix: several keys, empty and non-ASCII values, prefix isolation', async () => {
    await client.put('/r1/a', '{"x":1}');
    await client.put('/r1/b/c', '');
    await client.put('/r1/ü', 'värde ✓');
    await client.put('/r10/outside', 'no');
    await client.put('/r0', 'no');
    const { revision: delRev, deleted } = await client.delete('/r1/gone-never-existed');
    assert.equal(deleted, 0);
    const res = await client.range('/r1/');
    assert.ok(res.revision >= delRev);
    assert.deepEqual(
      res.kvs.map((kv) => [kv.key, kv.value]),
      [
        ['/r1/a', '{"x":1}'],
        ['/r1/b/c', ''],
        ['/r1/ü', 'värde ✓'],
      ],
    );
    assert.ok(res.kvs.every((kv) => kv.modRevision > 0 && kv.version === 1 && typeof kv.modRevision === 'number'));
    assert.deepEqual((await client.range('/nothing-here/')).kvs, []);
    const del = await client.delete('/r1/', { prefix: true });
    assert.equal(del.deleted, 3);
    assert.deepEqual((await client.range('/r1/')).kvs, []);
  });

  test('a 20,000-key range (one response > 4 MiB) loads', async (t) => {
    const value = JSON.stringify({ display_name: 'm', provider: 'openai', model_name: 'gpt-4o', pad: 'x'.repeat(180) });
    const entries: [string, string][] = Array.from(
      { length: 20_000 },
      (_, i) => [`/big/models/${String(i).padStart(6, '0')}`, value],
    );
    const t0 = performance.now();
    await bulkPut(etcd.endpoint, entries);
    const loadMs = performance.now() - t0;
    const t1 = performance.now();
    const res = await client.range('/big/');
    const rangeMs = performance.now() - t1;
    assert.equal(res.kvs.length, 20_000);
    assert.equal(res.kvs[19_999]!.key, '/big/models/019999');
    assert.equal(res.kvs[0]!.value, value);
    const bytes = res.kvs.reduce((n, kv) => n + kv.key.length + kv.value.length, 0);
    assert.ok(bytes > 4 * 1024 * 1024, `payload ${bytes} bytes`);
    t.diagnostic(
      `20k keys, ${(bytes / 1048576).toFixed(1)} MiB decoded: bulk load ${loadMs.toFixed(0)} ms, range ${
        rangeMs.toFixed(0)
      } ms`,
    );
    await client.delete('/big/', { prefix: true });
  });

  test('a paged range reads every key once, all pages at the first page revision', async () => {
    for (const k of ['a', 'b', 'c', 'd', 'e']) await client.put(`/pg/${k}`, k);
    await client.put('/pg0', 'outside');
    const range = await client.rangePaged('/pg/', { limit: 2 });
    // Written after the first page: a later page must not show it (one consistent read).
    await client.put('/pg/f', 'late');
    await client.put('/pg/a', 'changed');
    const pages: string[][] = [];
    for await (const page of range.pages) pages.push(page.map((kv) => `${kv.key}=${kv.value}`));
    assert.deepEqual(pages, [['/pg/a=a', '/pg/b=b'], ['/pg/c=c', '/pg/d=d'], ['/pg/e=e']]);
    assert.equal(range.revision, (await client.range('/pg/')).revision - 2);
    await client.delete('/pg/', { prefix: true });
  });

  test('a paged range whose revision is compacted during the read fails, and a new read sees the keys again', async () => {
    const keys = Array.from({ length: 60 }, (_, i) => `/pc/${String(i).padStart(2, '0')}`);
    for (const k of keys) await client.put(k, 'v');
    const range = await client.rangePaged('/pc/', { limit: 10 });
    const it = range.pages[Symbol.asyncIterator]();
    assert.equal((await it.next()).value?.length, 10);
    const { revision } = await client.put('/pc/late', 'v');
    await client.compact(revision);
    // The page asked ahead may have been answered before the compaction: one of the next two fails.
    await assert.rejects(
      (async () => {
        for (let r = await it.next(); !r.done; r = await it.next());
      })(),
      (e: unknown) => e instanceof EtcdError && e.kind === 'server' && /compacted/.test(e.message),
    );
    const again = await client.rangePaged('/pc/', { limit: 10 });
    const seen: string[] = [];
    for await (const page of again.pages) seen.push(...page.map((kv) => kv.key));
    assert.deepEqual(seen, [...keys, '/pc/late']);
    await client.delete('/pc/', { prefix: true });
  });

  test('supervisor: a compaction during a paged range fails it, and the range is read again', async () => {
    const P = '/rc/';
    for (let i = 0; i < 30; i++) await client.put(`${P}${String(i).padStart(2, '0')}`, 'v');
    const gate = gatedFetch('/v3/kv/range', 2);
    const ranges: { revision: number; keys: string[] }[] = [];
    const errors: EtcdError[] = [];
    const sup = new EtcdSupervisor({
      endpoints: [etcd.endpoint],
      prefix: P,
      fetch: gate.fetch,
      rangePageSize: 10,
      backoff: { initialMs: 50, maxMs: 100 },
      probeIntervalMs: 0,
      onSnapshot: () => {},
      onEvents: () => {},
      onError: (e) => errors.push(e),
      onRange: async (range) => {
        const keys: string[] = [];
        for await (const page of range.pages) keys.push(...page.map((kv) => kv.key));
        ranges.push({ revision: range.revision, keys });
      },
    });
    sup.start();
    try {
      await within(gate.reached, 10_000, 'the second page asked for');
      const { revision } = await client.put(`${P}late`, 'v');
      await client.compact(revision);
      gate.release();
      await until(() => ranges.length === 1, 10_000, 'the range read again');
      assert.match(errors[0]?.message ?? '', /compacted/);
      assert.equal(ranges[0]!.keys.length, 31);
      assert.ok(ranges[0]!.revision >= revision);
    } finally {
      await sup.stop();
      await client.delete(P, { prefix: true });
    }
  });

  test('watch sees puts and deletes from the start revision, in order', async () => {
    const { revision } = await client.range('/w/');
    const ctrl = new AbortController();
    const gen = watchPrefix(client, { prefix: '/w/', startRevision: revision + 1, signal: ctrl.signal });
    const seen = collect(
      gen,
      (_m, all) =>
        all.filter((x) => x.type === 'events').flatMap((x) => (x.type === 'events' ? x.events : [])).length >= 3,
    );
    const p1 = await client.put('/w/a', '1');
    await client.put('/w0', 'outside');
    const p2 = await client.put('/w/a', '2');
    const d = await client.delete('/w/a');
    const msgs = await within(seen, 10_000, 'three watch events');
    ctrl.abort();
    assert.equal(msgs[0]!.type, 'created');
    const events = msgs.flatMap((m) => (m.type === 'events' ? m.events : []));
    assert.deepEqual(
      events.map((e) => [e.type, e.key, e.value, e.modRevision]),
      [
        ['put', '/w/a', '1', p1.revision],
        ['put', '/w/a', '2', p2.revision],
        ['delete', '/w/a', '', d.revision],
      ],
    );
  });

  test('watch from a compacted revision yields `compacted`', async () => {
    const first = await client.put('/c/k', '1');
    await client.put('/c/k', '2');
    const last = await client.put('/c/k', '3');
    await client.compact(last.revision);
    const msgs = await within(
      collect(watchPrefix(client, { prefix: '/c/', startRevision: first.revision }), () => false),
      10_000,
      'compaction',
    );
    assert.deepEqual(msgs.at(-1), { type: 'compacted', compactRevision: last.revision });
  });

  test('supervisor: snapshot, then events; compaction under the watch → full resync (no error)', async () => {
    await client.put('/s/one', '1');
    const gate = gatedFetch('/v3/watch', 1);
    const rec = new Recorder();
    const sup = new EtcdSupervisor({
      endpoints: [etcd.endpoint],
      prefix: '/s/',
      fetch: gate.fetch,
      dialTimeoutMs: 10_000,
      ...rec.callbacks(),
    });
    sup.start();
    try {
      await rec.until(() => rec.snapshots.length === 1, 10_000, 'first snapshot');
      assert.deepEqual([...rec.view], [['/s/one', '1']]);
      // The first watch is held back while history moves on and gets compacted.
      await within(gate.reached, 10_000, 'watch request');
      await client.put('/s/two', '2');
      const last = await client.put('/s/two', '22');
      await client.compact(last.revision);
      gate.release();
      await rec.until(() => rec.snapshots.length === 2, 10_000, 'resync snapshot');
      assert.equal(rec.snapshots[1]!.revision >= last.revision, true);
      assert.deepEqual([...rec.view].sort(), [
        ['/s/one', '1'],
        ['/s/two', '22'],
      ]);
      // And the new watch delivers events.
      await client.delete('/s/one');
      await rec.until(() => !rec.view.has('/s/one'), 10_000, 'delete event');
      assert.deepEqual(rec.errors, []);
      assert.equal(sup.connected, true);
    } finally {
      await sup.stop();
    }
    assert.equal(sup.connected, false);
  });

  test('idle watchdog re-watches from the last seen revision + 1: nothing missed, nothing repeated', async () => {
    // Watch calls: #1 initial, #2 after the first idle period, #3 after the second (held back while we write).
    const gate = gatedFetch('/v3/watch', 3);
    const rec = new Recorder();
    const sup = new EtcdSupervisor({
      endpoints: [etcd.endpoint],
      prefix: '/idle/',
      fetch: gate.fetch,
      idleTimeoutMs: 1500,
      dialTimeoutMs: 10_000,
      ...rec.callbacks(),
    });
    sup.start();
    try {
      await rec.until(() => rec.snapshots.length === 1, 10_000, 'snapshot');
      const s = rec.snapshots[0]!.revision;
      await rec.until(() => rec.rewatches.length === 1, 6_000, 'first idle re-watch');
      assert.equal(rec.rewatches[0], s + 1);
      const a = await client.put('/idle/a', 'A');
      await rec.until(() => rec.view.get('/idle/a') === 'A', 10_000, 'event a');
      await rec.until(() => rec.rewatches.length === 2, 6_000, 'second idle re-watch');
      assert.equal(rec.rewatches[1], a.revision + 1);
      // While the re-watch is in flight, two writes happen: the new watch must deliver both.
      await within(gate.reached, 10_000, 'third watch request');
      await client.put('/idle/b', 'B');
      await client.put('/idle/c', 'C');
      gate.release();
      await rec.until(() => rec.view.get('/idle/b') === 'B' && rec.view.get('/idle/c') === 'C', 10_000, 'events b, c');
      assert.equal(rec.snapshots.length, 1, 'an idle re-watch is not a resync');
      assert.deepEqual(Object.fromEntries(rec.eventCount), { 'put /idle/a': 1, 'put /idle/b': 1, 'put /idle/c': 1 });
      assert.deepEqual(rec.errors, []);
      assert.deepEqual(rec.backoffs, []);
    } finally {
      await sup.stop();
    }
  });

  test('multiple endpoints: a dead one is skipped; all dead → one error naming each', async () => {
    const dead = await deadEndpoint();
    const c = new EtcdClient({ endpoints: [dead, etcd.endpoint] });
    await c.put('/m/k', 'v');
    assert.deepEqual((await c.range('/m/')).kvs.map((kv) => kv.value), ['v']);
    const dead2 = await deadEndpoint();
    const none = new EtcdClient({ endpoints: [dead, dead2], dialTimeoutMs: 2000 });
    await assert.rejects(none.range('/m/'), (e: unknown) => {
      assert.ok(e instanceof EtcdError);
      assert.equal(e.kind, 'transport');
      assert.match(e.message, /every endpoint failed/);
      assert.ok(e.message.includes(dead) && e.message.includes(dead2), e.message);
      return true;
    });
  });

  test('dial timeout (no response headers) and request timeout (body stalls) fail over to the next endpoint', async () => {
    const silent = await badServer('silent');
    const stalled = await badServer('headers-only');
    try {
      const c = new EtcdClient({
        endpoints: [silent.endpoint, stalled.endpoint, etcd.endpoint],
        dialTimeoutMs: 300,
        requestTimeoutMs: 600,
      });
      const t0 = performance.now();
      await c.put('/t/k', 'v');
      const ms = performance.now() - t0;
      assert.ok(ms >= 800 && ms < 5000, `took ${ms} ms`);
      const only = new EtcdClient({ endpoints: [silent.endpoint], dialTimeoutMs: 300 });
      await assert.rejects(
        only.range('/t/'),
        (e: unknown) => e instanceof EtcdError && e.kind === 'timeout' && /dial timeout 300 ms/.test(e.message),
      );
      const onlyStalled = new EtcdClient({ endpoints: [stalled.endpoint], dialTimeoutMs: 300, requestTimeoutMs: 600 });
      await assert.rejects(
        onlyStalled.range('/t/'),
        (e: unknown) => e instanceof EtcdError && e.kind === 'timeout' && /request timeout 600 ms/.test(e.message),
      );
    } finally {
      await silent.close();
      await stalled.close();
    }
  });

  test('stop() interrupts an in-flight request and a backoff wait promptly', async () => {
    const silent = await badServer('silent');
    try {
      const rec = new Recorder();
      const sent = latch();
      const f: EtcdFetch = (url, init) => {
        sent.resolve();
        return fetch(url, init);
      };
      const sup = new EtcdSupervisor({
        endpoints: [silent.endpoint],
        prefix: '/x/',
        fetch: f,
        dialTimeoutMs: 60_000,
        requestTimeoutMs: 60_000,
        ...rec.callbacks(),
      });
      sup.start();
      await within(sent.promise, 2000, 'request sent'); // it would hang for 60 s
      let t0 = performance.now();
      await within(sup.stop(), 2000, 'stop during request');
      assert.ok(performance.now() - t0 < 1000);
      assert.deepEqual(rec.errors, [], 'stopping is not an error');

      const dead = await deadEndpoint();
      const rec2 = new Recorder();
      const sup2 = new EtcdSupervisor({
        endpoints: [dead],
        prefix: '/x/',
        backoff: { initialMs: 60_000, maxMs: 60_000 },
        ...rec2.callbacks(),
      });
      sup2.start();
      await rec2.until(() => rec2.backoffs.length === 1, 5000, 'backoff');
      assert.equal(rec2.backoffs[0]!.ms, 60_000);
      t0 = performance.now();
      await within(sup2.stop(), 2000, 'stop during backoff');
      assert.ok(performance.now() - t0 < 1000);
    } finally {
      await silent.close();
    }
  });
});

describe('etcd killed and restarted under a running supervisor', { timeout: 120_000 }, () => {
  let etcd: EtcdServer;
  before(async () => {
    etcd = await startEtcd();
  });
  after(async () => {
    await etcd?.stop();
  });

  test('backoff fires and grows, connection state flips, it reconnects and catches up', async () => {
    const client = new EtcdClient({ endpoints: [etcd.endpoint] });
    await client.put('/k/before', '1');
    const rec = new Recorder();
    const sup = new EtcdSupervisor({
      endpoints: [etcd.endpoint],
      prefix: '/k/',
      dialTimeoutMs: 1000,
      requestTimeoutMs: 2000,
      backoff: { initialMs: 100, maxMs: 400 },
      ...rec.callbacks(),
    });
    sup.start();
    try {
      await rec.until(() => rec.snapshots.length === 1 && rec.connected.at(-1) === true, 10_000, 'snapshot');
      await etcd.kill();
      await rec.until(() => rec.backoffs.length >= 4, 15_000, 'four backoffs');
      assert.equal(rec.connected.at(-1), false);
      assert.equal(sup.connected, false);
      assert.deepEqual(rec.backoffs.slice(0, 4).map((b) => b.ms), [100, 200, 400, 400]);
      assert.ok(rec.errors.length >= 4 && rec.errors.every((e) => e instanceof EtcdError && e.message.length > 0));
      await etcd.restart();
      await client.put('/k/after-restart', '2');
      await rec.until(
        () => rec.view.get('/k/after-restart') === '2' && rec.connected.at(-1) === true,
        15_000,
        'catch-up',
      );
      assert.equal(rec.view.get('/k/before'), '1');
      // And the live watch works again.
      await client.put('/k/live', '3');
      await rec.until(() => rec.view.get('/k/live') === '3', 10_000, 'live event');
      assert.equal(sup.connected, true);
    } finally {
      await sup.stop();
    }
  });
});

describe('basic auth', { timeout: 120_000 }, () => {
  const PASSWORD = 'pw-S3cr3t-zq7';
  let etcd: EtcdServer;
  const tokens = new Set<string>();
  const messages: string[] = [];
  let authCalls = 0;
  /** Records tokens sent and received, so we can check none leaks into an error message. */
  const spyFetch: EtcdFetch = async (url, init) => {
    const auth = (init.headers as Record<string, string> | undefined)?.authorization;
    if (auth) tokens.add(auth);
    const res = await fetch(url, init);
    if (url.endsWith('/v3/auth/authenticate')) {
      authCalls++;
      const body = (await res.clone().json()) as { token?: string };
      if (body.token) tokens.add(body.token);
    }
    return res;
  };
  const record = (e: unknown): true => {
    assert.ok(e instanceof EtcdError, String(e));
    messages.push(e.message);
    return true;
  };

  before(async () => {
    etcd = await startEtcd();
    await gateway(etcd.endpoint, '/v3/auth/user/add', { name: 'root', password: PASSWORD });
    await gateway(etcd.endpoint, '/v3/auth/user/grant', { user: 'root', role: 'root' });
    await gateway(etcd.endpoint, '/v3/auth/enable', {});
  });
  after(async () => {
    await etcd?.stop();
  });

  test('wrong password and missing credentials are refused; error messages carry no secret', async () => {
    const bad = new EtcdClient({
      endpoints: [etcd.endpoint],
      user: 'root',
      password: 'wrong-' + PASSWORD,
      fetch: spyFetch,
    });
    await assert.rejects(
      bad.range('/a/'),
      (e: unknown) => record(e) && e instanceof EtcdError && e.kind === 'auth' && /authentication/.test(e.message),
    );
    const anon = new EtcdClient({ endpoints: [etcd.endpoint] });
    await assert.rejects(anon.range('/a/'), record);
  });

  test('authenticates, sends the token, re-authenticates after the token is lost (etcd restart)', async () => {
    const c = new EtcdClient({ endpoints: [etcd.endpoint], user: 'root', password: PASSWORD, fetch: spyFetch });
    authCalls = 0;
    await c.put('/a/k', 'v');
    assert.deepEqual((await c.range('/a/')).kvs.map((kv) => kv.value), ['v']);
    assert.equal(authCalls, 1);
    await etcd.restart(); // simple tokens live in memory: the old one is now invalid
    assert.deepEqual((await c.range('/a/')).kvs.map((kv) => kv.value), ['v']);
    assert.equal(authCalls, 2);
  });

  test('supervisor with auth: snapshot and events; a watch refused for a bad token re-authenticates', async () => {
    let corrupted = 0;
    // The first watch goes out with a token etcd does not know: etcd creates and cancels it.
    const f: EtcdFetch = (url, init) => {
      if (url.endsWith('/v3/watch') && corrupted++ === 0) {
        return spyFetch(url, {
          ...init,
          headers: { ...(init.headers as Record<string, string>), authorization: 'bogus.1' },
        });
      }
      return spyFetch(url, init);
    };
    const rec = new Recorder();
    const sup = new EtcdSupervisor({
      endpoints: [etcd.endpoint],
      prefix: '/a/',
      user: 'root',
      password: PASSWORD,
      fetch: f,
      ...rec.callbacks(),
    });
    sup.start();
    try {
      await rec.until(() => rec.snapshots.length === 1, 10_000, 'snapshot');
      const c = new EtcdClient({ endpoints: [etcd.endpoint], user: 'root', password: PASSWORD });
      await c.put('/a/new', 'n');
      await rec.until(() => rec.view.get('/a/new') === 'n', 10_000, 'event');
      assert.ok(corrupted >= 2, 'watch was retried');
      assert.deepEqual(rec.errors, []);
    } finally {
      await sup.stop();
    }
  });

  test('supervisor with a wrong password: errors and backoffs never contain the password or a token', async () => {
    const rec = new Recorder();
    const sup = new EtcdSupervisor({
      endpoints: [etcd.endpoint],
      prefix: '/a/',
      user: 'root',
      password: PASSWORD + '-nope',
      fetch: spyFetch,
      backoff: { initialMs: 50, maxMs: 100 },
      ...rec.callbacks(),
    });
    sup.start();
    try {
      await rec.until(() => rec.backoffs.length >= 2, 10_000, 'backoffs');
    } finally {
      await sup.stop();
    }
    messages.push(...rec.errors.map((e) => e.message), ...rec.backoffs.map((b) => b.error.message));
    assert.ok(rec.errors.every((e) => e.kind === 'auth'));
  });

  test('no error message seen in this suite contains the password or a token', () => {
    assert.ok(messages.length >= 4, `collected ${messages.length} messages`);
    assert.ok(tokens.size >= 2, 'saw tokens');
    for (const m of messages) {
      assert.ok(!m.includes(PASSWORD), `password leaked: ${m}`);
      for (const t of tokens) assert.ok(!m.includes(t), `token leaked: ${m}`);
    }
  });
});
