// src/http/discard.ts `discardRest`: the rest of a refused body read and dropped, ending at the body's end, or
// cancelling the body after its idle or total bound (docs/security.md "Safe defaults: bodies and connections").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { discardRest } from '../../src/http/discard.ts';

/** A body source that records what happened to it. */
function source(o: { chunks?: number; endless?: boolean; silentAfter?: number; errorAfter?: number }) {
  const seen = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      if (o.errorAfter !== undefined && seen.pulled === o.errorAfter) return c.error(new Error('reset'));
      if (o.silentAfter !== undefined && seen.pulled === o.silentAfter) return new Promise(() => {});
      if (!o.endless && seen.pulled === o.chunks) return c.close();
      seen.pulled++;
      c.enqueue(new Uint8Array(1024));
    },
    cancel() {
      seen.cancelled = true;
    },
  });
  return { reader: stream.getReader(), seen };
}

test('a body the caller goes on sending is read to its end, not cancelled', async () => {
  const { reader, seen } = source({ chunks: 200 });
  await discardRest(reader, 1000, 10_000);
  assert.deepEqual(seen, { pulled: 200, cancelled: false });
});

test('a caller silent for the idle bound is cancelled on', async () => {
  const { reader, seen } = source({ silentAfter: 3 });
  const started = performance.now();
  await discardRest(reader, 40, 10_000);
  assert.equal(seen.cancelled, true);
  assert.equal(seen.pulled, 3);
  assert.ok(performance.now() - started < 5000);
});

test('a body always ready is cancelled at the total bound, though its reads leave timers no turn', async () => {
  const { reader, seen } = source({ endless: true });
  const started = performance.now();
  await discardRest(reader, 1000, 100);
  assert.equal(seen.cancelled, true);
  assert.ok(seen.pulled > 0);
  assert.ok(performance.now() - started < 5000, 'stopped near the bound');
});

test('a body that breaks ends the discard without a throw', async () => {
  const { reader, seen } = source({ errorAfter: 2 });
  await discardRest(reader, 1000, 10_000);
  assert.equal(seen.pulled, 2);
});
