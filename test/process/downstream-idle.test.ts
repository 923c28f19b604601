// Black-box, on Node, Bun and Deno: `downstream.first_request_timeout_secs` (Sluice's; a connection whose first
// request head does not arrive in time is closed; on Bun, Bun's own ~10 s bound instead) and
// `downstream.idle_timeout_secs` (AISIX's key; Sluice's default 30 s, an explicit 0 = never, with a boot WARN;
// docs/security.md "Safe defaults: bodies and connections"). With 1 s, a keep-alive connection idle after its
// answer is closed after about a second, and so is an HTTP/2 session (h2c and TLS) that sent only its preface
// or whose last stream ended, while a slow answer and an SSE stream that last longer are never cut; without the
// key, answers announce the 30 s default; with 0, an idle connection outlives Node's own 5 s and carries a
// second request.
// Run: node build.mjs && node --import tsx --test test/process/downstream-idle.test.ts
import assert from 'node:assert/strict';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import * as tls from 'node:tls';
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
import { makePki, type Pki } from '../support/tls.ts';
import { until } from '../support/until.ts';
import { DEFAULT_IDLE_TIMEOUT_SECS } from '../../src/config/schema.ts';
import { MSG } from '../../src/observability/messages.ts';

/** A keep-alive HTTP/1.1 connection that collects what it receives and notes when the server closed it. */
function connection(port: number, secure?: { ca: string; alpn: string }): Promise<{
  send(text: string): void;
  received(): string;
  /** Resolves with the text received so far once it contains `marker`. */
  waitFor(marker: string, ms: number): Promise<string>;
  closedAt: Promise<number>;
  destroy(): void;
}> {
  return new Promise((resolve, reject) => {
    const s = secure
      ? tls.connect({ port, host: '127.0.0.1', ca: secure.ca, ALPNProtocols: [secure.alpn] })
      : net.connect(port, '127.0.0.1');
    let buf = '';
    const waiters: (() => void)[] = [];
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      buf += d;
      for (const w of [...waiters]) w();
    });
    const closedAt = new Promise<number>((r) => s.once('close', () => r(Date.now())));
    s.once('error', reject);
    s.once(secure ? 'secureConnect' : 'connect', () =>
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

/** The HTTP/2 client preface and an empty SETTINGS frame: what a client sends before its first request. */
const H2_PREFACE = Buffer.concat([
  Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'),
  Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]),
]);

/** A socket (cleartext or TLS with ALPN h2) that sends the HTTP/2 preface and nothing else; resolves when closed. */
function prefaceOnly(port: number, ca?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = ca
      ? tls.connect({ port, host: '127.0.0.1', ca, ALPNProtocols: ['h2'] }, () => s.write(H2_PREFACE))
      : net.connect(port, '127.0.0.1', () => s.write(H2_PREFACE));
    s.resume();
    s.once('error', (e: NodeJS.ErrnoException) => e.code !== 'ECONNRESET' && reject(e));
    s.once('close', () => resolve(Date.now()));
  });
}

