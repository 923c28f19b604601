// A paged range asks for the next page while its caller judges the current one (src/sources/etcd/client.ts
// `rangePaged`; docs/performance.md "Configuration at scale"), against a real HTTP server that answers etcd's
// range call: every page at the first page's revision, each from just past the last key read.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { EtcdClient } from '../../src/sources/etcd/client.ts';
import { until } from '../support/until.ts';

const KEYS = ['/p/a', '/p/b', '/p/c', '/p/d', '/p/e'];
const b64 = (s: string) => Buffer.from(s).toString('base64');
const unb64 = (s: string) => Buffer.from(s, 'base64').toString();

let server: Server;
let url: string;
const requests: { key: string; revision?: string }[] = [];

before(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const r = JSON.parse(body) as { key: string; limit: string; revision?: string };
      requests.push({ key: unb64(r.key), ...(r.revision ? { revision: r.revision } : {}) });
      const from = unb64(r.key);
      const rest = KEYS.filter((k) => k >= from);
      const page = rest.slice(0, Number(r.limit));
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({
        header: { revision: '42' },
        kvs: page.map((k) => ({
          key: b64(k),
          value: b64('v'),
          mod_revision: '2',
          create_revision: '2',
          version: '1',
        })),
        more: rest.length > page.length,
        count: String(rest.length),
      }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

describe('etcd paged range', () => {
  test('the next page is asked for while the caller holds this one; every key once, at one revision', async () => {
    const client = new EtcdClient({ endpoints: [url] });
    const range = await client.rangePaged('/p/', { limit: 2 });
    assert.equal(range.revision, 42);
    const it = range.pages[Symbol.asyncIterator]();
    const seen: string[] = [];
    const first = await it.next();
    seen.push(...(first.value as { key: string }[]).map((kv) => kv.key));
    // The caller has not asked for the second page yet: it is on its way all the same.
    await until(() => requests.length === 2, 5000, 'the second page asked for ahead');
    assert.deepEqual(requests[1], { key: '/p/b\u0000', revision: '42' });
    for (;;) {
      const r = await it.next();
      if (r.done) break;
      seen.push(...r.value.map((kv) => kv.key));
    }
    assert.deepEqual(seen, KEYS);
    assert.equal(requests.length, 3, 'no request past the last page');
  });
});
