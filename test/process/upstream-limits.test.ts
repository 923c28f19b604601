// Black-box, on Node, Bun and Deno: `upstream.max_response_bytes` (default 32 MiB) bounds an upstream answer at
// the transport, and `upstream.max_buffered_response_bytes` (default 64 MiB) all the answers read whole at once.
// A 50 MB answer — with its Content-Length declared (refused before its body is read) or chunked (refused once
// 32 MiB went by) — reaches the caller as 502 `upstream_error` naming the limit, or, read while the others hold
// the budget, as 503 `service_unavailable`; the upstream connection it came on is closed (not pooled), the
// gateway keeps serving, its peak RSS stays within a bound and its RSS after the answers returns near its idle
// level (measured from /proc; the figures are printed).
// Run: node build.mjs && node --import tsx --test test/process/upstream-limits.test.ts
import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { describe, test } from 'node:test';
import {
  AnswerBudget,
  AnswerBudgetFull,
  boundedChunks,
  bufferedText,
  declaresTooMuch,
  UpstreamTooLarge,
} from '../../src/upstream-fetch.ts';
import { bigPayload, type BigUpstream, gatewaysOver, startBigUpstream } from '../support/big-upstream.ts';
import { until } from '../support/until.ts';
import type { GatewayProcess, RuntimeName } from '../support/process.ts';
import { rssMiB, rssPeak, settledRssMiB, type TimedChat, timedChat } from '../support/victim.ts';

const BIG = 50_000_000;
const LIMIT = 33_554_432;

/** An upstream answering by the user message: `declared` / `chunked` → 50 MB of JSON, else a small completion. */
function startUpstream(): Promise<BigUpstream> {
  const payload = bigPayload(BIG, '{"id":"big","object":"chat.completion","choices":[{"message":{"content":"');
  const bomb = gzipSync(payload);
  return startBigUpstream({
    payload,
    other: (content, res) => {
      if (content !== 'gzip-bomb') return false;
      // ~50 KB on the wire, 50 MB once decompressed (Bun's fetch decompresses; undici's request does not).
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        'content-length': String(bomb.length),
      });
      res.end(bomb);
      return true;
    },
    big: (content) =>
      content === 'declared' || content === 'chunked'
        ? { 'content-type': 'application/json', ...(content === 'declared' ? { 'content-length': String(BIG) } : {}) }
        : undefined,
  });
}

const chat = (g: GatewayProcess, content: string): Promise<TimedChat> => timedChat(g, content);

const TOO_LARGE = {
  error: { message: `upstream answer exceeded ${LIMIT} bytes (upstream.max_response_bytes)`, type: 'upstream_error' },
};
/** The default budget, or the one the environment gives every gateway (to run the shape under another). */
const BUDGET = Number(process.env.AISIX_UPSTREAM__MAX_BUFFERED_RESPONSE_BYTES ?? 67_108_864);
const NO_ROOM = {
  error: {
    message:
      `the gateway is holding its limit of ${BUDGET} bytes of upstream answers (upstream.max_buffered_response_bytes); retry shortly`,
    type: 'service_unavailable',
  },
};

