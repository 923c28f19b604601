// The batched log sink (src/observability/log-sink.ts): lines in order, one write per batch, nothing lost.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchedSink, FLUSH_MS } from '../../src/observability/log-sink.ts';

/** A sink whose scheduled flushes run only when the test says so. */
function manual() {
  const writes: string[] = [];
  const queued: (() => void)[] = [];
  const sink = batchedSink((t) => writes.push(t), (f) => queued.push(f));
  return { sink, writes, queued, run: () => queued.splice(0).forEach((f) => f()) };
}

test('lines wait for the scheduled flush and leave in one write, in order', () => {
  const m = manual();
  m.sink.write('a');
  m.sink.write('b');
  m.sink.write('c');
  assert.deepEqual(m.writes, []);
  assert.equal(m.queued.length, 1, 'one flush scheduled per batch, not per line');
  m.run();
  assert.deepEqual(m.writes, ['a\nb\nc\n']);
  m.sink.write('d');
  assert.equal(m.queued.length, 1, 'the next batch schedules its own flush');
  m.run();
  assert.deepEqual(m.writes, ['a\nb\nc\n', 'd\n']);
});

test('flush() writes what is pending at once; a flush with nothing pending writes nothing', () => {
  const m = manual();
  m.sink.write('x');
  m.sink.flush();
  assert.deepEqual(m.writes, ['x\n']);
  m.run();
  assert.deepEqual(m.writes, ['x\n']);
});

test('a batch past 64 KiB is written without waiting for the flush', () => {
  const m = manual();
  const line = 'y'.repeat(1023);
  for (let i = 0; i < 64; i++) m.sink.write(line);
  assert.equal(m.writes.length, 1);
  assert.equal(m.writes[0]!.length, 64 * 1024);
  m.run();
  assert.equal(m.writes.length, 1, 'nothing was left for the scheduled flush');
});

test('by default a line is written within the window', async () => {
  const started = performance.now();
  const written = await new Promise<string>((resolve) => batchedSink(resolve).write('z'));
  assert.equal(written, 'z\n');
  assert.ok(performance.now() - started >= FLUSH_MS - 1, 'waited for the window, so later lines could join');
});
