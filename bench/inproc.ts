// Sluice's own work per request, without sockets: the bench configuration's proxy app (auth, a routing model
// in front of a direct one, metrics, the access log into a discarding sink) against a bare Hono app doing the
// I/O a proxy must (read the body, one upstream call, return its answer), both through `app.fetch` with the
// same in-process upstream answering the mock's JSON. What is left is the CPU the gateway's own code adds to
// each request — the part issue 12's "×bare" goal is about — measured in one process, alternating, medians.
//
//   node --import tsx bench/inproc.ts [--requests N] [--rounds N] [--concurrency N] [--no-access-log] [--tracing]
//   node --cpu-prof --import tsx bench/inproc.ts --only sluice      # a profile of Sluice's part alone
//   node --import tsx bench/inproc.ts --features    # also: guardrails on, a cache hit, a cache miss
//
// `--features` adds gateways of the same run with one keyword + one pii guardrail
// (config/resources-guardrails.yaml) and with one exact cache policy (config/resources-cache.yaml), asked the
// same request (every one after the first a hit) or with `Cache-Control: no-store` (a miss: the fingerprint
// and the lookup, nothing stored, then the upstream call).
//
// `--tracing` adds the same app with one OTLP exporter at sample ratio 1.0 (`observability.tracing.otlp`), its
// POSTs answered by the same in-process upstream, so tracing off and on are measured in one run.
// `--stream-chunks N` asks for streams instead: the upstream answers N chunks of the mock's stream (and its
// usage chunk when the body asks `include_usage`, as Sluice does behind the caller's back), then `[DONE]`,
// one chunk per read; the bare app passes the stream through.
// Prints a table; run on Bun or Deno the same way (`bun bench/inproc.ts`, `deno run -A bench/inproc.ts`).
import { Hono } from 'hono';
import { createGateway } from '../src/boot.ts';
import { loadConfig } from '../src/config/load.ts';
import type { Platform, UpstreamFetch } from '../src/platform.ts';
import { loadResourcesFile } from '../src/resources/pipeline.ts';
import { sha256Hex } from '../src/util/crypto.ts';
import { nodeSha256Stream } from '../runtimes/node-sha256.ts';
import { flag, has } from './flags.ts';
import { CHAT_COMPLETION, chunkJson, USAGE_CHUNK } from './mock-answer.mjs';

declare const Deno: { readTextFileSync(p: string): string } | undefined;
declare const Bun: { file(p: string): { text(): Promise<string> } } | undefined;

const REQUESTS = Number(flag('requests', '100000'));
const ROUNDS = Number(flag('rounds', '3'));
const CONCURRENCY = Number(flag('concurrency', '50'));
const ONLY = flag('only', '');
const ACCESS_LOG = !has('no-access-log');
const FEATURES = has('features');
const TRACING = has('tracing');
const STREAM_CHUNKS = Number(flag('stream-chunks', '0'));
/** The exporter `--tracing` adds; its POSTs reach the in-process upstream, never a socket. */
const TRACING_YAML =
  '  tracing: { otlp: { enabled: true, endpoint: "http://127.0.0.1:9/v1/traces", sample_ratio: 1.0 } }';

const enc = new TextEncoder();
const ANSWER = JSON.stringify(CHAT_COMPLETION);
const ANSWER_BYTES = enc.encode(ANSWER);
const UPSTREAM_HEADERS: Record<string, string> = {
  'content-type': 'application/json',
  'content-length': String(ANSWER_BYTES.byteLength),
};

const SSE_HEADERS: Record<string, string> = { 'content-type': 'text/event-stream' };
const SSE_CHUNKS = Array.from({ length: STREAM_CHUNKS }, (_, i) => enc.encode(chunkJson(i, 'fp_bench', STREAM_CHUNKS)));
const SSE_USAGE = enc.encode(`data: ${JSON.stringify(USAGE_CHUNK)}\n\n`);
const SSE_DONE = enc.encode('data: [DONE]\n\n');

async function* sse(includeUsage: boolean): AsyncGenerator<Uint8Array> {
  for (const c of SSE_CHUNKS) yield c;
  if (includeUsage) yield SSE_USAGE;
  yield SSE_DONE;
}

/** The mock's JSON answer or stream, one promise turn later, as an upstream client hands it to the core. */
const upstream: UpstreamFetch = async (req) => {
  if (STREAM_CHUNKS > 0) {
    return {
      status: 200,
      header: (name) => SSE_HEADERS[name] ?? null,
      body: sse(typeof req.body === 'string' && req.body.includes('"include_usage":true')),
      text: () => Promise.reject(new Error('a stream is read by its chunks')),
      discard: async () => {},
    };
  }
  return {
    status: 200,
    header: (name) => UPSTREAM_HEADERS[name] ?? null,
    body: (async function* () {
      yield ANSWER_BYTES;
    })(),
    text: async () => ANSWER,
    discard: async () => {},
  };
};

async function readText(path: string): Promise<string> {
  const url = new URL(path, import.meta.url);
  if (typeof Deno !== 'undefined') return Deno.readTextFileSync(url.pathname);
  if (typeof Bun !== 'undefined') return Bun.file(url.pathname).text();
  const fs = await import('node:fs/promises');
  return fs.readFile(url, 'utf8');
}

const CALLER_KEY = 'sk-sluice-bench';
const BODY = JSON.stringify({
  model: 'bench-route',
  messages: [{ role: 'user', content: 'Say hello.' }],
  ...(STREAM_CHUNKS > 0 ? { stream: true } : {}),
});

