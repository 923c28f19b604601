// Stream framing bounds (docs/configuration.md `upstream.max_sse_event_bytes`): the translating parser and
// the pass-through meter end a stream whose line or event outgrows the bound, in time linear in the bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseSse } from '../../src/providers/sse.ts';
import { editSse } from '../../src/providers/sse-edit.ts';
import { UpstreamStreamError } from '../../src/providers/types.ts';
import { meteredChunks, StreamUsage } from '../../src/proxy/usage.ts';
import { mainThreadCpuMs } from '../support/thread-cpu.ts';

const enc = new TextEncoder();
const dec = new TextDecoder();

/** `total` bytes of one `data:` line with no newline, in `size`-byte chunks. */
async function* longLine(total: number, size = 65_536): AsyncGenerator<Uint8Array> {
  const head = enc.encode('data: ');
  yield head;
  const chunk = enc.encode('x'.repeat(size));
  for (let sent = head.length; sent < total; sent += size) yield chunk;
}

async function* of(...parts: string[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield enc.encode(p);
}

async function drain<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

test('parseSse: a 20 MB line with no newline ends with an upstream error at the bound, in linear time', async () => {
  const started = performance.now();
  await assert.rejects(drain(parseSse(longLine(20_000_000))), (e: unknown) => {
    assert.ok(e instanceof UpstreamStreamError);
    assert.equal(e.kind, 'upstream_error');
    assert.match(e.message, /upstream\.max_sse_event_bytes/);
    return true;
  });
  // Rejected at the default bound (4 MiB), long before the 20 MB arrived; a quadratic scan of 4 MiB in
  // 64 KiB chunks alone takes several seconds.
  assert.ok(performance.now() - started < 2000, `took ${performance.now() - started} ms`);
});

/** How many times a chain of `setTimeout(0)` ran while `work` ran: the turns other callers had meanwhile. */
async function turnsDuring(work: () => Promise<unknown>): Promise<number> {
  let turns = 0;
  let on = true;
  const tick = (): void => {
    if (!on) return;
    turns++;
    setTimeout(tick, 0);
  };
  setTimeout(tick, 0);
  await work().catch(() => {});
  on = false;
  return turns;
}

test('a long line whose chunks are all at hand gives the event loop turns as it is read, not one at its end', async () => {
  // 4 MiB in 64 KiB chunks, each there at once (as a client's buffer gives them): a turn every 8 chunks.
  const edit = { mayTouch: () => false, edit: () => undefined };
  const edited = await turnsDuring(() => drain(editSse(longLine(20_000_000), edit)));
  const parsed = await turnsDuring(() => drain(parseSse(longLine(20_000_000))));
  assert.ok(edited >= 4, `editSse: ${edited} turns`);
  assert.ok(parsed >= 4, `parseSse: ${parsed} turns`);
});

test('parseSse: scan time grows linearly with an unbounded long line', async () => {
  // The main thread's CPU time, not the clock: other processes on the machine do not stretch it.
  const time = async (bytes: number) => {
    const t = mainThreadCpuMs();
    const evs = await drain(parseSse(longLine(bytes, 16_384), 0));
    assert.equal(evs.length, 1);
    return mainThreadCpuMs() - t;
  };
  await time(1_000_000); // warm-up
  const small = await time(2_000_000);
  const big = await time(8_000_000);
  // Four times the bytes: linear is ~4x, quadratic ~16x.
  assert.ok(big < small * 8 + 50, `2 MB: ${small} ms, 8 MB: ${big} ms`);
});

test('parseSse: one complete event larger than the bound is refused, smaller ones pass', async () => {
  const big = `data: ${'y'.repeat(100)}\n\n`;
  await assert.rejects(drain(parseSse(of(big), 50)), UpstreamStreamError);
  const evs = await drain(parseSse(of('data: a\n\n', `data: ${'z'.repeat(40)}\n\n`), 50));
  assert.deepEqual(evs.map((e) => e.data), ['a', 'z'.repeat(40)]);
});

test('parseSse: boundaries split across chunks of one character, and many events per chunk', async () => {
  const text = 'event: a\r\ndata: 1\r\n\r\ndata: 2\n\ndata: 3\r\rdata: 4';
  const one = await drain(parseSse(of(...text.split(''))));
  const whole = await drain(parseSse(of(text)));
  const expected = [{ event: 'a', data: '1' }, { data: '2' }, { data: '3' }, { data: '4' }];
  assert.deepEqual(one, expected);
  assert.deepEqual(whole, expected);
});

test('pass-through meter: a 20 MB line ends the stream with a line break then the error, bytes bounded', async () => {
  const meter = new StreamUsage(1_000_000);
  let relayed = 0;
  let last = '';
  const started = performance.now();
  await assert.rejects(
    (async () => {
      for await (const c of meteredChunks(longLine(20_000_000), meter)) {
        relayed += c.length;
        last = dec.decode(c);
      }
    })(),
    (e: unknown) => e instanceof UpstreamStreamError && e.kind === 'upstream_error',
  );
  assert.equal(last, '\n\n');
  assert.ok(relayed < 1_100_000, `relayed ${relayed}`);
  assert.ok(performance.now() - started < 2000);
});

test('pass-through meter: long lines under the bound pass untouched and usage is still read', async () => {
  const meter = new StreamUsage(1000);
  const body = `data: {"id":"r1","x":"${'a'.repeat(900)}"}\n\ndata: {"usage":{"total_tokens":7}}\n\ndata: [DONE]\n\n`;
  const parts = body.match(/[\s\S]{1,7}/g)!;
  const out = await drain(meteredChunks(of(...parts), meter));
  assert.equal(out.map((c) => dec.decode(c)).join(''), body);
  assert.equal(meter.tokens(), 7);
  assert.equal(meter.id, 'r1');
  assert.equal(meter.terminated, true);
});

test('pass-through meter: a stream cut anywhere reads as it does whole (usage, id, end, error)', () => {
  const streams = [
    {
      body: 'data: {"id":"c1","choices":[{"delta":{"content":"hi"}}]}\r\n\r\n' +
        'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}\n\n' +
        'data: [DONE]\n\n',
      want: { usage: { input: 3, output: 4, total: 7 }, id: 'c1', terminated: true, errored: false },
    },
    {
      body: 'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","usage":' +
        '{"input_tokens":5,"output_tokens":1}}}\n\nevent: message_delta\ndata: {"type":"message_delta",' +
        '"usage":{"output_tokens":9}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n',
      want: { usage: { input: 5, output: 9 }, id: 'msg_1', terminated: true, errored: false },
    },
    {
      body: 'data: {"id":"c2","choices":[]}\n\ndata: {"error":{"message":"over capacity"}}\n\n',
      want: { usage: undefined, id: 'c2', terminated: false, errored: true },
    },
  ];
  for (const { body, want } of streams) {
    const bytes = enc.encode(body);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const meter = new StreamUsage();
      meter.observe(bytes.subarray(0, cut));
      meter.observe(bytes.subarray(cut));
      const got = { usage: meter.usage(), id: meter.id, terminated: meter.terminated, errored: meter.errored };
      assert.deepEqual(got, want, `cut at ${cut}`);
    }
    const meter = new StreamUsage();
    for (let i = 0; i < bytes.length; i++) meter.observe(bytes.subarray(i, i + 1));
    assert.deepEqual(meter.usage(), want.usage, 'one byte at a time');
  }
});

test('editSse: a 20 MB event with no end is refused at the bound in linear time; edits still apply', async () => {
  const edit = { mayTouch: (t: string) => t.includes('"m"'), edit: (ev: string) => ev.replace('"m"', '"M"') };
  const started = performance.now();
  await assert.rejects(drain(editSse(longLine(20_000_000), edit, 1_000_000)), UpstreamStreamError);
  assert.ok(performance.now() - started < 2000, `took ${performance.now() - started} ms`);
  const body = 'data: {"model":"m"}\r\n\r\ndata: {"x":1}\n\ndata: [DONE]\n\n';
  const out = await drain(editSse(of(...body.split('')), edit, 1000));
  assert.equal(out.map((c) => dec.decode(c)).join(''), body.replace('"m"', '"M"'));
});