const models = `GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${CALLER_KEY}\r\n\r\n`;
function chatRequest(content: string, stream = false): string {
  const body = JSON.stringify({ model: 'gpt-test', stream, messages: [{ role: 'user', content }] });
  return `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${CALLER_KEY}\r\n` +
    `content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
}

/** One chat request on an HTTP/2 session: its status and body. */
function h2Chat(session: http2.ClientHttp2Session, content: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content }] });
    const req = session.request({
      ':method': 'POST',
      ':path': '/v1/chat/completions',
      authorization: `Bearer ${CALLER_KEY}`,
      'content-type': 'application/json',
    });
    let status = 0;
    let text = '';
    req.setEncoding('utf8');
    req.on('response', (h) => (status = Number(h[':status'])));
    req.on('data', (d: string) => (text += d));
    req.once('end', () => resolve({ status, text }));
    req.once('error', reject);
    req.end(body);
  });
}

describe('downstream.idle_timeout_secs (gateway processes on node, bun, deno)', {
  // A few gateways at a time: each test times a close to the second, which a starved machine blurs.
  concurrency: 4,
  timeout: 120_000,
}, () => {
  const procs: GatewayProcess[] = [];
  const mocks: MockUpstream[] = [];
  let mock: MockUpstream;
  let pki: Promise<Pki> | undefined;
  const sharedPki = () => (pki ??= Promise.resolve().then(makePki));
  before(async () => {
    mock = await startMockUpstream();
    mocks.push(mock);
    // openssl runs synchronously: made before the tests that time a close, whose events it would hold back.
    await sharedPki();
  });
  after(async () => {
    await Promise.all(procs.map((g) => g.stop(10_000).catch(() => g.kill())));
    await Promise.all(mocks.map((m) => m.close()));
  });
  const spawn = async (
    runtime: RuntimeName,
    upstream: MockUpstream,
    extra = '',
    proxyExtra = '',
  ): Promise<GatewayProcess> => {
    const g = await spawnGateway({
      runtime,
      config: baseConfig(extra).replace('"127.0.0.1:{{proxy}}" }', `"127.0.0.1:{{proxy}}"${proxyExtra} }`),
      files: { 'resources.yaml': resourcesFor(upstream.base) },
      env: { CALLER_KEY },
    });
    procs.push(g);
    // A TLS listener answers HTTPS only: its readiness is its boot line.
    if (proxyExtra.includes('tls')) await g.waitForLog((l) => l.msg === MSG.listening && l.listener === 'proxy');
    else await g.waitReady('/readyz');
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

    test(`${runtime}: first_request_timeout_secs: 1 closes a connection without a request, not one that sent one; without idle_timeout_secs, answers announce the ${DEFAULT_IDLE_TIMEOUT_SECS} s default`, async () => {
      const g = await spawn(runtime, mock, 'downstream: { first_request_timeout_secs: 1 }');
      const opened = Date.now();
      const silent = await connection(g.ports.proxy);
      // One byte of a request line, then nothing: no request head either.
      const trickle = await connection(g.ports.proxy);
      trickle.send('G');
      // A request answered, then idle (within the 30 s idle default): kept.
      const used = await connection(g.ports.proxy);
      used.send(models);
      await used.waitFor('"object":"list"', 5000);
      // No idle_timeout_secs in the file: the default, announced, and no WARN.
      assert.match(used.received(), new RegExp(`^keep-alive: timeout=${DEFAULT_IDLE_TIMEOUT_SECS}\\r?$`, 'im'));
      assert.equal(g.logs.find((l) => l.msg === MSG.idleTimeoutUnbounded), undefined);
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

    test(`${runtime}: h2c and TLS, idle_timeout_secs: 1: a preface-only session, an idle session and an idle TLS HTTP/1.1 connection are closed; a slow answer is not cut`, async () => {
      const up = await startMockUpstream();
      mocks.push(up);
      const idle = 'downstream: { idle_timeout_secs: 1 }';
      const h2c = await spawn(runtime, up, idle, ', http2: true');
      const pki = await sharedPki();
      const secure = await spawn(
        runtime,
        up,
        idle,
        `, tls: { cert_file: "${pki.certFile}", key_file: "${pki.keyFile}" }`,
      );
      const within = (what: string, ms: number) =>
        assert.ok(ms >= 900 && ms <= 4000, `${runtime}: ${what} closed after ${ms} ms`);

      const opened = Date.now();
      const [h2cPreface, tlsPreface] = await Promise.all([
        prefaceOnly(h2c.ports.proxy),
        prefaceOnly(secure.ports.proxy, pki.ca),
      ]);
      within('h2c session that sent only its preface', h2cPreface - opened);
      within('TLS h2 session that sent only its preface', tlsPreface - opened);

      // A session whose one stream is answered after 2.5 s (longer than the timeout): answered, then closed.
      up.script({ delayMs: 2500 });
      const session = http2.connect(`http://127.0.0.1:${h2c.ports.proxy}`);
      session.on('error', () => {});
      const sessionClosed = new Promise<number>((r) => session.once('close', () => r(Date.now())));
      const answer = await h2Chat(session, 'slow over h2c');
      const answered = Date.now();
      assert.equal(answer.status, 200, answer.text);
      assert.match(answer.text, /"chat\.completion"/);
      within('h2c session idle after its answer', (await sessionClosed) - answered);

      const c = await connection(secure.ports.proxy, { ca: pki.ca, alpn: 'http/1.1' });
      c.send(models);
      await c.waitFor('"object":"list"', 5000);
      const tlsAnswered = Date.now();
      within('TLS HTTP/1.1 connection idle after its answer', (await c.closedAt) - tlsAnswered);
    });

    test(`${runtime}: idle_timeout_secs: 0 (explicit) WARNs at boot; an idle connection stays open past 5 s`, async () => {
      const g = await spawn(runtime, mock, 'downstream: { idle_timeout_secs: 0 }');
      const warn = await g.waitForLog(MSG.idleTimeoutUnbounded);
      assert.equal(warn.level, 'WARN');
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