type Handler = (r: Request) => Promise<Response>;

async function sluiceApp(resourcesFile = 'resources.yaml', tracing = false): Promise<Handler> {
  const env = { SLUICE_BENCH_UPSTREAM: 'http://127.0.0.1:9/v1' };
  const platform: Platform = {
    name: 'inproc',
    listen: () => Promise.reject(new Error('in-process')),
    onSignal: () => {},
    upstream: () => upstream,
    env,
    writeLog: () => {},
    sha256Stream: nodeSha256Stream, // as the runtimes' platforms hash (the cache's fingerprints)
    exit: () => {},
  };
  const configText = (await readText('./config/config.yaml')).replace(
    /access_log: true/,
    `access_log: ${ACCESS_LOG}${tracing ? `\n${TRACING_YAML}` : ''}`,
  );
  const c = loadConfig('bench/config/config.yaml', configText, env);
  if (!c.ok) throw new Error(c.report.format());
  const { gw, proxy } = createGateway(c.config, platform, { backgroundChecks: false });
  const resources = await readText(`./config/${resourcesFile}`);
  const r = await loadResourcesFile(`bench/config/${resourcesFile}`, resources, env);
  if (!r.ok) throw new Error(r.report.format());
  gw.apply(r.snapshot, { configHash: await sha256Hex(resources) });
  gw.lifecycle.serve();
  return (req) => Promise.resolve(proxy.fetch(req));
}

function bareApp(): Handler {
  const app = new Hono();
  app.post('/v1/chat/completions', async (c) => {
    const body = await c.req.text();
    const r = await upstream({
      url: 'http://127.0.0.1:9/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: c.req.header('authorization') ?? '' },
      body,
    });
    if (STREAM_CHUNKS > 0) {
      const it = r.body[Symbol.asyncIterator]();
      const stream = new ReadableStream<Uint8Array>({
        async pull(ctrl) {
          const n = await it.next();
          if (n.done) ctrl.close();
          else ctrl.enqueue(n.value);
        },
      }, { highWaterMark: 0 });
      return c.body(stream, r.status as 200, { 'content-type': 'text/event-stream' });
    }
    return c.body(await r.text(), r.status as 200, { 'content-type': 'application/json' });
  });
  return (req) => Promise.resolve(app.fetch(req));
}

function request(extra: Record<string, string> = {}): Request {
  return new Request('http://127.0.0.1:3000/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json', ...extra },
    body: BODY,
  });
}

const cpuMicros = (): number => {
  if (typeof process.cpuUsage === 'function') {
    const u = process.cpuUsage();
    return u.user + u.system;
  }
  return performance.now() * 1000; // no CPU clock: wall time (run on an idle machine)
};

/** `n` requests, `CONCURRENCY` at a time; µs of CPU per request (the Request built and the body read included). */
async function measure(handle: Handler, n: number, extra: Record<string, string> = {}): Promise<number> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) {
      next++;
      const res = await handle(request(extra));
      if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    }
  };
  const t0 = cpuMicros();
  await Promise.all([...Array(CONCURRENCY)].map(worker));
  return (cpuMicros() - t0) / n;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Name, app, and the headers each of its requests carries. */
const targets: [string, Handler, Record<string, string>?][] = [];
if (ONLY !== 'bare') targets.push([`sluice${ACCESS_LOG ? '' : ' (no access log)'}`, await sluiceApp()]);
if (FEATURES && ONLY !== 'bare') {
  targets.push(['sluice + keyword + pii guardrails', await sluiceApp('resources-guardrails.yaml')]);
  const cached = await sluiceApp('resources-cache.yaml');
  targets.push(['sluice + cache policy: hit', cached]);
  targets.push(['sluice + cache policy: miss (no-store)', cached, { 'cache-control': 'no-store' }]);
}
if (ONLY !== 'bare' && TRACING) {
  targets.push(['sluice, tracing on (1 exporter, ratio 1.0)', await sluiceApp('resources.yaml', true)]);
}
if (ONLY !== 'sluice') targets.push(['bare hono', bareApp()]);
for (const [, h, extra] of targets) await measure(h, Math.min(REQUESTS, 20_000), extra); // warm-up
const results = new Map<string, number[]>(targets.map(([name]) => [name, []]));
for (let i = 0; i < ROUNDS; i++) {
  for (const [name, h, extra] of targets) results.get(name)!.push(await measure(h, REQUESTS, extra));
}
const bare = results.get('bare hono');
console.log(
  `| app (${REQUESTS} requests × ${ROUNDS} rounds, ${CONCURRENCY} at a time) | µs of CPU per request | rounds |`,
);
console.log('|---|---:|---|');
for (const [name, xs] of results) {
  console.log(`| ${name} | ${median(xs).toFixed(2)} | ${xs.map((x) => x.toFixed(1)).join(', ')} |`);
}
if (bare && results.size > 1) {
  const s = median([...results.values()][0]!);
  console.log(`\nSluice's own work: ${(s - median(bare)).toFixed(2)} µs per request in process`);
}
const traced = results.get('sluice, tracing on (1 exporter, ratio 1.0)');
if (traced) {
  const off = median([...results.values()][0]!);
  console.log(`Tracing on: ${(median(traced) - off).toFixed(2)} µs per request more than off`);
}
