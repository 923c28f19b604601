// Mock OpenAI-compatible upstream for the benchmark. Runs on Node (node:http) or on Bun (Bun.serve), so the
// harness can pick whichever is faster on the machine; both serve byte-identical answers.
//
//   node bench/mock-upstream.mjs --port 18090 [--chunk-delay-ms 5] [--chunks 20]
//   bun  bench/mock-upstream.mjs --port 18090
//
// POST /v1/chat/completions
//   JSON (no `"stream":true` in the body): a fixed small `chat.completion`, precomputed, with content-length.
//   SSE  (`"stream":true`): response headers (on Bun, all but the head's end: see below), then `--chunks`
//        chunks `--chunk-delay-ms` apart (the first one after one delay, as a model's first token would be),
//        then `data: [DONE]`.
//        The first chunk carries its send time as `"system_fingerprint":"fp_t<epoch ms with µs>"` so that a
//        client can compute how long a gateway took to forward it (bench/ttfb.ts); every other chunk is
//        precomputed. A body with `"user":"bench-scale:<delay ms>:<chunks>"` (the streams-at-scale scenario)
//        gets that many chunks that far apart instead, every one stamped with its send time. A body that
//        asks `"include_usage":true` gets OpenAI's usage-only chunk before `[DONE]`.
// GET /livez → 200 `ok` (readiness of the mock itself). Anything else → 404.
// Talks only to 127.0.0.1. Prints `mock-upstream listening <port> <runtime>` once bound.

import { CHAT_COMPLETION, chunkJson, USAGE_CHUNK } from './mock-answer.mjs';

const args = process.argv.slice(2);
function flag(name, dflt) {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : dflt;
}
const PORT = Number(flag('port', '18090'));
const DELAY_MS = Number(flag('chunk-delay-ms', '5'));
const CHUNKS = Number(flag('chunks', '20'));
const HOST = '127.0.0.1';

const enc = new TextEncoder();
const JSON_BODY = enc.encode(JSON.stringify(CHAT_COMPLETION));

// Chunk 0 is built per stream (it carries the send time); chunks 1..N-1 and [DONE] are precomputed.
const CHUNK_BYTES = Array.from({ length: CHUNKS }, (_, i) => enc.encode(chunkJson(i, 'fp_bench', CHUNKS)));
const DONE = enc.encode('data: [DONE]\n\n');
const USAGE_DONE = enc.encode(`data: ${JSON.stringify(USAGE_CHUNK)}\n\ndata: [DONE]\n\n`);
const INCLUDE_USAGE = /"include_usage"\s*:\s*true/;
const wallMs = () => performance.timeOrigin + performance.now();
const stamped = (i, chunks = CHUNKS) => enc.encode(chunkJson(i, `fp_t${wallMs().toFixed(3)}`, chunks));
const firstChunk = () => stamped(0);

/** Delay until event i (chunk i, or [DONE] at i = chunks) is due at t0 + (i + 1) × delay: no drift. */
const due = (t0, i, delay = DELAY_MS) => Math.max(0, t0 + (i + 1) * delay - performance.now());

const SCALE_MARK = /"user"\s*:\s*"bench-scale:(\d+):(\d+)"/;
/** What one stream sends: chunk i's bytes, how many chunks, how far apart. */
function streamPlan(body) {
  const m = SCALE_MARK.exec(body);
  const end = INCLUDE_USAGE.test(body) ? USAGE_DONE : DONE;
  if (!m) return { chunks: CHUNKS, delay: DELAY_MS, chunk: (i) => (i === 0 ? firstChunk() : CHUNK_BYTES[i]), end };
  const chunks = Number(m[2]);
  return { chunks, delay: Number(m[1]), chunk: (i) => stamped(i, chunks), end };
}

const STREAM_MARK = /"stream"\s*:\s*true/;
const NOT_FOUND = enc.encode('{"error":{"message":"not found","type":"not_found"}}');

if (typeof Bun !== 'undefined' && !process.env.MOCK_FORCE_NODE) {
  // ---------------------------------------------------------------------------------------------- Bun
  const jsonHeaders = { 'content-type': 'application/json' };
  const sseHeaders = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };
  const server = Bun.serve({
    hostname: HOST,
    port: PORT,
    idleTimeout: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      if (req.method === 'GET' && path === '/livez') return new Response('ok');
      if (req.method !== 'POST' || path !== '/v1/chat/completions') {
        return new Response(NOT_FOUND, { status: 404, headers: jsonHeaders });
      }
      const body = await req.text();
      if (!STREAM_MARK.test(body)) return new Response(JSON_BODY, { headers: jsonHeaders });
      // Bun (1.4.5) sends the status line and these headers at once but its `Date`, `Transfer-Encoding` and
      // the blank line ending the head only with the first chunk, pull or `direct` stream alike: a client sees
      // the response when the first chunk comes. The Node mock (`--upstream node`) sends the whole head first.
      const plan = streamPlan(body);
      let i = 0;
      let timer;
      const t0 = performance.now();
      const stream = new ReadableStream({
        pull(ctrl) {
          return new Promise((resolve) => {
            timer = setTimeout(() => {
              try {
                if (i < plan.chunks) {
                  ctrl.enqueue(plan.chunk(i));
                  i++;
                } else {
                  ctrl.enqueue(plan.end);
                  ctrl.close();
                }
              } catch { /* cancelled */ }
              resolve();
            }, due(t0, i, plan.delay));
          });
        },
        cancel() {
          clearTimeout(timer);
        },
      });
      return new Response(stream, { headers: sseHeaders });
    },
  });
  console.log(`mock-upstream listening ${server.port} bun`);
} else {
  // --------------------------------------------------------------------------------------------- Node
  const http = await import('node:http');
  const jsonHead = { 'content-type': 'application/json', 'content-length': String(JSON_BODY.byteLength) };
  const sseHead = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };
  const server = http.createServer({ keepAliveTimeout: 120_000, requestTimeout: 0, headersTimeout: 0 }, (req, res) => {
    if (req.method === 'GET' && req.url === '/livez') {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
      res.end('ok');
      return;
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json', 'content-length': String(NOT_FOUND.byteLength) });
      res.end(NOT_FOUND);
      req.resume();
      return;
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => {
      body += d;
    });
    req.on('end', () => {
      if (!STREAM_MARK.test(body)) {
        res.writeHead(200, jsonHead);
        res.end(JSON_BODY);
        return;
      }
      res.writeHead(200, sseHead);
      res.flushHeaders();
      const plan = streamPlan(body);
      let i = 0;
      let timer;
      const t0 = performance.now();
      const tick = () => {
        if (res.destroyed) return;
        if (i < plan.chunks) {
          res.write(plan.chunk(i));
          i++;
          timer = setTimeout(tick, due(t0, i, plan.delay));
        } else {
          res.end(plan.end);
        }
      };
      timer = setTimeout(tick, due(t0, 0, plan.delay));
      res.on('close', () => clearTimeout(timer));
    });
  });
  server.keepAliveTimeout = 120_000;
  server.listen(PORT, HOST, () => console.log(`mock-upstream listening ${server.address().port} node`));
}

for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
