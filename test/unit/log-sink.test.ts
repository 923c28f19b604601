// The batched log sink (src/observability/log-sink.ts): lines in order, one write per turn, nothing lost.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchedSink } from '../../src/observability/log-sink.ts';

/** A sink whose writes are kept, and a promise of the next one; by default written from a zero-delay timer. */
function kept(schedule: (run: () => void) => void = (run) => void setTimeout(run, 0)) {
  const writes: string[] = [];
  let wrote: () => void = () => {};
  const sink = batchedSink((t) => {
    writes.push(t);
    wrote();
  }, schedule);
  const next = () => new Promise<void>((resolve) => wrote = resolve);
  return { sink, writes, next };
}

test('the lines of one turn leave in one write, in order, after the turn', async () => {
  const k = kept();
  const written = k.next();
  k.sink.write('a');
  k.sink.write('b');
  k.sink.write('c');
  assert.deepEqual(k.writes, [], 'nothing is written within the turn');
  await written;
  assert.deepEqual(k.writes, ['a\nb\nc\n']);
  const again = k.next();
  k.sink.write('d');
  await again;
  assert.deepEqual(k.writes, ['a\nb\nc\n', 'd\n']);
});

test('flush() writes what is pending at once; the turn then has nothing left to write', async () => {
  const k = kept();
  k.sink.write('x');
  k.sink.flush();
  assert.deepEqual(k.writes, ['x\n']);
  const later = k.next();
  k.sink.write('y');
  await later;
  assert.deepEqual(k.writes, ['x\n', 'y\n']);
});

test('a batch past 64 KiB is written without waiting for the turn to end', () => {
  const k = kept();
  const line = 'z'.repeat(1023);
  for (let i = 0; i < 64; i++) k.sink.write(line);
  assert.equal(k.writes.length, 1);
  assert.equal(k.writes[0]!.length, 64 * 1024);
});

test("with the runtime's setImmediate: the turn's lines in one write once its callbacks and promises are done", async () => {
  const k = kept(setImmediate);
  const written = k.next();
  k.sink.write('a');
  await Promise.resolve();
  k.sink.write('b');
  setTimeout(() => k.sink.write('next turn'), 0);
  await written;
  assert.deepEqual(k.writes, ['a\nb\n']);
  await k.next();
  assert.deepEqual(k.writes, ['a\nb\n', 'next turn\n']);
});
