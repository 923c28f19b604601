// Black-box, on Node, Bun and Deno: a streamed answer whose upstream sends one 20 MB `data:` line with no
// newline (docs/operations.md "Limits and failure behaviour", `upstream.max_sse_event_bytes`) ends once the
// line passes the bound — with the OpenAI error event, never the 20 MB relayed — and the other callers of
// the instance barely notice: the median latency of a victim's plain requests while two callers keep sending such streams stays within a small ratio of its median before.
// Run: node build.mjs && node --import tsx --test test/process/stream-long-line.test.ts
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, test } from 'node:test';
import { chatCompletion } from '../support/mock-upstream.ts';
import { sleep } from '../support/until.ts';
import {
  baseConfig,
  CALLER_KEY,
  type GatewayProcess,
  resourcesFor,
  type RuntimeName,
  spawnGateway,
} from '../support/process.ts';

const BIG = 20_000_000;
const BOUND = 4_194_304;
const ATTACKERS = 2;
/** Each attacker's pause between its streams: the instance is not saturated, so the ratio shows what one costs. */
const PAUSE_MS = 100;
const SAMPLES = 40;
/** The victim keeps sampling until at least this many such streams were cut. */
const MIN_REFUSED = 10;

/** `long-line` → an SSE stream of one 20 MB `data:` line with no newline; anything else → a small completion. */
async function startUpstream(): Promise<{ base: string; bigWritten: number[]; close(): Promise<void> }> {
  const payload = Buffer.alloc(BIG, 0x61);
  Buffer.from('data: ').copy(payload);
  const bigWritten: number[] = [];
  const server = http.createServer(async (req, res) => {
    let text = '';
    for await (const c of req) text += c;
    const content = (JSON.parse(text) as { messages: { content: string }[] }).messages[0]?.content;
    if (content !== 'long-line') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(chatCompletion('gpt-upstream')));
      return;
    }
    const slot = bigWritten.push(0) - 1;
    res.on('error', () => {});
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const step = 256 * 1024;
    for (let off = 0; off < BIG && !res.destroyed; off += step) {
      const ok = res.write(payload.subarray(off, Math.min(BIG, off + step)));
      bigWritten[slot] = Math.min(BIG, off + step);
      if (!ok) {
        await new Promise<void>((r) => {
          const done = (): void => {
            res.off('drain', done).off('close', done);
            r();
          };
          res.on('drain', done).on('close', done);
        });
      }
    }
    if (!res.destroyed) res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    bigWritten,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

async function chat(
  g: GatewayProcess,
  content: string,
  stream: boolean,
): Promise<{ status: number; contentType: string | null; body: string; ms: number }> {
  const t = performance.now();
  const r = await fetch(g.url('/v1/chat/completions'), {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content }], stream }),
    signal: AbortSignal.timeout(60_000),
  });
  const body = await r.text();
  return { status: r.status, contentType: r.headers.get('content-type'), body, ms: performance.now() - t };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe(
  'a stream of one 20 MB line with no newline (gateway processes on node, bun, deno)',
  { timeout: 240_000 },
  () => {
    const procs: GatewayProcess[] = [];
    const ups: Awaited<ReturnType<typeof startUpstream>>[] = [];
    after(async () => {
      await Promise.all(procs.map((g) => g.stop(10_000).catch(() => g.kill())));
      await Promise.all(ups.map((u) => u.close()));
    });

    for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
      test(`${runtime}: the stream ends with the error event at the bound; the victim's latency stays near its baseline`, async () => {
        const up = await startUpstream();
        ups.push(up);
        const g = await spawnGateway({
          runtime,
          config: baseConfig(),
          files: { 'resources.yaml': resourcesFor(up.base) },
          env: { CALLER_KEY },
        });
        procs.push(g);
        await g.waitReady('/readyz');
        for (let i = 0; i < 20; i++) assert.equal((await chat(g, 'warm', false)).status, 200);
        const before: number[] = [];
        for (let i = 0; i < SAMPLES; i++) before.push((await chat(g, 'victim', false)).ms);

        // Attackers keep sending such streams while the victim samples again.
        let stop = false;
        const cut: Awaited<ReturnType<typeof chat>>[] = [];
        const attackers = [...Array(ATTACKERS)].map(async () => {
          while (!stop) {
            cut.push(await chat(g, 'long-line', true));
            await sleep(PAUSE_MS);
          }
        });
        const during: number[] = [];
        while (during.length < SAMPLES || cut.length < MIN_REFUSED) {
          const v = await chat(g, 'victim', false);
          assert.equal(v.status, 200);
          during.push(v.ms);
        }
        stop = true;
        await Promise.all(attackers);

        assert.ok(cut.length >= MIN_REFUSED, `${runtime}: streams cut: ${cut.length}`);
        const errorEvent = `data: ${
          JSON.stringify({
            error: {
              message: `upstream stream event over ${BOUND} bytes without an end (upstream.max_sse_event_bytes)`,
              type: 'upstream_error',
            },
          })
        }\n\n`;
        for (const r of cut) {
          assert.equal(r.status, 200);
          assert.match(r.contentType ?? '', /^text\/event-stream/);
          assert.ok(r.body.endsWith(errorEvent), r.body.slice(-300));
          assert.ok(r.body.length <= BOUND + errorEvent.length, `${runtime}: relayed ${r.body.length} characters`);
        }
        // One upstream call per caller request (not retried), each cut long before its 50 MB.
        assert.equal(up.bigWritten.length, cut.length);
        const ratio = median(during) / median(before);
        console.log(
          `${runtime}: victim p50 ${median(before).toFixed(1)} ms before, ${median(during).toFixed(1)} ms during ` +
            `${cut.length} cut streams (×${ratio.toFixed(2)}); upstream bytes written per stream: max ` +
            `${Math.max(...up.bigWritten)}`,
        );
        // Unbounded, one such line cost seconds of CPU (quadratic scans) and stalled every caller; cut at the
        // bound in linear time it costs a few hundred milliseconds of copying. ×6 leaves room on a loaded machine.
        assert.ok(ratio <= 6, `${runtime}: victim p50 ×${ratio.toFixed(2)} (${median(before)} → ${median(during)} ms)`);
        assert.ok(Math.max(...up.bigWritten) < BIG, `${runtime}: an upstream sent its whole 50 MB`);
      });
    }
  },
);
