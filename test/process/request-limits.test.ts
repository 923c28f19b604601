// Black-box, on Node, Bun and Deno: request header limits (`proxy.max_request_headers`, default 100, and
// `proxy.max_request_header_bytes`, default 32 KiB) answered 431 in the endpoint's error envelope, the same
// on every runtime; and the CPU a request costs does not jump with its number of headers (a fault study
// found 1,000 headers costing 70× the CPU of 900 on Deno): measured from /proc/<pid>/stat as a ratio
// between header shapes, never as an absolute time.
// Run: node build.mjs && node --import tsx --test test/process/request-limits.test.ts
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import {
  baseConfig,
  CALLER_KEY,
  type GatewayProcess,
  resourcesFor,
  type RuntimeName,
  spawnGateway,
} from '../support/process.ts';
import { until } from '../support/until.ts';

const RUNTIMES: RuntimeName[] = ['node', 'bun', 'deno'];
const BODY = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] });

/** One raw HTTP/1.1 request on its own connection (`connection: close`); the whole answer as text. */
function rawRequest(port: number, head: string, body = ''): Promise<{ status: number; headers: string; body: string }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(head + body));
    const parts: Buffer[] = [];
    s.on('data', (d: Buffer) => parts.push(d));
    s.on('error', reject);
    s.setTimeout(10_000, () => s.destroy(new Error('no answer within 10 s')));
    s.on('close', () => {
      const text = Buffer.concat(parts).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, headers: text.slice(0, end), body: end < 0 ? '' : text.slice(end + 4) });
    });
  });
}

/**
 * A request head with `fields` header fields in all (host, authorization, connection, content-* included),
 * padded with `x-f-<i>: v` fields; `pad` makes one field that long.
 */
function head(path: string, fields: number, o: { post?: boolean; pad?: number } = {}): string {
  const lines = [
    `host: 127.0.0.1`,
    `authorization: Bearer ${CALLER_KEY}`,
    `connection: close`,
    ...(o.post ? ['content-type: application/json', `content-length: ${BODY.length}`] : []),
  ];
  if (o.pad) lines.push(`x-pad: ${'p'.repeat(o.pad)}`);
  for (let i = 0; lines.length < fields; i++) lines.push(`x-f-${i}: v`);
  return `${o.post ? 'POST' : 'GET'} ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`;
}

/** utime + stime of `pid` in clock ticks. */
function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** CPU ticks the gateway spent on `n` sequential requests with this head (after 20 warm-up requests). */
async function cpuPer(g: GatewayProcess, n: number, h: string, body: string, expect: number): Promise<number> {
  for (let i = 0; i < 20; i++) assert.equal((await rawRequest(g.ports.proxy, h, body)).status, expect);
  const t0 = cpuTicks(g.proc.pid!);
  for (let i = 0; i < n; i++) await rawRequest(g.ports.proxy, h, body);
  return (cpuTicks(g.proc.pid!) - t0) / n;
}