describe('upstream.max_response_bytes (gateway processes on node, bun, deno)', {
  concurrency: true,
  timeout: 240_000,
}, () => {
  const gatewayOver = gatewaysOver(startUpstream);

  test("bun: a small gzip answer that inflates past the limit is refused (Bun's fetch decompresses)", async () => {
    const { g } = await gatewayOver('bun');
    const a = await chat(g, 'gzip-bomb');
    assert.equal(a.status, 502, a.body.slice(0, 300));
    assert.match(a.body, new RegExp(`upstream answer exceeded ${LIMIT} bytes`));
  });

  for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
    test(`${runtime}: 50 MB answers → 502 naming the limit, connections closed, RSS back near idle`, async () => {
      const { up, g } = await gatewayOver(runtime);
      for (let i = 0; i < 20; i++) assert.equal((await chat(g, 'small')).status, 200);
      const pid = g.proc.pid!;
      const idle = rssMiB(pid);
      const sampler = rssPeak(pid, idle);
      /** Ten concurrent 50 MB answers (half declared, half chunked); then RSS, settled for up to 5 s. */
      const burst = async (): Promise<{ rss: number; closed: { written: number; mode: string }[] }> => {
        const closedBefore = up.bigClosed.length;
        const answers = await Promise.all(
          [...Array(10)].map((_, i) => chat(g, i % 2 === 0 ? 'declared' : 'chunked')),
        );
        // Each answer is refused: over the per-answer limit (502), or, for a chunked one read while the others
        // held the budget, at once for want of room (503, Retry-After 1).
        answers.forEach((a, i) => {
          if (i % 2 === 0 || a.status === 502) {
            assert.equal(a.status, 502, a.body.slice(0, 300));
            assert.deepEqual(JSON.parse(a.body), TOO_LARGE);
          } else {
            assert.equal(a.status, 503, a.body.slice(0, 300));
            assert.deepEqual(JSON.parse(a.body), NO_ROOM);
            assert.equal(a.retryAfter, '1');
          }
        });
        refusedForRoom += answers.filter((a) => a.status === 503).length;
        // Every connection a big answer came on is closed by the gateway, long before 50 MB were written.
        const closed = await Promise.race([
          Promise.all(up.bigClosed.slice(closedBefore)),
          new Promise<undefined>((r) => setTimeout(() => r(undefined), 10_000)),
        ]);
        assert.ok(closed, `${runtime}: an upstream connection stayed open`);
        // Not retried: the same target would send the same answer again (one upstream call per caller request).
        assert.equal(up.bigClosed.length - closedBefore, 10, `${runtime}: big answers requested`);
        // (How much was written before the close is printed, not asserted: Deno's sockets read ahead of the
        // consumer, so under load the whole 50 MB can be in its buffers before the limit trips.)
        assert.equal((await chat(g, 'small')).status, 200, 'still serving');
        return { rss: await settledRssMiB(pid), closed };
      };
      let refusedForRoom = 0;
      const first = await burst();
      const later = [(await burst()).rss, (await burst()).rss];
      sampler.stop();
      const peak = sampler.peak;
      const written = (mode: string): number =>
        Math.max(...first.closed.filter((c) => c.mode === mode).map((c) => c.written));
      console.log(
        `${runtime}: RSS idle ${idle.toFixed(0)} MiB, peak ${peak.toFixed(0)} MiB, after each burst of ten answers ` +
          `${[first.rss, ...later].map((r) => r.toFixed(0)).join(', ')} MiB; upstream calls for 10 answers: ` +
          `${first.closed.length}; bytes written before close: declared max ${written('declared')}, chunked max ` +
          `${written('chunked')}; refused for room (503): ${refusedForRoom} of 15 chunked`,
      );
      // While they are read, the answers together hold at most upstream.max_buffered_response_bytes (64 MiB:
      // two of the five chunked ones, the others refused for room at once); the peak adds what the runtime
      // reads ahead of the gateway (Bun's fetch and Deno's sockets buffer several MB per answer beyond what was
      // consumed) and freed memory not yet returned. Peak over idle measured in three runs each: Node 104–122
      // MiB, Deno 107–151, Bun 137–334 (Bun's collector returns memory late and unevenly); without the budget
      // Deno peaked at 177–223 over idle. What stays after a burst is memory the allocator and the engine keep
      // for reuse (on Node, MALLOC_TRIM_THRESHOLD_=65536 brings it to ~40 MiB over idle). A burst that leaked
      // its answers would keep at least 64 MiB each time: ≥ idle + 128 after the second and + 192 after the
      // third, more with what is read ahead. Bun has kept ~170 MiB after one burst and ~205 after the second
      // and third (it has also been back at idle after later ones); Deno plateaus at ~100–150 over idle. So the
      // first burst is bounded by idle + 200, the better of the second and third by idle + 300.
      const peakBound = runtime === 'bun' ? 400 : 200;
      assert.ok(
        peak <= idle + peakBound,
        `${runtime}: peak RSS ${peak.toFixed(0)} MiB > idle ${idle.toFixed(0)} + ${peakBound}`,
      );
      assert.ok(
        first.rss <= idle + 200,
        `${runtime}: RSS after the first burst ${first.rss.toFixed(0)} MiB > idle ${idle.toFixed(0)} + 200`,
      );
      assert.ok(
        Math.min(...later) <= idle + 300,
        `${runtime}: RSS after the second and third bursts ${later.map((r) => r.toFixed(0)).join(', ')} MiB, ` +
          `both > idle ${idle.toFixed(0)} + 300`,
      );
    });
  }
});

