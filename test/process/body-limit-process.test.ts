// The declared-length 413 against real listeners (docs/aisix-compatibility.md "Logs".5): a caller still sending a body
// far over `proxy.request_body_limit_bytes` reads the 413 (the gateway drains what it sends), without
// credentials (refused before authentication), and the gateway writes its `aisix::body_limit` line. With no
// limit configured, the default one (docs/security.md "Safe defaults: bodies and connections") refuses a 100 MB
// body, declared or chunked, without the process holding it; an explicit 0 WARNs at boot.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { MSG } from '../../src/observability/messages.ts';
import { DRAIN_CAP_BYTES } from '../../src/proxy/body-limit.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';
import { until } from '../support/until.ts';

const RESOURCES = `_format_version: "1"
provider_keys:
  - { display_name: offline, provider: echo }
models:
  - { display_name: echo, provider_key: offline, model_name: e1 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;

const running: GatewayProcess[] = [];

/** The body sent to the default limit: 100 MB (decimal), three times the default. */
const BIG_BYTES = 100_000_000;

/** Reset the process's peak resident memory (`VmHWM`) to its current one (Linux `clear_refs`, value 5). */
function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/** The process's resident memory now and at its peak since `resetPeak` (`VmRSS`, `VmHWM`), in bytes. */
function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)![1]) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

/** What a caller sending a big body saw: the answer's status (0 without one) and head, how much it sent, its error. */
interface BigPost {
  status: number;
  head: string;
  sent: number;
  error?: string;
}

/** A raw connection to the gateway: what it has received so far, its socket error's code, its close. */
async function rawConnection(port: number) {
  const s = net.connect(port, '127.0.0.1');
  await new Promise((r) => s.once('connect', r));
  let received = '';
  s.setEncoding('latin1');
  s.on('data', (d: string) => (received += d));
  let error: string | undefined;
  s.on('error', (e: NodeJS.ErrnoException) => (error = e.code));
  const closed = new Promise((r) => s.once('close', r));
  return { s, closed, received: () => received, error: () => error };
}

/**
 * POST `total` bytes of a JSON chat body (never closed, so a gateway that read it all could not parse it) over a raw
 * connection, declared (`Content-Length`) or chunked, 1 MiB at a time, as long as the gateway reads and has not
 * answered: a caller that keeps sending.
 */
async function postBig(port: number, total: number, o: { chunked: boolean; key?: string }): Promise<BigPost> {
  const { s, closed, received, error } = await rawConnection(port);
  const framing = o.chunked ? 'transfer-encoding: chunked' : `content-length: ${total}`;
  s.write(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n${framing}\r\n` +
      (o.key ? `authorization: Bearer ${o.key}\r\n` : '') + '\r\n',
  );
  const prefix = Buffer.from('{"model":"echo","messages":[{"role":"user","content":"');
  const mib = Buffer.alloc(1024 * 1024, 'x');
  let sent = 0;
  while (sent < total && !s.destroyed && !received().includes('\r\n\r\n')) {
    let piece = sent === 0 ? Buffer.concat([prefix, mib.subarray(prefix.length)]) : mib;
    if (total - sent < piece.length) piece = piece.subarray(0, total - sent);
    const framed = o.chunked ? [Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')] : [piece];
    let ok = true;
    for (const b of framed) ok = s.write(b) && ok;
    sent += piece.length;
    if (!ok) await Promise.race([new Promise((r) => s.once('drain', r)), closed]);
  }
  if (o.chunked && sent >= total && !s.destroyed) s.write('0\r\n\r\n');
  await until(() => received().includes('\r\n\r\n') || s.destroyed, 60_000, 'an answer or the connection closed');
  s.destroy();
  const answer = received();
  const head = answer.slice(0, Math.max(0, answer.indexOf('\r\n\r\n')));
  const code = error();
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), head, sent, ...(code ? { error: code } : {}) };
}

/**
 * Over one raw connection: POST all of a `total`-byte body, declared or (with the caller's key) chunked, whatever the
 * gateway answers meanwhile, then a small chat with the key; what came back once both answers did (or it closed).
 */
