// The per-chunk layers of a stream (docs/performance.md "Streams are pulled"): the upstream body's byte bound,
// the stream edits and the meter are iterators, and keep the contract of the `for await` loops they replace:
// `return()` closes the source, a throw of their own closes it first, a failure of the source passes as it is.
// The fetch transport's body reader keeps the contract of the async generator it replaces: the body is cancelled
// once the chunks are done, failed or returned, and never touched when they were not read.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { boundedChunks, fetchUpstream, UpstreamTooLarge } from '../../src/upstream-fetch.ts';
import { editSse } from '../../src/providers/sse-edit.ts';
import { meteredChunks, StreamUsage } from '../../src/proxy/usage.ts';

const enc = new TextEncoder();

/** A source that counts its reads and whether it was closed; `fail` makes the read after the chunks reject. */
function source(chunks: string[], fail?: Error) {
  const s = {
    reads: 0,
    closed: 0,
    [Symbol.asyncIterator]() {
      return this;
    },
    next(): Promise<IteratorResult<Uint8Array>> {
      const i = s.reads++;
      if (i < chunks.length) return Promise.resolve({ done: false, value: enc.encode(chunks[i]) });
      return fail ? Promise.reject(fail) : Promise.resolve({ done: true, value: undefined });
    },
    return(): Promise<IteratorResult<Uint8Array>> {
      s.closed++;
      return Promise.resolve({ done: true, value: undefined });
    },
  };
  return s;
}

const keep = { mayTouch: () => false, edit: () => undefined };
const layers: [string, (src: AsyncIterable<Uint8Array>) => AsyncIterator<Uint8Array>][] = [
  ['boundedChunks', (src) => boundedChunks(src, 1_000)],
  ['editSse', (src) => editSse(src, keep)],
  ['meteredChunks', (src) => meteredChunks(src, new StreamUsage())],
];

for (const [name, layer] of layers) {
  test(`${name}: return() closes the source once; later reads are done`, async () => {
    const src = source(['data: {"a":1}\n\n', 'data: {"b":2}\n\n']);
    const it = layer(src);
    assert.equal((await it.next()).done, false);
    assert.deepEqual(await it.return!(), { done: true, value: undefined });
    await it.return!();
    assert.equal(src.closed, 1);
    assert.equal((await it.next()).done, true);
    assert.equal(src.reads, 1);
  });

  test(`${name}: the chunks pass through in order; the end is reported once and the source not closed`, async () => {
    const src = source(['data: {"a":1}\n\n', 'data: {"b":2}\n\n']);
    const it = layer(src);
    const got: string[] = [];
    for (let r = await it.next(); !r.done; r = await it.next()) got.push(new TextDecoder().decode(r.value));
    assert.deepEqual(got, ['data: {"a":1}\n\n', 'data: {"b":2}\n\n']);
    assert.equal((await it.next()).done, true);
    assert.equal(src.closed, 0);
  });

  test(`${name}: a failure of the source passes as it is, and the source is not closed`, async () => {
    const boom = new Error('connection reset');
    const src = source(['data: {"a":1}\n\n'], boom);
    const it = layer(src);
    await it.next();
    await assert.rejects(it.next(), (e) => e === boom);
    await it.return!();
    assert.equal(src.closed, 0, 'a failed source is done: not closed, even by a later return()');
    assert.equal((await it.next()).done, true);
  });
}

test('boundedChunks: over the bound, the source is closed before UpstreamTooLarge', async () => {
  const src = source(['x'.repeat(6), 'y'.repeat(6)]);
  const it = boundedChunks(src, 10);
  assert.equal((await it.next()).done, false);
  await assert.rejects(it.next(), UpstreamTooLarge);
  assert.equal(src.closed, 1);
  assert.equal((await it.next()).done, true);
});

test('editSse: an unfinished event over the bound closes the source before the error', async () => {
  const src = source(['data: ' + 'x'.repeat(40), 'x'.repeat(40)]);
  const it = editSse(src, keep, 64);
  await assert.rejects(it.next(), /without an end/);
  assert.equal(src.closed, 1);
  assert.equal((await it.next()).done, true);
});

test("meteredChunks: the meter's own failure ends the line, then throws; the source is closed", async () => {
  const src = source(['data: ' + 'x'.repeat(40), 'x'.repeat(40)]);
  const it = meteredChunks(src, new StreamUsage(64));
  const first = await it.next();
  assert.equal(new TextDecoder().decode(first.value as Uint8Array), 'data: ' + 'x'.repeat(40));
  assert.equal(new TextDecoder().decode((await it.next()).value as Uint8Array), '\n\n');
  await assert.rejects(it.next(), /without an end/);
  assert.equal(src.closed, 1);
  assert.equal((await it.next()).done, true);
});

/** A fetch transport over one answer whose body is `chunks` (then `fail`, if given); what the body saw. */
function fetchedBody(chunks: string[], fail?: Error) {
  const seen = { pulls: 0, cancelled: 0 };
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      const i = seen.pulls++;
      if (i < chunks.length) c.enqueue(enc.encode(chunks[i]));
      else if (fail) c.error(fail);
      else c.close();
    },
    cancel() {
      seen.cancelled++;
    },
  }, { highWaterMark: 0 });
  const fetchFn = (() => Promise.resolve(new Response(body))) as unknown as typeof fetch;
  const answer = () => fetchUpstream(fetchFn)({ url: 'http://upstream.test/', method: 'POST', headers: {} });
  return { seen, answer, body };
}

test('fetch body: the chunks in order, then done; the body released', async () => {
  const f = fetchedBody(['data: 1\n\n', 'data: 2\n\n']);
  const it = (await f.answer()).body[Symbol.asyncIterator]();
  const got: string[] = [];
  for (let r = await it.next(); !r.done; r = await it.next()) got.push(new TextDecoder().decode(r.value));
  assert.deepEqual(got, ['data: 1\n\n', 'data: 2\n\n']);
  assert.equal((await it.next()).done, true);
  assert.equal(f.body.locked, false);
});

test('fetch body: return() mid-body cancels it once; later reads are done', async () => {
  const f = fetchedBody(['data: 1\n\n', 'data: 2\n\n']);
  const it = (await f.answer()).body[Symbol.asyncIterator]();
  assert.equal((await it.next()).done, false);
  await it.return!();
  await it.return!();
  assert.equal(f.seen.cancelled, 1);
  assert.equal((await it.next()).done, true);
  assert.equal(f.body.locked, false);
});

test('fetch body: a failing body throws its error and is released', async () => {
  const boom = new Error('connection reset');
  const f = fetchedBody(['data: 1\n\n'], boom);
  const it = (await f.answer()).body[Symbol.asyncIterator]();
  await it.next();
  await assert.rejects(it.next(), (e) => e === boom);
  assert.equal((await it.next()).done, true);
  assert.equal(f.body.locked, false);
});

test('fetch body: an answer read by text() is not locked by the chunks never read', async () => {
  const f = fetchedBody(['{"ok":', 'true}']);
  const res = await f.answer();
  res.body[Symbol.asyncIterator](); // taken, not read
  assert.equal(f.body.locked, false);
  assert.equal(await res.text(), '{"ok":true}');
});