test('bufferedText / boundedChunks / declaresTooMuch: the limit is inclusive, 0 means none', async () => {
  async function* chunks(...sizes: number[]): AsyncGenerator<Uint8Array> {
    for (const n of sizes) yield new Uint8Array(n).fill(0x61);
  }
  const none = new AnswerBudget(0);
  assert.equal(await bufferedText(chunks(3, 4), 7, none), 'aaaaaaa');
  assert.equal(await bufferedText(chunks(3, 4), 0, none), 'aaaaaaa');
  await assert.rejects(bufferedText(chunks(3, 5), 7, none), (e: unknown) => {
    assert.ok(e instanceof UpstreamTooLarge);
    assert.equal((e as Error).message, 'upstream answer exceeded 7 bytes');
    return true;
  });
  const seen: number[] = [];
  await assert.rejects(async () => {
    for await (const c of boundedChunks(chunks(4, 4, 4), 10)) seen.push(c.byteLength);
  }, /upstream answer exceeded 10 bytes/);
  assert.deepEqual(seen, [4, 4]);
  assert.equal(declaresTooMuch('11', 10), true);
  assert.equal(declaresTooMuch('10', 10), false);
  assert.equal(declaresTooMuch('11', 0), false);
  assert.equal(declaresTooMuch(null, 10), false);
});

test('AnswerBudget: answers hold their bytes while read, give them back whole or failed; a chunk without room fails', async () => {
  const budget = new AnswerBudget(12);
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  async function* slow(): AsyncGenerator<Uint8Array> {
    yield new TextEncoder().encode('{"a":"bcd"}'.slice(0, 6));
    await held;
    yield new TextEncoder().encode('{"a":"bcd"}'.slice(6));
  }
  async function* bytes(n: number): AsyncGenerator<Uint8Array> {
    yield new Uint8Array(n).fill(0x62);
  }
  const first = bufferedText(slow(), 0, budget);
  await until(() => budget.heldBytes === 6, 2000, 'the first answer to hold its first chunk');
  // 6 + 7 > 12: the second answer fails at once, holding nothing afterwards.
  await assert.rejects(bufferedText(bytes(7), 0, budget), (e: unknown) => {
    assert.ok(e instanceof AnswerBudgetFull);
    assert.equal(e.caller.status, 503);
    assert.equal(e.caller.retryAfterSecs, 1);
    assert.equal(e.upstreamAtFault, false);
    return true;
  });
  assert.equal(budget.heldBytes, 6);
  assert.equal(await bufferedText(bytes(6), 0, budget), 'bbbbbb'); // 6 + 6 fits
  release();
  assert.equal(await first, '{"a":"bcd"}');
  assert.equal(budget.heldBytes, 0);
  // Multi-byte characters split across chunks decode whole.
  const euro = new TextEncoder().encode('€');
  async function* split(): AsyncGenerator<Uint8Array> {
    yield euro.subarray(0, 1);
    yield euro.subarray(1);
  }
  assert.equal(await bufferedText(split(), 0, budget), '€');
});
