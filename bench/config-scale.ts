// Configuration at internet scale (docs/performance.md "Configuration at scale"): N api keys, through a real etcd
// and through a resources file, on each runtime named, with real processes. Prints per runtime and source:
// process start → proxy ready, peak and settled RSS, one key's change (etcd: put → the new key answers 200,
// delete → it answers 401; file: a SIGHUP reload of the whole file) and the slowest of the requests sent every
// 20 ms while the load and the update run, each against its target with MET/MISS. etcd also: how long after the
// change `/status/config` shows it applied (its hashes follow), and the gateway's CPU per change until then.
//
// Run: node build.mjs && node --import tsx bench/config-scale.ts [--keys 1000000] [--runtimes node,bun,deno]
//        [--sources etcd,file] [--changes 5] [--etcd http://127.0.0.1:2379] [--reload-changed 1]
// `--etcd`: an etcd already running, seeded only when it holds fewer keys (seeding a million takes minutes).
// `--reload-changed`: the share of the file's keys its reload renames (1: every key, 0.01: one in a hundred).
// `--etcd-pid PID`: etcd's CPU seconds to ready too (stderr).
// `--cache`: the etcd runs write a snapshot cache file (docs/etcd.md "The snapshot cache") in their temp dir.
// `--restore` (with `--cache`): after each etcd run, a gateway boots from the cache file that run left, its etcd
// unreachable: ready, peak RSS and the slowest `/livez` while it restores (printed as `cache restore`; with
// `--gateway-exec`, that gateway is the executable's). `--cache-out FILE`: a copy of that cache file.
// `--jwt`: etcd also holds a shared-secret OIDC provider and a key bound to a JWT subject; the requests sent during
// the changes present that JWT instead of an api key (the bindings are read after every change).
// `--stalls MS`: every request slower than MS during the file's reload, with when it was sent (after the SIGHUP
// and after the spawn, to set beside a collector's trace); `--gateway-env K=V,K=V`: the gateway's environment only
// (`NODE_OPTIONS=--trace-gc`, `DENO_V8_FLAGS=--trace-gc`, `BUN_JSC_logGC=1`); `--gateway-out FILE`: the
// gateway's stdout and the stderr lines that are not log lines, where such traces go; `--gateway-exec FILE`: an
// executable run in place of the runtime's command, given the gateway's arguments (Node refuses `--trace-gc` and
// `--cpu-prof` in NODE_OPTIONS: a script that runs `node --trace-gc … bin/sluice "$@"`); the three apply to the etcd
// runs too. stderr names the status probes during the load slower than 100 ms and when the slowest were sent.
// `--read-only planned,whole [--pages 20000,50000] [--rounds 2]`: no gateway, only the etcd source's initial read
// of the prefix, timed: `planned` as the source reads it (client.ts `rangePaged`), `whole` as it did before, each
// page asked over the whole rest of the prefix; with etcd's CPU seconds.
// The rows also go to bench/results/config-scale.json, which `npm run bench` reads for its target 4 (not those of a
// run with `--cache` or `--jwt`: printed as `etcd+cache`, `etcd+jwt`, they would replace the plain etcd row).
import { createHash, createHmac } from 'node:crypto';
import { copyFileSync, existsSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { encodeUtf8, EtcdClient, type EtcdFetch, prefixRange } from '../src/sources/etcd/client.ts';
import { base64Encode } from '../src/util/bytes.ts';
import { startEtcd } from '../test/support/etcd.ts';
import { startMockUpstream } from '../test/support/mock-upstream.ts';
import { CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../test/support/process.ts';
import { readFileSync } from 'node:fs';
import { rssMiB } from '../test/support/victim.ts';
import { flag } from './flags.ts';

const KEYS = Number(flag('keys', '1000000'));
const RUNTIMES = flag('runtimes', 'node,bun,deno').split(',') as RuntimeName[];
const SOURCES = flag('sources', 'etcd,file').split(',');
const CHANGES = Number(flag('changes', '5'));
const ETCD = flag('etcd', '');
/** The share of the file's keys a reload changes (renamed); the rest are left as they were. */
const RELOAD_CHANGED = Number(flag('reload-changed', '1'));
const READ_ONLY = flag('read-only', '').split(',').filter(Boolean);
const PAGES = flag('pages', '20000').split(',').map(Number);
const ROUNDS = Number(flag('rounds', '1'));
const ETCD_PID = flag('etcd-pid', '');
const CACHE = process.argv.includes('--cache');
const JWT = process.argv.includes('--jwt');
const RESTORE = CACHE && process.argv.includes('--restore');
const CACHE_OUT = flag('cache-out', '');
/** The shared secret of `--jwt`'s provider (HS256: at least 32 bytes). */
const JWT_SECRET = 'config-scale-bench-shared-secret-0123456789';
const STALLS = Number(flag('stalls', '0'));
const GATEWAY_ENV: Record<string, string> = Object.fromEntries(
  flag('gateway-env', '').split(',').filter(Boolean).map((
    kv,
  ) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
const GATEWAY_OUT = flag('gateway-out', '');
const GATEWAY_EXEC = flag('gateway-exec', '');
const RESULTS = join(dirname(fileURLToPath(import.meta.url)), 'results', 'config-scale.json');
const PREFIX = '/aisix';
const TARGET = { readyMs: 30_000, rssMiB: 1536, changeMs: 100, stallMs: 100 };

const hashOf = (plain: string): string => createHash('sha256').update(plain).digest('hex');
const b64url = (s: string | Buffer): string => Buffer.from(s).toString('base64url');

/** An HS256 token for `--jwt`'s provider, naming the bound subject, valid for a day. */
function jwtToken(): string {
  const head = `${b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }))}.${
    b64url(JSON.stringify({ sub: 'bench-caller', exp: Math.floor(Date.now() / 1000) + 86_400 }))
  }`;
  return `${head}.${b64url(createHmac('sha256', JWT_SECRET).update(head).digest())}`;
}

/** `--jwt`'s rows (written with `--jwt`, deleted without): a provider and the key its subject is bound to. */
const JWT_ROWS: [string, string][] = [
  [`${PREFIX}/oidc_providers/bench`, JSON.stringify({ name: 'bench', hmac_secret: JWT_SECRET })],
  [
    `${PREFIX}/api_keys/jwt-caller`,
    JSON.stringify({
      key_hash: hashOf('sk-jwt-caller-unused'),
      allowed_models: ['*'],
      jwt_provider: 'bench',
      jwt_subject: 'bench-caller',
    }),
  ],
];
const keyPlain = (i: number): string => `sk-scale-${i}`;

function keyDoc(i: number): string {
  return JSON.stringify({ display_name: `user-${i}`, key_hash: hashOf(keyPlain(i)), allowed_models: ['gpt-test'] });
}

async function txn(endpoint: string, puts: [string, string][]): Promise<void> {
  const success = puts.map(([k, v]) => ({
    request_put: { key: base64Encode(encodeUtf8(k)), value: base64Encode(encodeUtf8(v)) },
  }));
  const res = await fetch(`${endpoint}/v3/kv/txn`, { method: 'POST', body: JSON.stringify({ success }) });
  if (res.status !== 200) throw new Error(`txn: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
}

/** The call's etcd revision. */
async function etcdCall(endpoint: string, path: string, body: unknown): Promise<number> {
  const res = await fetch(`${endpoint}${path}`, { method: 'POST', body: JSON.stringify(body) });
  if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
  return Number(((await res.json()) as { header?: { revision?: string } }).header?.revision ?? 0);
}

/** Until `/status/config` shows revision `rev` applied (its hashes computed): the facts follow a served change. */
async function untilApplied(g: GatewayProcess, rev: number, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const r = await fetch(g.url('/status/config', 'status'), { signal: AbortSignal.timeout(60_000) });
    const body = (await r.json()) as { applied?: { applied_revision?: number } };
    if ((body.applied?.applied_revision ?? 0) >= rev) return;
    await new Promise((r) => setTimeout(r, 1));
  }
  throw new Error(`revision ${rev} never applied`);
}

/** How many keys etcd holds under the prefix. */
async function keyCount(endpoint: string): Promise<number> {
  const prefix = encodeUtf8(`${PREFIX}/`);
  const end = prefix.slice();
  end[end.length - 1]! += 1;
  const res = await fetch(`${endpoint}/v3/kv/range`, {
    method: 'POST',
    body: JSON.stringify({ key: base64Encode(prefix), range_end: base64Encode(end), count_only: true }),
  });
  const body = (await res.json()) as { count?: string };
  return Number(body.count ?? 0);
}

/**
 * The mock provider, `gpt-test` and the usual caller key, then `KEYS` keys, 128 puts a txn, 8 txns at once
 * (the provider's `api_base` is written every time: a reused etcd has the last run's upstream).
 */
async function seedEtcd(endpoint: string, upstream: string): Promise<void> {
  const held = await keyCount(endpoint);
  if (held > KEYS + 3 + JWT_ROWS.length) {
    throw new Error(`etcd holds ${held} keys under ${PREFIX}/, more than --keys ${KEYS}: use a fresh one`);
  }
  const seeded = held >= KEYS + 3;
  if (JWT) await txn(endpoint, JWT_ROWS);
  else {for (const [key] of JWT_ROWS) {
      await etcdCall(endpoint, '/v3/kv/deleterange', { key: base64Encode(encodeUtf8(key)) });
    }}
  await txn(endpoint, [
    [
      `${PREFIX}/provider_keys/pk1`,
      JSON.stringify({ display_name: 'mock', provider: 'openai', api_key: 'sk-up', api_base: upstream }),
    ],
    [
      `${PREFIX}/models/gpt-test`,
      JSON.stringify({ display_name: 'gpt-test', model_name: 'gpt-upstream', provider_key_id: 'pk1' }),
    ],
    [`${PREFIX}/api_keys/caller`, JSON.stringify({ key_hash: hashOf(CALLER_KEY), allowed_models: ['*'] })],
  ]);
  if (seeded) return;
  let next = 0;
  const worker = async () => {
    for (;;) {
      const from = next;
      next += 128;
      if (from >= KEYS) return;
      const puts: [string, string][] = [];
      for (let i = from; i < Math.min(KEYS, from + 128); i++) puts.push([`${PREFIX}/api_keys/k${i}`, keyDoc(i)]);
      await txn(endpoint, puts);
    }
  };
  await Promise.all([...Array(8)].map(worker));
}

function resourcesFile(upstream: string, salt: string, changed = KEYS): string {
  const out = [
    `_format_version: "1"`,
    'provider_keys:',
    '  - display_name: mock',
    '    provider: openai',
    '    api_key: sk-up',
    `    api_base: ${upstream}`,
    'models:',
    '  - display_name: gpt-test',
    '    model_name: gpt-upstream',
    '    provider_key: mock',
    'api_keys:',
    '  - display_name: caller',
    '    key_env: CALLER_KEY',
    '    allowed_models: ["*"]',
  ];
  for (let i = 0; i < KEYS; i++) {
    out.push(
      `  - display_name: user-${i < changed ? salt : 'a'}${i}`,
      `    key_hash: ${hashOf(keyPlain(i))}`,
      '    allowed_models: [gpt-test]',
    );
  }
  return out.join('\n') + '\n';
}

/**
 * Requests sent every 20 ms, open loop, until stopped: the slowest answer (or failure) among them, and when it
 * was sent (ms after the probe began: where in a reload the gateway held its loop).
 */
function prober(
  url: () => string | undefined,
  init: () => RequestInit,
): { stop(): Promise<{ max: number; maxAt: number; n: number; all: { at: number; ms: number }[] }> } {
  let stopped = false;
  const began = performance.now();
  const times: Promise<number>[] = [];
  const sentAt: number[] = [];
  const loop = (async () => {
    while (!stopped) {
      const u = url();
      if (u !== undefined) {
        const t = performance.now();
        sentAt.push(t - began);
        times.push(
          fetch(u, { ...init(), signal: AbortSignal.timeout(120_000) }).then(async (r) => {
            await r.arrayBuffer();
            return performance.now() - t;
          }, () => performance.now() - t),
        );
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      const xs = await Promise.all(times);
      const max = xs.length ? Math.max(...xs) : NaN;
      const all = xs.map((ms, i) => ({ at: sentAt[i]!, ms }));
      return { max, maxAt: sentAt[xs.indexOf(max)] ?? NaN, n: xs.length, all };
    },
  };
}

const chatInit = (key: string) => (): RequestInit => ({
  method: 'POST',
  headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
  body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }),
});

async function chatStatus(g: GatewayProcess, key: string): Promise<number> {
  const r = await fetch(g.url('/v1/chat/completions'), { ...chatInit(key)(), signal: AbortSignal.timeout(60_000) });
  await r.arrayBuffer();
  return r.status;
}

async function untilStatus(g: GatewayProcess, key: string, want: number, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if ((await chatStatus(g, key)) === want) return;
    await new Promise((r) => setTimeout(r, 1));
  }
  throw new Error(`key never answered ${want}`);
}

async function readyz(g: GatewayProcess): Promise<boolean> {
  try {
    const r = await fetch(g.url('/readyz'), { signal: AbortSignal.timeout(1000) });
    await r.arrayBuffer();
    return r.status === 200;
  } catch {
    return false;
  }
}

/** The process's peak RSS so far (VmHWM), in MiB. */
function hwmMiB(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0) / 1024;
}

/** CPU seconds (user + system) the process has used, from /proc: what the load cost on a shared machine. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}

interface Row {
  runtime: string;
  source: string;
  readyMs: number;
  readyCpuS: number;
  peakMiB: number;
  settledMiB: number;
  loadStallMs: number;
  changeMs: number;
  changeWhat: string;
  updateStallMs: number;
  /** etcd: put or delete → `/status/config` shows it applied, median (the hashes follow the served change). */
  factsMs?: number;
  /** etcd: the gateway's CPU over the changes until each was applied, per change. */
  cpuMsPerChange?: number;
  /** `--cache`, `--jwt`: what the etcd run configured besides the keys. */
  variant?: string;
}

/** Spawns the gateway and measures it up to ready: time, RSS (peak sampled every 50 ms), status probe latency. */
async function boot(
  runtime: RuntimeName,
  spawn: () => Promise<GatewayProcess>,
): Promise<
  {
    g: GatewayProcess;
    readyMs: number;
    readyCpuS: number;
    peak: () => number;
    stopPeak: () => void;
    loadStallMs: number;
  }
> {
  const t0 = performance.now();
  const g = await spawn();
  let peak = 0;
  // Sampled, and the kernel's high-water mark, which a sample between two peaks would miss.
  const sample = () => {
    try {
      peak = Math.max(peak, rssMiB(g.proc.pid!), hwmMiB(g.proc.pid!));
    } catch {
      // exited
    }
  };
  const timer = setInterval(sample, 50);
  const probe = prober(() => g.url('/livez', 'status'), () => ({}));
  for (;;) {
    if (g.exited) throw new Error(`${runtime}: gateway exited (${g.exitCode}): ${g.rawErr.slice(-5).join(' | ')}`);
    if (await readyz(g)) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const readyMs = performance.now() - t0;
  const readyCpuS = cpuSeconds(g.proc.pid!);
  const { max, all } = await probe.stop();
  // Which part of the load held the loop: the slowest probes, with when they were sent.
  const slow = all.filter((p) => p.ms > 100).sort((a, b) => b.ms - a.ms);
  const worst = slow.slice(0, 3).map((p) => `${p.ms.toFixed(0)} ms sent at ${(p.at / 1000).toFixed(1)} s`);
  console.error(`${runtime}: ${slow.length} of ${all.length} status probes over 100 ms; ${worst.join(', ')}`);
  const peakNow = () => {
    sample();
    return peak;
  };
  return { g, readyMs, readyCpuS, peak: peakNow, stopPeak: () => clearInterval(timer), loadStallMs: max };
}

/** Every run's gateway: the proxy and the status listener, no admin, no access log, no drain wait. */
const LISTENERS = `proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { enabled: false }
observability: { access_log: false, metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
`;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function etcdRun(runtime: RuntimeName, endpoint: string): Promise<Row> {
  const config = `etcd: { endpoints: ["${endpoint}"], prefix: ${PREFIX} }
${LISTENERS}${CACHE ? 'managed: { snapshot_cache_path: snapshot-cache.json }\n' : ''}`;
  const etcdCpu0 = ETCD_PID ? cpuSeconds(Number(ETCD_PID)) : NaN;
  const b = await boot(
    runtime,
    () =>
      spawnGateway({
        runtime,
        config,
        env: GATEWAY_ENV,
        ...(GATEWAY_EXEC ? { executable: GATEWAY_EXEC } : {}),
      }),
  );
  if (ETCD_PID) {
    console.error(`${runtime}: etcd used ${(cpuSeconds(Number(ETCD_PID)) - etcdCpu0).toFixed(1)} s of CPU to ready`);
  }
  const { g } = b;
  try {
    await untilStatus(g, keyPlain(KEYS - 1), 200);
    const probe = prober(() => g.url('/v1/chat/completions'), chatInit(JWT ? jwtToken() : CALLER_KEY));
    const times: number[] = [];
    const facts: number[] = [];
    const cpu0 = cpuSeconds(g.proc.pid!);
    for (let c = 0; c < CHANGES; c++) {
      const plain = `sk-scale-new-${c}-${Date.now()}`;
      const key = `${PREFIX}/api_keys/new-${c}`;
      const value = JSON.stringify({ key_hash: hashOf(plain), allowed_models: ['gpt-test'] });
      let t = performance.now();
      let rev = await etcdCall(endpoint, '/v3/kv/put', {
        key: base64Encode(encodeUtf8(key)),
        value: base64Encode(encodeUtf8(value)),
      });
      await untilStatus(g, plain, 200);
      times.push(performance.now() - t);
      await untilApplied(g, rev);
      facts.push(performance.now() - t);
      t = performance.now();
      rev = await etcdCall(endpoint, '/v3/kv/deleterange', { key: base64Encode(encodeUtf8(key)) });
      await untilStatus(g, plain, 401);
      times.push(performance.now() - t);
      await untilApplied(g, rev);
      facts.push(performance.now() - t);
    }
    const cpuMsPerChange = ((cpuSeconds(g.proc.pid!) - cpu0) * 1000) / times.length;
    const { max, all } = await probe.stop();
    // Which part of the load held the loop: the slowest probes, with when they were sent.
    const slow = all.filter((p) => p.ms > 100).sort((a, b) => b.ms - a.ms);
    const worst = slow.slice(0, 3).map((p) => `${p.ms.toFixed(0)} ms sent at ${(p.at / 1000).toFixed(1)} s`);
    console.error(`${runtime}: ${slow.length} of ${all.length} status probes over 100 ms; ${worst.join(', ')}`);
    await new Promise((r) => setTimeout(r, 3000));
    return {
      runtime,
      source: 'etcd',
      ...(CACHE || JWT ? { variant: [CACHE ? 'cache' : '', JWT ? 'jwt' : ''].filter(Boolean).join('+') } : {}),
      readyMs: b.readyMs,
      readyCpuS: b.readyCpuS,
      peakMiB: b.peak(),
      settledMiB: rssMiB(g.proc.pid!),
      loadStallMs: b.loadStallMs,
      changeMs: median(times),
      changeWhat: `put/delete → served, median of ${times.length} (max ${Math.max(...times).toFixed(1)})`,
      updateStallMs: max,
      factsMs: median(facts),
      cpuMsPerChange,
    };
  } finally {
    b.stopPeak();
    await g.stop(60_000);
    lastCache = join(g.dir, 'snapshot-cache.json');
    if (CACHE_OUT) copyFileSync(lastCache, CACHE_OUT);
  }
}

/** The cache file the last etcd run's gateway wrote (it flushes it as it stops). */
let lastCache = '';

/** `--restore`: a gateway boots from `cache` with its etcd unreachable; one of the million keys must answer. */
async function restoreRun(runtime: RuntimeName, cache: string): Promise<Row> {
  const config = `etcd: { endpoints: ["http://127.0.0.1:1"], prefix: ${PREFIX} }
${LISTENERS}managed: { snapshot_cache_path: "${cache}" }
`;
  const b = await boot(
    runtime,
    () => spawnGateway({ runtime, config, ...(GATEWAY_EXEC ? { executable: GATEWAY_EXEC } : {}) }),
  );
  try {
    const status = await chatStatus(b.g, keyPlain(KEYS - 1));
    if (status !== 200) throw new Error(`a restored key answered ${status}`);
    return {
      runtime,
      source: 'cache restore',
      variant: 'etcd down',
      readyMs: b.readyMs,
      readyCpuS: b.readyCpuS,
      peakMiB: b.peak(),
      settledMiB: rssMiB(b.g.proc.pid!),
      loadStallMs: b.loadStallMs,
      changeMs: NaN,
      changeWhat: 'none',
      updateStallMs: NaN,
    };
  } finally {
    b.stopPeak();
    await b.g.stop(60_000);
  }
}

async function fileRun(runtime: RuntimeName, upstream: string): Promise<Row> {
  // Both files are written out before anything is timed: generating a million keys' hashes holds this
  // process's event loop (the mock upstream's and the probes') for seconds.
  const first = resourcesFile(upstream, 'a');
  const next = resourcesFile(upstream, 'b', Math.round(KEYS * RELOAD_CHANGED));
  let spawnedAt = 0;
  const b = await boot(runtime, () => {
    spawnedAt = performance.now();
    return spawnGateway({
      runtime,
      config: `resources_file: resources.yaml\n${LISTENERS}`,
      files: { 'resources.yaml': first },
      env: { CALLER_KEY, ...GATEWAY_ENV },
      ...(GATEWAY_EXEC ? { executable: GATEWAY_EXEC } : {}),
    });
  });
  const { g } = b;
  const out: string[] = [];
  if (GATEWAY_OUT) g.proc.stdout!.on('data', (d: Buffer) => out.push(d.toString('utf8')));
  try {
    // The gateway's first requests compile its path and open the upstream's connections: not the reload's doing.
    for (let i = 0; i < 50; i++) await chatStatus(g, CALLER_KEY);
    writeFileSync(join(g.dir, 'resources.yaml'), next);
    const probe = prober(() => g.url('/v1/chat/completions'), chatInit(CALLER_KEY));
    const t = performance.now();
    g.signal('SIGHUP');
    await g.waitForLog((l) => /resources file reload/.test(String(l.msg)), 600_000);
    const reloadMs = performance.now() - t;
    const { max, maxAt, all } = await probe.stop();
    if (STALLS > 0) {
      const since = t - spawnedAt;
      const sorted = all.map((r) => r.ms).sort((a, b) => a - b);
      const p99 = sorted[Math.floor(sorted.length * 0.99)] ?? NaN;
      console.error(
        `${runtime}: ${
          sorted.filter((ms) => ms > STALLS).length
        } of ${sorted.length} requests slower than ${STALLS} ms, p99 ${p99.toFixed(1)} ms, median ${
          (sorted[sorted.length >> 1] ?? NaN).toFixed(1)
        } ms`,
      );
      console.error(`${runtime}: SIGHUP ${since.toFixed(0)} ms after the spawn; requests slower than ${STALLS} ms:`);
      // The probe began just before the SIGHUP: its times are the reload's.
      for (const r of all.filter((r) => r.ms > STALLS)) {
        console.error(
          `  sent ${(r.at / 1000).toFixed(3)} s after the SIGHUP (${
            ((r.at + since) / 1000).toFixed(3)
          } s after the spawn), took ${r.ms.toFixed(1)} ms`,
        );
      }
    }
    if (GATEWAY_OUT) writeFileSync(GATEWAY_OUT, out.join('') + g.rawErr.join('\n'));
    await new Promise((r) => setTimeout(r, 3000));
    return {
      runtime,
      source: 'file',
      readyMs: b.readyMs,
      readyCpuS: b.readyCpuS,
      peakMiB: b.peak(),
      settledMiB: rssMiB(g.proc.pid!),
      loadStallMs: b.loadStallMs,
      changeMs: reloadMs,
      changeWhat: `SIGHUP reload of the whole file, the slowest request sent at ${(maxAt / 1000).toFixed(1)} s`,
      updateStallMs: max,
    };
  } finally {
    b.stopPeak();
    await g.stop(60_000);
  }
}

const verdict = (ok: boolean) => (ok ? 'MET' : 'MISS');

/** The read as it was before range-plan.ts: each page from just past the last key to the prefix's end. */
async function readWhole(client: EtcdClient, limit: number): Promise<number> {
  const { key, range_end } = prefixRange(`${PREFIX}/`);
  type Page = { kvs: { key: string }[]; more?: boolean; header: { revision: string } };
  const ask = (from: string, revision?: string) =>
    client.unary('/v3/kv/range', {
      key: from,
      range_end,
      limit: String(limit),
      ...(revision ? { revision } : {}),
    }) as Promise<Page>;
  let page = await ask(key);
  const revision = page.header.revision;
  let keys = 0;
  for (;;) {
    const last = page.kvs[page.kvs.length - 1];
    const next = page.more && last
      ? ask(base64Encode(new Uint8Array([...Buffer.from(last.key, 'base64'), 0])), revision)
      : undefined;
    keys += page.kvs.length;
    if (!next) return keys;
    page = await next;
  }
}

async function readPlanned(client: EtcdClient, limit: number): Promise<number> {
  const range = await client.rangePaged(`${PREFIX}/`, { limit });
  let keys = 0;
  for await (const page of range.pages) keys += page.length;
  return keys;
}

/** `--read-only`: the initial read alone, each way and page size, round by round. */
async function readOnly(endpoint: string): Promise<void> {
  let requests = 0;
  const counting: EtcdFetch = (url, init) => {
    requests++;
    return fetch(url, init);
  };
  const client = new EtcdClient({ endpoints: [endpoint], fetch: counting, requestTimeoutMs: 600_000 });
  const etcdCpu = () => (ETCD_PID ? cpuSeconds(Number(ETCD_PID)) : NaN);
  console.log(`load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  console.log('| round | read | page | keys | requests | time | etcd CPU | reader CPU |');
  console.log('|---|---|---:|---:|---:|---:|---:|---:|');
  for (let round = 1; round <= ROUNDS; round++) {
    for (const limit of PAGES) {
      for (const how of READ_ONLY) {
        requests = 0;
        const cpu0 = etcdCpu();
        const own0 = process.cpuUsage();
        const t = performance.now();
        const keys = how === 'whole' ? await readWhole(client, limit) : await readPlanned(client, limit);
        const s = (performance.now() - t) / 1000;
        const own = process.cpuUsage(own0);
        console.log(
          `| ${round} | ${how} | ${limit} | ${keys} | ${requests} | ${s.toFixed(1)} s | ${
            (etcdCpu() - cpu0).toFixed(1)
          } s | ${((own.user + own.system) / 1e6).toFixed(1)} s |`,
        );
      }
    }
  }
  console.log(`load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
}

async function main(): Promise<void> {
  if (READ_ONLY.length > 0) {
    if (ETCD === '') throw new Error('--read-only reads an etcd seeded before: pass --etcd http://127.0.0.1:PORT');
    await readOnly(ETCD);
    return;
  }
  const mock = await startMockUpstream();
  const rows: Row[] = [];
  const failures: string[] = [];
  if (SOURCES.includes('etcd')) {
    const etcd = ETCD === ''
      ? await startEtcd({ extraArgs: ['--quota-backend-bytes=8589934592'] })
      : { endpoint: ETCD, stop: async () => {} };
    try {
      const t = performance.now();
      await seedEtcd(etcd.endpoint, mock.base);
      console.error(`seeded ${KEYS} keys in ${((performance.now() - t) / 1000).toFixed(1)} s`);
      for (const runtime of RUNTIMES) {
        try {
          rows.push(await etcdRun(runtime, etcd.endpoint));
          if (RESTORE) rows.push(await restoreRun(runtime, lastCache));
        } catch (e) {
          failures.push(`${runtime} etcd: ${(e as Error).message}`);
        }
      }
    } finally {
      await etcd.stop();
    }
  }
  if (SOURCES.includes('file')) {
    for (const runtime of RUNTIMES) {
      try {
        rows.push(await fileRun(runtime, mock.base));
      } catch (e) {
        failures.push(`${runtime} file: ${(e as Error).message}`);
      }
    }
  }
  await mock.close();
  console.log(`\nconfig-scale: ${KEYS} api keys, ${new Date().toISOString().slice(0, 10)}\n`);
  console.log(
    '| runtime | source | ready | CPU to ready | peak RSS | settled RSS | max request during load | one key applied | max request during update | status follows | CPU per change |',
  );
  console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const change = r.source === 'cache restore'
      ? ''
      : r.source === 'etcd'
      ? `${r.changeMs.toFixed(1)} ms ${verdict(r.changeMs <= TARGET.changeMs)} (${r.changeWhat})`
      : `${(r.changeMs / 1000).toFixed(1)} s (${r.changeWhat}; no per-key change)`;
    console.log(
      `| ${r.runtime} | ${r.source}${r.variant ? `+${r.variant}` : ''} | ${(r.readyMs / 1000).toFixed(1)} s ${
        verdict(r.readyMs <= TARGET.readyMs)
      } | ${r.readyCpuS.toFixed(1)} s | ${r.peakMiB.toFixed(0)} MiB ${verdict(r.peakMiB <= TARGET.rssMiB)} | ${
        r.settledMiB.toFixed(0)
      } MiB | ${r.loadStallMs.toFixed(1)} ms (status /livez) | ${change} | ${
        Number.isNaN(r.updateStallMs)
          ? ''
          : `${r.updateStallMs.toFixed(1)} ms ${verdict(r.updateStallMs <= TARGET.stallMs)}`
      } | ${r.factsMs === undefined ? '' : `${r.factsMs.toFixed(1)} ms`} | ${
        r.cpuMsPerChange === undefined ? '' : `${r.cpuMsPerChange.toFixed(0)} ms`
      } |`,
    );
  }
  console.log(`load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  console.log(
    `\ntargets: ready ≤ ${
      TARGET.readyMs / 1000
    } s, peak RSS ≤ ${TARGET.rssMiB} MiB, one key applied ≤ ${TARGET.changeMs} ms, no request slower than ${TARGET.stallMs} ms while it happens`,
  );
  for (const f of failures) console.log(`FAILED ${f}`);
  writeResults(rows);
}

/** What `npm run bench` reads (bench/run.ts, target 4). */
interface Results {
  keys: number;
  date: string;
  rows: (Row & { date: string; loadAverage: number })[];
}

/**
 * This run's rows into bench/results/config-scale.json; the rows of another runtime or source that an earlier
 * run of as many keys left there are kept (each row has its date and the load average it ran at).
 */
function writeResults(rows: Row[]): void {
  const date = new Date().toISOString().slice(0, 10);
  const loadAverage = Number(loadavg()[0]!.toFixed(1));
  let earlier: Results | undefined;
  try {
    earlier = existsSync(RESULTS) ? JSON.parse(readFileSync(RESULTS, 'utf8')) as Results : undefined;
  } catch {
    earlier = undefined; // a half-written file: replaced
  }
  const fresh = rows.filter((r) => r.variant === undefined).map((r) => ({ ...r, date, loadAverage }));
  if (fresh.length === 0) return;
  const kept = earlier?.keys === KEYS && Array.isArray(earlier.rows)
    ? earlier.rows.filter((o) => !fresh.some((r) => r.runtime === o.runtime && r.source === o.source))
    : [];
  const out: Results = { keys: KEYS, date, rows: [...fresh, ...kept] };
  writeFileSync(RESULTS, JSON.stringify(out, null, 2) + '\n');
  console.log(`\n${RESULTS}: ${out.rows.length} rows`);
}

await main();