async function refusedThenReused(
  port: number,
  total: number,
  chunked: boolean,
): Promise<{ statuses: number[]; error?: string }> {
  const { s, closed, received, error } = await rawConnection(port);
  const framing = chunked
    ? `transfer-encoding: chunked\r\nauthorization: Bearer ${CALLER_KEY}`
    : `content-length: ${total}`;
  s.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n${framing}\r\n\r\n`);
  const mib = Buffer.alloc(1024 * 1024, 'x');
  const crlf = Buffer.from('\r\n');
  for (let sent = 0; sent < total && !s.destroyed; sent += mib.length) {
    const piece = mib.subarray(0, Math.min(mib.length, total - sent));
    const framed = chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, crlf]) : piece;
    if (!s.write(framed)) await Promise.race([new Promise((r) => s.once('drain', r)), closed]);
  }
  if (chunked && !s.destroyed) s.write('0\r\n\r\n');
  const chat = JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'again' }] });
  if (!s.destroyed) {
    s.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
        `authorization: Bearer ${CALLER_KEY}\r\ncontent-length: ${Buffer.byteLength(chat)}\r\n\r\n${chat}`,
    );
  }
  await until(() => received().includes('chat.completion') || s.destroyed, 30_000, 'the second answer or the close');
  s.destroy();
  const statuses = [...received().matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
  const code = error();
  return { statuses, ...(code ? { error: code } : {}) };
}

/** A gateway on `runtime` with `request_body_limit_bytes: limit`, ready (stopped after the file). */
async function readyWithLimit(runtime: RuntimeName, limit: number): Promise<GatewayProcess> {
  const gw = await spawnGateway({
    runtime,
    config: baseConfig().replace(
      'proxy: { addr: "127.0.0.1:{{proxy}}" }',
      `proxy: { addr: "127.0.0.1:{{proxy}}", request_body_limit_bytes: ${limit} }`,
    ),
    env: { CALLER_KEY },
    files: { 'resources.yaml': RESOURCES },
  });
  running.push(gw);
  await gw.waitReady();
  return gw;
}

after(async () => {
  await Promise.all(running.map((g) => g.stop()));
});

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: request body limit`, () => {
    test('a 2 MiB body over a 1 KiB limit: 413 read by the caller, drained, logged', async () => {
      const gw = await readyWithLimit(runtime, 1024);
      const big = 'x'.repeat(2 * 1024 * 1024);
      const res = await fetch(gw.url('/v1/chat/completions'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-aisix-request-id': `big-${runtime}` },
        body: big,
        signal: AbortSignal.timeout(15_000),
      });
      assert.equal(res.status, 413);
      assert.deepEqual(await res.json(), {
        error: { message: 'request body exceeds 1024-byte limit', type: 'invalid_request_error' },
      });
      const line = await gw.waitForLog((l) => l.target === 'aisix::body_limit');
      assert.equal(line.level, 'INFO');
      assert.equal(line.msg, 'request body exceeded the configured limit');
      assert.equal(line.request_id, `big-${runtime}`);
      assert.equal(line.declared_content_length, big.length);
      assert.equal(line.drained_bytes, big.length);
      assert.equal(line.drain_outcome, 'completed');
      const access = await gw.waitForLog((l) =>
        l.msg === 'proxy request completed' && l.request_id === `big-${runtime}`
      );
      assert.equal(access.status, 413);
      assert.equal(access.target, 'aisix_obs::access_log');
      // the gateway still serves
      const ok = await fetch(gw.url('/v1/chat/completions'), {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(ok.status, 200);
      await ok.text();
    });
    test('a caller that sends all of a refused body reads the 413 and reuses the connection', async () => {
      const gw = await readyWithLimit(runtime, 1024);
      const declared = await refusedThenReused(gw.ports.proxy, DRAIN_CAP_BYTES + 8 * 1024 * 1024, false);
      assert.deepEqual(declared, { statuses: [413, 200] });
      const line = await gw.waitForLog((l) => l.target === 'aisix::body_limit');
      assert.equal(line.drain_outcome, 'cap_reached');
      // Chunked, refused at the limit after authentication: the rest is read and dropped the same way.
      assert.deepEqual(await refusedThenReused(gw.ports.proxy, 8 * 1024 * 1024, true), { statuses: [413, 200] });
    });
  });
  describe(`${runtime}: the default request body limit`, () => {
    test('a 100 MB body, declared or chunked, is refused with 413 without the gateway holding it', async () => {
      const gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        env: { CALLER_KEY },
        files: { 'resources.yaml': RESOURCES },
      });
      running.push(gw);
      await gw.waitReady();
      assert.equal(gw.logs.find((l) => l.msg === MSG.bodyLimitUnbounded), undefined);
      const pid = gw.proc.pid!;
      const posts: BigPost[] = [];
      const grown: number[] = [];
      for (const o of [{ chunked: false }, { chunked: false, key: CALLER_KEY }, { chunked: true, key: CALLER_KEY }]) {
        resetPeak(pid);
        const before = memory(pid).rss;
        posts.push(await postBig(gw.ports.proxy, BIG_BYTES, o));
        grown.push(memory(pid).peak - before);
      }
      console.log(
        `${runtime}: peak resident memory grew by ${grown.join(', ')} bytes (declared, declared with a key, chunked)`,
      );
      // Each caller read its 413, though it went on sending past what the gateway reads; the declared ones past
      // the drain's cap, whose connection the runtime keeps discarding into rather than resetting.
      for (const p of posts) assert.equal(p.status, 413, `${runtime}: ${JSON.stringify(p)}`);
      for (const p of posts.slice(0, 2)) assert.doesNotMatch(p.head, /^connection: *close/im, `${runtime}: ${p.head}`);
      // Reading a body of 100 MB whole takes more than 100 MB; the drain and the limit's reads leave garbage
      // the runtime has not yet collected, below that.
      for (const g of grown) assert.ok(g < BIG_BYTES, `${runtime}: resident memory grew by ${g} bytes`);
      const refused = () => gw.logs.filter((l) => l.msg === 'proxy request completed' && l.status === 413).length;
      await until(() => refused() === 3, 5000, 'three 413 access-log lines');
    });

    test("an explicit 0 keeps AISIX's meaning (no limit) and WARNs at boot", async () => {
      const gw = await spawnGateway({
        runtime,
        config: baseConfig().replace(
          'proxy: { addr: "127.0.0.1:{{proxy}}" }',
          'proxy: { addr: "127.0.0.1:{{proxy}}", request_body_limit_bytes: 0 }',
        ),
        env: { CALLER_KEY },
        files: { 'resources.yaml': RESOURCES },
      });
      running.push(gw);
      const warn = await gw.waitForLog(MSG.bodyLimitUnbounded);
      assert.equal(warn.level, 'WARN');
      assert.equal(warn.key, 'proxy.request_body_limit_bytes');
      await gw.waitReady();
      // 40 MiB (over the default) of a valid chat body: read whole and answered.
      const content = 'y'.repeat(40 * 1024 * 1024);
      const res = await fetch(gw.url('/v1/chat/completions'), {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', max_tokens: 1, messages: [{ role: 'user', content }] }),
      });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    });
  });
}
