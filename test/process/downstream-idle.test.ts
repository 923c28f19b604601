// Black-box, on Node, Bun and Deno: `downstream.first_request_timeout_secs` (Sluice's; a connection whose first
// request head does not arrive in time is closed; on Bun, Bun's own ~10 s bound instead) and
// `downstream.idle_timeout_secs` (AISIX's key; default 0 = an idle HTTP/1.1 connection is never closed). With
// 1 s, a keep-alive connection idle after its answer is closed after about a second, while a slow answer and
// an SSE stream that last longer are never cut; with the default, an idle connection outlives Node's own 5 s
// default and carries a second request.
// Run: node build.mjs && node --import tsx --test test/process/downstream-idle.test.ts
import assert from 'node:assert/strict';
import * as net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { chunk, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import {
  baseConfig,
  CALLER_KEY,
  type GatewayProcess,
  resourcesFor,
  type RuntimeName,
  spawnGateway,
} from '../support/process.ts';
import { until } from '../support/until.ts';

/** A keep-alive HTTP/1.1 connection that collects what it receives and notes when the server closed it. */
function connection(port: number): Promise<{
  send(text: string): void;
  received(): string;
  /** Resolves with the text received so far once it contains `marker`. */
  waitFor(marker: string, ms: number): Promise<string>;
  closedAt: Promise<number>;
  destroy(): void;
}> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = '';
    const waiters: (() => void)[] = [];
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      buf += d;
      for (const w of [...waiters]) w();
    });
    const closedAt = new Promise<number>((r) => s.once('close', () => r(Date.now())));
    s.once('error', reject);
    s.once('connect', () =>
      resolve({
        send: (text) => void s.write(text),
        received: () => buf,
        waitFor: (marker, ms) =>
          new Promise((res, rej) => {
            const t = setTimeout(() => rej(new Error(`no "${marker}" within ${ms} ms; got: ${buf.slice(-300)}`)), ms);
            const check = (): void => {
              if (!buf.includes(marker)) return;
              clearTimeout(t);
              waiters.splice(waiters.indexOf(check), 1);
              res(buf);
            };
            waiters.push(check);
            check();
          }),
        closedAt,
        destroy: () => s.destroy(),
      }));
  });
}

