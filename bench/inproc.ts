// Sluice's own work per request, without sockets: the bench configuration's proxy app (auth, a routing model
// in front of a direct one, metrics, the access log into a discarding sink) against a bare Hono app doing the
// I/O a proxy must (read the body, one upstream call, return its answer), both through `app.fetch` with the
// same in-process upstream answering the mock's JSON. What is left is the CPU the gateway's own code adds to
// each request — the part issue 12's "×bare" goal is about — measured in one process, alternating, medians.
//
//   node --import tsx bench/inproc.ts [--requests N] [--rounds N] [--concurrency N] [--no-access-log]
//   node --cpu-prof --import tsx bench/inproc.ts --only sluice      # a profile of Sluice's part alone
//   node --import tsx bench/inproc.ts --features    # also: guardrails on, a cache hit, a cache miss
//
// `--features` adds gateways of the same run with one keyword + one pii guardrail
// (config/resources-guardrails.yaml) and with one exact cache policy (config/resources-cache.yaml), asked the
// same request (every one after the first a hit) or with `Cache-Control: no-store` (a miss: the fingerprint
// and the lookup, nothing stored, then the upstream call).
//
// Prints a table; run on Bun or Deno the same way (`bun bench/inproc.ts`, `deno run -A bench/inproc.ts`).
import { Hono } from 'hono';
import { createGateway } from '../src/boot.ts';
import { loadConfig } from '../src/config/load.ts';
import type { Platform, UpstreamFetch } from '../src/platform.ts';
import { loadResourcesFile } from '../src/resources/pipeline.ts';
import { sha256Hex } from '../src/util/crypto.ts';
import { flag, has } from './flags.ts';
import { CHAT_COMPLETION } from './mock-answer.mjs';

declare const Deno: { readTextFileSync(p: string): string } | undefined;
declare const Bun: { file(p: string): { text(): Promise<string> } } | undefined;

const REQUESTS = Number(flag('requests', '100000'));
const ROUNDS = Number(flag('rounds', '3'));
const CONCURRENCY = Number(flag('concurrency', '50'));
const ONLY = flag('only', '');
const ACCESS_LOG = !has('no-access-log');
const FEATURES = has('features');

const enc = new TextEncoder();
const ANSWER = JSON.stringify(CHAT_COMPLETION);
const ANSWER_BYTES = enc.encode(ANSWER);
const UPSTREAM_HEADERS: Record<string, string> = {
  'content-type': 'application/json',
  'content-length': String(ANSWER_BYTES.byteLength),
};

/** The mock's JSON answer, one promise turn later, as an upstream client hands it to the core. */
const upstream: UpstreamFetch = async () => ({
  status: 200,
  header: (name) => UPSTREAM_HEADERS[name] ?? null,
  body: (async function* () {
    yield ANSWER_BYTES;
  })(),
  text: async () => ANSWER,
  discard: async () => {},
});

async function readText(path: string): Promise<string> {
  const url = new URL(path, import.meta.url);
  if (typeof Deno !== 'undefined') return Deno.readTextFileSync(url.pathname);
  if (typeof Bun !== 'undefined') return Bun.file(url.pathname).text();
  const fs = await import('node:fs/promises');
  return fs.readFile(url, 'utf8');
}

const CALLER_KEY = 'sk-sluice-bench';
const BODY = JSON.stringify({ model: 'bench-route', messages: [{ role: 'user', content: 'Say hello.' }] });

type Handler = (r: Request) => Promise<Response>;

async function sluiceApp(resourcesFile = 'resources.yaml'): Promise<Handler> {
  const env = { SLUICE_BENCH_UPSTREAM: 'http://127.0.0.1:9/v1' };
  const platform: Platform = {
    name: 'inproc',
    listen: () => Promise.reject(new Error('in-process')),
    onSignal: () => {},
    upstream: () => upstream,
    env,
    writeLog: () => {},
    exit: () => {},
  };
  const configText = (await readText('./config/config.yaml')).replace(
    /access_log: true/,
    `access_log: ${ACCESS_LOG}`,
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