describe(
  'request header limits (gateway processes on node, bun, deno)',
  { concurrency: true, timeout: 240_000 },
  () => {
    let mock: MockUpstream;
    const procs: GatewayProcess[] = [];
    const spawn = async (runtime: RuntimeName, proxyExtra = ''): Promise<GatewayProcess> => {
      const config = baseConfig().replace(
        'proxy: { addr: "127.0.0.1:{{proxy}}" }',
        `proxy: { addr: "127.0.0.1:{{proxy}}"${proxyExtra} }`,
      );
      const g = await spawnGateway({
        runtime,
        config,
        files: { 'resources.yaml': resourcesFor(mock.base) },
        env: { CALLER_KEY },
      });
      procs.push(g);
      await g.waitReady('/readyz');
      return g;
    };
    before(async () => {
      mock = await startMockUpstream();
    });
    after(async () => {
      await Promise.all(procs.map((g) => g.stop(10_000).catch(() => g.kill())));
      await mock?.close();
    });

    const answers = new Map<RuntimeName, string[]>();
    for (const runtime of RUNTIMES) {
      test(`${runtime}: 100 header fields pass, 101 get 431 in the endpoint's envelope, as do > 32 KiB of fields`, async () => {
        const g = await spawn(runtime);
        const port = g.ports.proxy;
        assert.equal((await rawRequest(port, head('/v1/models', 100))).status, 200);
        const seen: string[] = [];
        const refused = async (h: string, body = ''): Promise<Record<string, unknown>> => {
          const r = await rawRequest(port, h, body);
          assert.equal(r.status, 431, `${runtime}: ${r.headers}\n${r.body}`);
          assert.match(r.headers, /^content-type: application\/json$/im);
          assert.match(r.headers, /^connection: close$/im);
          seen.push(r.body);
          return JSON.parse(r.body) as Record<string, unknown>;
        };
        assert.deepEqual(await refused(head('/v1/chat/completions', 101, { post: true }), BODY), {
          error: { message: 'too many request header fields: 101 (the limit is 100)', type: 'invalid_request_error' },
        });
        assert.deepEqual(await refused(head('/v1/messages', 150, { post: true }), BODY), {
          type: 'error',
          error: { type: 'invalid_request_error', message: 'too many request header fields: 150 (the limit is 100)' },
        });
        const big = await refused(head('/v1/models', 4, { pad: 33_000 }));
        assert.match(
          (big.error as { message: string }).message,
          /^request header fields too large: \d+ bytes \(the limit is 32768 bytes\)$/,
        );
        // Just under the byte limit passes.
        assert.equal((await rawRequest(port, head('/v1/models', 4, { pad: 32_000 }))).status, 200);
        answers.set(runtime, seen);
        // Still serving after the refusals.
        assert.equal((await rawRequest(port, head('/v1/chat/completions', 10, { post: true }), BODY)).status, 200);
        // Accounted although no handler saw them: every one counted, the WARN at most once a second (the first
        // refusal's line at once; the three came within a second or two, so one or two lines).
        const metrics = await (await fetch(g.url('/metrics', 'status'))).text();
        assert.match(metrics, /^sluice_request_header_limit_rejections_total\{reason="fields"\} 2$/m);
        assert.match(metrics, /^sluice_request_header_limit_rejections_total\{reason="bytes"\} 1$/m);
        const warned = g.logs.filter((l) => l.msg === 'request refused: header fields over the limit (431)');
        assert.ok(warned.length >= 1 && warned.length <= 3, `${runtime}: ${warned.length} WARN lines`);
        const first = warned[0]!;
        assert.equal(first.level, 'WARN');
        assert.equal(first.path, '/v1/chat/completions');
        assert.equal(first.reason, 'fields');
        assert.equal(first.detail, 'too many request header fields: 101 (the limit is 100)');
        assert.match(String(first.peer), /^127\.0\.0\.1:\d+$/);
        assert.equal(first.refused_since_last_line, 1);
        const logged = warned.reduce((n, l) => n + Number(l.refused_since_last_line), 0);
        assert.ok(logged <= 3, `${runtime}: lines account for ${logged} refusals`);
      });
    }

    for (const runtime of RUNTIMES) {
      test(`${runtime}: h2c (proxy.http2) — 150 fields get the same 431; a far larger flood is reset`, async () => {
        const g = await spawn(runtime, ', http2: true');
        const ask = async (fields: number): Promise<string> => {
          const session = http2.connect(`http://127.0.0.1:${g.ports.proxy}`);
          session.on('error', () => {});
          const headers: Record<string, string> = { ':path': '/v1/models', authorization: `Bearer ${CALLER_KEY}` };
          for (let i = 0; Object.keys(headers).length < fields + 1; i++) headers[`x-f-${i}`] = 'v';
          try {
            return await new Promise<string>((resolve) => {
              const st = session.request(headers);
              let body = '';
              let status = '';
              st.on('response', (h) => (status = String(h[':status'])));
              st.on('data', (d: Buffer) => (body += d.toString()));
              st.on('end', () => resolve(`${status} ${body}`));
              st.on('error', (e: Error) => resolve(`reset: ${e.message}`));
            });
          } finally {
            session.close();
          }
        };
        assert.match(await ask(50), /^200 /);
        assert.equal(
          await ask(150),
          '431 {"error":{"message":"too many request header fields: 150 (the limit is 100)","type":"invalid_request_error"}}',
        );
        // Past the HTTP/2 layer's own bound (2 × the limit + 8 pairs), nghttp2 resets the stream.
        assert.match(await ask(500), /^reset: .*ENHANCE_YOUR_CALM|^431 /);
      });
    }

    test('the 431 answers are byte-identical on the three runtimes', { timeout: 200_000 }, async () => {
      // Runs after the three per-runtime tests above have filled `answers` (they run concurrently).
      await until(() => answers.size === RUNTIMES.length, 180_000, 'every runtime answered', 100);
      assert.equal(answers.size, RUNTIMES.length, 'every runtime answered');
      assert.deepEqual(answers.get('bun'), answers.get('node'));
      assert.deepEqual(answers.get('deno'), answers.get('node'));
    });

    for (const runtime of RUNTIMES) {
      test(`${runtime}: CPU per request with many headers stays within a small factor of 10 headers; a refused flood is cheap`, async () => {
        // The highest limit the schema allows; Bun's own parser refuses above 198 fields, so Bun is measured there.
        const g = await spawn(runtime, ', max_request_headers: 999, max_request_header_bytes: 65536');
        const many = runtime === 'bun' ? 198 : 999;
        const N = 150;
        const small = await cpuPer(g, N, head('/v1/chat/completions', 10, { post: true }), BODY, 200);
        const large = await cpuPer(g, N, head('/v1/chat/completions', many, { post: true }), BODY, 200);
        // 3,000 fields: refused by our check (Node, Deno) or by Bun's parser, before any handler runs.
        const flood = await cpuPer(g, N, head('/v1/chat/completions', 3000, { post: true }), BODY, 431);
        const ms = (t: number): string => `${(t * 10).toFixed(2)} ms`;
        console.log(
          `${runtime}: CPU/request 10 headers ${ms(small)}, ${many} headers ${ms(large)}, 3000-header flood ${
            ms(flood)
          }`,
        );
        const floor = Math.max(small, 0.05); // at least 0.5 ms a request, so a tick of noise is not a failure
        assert.ok(large <= floor * 4, `${runtime}: ${many} headers cost ${ms(large)} vs ${ms(small)} for 10`);
        assert.ok(flood <= floor * 2, `${runtime}: a refused 3000-header flood costs ${ms(flood)} vs ${ms(small)}`);
      });
    }
  },
);