const models = `GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${CALLER_KEY}\r\n\r\n`;
function chatRequest(content: string, stream = false): string {
  const body = JSON.stringify({ model: 'gpt-test', stream, messages: [{ role: 'user', content }] });
  return `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${CALLER_KEY}\r\n` +
    `content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
}

describe('downstream.idle_timeout_secs (gateway processes on node, bun, deno)', {
  concurrency: true,
  timeout: 120_000,
}, () => {
  const procs: GatewayProcess[] = [];
  const mocks: MockUpstream[] = [];
  let mock: MockUpstream;
  before(async () => {
    mock = await startMockUpstream();
    mocks.push(mock);
  });
  after(async () => {
    await Promise.all(procs.map((g) => g.stop(10_000).catch(() => g.kill())));
    await Promise.all(mocks.map((m) => m.close()));
  });
  const spawn = async (runtime: RuntimeName, upstream: MockUpstream, extra = ''): Promise<GatewayProcess> => {
    const g = await spawnGateway({
      runtime,
      config: baseConfig(extra),
      files: { 'resources.yaml': resourcesFor(upstream.base) },
      env: { CALLER_KEY },
    });
    procs.push(g);
    await g.waitReady('/readyz');
    return g;
  };

  for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
    test(`${runtime}: idle_timeout_secs: 1 closes an idle connection after ~1 s, never a slow answer or a stream`, async () => {
      // Its own upstream: the scripted slow replies must not be taken by another runtime's requests.
      const up = await startMockUpstream();
      mocks.push(up);
      const g = await spawn(runtime, up, 'downstream: { idle_timeout_secs: 1 }');
      const c = await connection(g.ports.proxy);
      c.send(models);
      await c.waitFor('"object":"list"', 5000);
      const answered = Date.now();
      assert.match(c.received(), /^keep-alive: timeout=1$/im);
      const idleMs = (await c.closedAt) - answered;
      // Bun's timers tick every 4 s, so its listener arms the timeout plus a tick: never before the timeout,
      // a tick or two after it (runtimes/bun-listener.ts).
      const idleMax = runtime === 'bun' ? 12_000 : 4000;
      assert.ok(idleMs >= 900 && idleMs <= idleMax, `${runtime}: idle connection closed after ${idleMs} ms`);

      // A JSON answer that takes 2.5 s, and an SSE stream of 3 chunks 900 ms apart: both complete.
      up.script({ delayMs: 2500 }, { sse: [chunk('m', 'a'), chunk('m', 'b'), chunk('m', 'c')], chunkDelayMs: 900 });
      const slow = await connection(g.ports.proxy);
      slow.send(chatRequest('slow'));
      await slow.waitFor('"chat.completion"', 8000);
      const sse = await connection(g.ports.proxy);
      sse.send(chatRequest('stream', true));
      const text = await sse.waitFor('[DONE]', 8000);
      assert.equal((text.match(/"content":"[abc]"/g) ?? []).length, 3, text);
      slow.destroy();
      sse.destroy();
      console.log(`${runtime}: idle connection closed ${idleMs} ms after its answer`);
    });

    test(`${runtime}: first_request_timeout_secs: 1 closes a connection without a request, not one that sent one`, async () => {
      const g = await spawn(runtime, mock, 'downstream: { first_request_timeout_secs: 1 }');
      const opened = Date.now();
      const silent = await connection(g.ports.proxy);
      // One byte of a request line, then nothing: no request head either.
      const trickle = await connection(g.ports.proxy);
      trickle.send('G');
      // A request answered, then idle (idle_timeout_secs is 0): kept.
      const used = await connection(g.ports.proxy);
      used.send(models);
      await used.waitFor('"object":"list"', 5000);
      const silentMs = (await silent.closedAt) - opened;
      const trickleMs = (await trickle.closedAt) - opened;
      // `Bun.serve` has no hook before a connection's first request: Bun's own bound closes it, ~10 s in
      // (in 4 s ticks) whatever the setting says (README "Runtimes").
      const [lo, hi] = runtime === 'bun' ? [9000, 16_000] : [900, 4000];
      for (const [what, ms] of [['silent', silentMs], ['trickling', trickleMs]] as const) {
        assert.ok(ms >= lo && ms <= hi, `${runtime}: ${what} connection closed after ${ms} ms`);
      }
      const cut = await Promise.race([used.closedAt, new Promise<undefined>((r) => setTimeout(r, 2000))]);
      assert.equal(cut, undefined, `${runtime}: the connection that sent a request was closed`);
      // It still carries a request.
      used.send(models);
      await until(() => (used.received().match(/"object":"list"/g) ?? []).length === 2, 5000, 'a second answer');
      used.destroy();
      console.log(`${runtime}: connections without a request closed ${silentMs} and ${trickleMs} ms after opening`);
    });

    test(`${runtime}: by default (0) an idle connection stays open past 5 s and carries another request`, async () => {
      const g = await spawn(runtime, mock);
      const c = await connection(g.ports.proxy);
      c.send(models);
      await c.waitFor('"object":"list"', 5000);
      assert.doesNotMatch(c.received(), /^keep-alive: timeout=/im);
      const closed = await Promise.race([c.closedAt, new Promise<undefined>((r) => setTimeout(r, 7000))]);
      assert.equal(closed, undefined, `${runtime}: the idle connection was closed`);
      const before = c.received().length;
      c.send(models);
      await until(() => c.received().slice(before).includes('"object":"list"'), 5000, 'the second answer', 20);
      assert.match(c.received().slice(before), /^HTTP\/1\.1 200/);
      c.destroy();
    });
  }
});
