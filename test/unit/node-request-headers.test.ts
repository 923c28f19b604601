// The node listener's raw header reader (runtimes/node-request-headers.ts) answers as a `Headers` built from the
// same fields would: case, duplicates, cookies, whitespace, HTTP/2 pseudo-headers, refused names and values.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RawRequestHeaders, readHeadersRaw } from '../../runtimes/node-request-headers.ts';

/** A `Headers` of the same fields, the reference. */
function reference(raw: string[]): Headers {
  const h = new Headers();
  for (let i = 0; i < raw.length; i += 2) if (!raw[i]!.startsWith(':')) h.append(raw[i]!, raw[i + 1]!);
  return h;
}

const RAW = [
  ':path',
  '/v1/chat/completions',
  'Host',
  '127.0.0.1:8080',
  'Authorization',
  '  Bearer sk-1 \t',
  'content-type',
  'application/json',
  'X-Forwarded-For',
  '10.0.0.1',
  'x-forwarded-for',
  '10.0.0.2',
  'Cookie',
  'a=1',
  'cookie',
  'b=2',
  'X-Empty',
  '',
  'x-aisix-ROUTING-tags',
  'fast',
];

test('get and has answer as a Headers of the same fields, whatever the case', () => {
  const h = new RawRequestHeaders(RAW);
  const ref = reference(RAW);
  const names = [
    'host',
    'HOST',
    'authorization',
    'Content-Type',
    'x-forwarded-for',
    'cookie',
    'x-empty',
    'x-aisix-routing-tags',
    'x-absent',
    'path',
    'content-length',
  ];
  for (const name of names) {
    assert.equal(h.get(name), ref.get(name), name);
    assert.equal(h.has(name), ref.has(name), name);
  }
  assert.equal(h.get('x-forwarded-for'), '10.0.0.1, 10.0.0.2');
  assert.equal(h.get('cookie'), 'a=1; b=2');
  assert.equal(h.get('authorization'), 'Bearer sk-1');
});

test('a name that is no token throws as Headers does; the pseudo-headers are not fields', () => {
  const h = new RawRequestHeaders(RAW);
  assert.throws(() => h.get('bad name'), TypeError);
  assert.throws(() => reference(RAW).get('bad name'), TypeError);
  assert.throws(() => h.has(':path'), TypeError);
  assert.deepEqual([...h].map(([k]) => k), [...reference(RAW)].map(([k]) => k));
});

test('iteration, set and delete go through a real Headers, and get sees the change', () => {
  const h = new RawRequestHeaders(RAW);
  assert.ok(h instanceof Headers);
  assert.deepEqual([...h.entries()], [...reference(RAW).entries()]);
  h.set('content-type', 'text/plain');
  h.delete('cookie');
  assert.equal(h.get('Content-Type'), 'text/plain');
  assert.equal(h.has('cookie'), false);
  const seen: string[] = [];
  h.forEach((_v, k, parent) => {
    seen.push(k);
    assert.equal(parent, h);
  });
  assert.ok(seen.includes('authorization'));
  assert.deepEqual(new Headers(h as unknown as Headers).get('x-forwarded-for'), '10.0.0.1, 10.0.0.2');
});

test('a value Headers refuses is refused the same way, not handed on', () => {
  const raw = ['x-bad', 'a\rb', 'host', 'h'];
  const h = new RawRequestHeaders(raw);
  assert.throws(() => reference(raw), TypeError);
  assert.throws(() => h.get('x-bad'), TypeError);
});

test("readHeadersRaw: the request's headers are the raw reader; a request it never saw keeps its own", () => {
  const proto = {
    get headers(): unknown {
      return 'its own';
    },
  };
  const [seen, other, again] = [Object.create(proto), Object.create(proto), Object.create(proto)] as Request[];
  readHeadersRaw(seen!, RAW);
  readHeadersRaw(again!, ['x-a', '1']);
  assert.ok(seen!.headers instanceof RawRequestHeaders);
  assert.equal(seen!.headers.get('authorization'), 'Bearer sk-1');
  assert.equal(again!.headers.get('X-A'), '1');
  assert.equal(other!.headers, 'its own' as unknown);
  const sub = Object.create(Object.create(proto)) as Request;
  readHeadersRaw(sub, ['x-b', '2']);
  assert.equal(sub.headers.get('x-b'), '2');
  assert.equal((Object.create(proto) as Request).headers, 'its own' as unknown);
});
