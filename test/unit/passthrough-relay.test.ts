// The passthrough relay (src/passthrough/relay.ts): bytes pass as they come; an event stream's keep-alive
// comment goes out only between frames, never inside one; an event stream that fails mid-relay just ends.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { relayBody } from '../../src/passthrough/relay.ts';
import { until } from '../support/until.ts';

const enc = new TextEncoder();

/** An upstream body whose chunks a test hands over one by one. */
function scripted() {
  const queue: (Uint8Array | Error | null)[] = [];
  let wake: (() => void) | undefined;
  const chunks: AsyncIterable<Uint8Array> = {
    async *[Symbol.asyncIterator]() {
      for (;;) {
        while (queue.length === 0) await new Promise<void>((r) => wake = r);
        const next = queue.shift()!;
        if (next === null) return;
        if (next instanceof Error) throw next;
        yield next;
      }
    },
  };
  const push = (v: Uint8Array | Error | null) => {
    queue.push(v);
    wake?.();
  };
  return { chunks, push };
}

async function drain(stream: ReadableStream<Uint8Array>, into: string[]) {
  const d = new TextDecoder();
  const reader = stream.getReader();
  for (;;) {
    const r = await reader.read();
    if (r.done) return;
    into.push(d.decode(r.value));
  }
}

describe('relayBody', () => {
  test('keep-alive comments only between frames', async () => {
    const up = scripted();
    const ends: string[] = [];
    const out: string[] = [];
    let idle: (() => void) | undefined;
    const stream = relayBody({
      chunks: up.chunks,
      eventStream: true,
      keepaliveMs: 5,
      timer: (_ms, onIdle) => {
        idle = onIdle;
        return { touch() {}, pause() {}, stop() {} };
      },
      onChunk: () => {},
      onFirstByte: () => {},
      onEnd: (e) => ends.push(e),
      abortUpstream: () => {},
    });
    const done = drain(stream, out);
    up.push(enc.encode('data: {"a":'));
    await until(() => out.length === 1, 5000, 'the first half frame');
    // Silent mid-frame: the keep-alive period passes with nothing inserted.
    idle!();
    up.push(enc.encode('1}\n\n'));
    await until(() => out.length === 2, 5000, 'the frame’s end');
    idle!();
    await until(() => out.length === 3, 5000, 'a keep-alive after the frame ended');
    assert.deepEqual(out, ['data: {"a":', '1}\n\n', ':\n\n']);
    up.push(null);
    await done;
    assert.deepEqual(ends, ['complete']);
  });

  test('an event stream failing mid-relay ends; another body errors', async () => {
    for (const eventStream of [true, false]) {
      const up = scripted();
      const ends: string[] = [];
      const stream = relayBody({
        chunks: up.chunks,
        eventStream,
        keepaliveMs: 0,
        onChunk: () => {},
        onFirstByte: () => {},
        onEnd: (e) => ends.push(e),
        abortUpstream: () => {},
      });
      const out: string[] = [];
      up.push(enc.encode('data: x\n\n'));
      up.push(new Error('socket hang up'));
      const r = await drain(stream, out).then(() => 'ended', () => 'errored');
      assert.equal(r, eventStream ? 'ended' : 'errored');
      assert.deepEqual(out, ['data: x\n\n']);
      assert.deepEqual(ends, ['upstream_error']);
    }
  });
});
