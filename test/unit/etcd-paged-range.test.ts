// A paged range (src/sources/etcd/client.ts `rangePaged`, planned by src/sources/etcd/range-plan.ts; docs/etcd.md
// "How it reads") against a real HTTP server that answers etcd 3.4's range call as etcd does: keys in
// [key, range_end) in byte order, `limit` of them, `more`, and `count` = every key in the asked range (what etcd
// 3.4 walks to answer). Every key once, in order, at the first page's revision; the next page asked for while the
// caller holds this one; and, for several key shapes, few requests that walk few keys.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { DECODED_KVS, decodeKv, EtcdClient, EtcdError } from '../../src/sources/etcd/client.ts';
import { until } from '../support/until.ts';

interface Asked {
  key: string;
  end: string;
  revision?: string;
  /** Keys etcd walked to answer: every key in the asked range. */
  walked: number;
}

/** etcd's range over `keys` (any order given; served in byte order), recording what each request asked. */
class MockEtcd {
  private keys: Buffer[] = [];
  readonly asked: Asked[] = [];
  readonly revision = 42;

  load(keys: string[]): void {
    this.keys = keys.map((k) => Buffer.from(k)).sort(Buffer.compare);
    this.asked.length = 0;
  }

  private lower(k: Buffer): number {
    let lo = 0;
    let hi = this.keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (Buffer.compare(this.keys[mid]!, k) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  answer(r: { key: string; range_end: string; limit?: string; revision?: string }): unknown {
    const key = Buffer.from(r.key, 'base64');
    const end = Buffer.from(r.range_end, 'base64');
    const from = this.lower(key);
    const to = end.length === 1 && end[0] === 0 ? this.keys.length : this.lower(end);
    const count = Math.max(0, to - from);
    const limit = Number(r.limit ?? 0) || count;
    this.asked.push({
      key: key.toString(),
      end: end.toString(),
      ...(r.revision ? { revision: r.revision } : {}),
      walked: count,
    });
    const page = this.keys.slice(from, from + Math.min(limit, count));
    return {
      header: { revision: String(this.revision) },
      kvs: page.map((k) => ({
        key: k.toString('base64'),
        value: Buffer.from('v').toString('base64'),
        mod_revision: '2',
        create_revision: '2',
        version: '1',
      })),
      ...(count > page.length ? { more: true } : {}),
      ...(count > 0 ? { count: String(count) } : {}),
    };
  }
}

const etcd = new MockEtcd();
let server: Server;
let url: string;

before(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(etcd.answer(JSON.parse(body))));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

async function readAll(prefix: string, limit: number): Promise<{ keys: string[]; pages: number }> {
  const range = await new EtcdClient({ endpoints: [url] }).rangePaged(prefix, { limit });
  assert.equal(range.revision, etcd.revision);
  const keys: string[] = [];
  let pages = 0;
  for await (const page of range.pages) {
    pages++;
    keys.push(...page.map((kv) => kv.key));
  }
  return { keys, pages };
}

const byBytes = (keys: string[]) => keys.map((k) => Buffer.from(k)).sort(Buffer.compare).map((b) => b.toString());
const pad = (i: number, n: number) => String(i).padStart(n, '0');

/** Key shapes a gateway meets: ids of every kind, under one prefix with a few other kinds beside them. */
const SHAPES: Record<string, (i: number) => string> = {
  'UUIDs': () => `/aisix/api_keys/${randomUUID()}`,
  'zero-padded numbers': (i) => `/aisix/api_keys/user-${pad(i, 6)}`,
  'numbers of every length': (i) => `/aisix/api_keys/k${i}`,
  'one long shared prefix': (i) =>
    `/aisix/api_keys/tenant-acme-production-eu-west-1-namespace-default-key-${pad(i, 7)}`,
  'non-ASCII, out of order': (i) => `/aisix/api_keys/ключ-${pad((i * 7919) % 20_000, 6)}-é`,
  'tenants of very different sizes': (i) =>
    `/aisix/api_keys/t${Math.floor(((i * 7919) % 1000) ** 3 / 1e7)}/${randomUUID()}`,
};

/** Extra requests allowed over one per page: where the density changes at every tenant, a third more. */
const EXTRA: Record<string, (pages: number) => number> = {
  'tenants of very different sizes': (pages) => Math.ceil(pages / 3) + 4,
};

describe('etcd paged range', () => {
  test('the next page is asked for while the caller holds this one; every key once, at one revision', async () => {
    const keys = ['/p/a', '/p/b', '/p/c', '/p/d', '/p/e'];
    etcd.load([...keys, '/p0', '/o']);
    const range = await new EtcdClient({ endpoints: [url] }).rangePaged('/p/', { limit: 2 });
    const it = range.pages[Symbol.asyncIterator]();
    const seen: string[] = [];
    const first = await it.next();
    seen.push(...(first.value as { key: string }[]).map((kv) => kv.key));
    // The caller has not asked for the second page yet: it is on its way all the same.
    await until(() => etcd.asked.length === 2, 5000, 'the second page asked for ahead');
    assert.deepEqual(etcd.asked[1], { key: '/p/b\u0000', end: '/p0', revision: '42', walked: 3 });
    for (;;) {
      const r = await it.next();
      if (r.done) break;
      seen.push(...r.value.map((kv) => kv.key));
    }
    assert.deepEqual(seen, keys);
    assert.equal(etcd.asked.length, 3, 'no request past the last page');
  });

  test('fewer keys than a page: one request; none: one request and one empty page', async () => {
    etcd.load(Array.from({ length: 499 }, (_, i) => `/aisix/api_keys/${randomUUID()}-${i}`));
    const { keys } = await readAll('/aisix/', 500);
    assert.equal(keys.length, 499);
    assert.equal(etcd.asked.length, 1);
    etcd.load(['/other/x']);
    const none = await readAll('/aisix/', 500);
    assert.deepEqual(none, { keys: [], pages: 1 });
    assert.equal(etcd.asked.length, 1);
  });

  test('a page is handed in pieces of at most DECODED_KVS rows: no decode of a whole page holds the loop', async () => {
    const n = 2 * DECODED_KVS + 100;
    etcd.load(Array.from({ length: n }, (_, i) => `/aisix/api_keys/${pad(i, 5)}`));
    const range = await new EtcdClient({ endpoints: [url] }).rangePaged('/aisix/', { limit: 4 * DECODED_KVS });
    const sizes: number[] = [];
    for await (const piece of range.pages) sizes.push(piece.length);
    assert.deepEqual(sizes, [DECODED_KVS, DECODED_KVS, 100]);
    assert.equal(etcd.asked.length, 1, 'one page');
  });

  for (const [shape, key] of Object.entries(SHAPES)) {
    test(`${shape}: every key once, in order, at the revision; few requests, each walking a few pages`, async () => {
      const n = 20_000;
      const limit = 500;
      const keys = [...new Set(Array.from({ length: n }, (_, i) => key(i)))];
      const others = ['/aisix/models/gpt-test', '/aisix/provider_keys/pk1', '/aisix/api_keys/caller'];
      etcd.load([...keys, ...others, '/aisix0', '/aisiw/z']);
      const read = await readAll('/aisix/', limit);
      const all = byBytes([...keys, ...others]);
      assert.equal(read.keys.length, all.length, 'every key once');
      assert.deepEqual(read.keys, all, 'in etcd order');
      const asked = etcd.asked;
      assert.ok(asked.slice(1).every((a) => a.revision === '42'), 'every page at the first page revision');
      const pages = Math.ceil(all.length / limit);
      const extra = EXTRA[shape]?.(pages) ?? 4;
      assert.ok(asked.length <= pages + extra, `${asked.length} requests for ${pages} pages`);
      // Each page over the whole rest of the prefix walked n²/2·limit keys in all (20 × n here).
      const walked = asked.reduce((s, a) => s + a.walked, 0);
      assert.ok(walked <= 5 * all.length, `walked ${walked} keys to read ${all.length}`);
      const far = asked.slice(1).filter((a) => a.walked > 8 * limit);
      assert.deepEqual(far, [], 'no request but the first walks more than 8 pages');
    });
  }
});

describe('a kv as etcd sends it', () => {
  test('decodes as its UTF-8 bytes read, ASCII or not; bytes that are not UTF-8 are marked; bad base64 is refused', () => {
    const b64 = (x: string | Buffer) => Buffer.from(x).toString('base64');
    const utf8 = new TextDecoder('utf-8');
    const texts = [
      '',
      '/aisix/api_keys/k1',
      '{"a":"\u007f\u0000"}',
      '\u00e9t\u00e9',
      '\u{1F600} and \uFF21',
      'a\u0080',
    ];
    for (const t of texts) {
      const kv = decodeKv({ key: b64(`/k/${t}`), value: b64(t), mod_revision: '7' });
      assert.deepEqual([kv.key, kv.value, kv.modRevision, kv.invalidUtf8], [`/k/${t}`, t, 7, undefined], t);
    }
    const bad = Buffer.from([0x61, 0xff, 0x62]);
    const kv = decodeKv({ key: b64('/k/x'), value: b64(bad) });
    assert.equal(kv.value, utf8.decode(bad));
    assert.equal(kv.invalidUtf8, true);
    assert.throws(
      () => decodeKv({ key: '!!not base64' }),
      (e: Error) => e instanceof EtcdError && e.kind === 'protocol',
    );
  });
});
