// Sluice benchmark harness: one command, one table. See bench/README.md.
//
//   npm run bench                      # full run (~6-8 min on 2 cores)
//   npm run bench -- --quick           # one round, 3 s runs (~2-3 min)
//   npm run bench -- --scenarios json50,json1 --targets direct,node,portkey --rounds 3
//   npm run bench -- --profile         # Node gateway under JSON/50 with --cpu-prof, then the top functions
//   npm run bench -- --profile-runtime deno   # the same on Deno, through its inspector
//
// Everything runs on 127.0.0.1: a mock OpenAI upstream (bench/mock-upstream.mjs), Sluice on Node (the
// esbuild bundle via bin/sluice), Bun and Deno with bench/config/, and the Portkey gateway (installed into
// bench/.portkey on first use). Load comes from wrk (bench/wrk/*.lua); SSE first-byte timing from
// bench/ttfb.ts; /readyz latency under load from bench/probe.ts. Targets alternate within every scenario
// and the whole sequence repeats for --rounds; each cell is the median over rounds.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ProbeResult, runProbe } from './probe.ts';
import {
  cpuSeconds,
  freePort,
  launch,
  machineBusySeconds,
  onInterrupt,
  peakRssMb,
  resetPeakRss,
  rssMb,
  selfAndReapedChildrenSeconds,
  sleep,
  type Spawned,
  stop,
  stopAll,
  waitFor200,
} from './proc.ts';
import { denoRunFlags } from './deno-flags.ts';
import { profileOverInspector } from './inspector.ts';
import { type CpuProfile, formatSummary, summarizeProfile } from './profile-summary.ts';
import { median } from './stats.ts';
import { runTtfb, type TtfbResult } from './ttfb.ts';
import { runStreams, STALL_MS } from './streams.ts';

const BENCH = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(BENCH, '..');
const BIN = path.join(ROOT, 'node_modules', '.bin');
const PORTKEY_DIR = path.join(BENCH, '.portkey');
const PORTKEY_VERSION = '1.15.2';
/**
 * Portkey 1.15.2 breaks on @hono/node-server ≥ 1.14.2 (`TypeError: immutable` from
 * ResponseService.updateHeaders — Portkey-AI/gateway#1389; on every streamed chat completion here), and npm
 * resolves its `^1.3.3` range to 1.19.x. 1.14.1 is the newest release it works with.
 */
const PORTKEY_NODE_SERVER = '1.14.1';
const SLUICE_KEY = 'sk-sluice-bench';
/** The caller key with a rate limit that never trips (bench/config/resources.yaml `bench-rl`). */
const SLUICE_RL_KEY = 'sk-sluice-bench-rl';
const UPSTREAM_KEY = 'sk-bench-upstream';

// ------------------------------------------------------------------------------------------- options

const SCENARIOS = ['startup', 'json50', 'json1', 'sse200', 'sse4', 'sse1', 'sse512', 'readyz'] as const;
type ScenarioId = (typeof SCENARIOS)[number];
const TARGETS = [
  'direct',
  'direct-node',
  'undici',
  'node',
  'bun',
  'deno',
  'bare-node',
  'bare-bun',
  'bare-deno',
  'bare-bun-nodehttp',
  'bare-deno-nodehttp',
  'raw-node',
  'tcp-relay',
  'floor-node',
  'floor-bun',
  'floor-deno',
  'portkey',
  'portkey-bun',
  'node-nolog',
  'bun-nolog',
  'deno-nolog',
  'node-rl-memory',
  'node-rl-redis',
  'node-cache-hit',
  'node-cache-miss',
  'node-cache-refresh',
  'node-guardrails',
  'node-otlp',
  'node-responses',
  'node-responses-store',
  'node-budgets',
  'node-mcp',
  'node-usage',
  'node-base',
  'bun-base',
  'deno-base',
  'node-base-responses',
] as const;
type TargetId = (typeof TARGETS)[number];
/** Ceiling measurements: JSON scenarios only (see scenarioTargets). */
const SSE_CEILINGS: readonly TargetId[] = [
  'bare-node',
  'bare-bun',
  'bare-deno',
  'bare-bun-nodehttp',
  'bare-deno-nodehttp',
  'raw-node',
  'tcp-relay',
];
const JSON_ONLY: readonly TargetId[] = [
  'direct-node',
  'floor-node',
  'floor-bun',
  'floor-deno',
  'undici',
  'bare-node',
  'bare-bun',
  'bare-deno',
  'bare-bun-nodehttp',
  'bare-deno-nodehttp',
  'raw-node',
  'tcp-relay',
  'node-nolog',
  'bun-nolog',
  'deno-nolog',
  'node-rl-memory',
  'node-rl-redis',
  'node-cache-hit',
  'node-cache-miss',
  'node-cache-refresh',
  'node-guardrails',
  'node-otlp',
  'node-responses',
  'node-responses-store',
  'node-budgets',
  'node-mcp',
  'node-usage',
  'node-base-responses',
];
/** The targets of another tree (`--baseline DIR`): started only when that option is given. */
const BASELINE: readonly TargetId[] = ['node-base', 'bun-base', 'deno-base', 'node-base-responses'];
/** The contract's floor per runtime (bench/contract-floor.ts): a reference for target 1, asked for by name. */
const FLOORS: readonly TargetId[] = ['floor-node', 'floor-bun', 'floor-deno'];
/** The default target list: everything but the baseline tree's and the floors. */
const DEFAULT_TARGETS: TargetId[] = TARGETS.filter((t) => !BASELINE.includes(t) && !FLOORS.includes(t));

interface Options {
  rounds: number;
  durationS: number;
  warmupS: number;
  startupTrials: number;
  scenarios: ScenarioId[];
  targets: TargetId[];
  upstream: 'bun' | 'node';
  chunkDelayMs: number;
  build: boolean;
  keep: boolean;
  primeS: number;
  profile: boolean;
  profileSeconds: number;
  profileLoad: 'json50' | 'json1' | 'sse200';
  profileAccessLog: boolean;
  /** Profile the bare Hono proxy of Sluice's pieces instead of Sluice (the same load): two profiles side by side. */
  profileBare: boolean;
  /** The runtime profiled: Node and Bun through `--cpu-prof`, Deno through its inspector. */
  profileRuntime: 'node' | 'deno' | 'bun';
  /** Another tree (a git worktree, built) whose Sluice runs as the `*-base` targets: an A/B in one run. */
  baseline?: string;
  /** sse512: streams open at once, the delay between their chunks and how many each has. */
  streams: number;
  streamChunkDelayMs: number;
  streamChunks: number;
}

const HELP = `usage: npm run bench -- [options]
  --quick                 1 round, 3 s runs, 3 start-up trials
  --rounds N              repeat the alternating sequence N times; cells are medians (default 2)
  --duration S            measured seconds per wrk run (default 5)
  --warmup S              warm-up seconds before each measured run (default 1)
  --startup-trials N      timed start-ups per runtime (default 5)
  --prime S               untimed JSON/50 load per target once everything is up, so every JIT starts the
                          rounds warm (default 3; Portkey needs several seconds to reach its pace)
  --scenarios a,b         of ${SCENARIOS.join(',')} (default all)
  --targets a,b           of ${TARGETS.join(',')} (default all)
  --upstream bun|node     runtime of the mock upstream (default bun: the faster one here); target
                          direct-node reaches a second mock on node:http directly (the same mock with
                          --upstream node)
  --chunk-delay-ms N      delay between the mock's SSE chunks (default 5)
  --streams N             sse512: streams open at once (default 512)
  --stream-chunk-delay-ms N, --stream-chunks N
                          sse512: each stream's chunks, that far apart (default 40 chunks, 50 ms apart)
  --baseline DIR          also run the Sluice of another tree (a built git worktree, e.g. of an old commit)
                          as targets node-base, bun-base, deno-base, alternating with this tree's
  --no-build              do not rebuild dist/node.mjs first
  --keep                  keep the run directory (configs, logs) under /tmp
  --profile [--profile-seconds S] [--profile-load json50|json1|sse200] [--profile-no-access-log] [--profile-bare]
            [--profile-runtime node|deno|bun]
                          instead of the table: the gateway under that load with node --cpu-prof (Deno: through
                          its inspector; Bun: bun --cpu-prof), then the top self-time functions
                          (bench/profile-summary.ts)`;

function parseOptions(argv: string[]): Options {
  const o: Options = {
    rounds: 2,
    durationS: 5,
    warmupS: 1,
    startupTrials: 5,
    scenarios: [...SCENARIOS],
    targets: [...DEFAULT_TARGETS],
    upstream: 'bun',
    chunkDelayMs: 5,
    build: true,
    keep: false,
    primeS: 3,
    profile: false,
    profileSeconds: 10,
    profileLoad: 'json50',
    profileAccessLog: true,
    profileBare: false,
    profileRuntime: 'node',
    streams: 512,
    streamChunkDelayMs: 50,
    streamChunks: 40,
  };
  const list = <T extends string>(v: string, allowed: readonly T[], what: string): T[] => {
    const xs = v.split(',').map((s) => s.trim()).filter(Boolean);
    for (const x of xs) {
      if (!allowed.includes(x as T)) throw new Error(`unknown ${what} "${x}" (one of ${allowed.join(', ')})`);
    }
    return xs as T[];
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const val = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    switch (a) {
      case '--quick':
        o.rounds = 1;
        o.durationS = 3;
        o.warmupS = 1;
        o.startupTrials = 3;
        o.primeS = 2;
        break;
      case '--prime':
        o.primeS = Number(val());
        break;
      case '--rounds':
        o.rounds = Number(val());
        break;
      case '--duration':
        o.durationS = Number(val());
        break;
      case '--warmup':
        o.warmupS = Number(val());
        break;
      case '--startup-trials':
        o.startupTrials = Number(val());
        break;
      case '--scenarios':
        o.scenarios = list(val(), SCENARIOS, 'scenario');
        break;
      case '--targets':
        o.targets = list(val(), TARGETS, 'target');
        break;
      case '--upstream': {
        const v = val();
        if (v !== 'bun' && v !== 'node') throw new Error('--upstream is bun or node');
        o.upstream = v;
        break;
      }
      case '--chunk-delay-ms':
        o.chunkDelayMs = Number(val());
        break;
      case '--streams':
        o.streams = Number(val());
        break;
      case '--stream-chunk-delay-ms':
        o.streamChunkDelayMs = Number(val());
        break;
      case '--stream-chunks':
        o.streamChunks = Number(val());
        break;
      case '--baseline':
        o.baseline = path.resolve(val());
        break;
      case '--no-build':
        o.build = false;
        break;
      case '--keep':
        o.keep = true;
        break;
      case '--profile':
        o.profile = true;
        break;
      case '--profile-seconds':
        o.profileSeconds = Number(val());
        break;
      case '--profile-load': {
        const v = val();
        if (v !== 'json50' && v !== 'json1' && v !== 'sse200') {
          throw new Error('--profile-load is json50, json1 or sse200');
        }
        o.profileLoad = v;
        o.profile = true;
        break;
      }
      case '--profile-no-access-log':
        o.profileAccessLog = false;
        o.profile = true;
        break;
      case '--profile-bare':
        o.profileBare = true;
        o.profile = true;
        break;
      case '--profile-runtime': {
        const v = val();
        if (v !== 'node' && v !== 'deno' && v !== 'bun') throw new Error('--profile-runtime is node, deno or bun');
        o.profileRuntime = v;
        o.profile = true;
        break;
      }
      case '--help':
      case '-h':
        process.stdout.write(`${HELP}\n`);
        process.exit(0);
        break; // unreachable: exit() does not return
      default:
        throw new Error(`unknown option ${a}\n${HELP}`);
    }
  }
  if (o.baseline) {
    if (!existsSync(path.join(o.baseline, 'dist', 'node.mjs'))) {
      throw new Error(`--baseline ${o.baseline}: no dist/node.mjs (run node build.mjs there)`);
    }
    if (!argv.includes('--targets')) o.targets = [...TARGETS];
  } else o.targets = o.targets.filter((t) => !BASELINE.includes(t));
  return o;
}

const log = (msg: string) => process.stderr.write(`bench: ${msg}\n`);

// ------------------------------------------------------------------------------------------- targets

/** `bare`: bench/bare-proxy.ts; `client`: bench/undici-client.ts at the mock, no server in between. */
type Kind = 'direct' | 'sluice' | 'portkey' | 'bare' | 'client';
type Runtime = 'node' | 'bun' | 'deno';

interface Target {
  id: TargetId;
  label: string;
  kind: Kind;
  runtime?: Runtime;
  accessLog?: boolean;
  /** bare proxies only: extra bench/bare-proxy.ts flags (node:http listener, undici client, no framework). */
  bareArgs?: string[];
  /** bare proxies only: run under the runtime flags Sluice runs under (Deno's V8 flags, runtimes/deno-launch.ts). */
  sluiceFlags?: boolean;
  /** Sluice with the rate-limited key: where the counters live (`ratelimit.backend`). */
  rateLimit?: 'memory' | 'redis';
  /** Sluice: environment overrides of its own (e.g. another resources file). */
  env?: Record<string, string>;
  /** Sluice: the tree it runs from (default this one; `--baseline` for the `*-base` targets). */
  root?: string;
  /** Portkey: the runtime it runs on (default Node). */
  portkeyRuntime?: 'node' | 'bun';
  /** Load `/v1/responses` (`input` instead of `messages`) with this `store`, instead of `/v1/chat/completions`. */
  responsesStore?: boolean;
  port: number;
  proc?: Spawned;
  /** Request headers (besides content-type). */
  headers: Record<string, string>;
  model: string;
  /** Per-run peaks of VmHWM, for the memory row. */
  peaks: number[];
}

interface Ctx {
  opt: Options;
  runDir: string;
  mock: Spawned;
  mockPort: number;
  targets: Map<TargetId, Target>;
  /** Measurements that started without the machine going quiet first. */
  noisyWaits: number;
}

function baseEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('AISIX_') && k !== 'NODE_OPTIONS') env[k] = v;
  return env;
}

/** `runtimeFlags`: Node's before the script; Deno's after the tree's own launch flags. */
async function sluiceCommand(runtime: Runtime, runtimeFlags: string[], root: string): Promise<[string, string[]]> {
  const config = path.join(BENCH, 'config', 'config.yaml');
  switch (runtime) {
    case 'node':
      return [process.execPath, [...runtimeFlags, path.join(root, 'bin', 'sluice'), '--config', config]];
    case 'bun':
      return [path.join(BIN, 'bun'), [...runtimeFlags, path.join(root, 'runtimes', 'bun.ts'), '--config', config]];
    case 'deno':
      return [path.join(BIN, 'deno'), [
        'run',
        ...await denoRunFlags(root),
        ...runtimeFlags,
        path.join(root, 'runtimes', 'deno.ts'),
        '--config',
        config,
      ]];
  }
}

/** Start one Sluice process on fresh ports; resolves once its /readyz answers 200. */
async function startSluice(
  ctx: Ctx,
  runtime: Runtime,
  accessLog: boolean,
  name: string,
  runtimeFlags: string[] = [],
  extraEnv: Record<string, string> = {},
  root = ROOT,
): Promise<{ proc: Spawned; port: number; startMs: number }> {
  const port = await freePort();
  const metricsPort = await freePort();
  const env = {
    ...baseEnv(),
    ...extraEnv,
    SLUICE_BENCH_UPSTREAM: `http://127.0.0.1:${ctx.mockPort}/v1`,
    // Another resources file next to config.yaml (e.g. resources-guardrails.yaml), for an A/B of a feature.
    ...(process.env.SLUICE_BENCH_RESOURCES ? { AISIX_RESOURCES_FILE: process.env.SLUICE_BENCH_RESOURCES } : {}),
    AISIX_PROXY__ADDR: `127.0.0.1:${port}`,
    AISIX_OBSERVABILITY__METRICS__PROMETHEUS__ADDR: `127.0.0.1:${metricsPort}`,
    AISIX_OBSERVABILITY__ACCESS_LOG: accessLog ? 'true' : 'false',
    // Trace export to a collector (bench/otlp-sink.mjs) at sample ratio 1.0, when the run asks for it.
    ...(process.env.SLUICE_BENCH_OTLP_ENDPOINT
      ? {
        AISIX_OBSERVABILITY__TRACING__OTLP__ENABLED: 'true',
        AISIX_OBSERVABILITY__TRACING__OTLP__ENDPOINT: process.env.SLUICE_BENCH_OTLP_ENDPOINT,
      }
      : {}),
  };
  const [cmd, args] = await sluiceCommand(runtime, runtimeFlags, root);
  const t0 = performance.now();
  const proc = launch(cmd, args, { cwd: root, env, logFile: path.join(ctx.runDir, `${name}.log`) });
  const startMs = await waitFor200(`http://127.0.0.1:${port}/livez`, t0, { exited: proc.exited, timeoutMs: 60_000 })
    .catch((e: Error) => {
      throw new Error(`${name}: ${e.message} (log: ${path.join(ctx.runDir, `${name}.log`)})`);
    });
  await waitFor200(`http://127.0.0.1:${port}/readyz`, performance.now(), { exited: proc.exited, timeoutMs: 30_000 });
  return { proc, port, startMs };
}

function ensurePortkey(): string {
  const entry = path.join(PORTKEY_DIR, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');
  const pinned = path.join(PORTKEY_DIR, 'node_modules', '@hono', 'node-server', 'package.json');
  const ok = existsSync(entry) && existsSync(pinned) &&
    (JSON.parse(readFileSync(pinned, 'utf8')) as { version: string }).version === PORTKEY_NODE_SERVER &&
    (JSON.parse(
        readFileSync(path.join(PORTKEY_DIR, 'node_modules', '@portkey-ai', 'gateway', 'package.json'), 'utf8'),
      ) as { version: string }).version === PORTKEY_VERSION;
  if (ok) return entry;
  log(`installing @portkey-ai/gateway@${PORTKEY_VERSION} into bench/.portkey (first use) …`);
  mkdirSync(PORTKEY_DIR, { recursive: true });
  writeFileSync(
    path.join(PORTKEY_DIR, 'package.json'),
    `${
      JSON.stringify(
        {
          private: true,
          description:
            'Benchmark peer for bench/run.ts (gitignored). @hono/node-server pinned: see PORTKEY_NODE_SERVER in bench/run.ts.',
          overrides: { '@hono/node-server': PORTKEY_NODE_SERVER },
        },
        null,
        2,
      )
    }\n`,
  );
  const r = spawnSync('npm', [
    'install',
    '--prefix',
    PORTKEY_DIR,
    '--no-audit',
    '--no-fund',
    '--save-exact',
    `@portkey-ai/gateway@${PORTKEY_VERSION}`,
  ], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0 || !existsSync(entry)) throw new Error('npm install of @portkey-ai/gateway failed');
  return entry;
}

async function startPortkey(
  ctx: Ctx,
  name: string,
  runtime: 'node' | 'bun' = 'node',
): Promise<{ proc: Spawned; port: number; startMs: number }> {
  const entry = ensurePortkey();
  const port = await freePort();
  const t0 = performance.now();
  // `--headless`: no UI routes. It listens on every interface (its CLI has no host option); we only ever
  // talk to it on 127.0.0.1.
  const cmd = runtime === 'bun' ? path.join(BIN, 'bun') : process.execPath;
  const pre = runtime === 'bun' ? ['--preload', path.join(BENCH, 'portkey-bun-serve.ts')] : [];
  const proc = launch(cmd, [...pre, entry, `--port=${port}`, '--headless'], {
    cwd: PORTKEY_DIR,
    env: baseEnv(),
    logFile: path.join(ctx.runDir, `${name}.log`),
  });
  const startMs = await waitFor200(`http://127.0.0.1:${port}/`, t0, { exited: proc.exited, timeoutMs: 60_000 });
  return { proc, port, startMs };
}

async function startMock(
  runDir: string,
  upstream: 'bun' | 'node',
  chunkDelayMs: number,
  name = 'mock-upstream',
): Promise<{ proc: Spawned; port: number }> {
  const port = await freePort();
  const script = path.join(BENCH, 'mock-upstream.mjs');
  const args = [script, '--port', String(port), '--chunk-delay-ms', String(chunkDelayMs)];
  const proc = upstream === 'bun'
    ? launch(path.join(BIN, 'bun'), args, { cwd: ROOT, env: baseEnv(), logFile: path.join(runDir, `${name}.log`) })
    : launch(process.execPath, args, {
      cwd: ROOT,
      env: { ...baseEnv(), MOCK_FORCE_NODE: '1' },
      logFile: path.join(runDir, `${name}.log`),
    });
  await waitFor200(`http://127.0.0.1:${port}/livez`, performance.now(), { exited: proc.exited, timeoutMs: 30_000 });
  return { proc, port };
}

/**
 * The bare Hono proxy (bench/bare-proxy.ts) on one runtime, forwarding to the same mock as Sluice. It has
 * no GET route, so readiness is its `listening` line in the log.
 */
async function startBare(
  ctx: Ctx,
  runtime: Runtime,
  name: string,
  extra: string[],
  runtimeFlags: string[] = [],
): Promise<{ proc: Spawned; port: number }> {
  const port = await freePort();
  const script = path.join(BENCH, 'bare-proxy.ts');
  const args = [script, '--port', String(port), '--upstream', `http://127.0.0.1:${ctx.mockPort}`, ...extra];
  const logFile = path.join(ctx.runDir, `${name}.log`);
  const proc = runtime === 'node'
    ? launch(process.execPath, [...runtimeFlags, '--import', 'tsx', ...args], { cwd: ROOT, env: baseEnv(), logFile })
    : runtime === 'bun'
    // With Bun's fetch cap lifted as Sluice lifts it (runtimes/bun-upstream-cap.ts): the ceiling of a proxy on Bun,
    // not of the queue Bun's fetch keeps past 256 requests in flight.
    ? launch(path.join(BIN, 'bun'), [...runtimeFlags, ...args], {
      cwd: ROOT,
      env: { ...baseEnv(), BUN_CONFIG_MAX_HTTP_REQUESTS: '65535' },
      logFile,
    })
    : launch(path.join(BIN, 'deno'), ['run', '-A', ...runtimeFlags, ...args], { cwd: ROOT, env: baseEnv(), logFile });
  let gone = false;
  void proc.exited.then(() => {
    gone = true;
  });
  const deadline = performance.now() + 60_000;
  while (!(existsSync(logFile) && readFileSync(logFile, 'utf8').includes(`bare-proxy listening ${port}`))) {
    if (gone || performance.now() > deadline) {
      throw new Error(`${name}: ${gone ? 'exited' : 'not listening after 60 s'} (log: ${logFile})`);
    }
    await sleep(20);
  }
  return { proc, port };
}

function targetDefs(ctx: Ctx): Omit<Target, 'port' | 'peaks'>[] {
  const upstreamBase = `http://127.0.0.1:${ctx.mockPort}/v1`;
  const sluice = (id: TargetId, runtime: Runtime, accessLog: boolean): Omit<Target, 'port' | 'peaks'> => ({
    id,
    runtime,
    accessLog,
    kind: 'sluice',
    label: `Sluice ${runtime[0]!.toUpperCase()}${runtime.slice(1)}${accessLog ? '' : ' (no access log)'}`,
    headers: { authorization: `Bearer ${SLUICE_KEY}` },
    model: 'bench-route',
  });
  return [
    {
      id: 'direct',
      kind: 'direct',
      label: `direct (mock on ${ctx.opt.upstream})`,
      headers: { authorization: `Bearer ${UPSTREAM_KEY}` },
      model: 'mock-model',
    },
    {
      id: 'direct-node',
      kind: 'direct',
      label: 'direct (mock on node)',
      headers: { authorization: `Bearer ${UPSTREAM_KEY}` },
      model: 'mock-model',
    },
    {
      id: 'undici',
      kind: 'client',
      runtime: 'node',
      label: 'undici.request client alone (Node)',
      headers: { authorization: `Bearer ${UPSTREAM_KEY}` },
      model: 'mock-model',
    },
    sluice('node', 'node', true),
    sluice('bun', 'bun', true),
    sluice('deno', 'deno', true),
    ...(['node', 'bun', 'deno'] as const).map((rt): Omit<Target, 'port' | 'peaks'> => ({
      id: `bare-${rt}`,
      kind: 'bare',
      runtime: rt,
      label: `bare Hono proxy ${rt[0]!.toUpperCase()}${rt.slice(1)}`,
      headers: { authorization: `Bearer ${UPSTREAM_KEY}` },
      model: 'mock-model',
    })),
    // The node:http listener (Sluice's on Deno, and on Bun for TLS and h2c only), and on Deno the undici client.
    {
      id: 'bare-bun-nodehttp',
      kind: 'bare',
      runtime: 'bun',
      bareArgs: ['--listener', 'node'],
      label: 'bare Hono proxy Bun via node:http',
      headers: { authorization: `Bearer ${UPSTREAM_KEY}` },
      model: 'mock-model',
    },
    {
      id: 'bare-deno-nodehttp',
      kind: 'bare',
      runtime: 'deno',
      bareArgs: ['--listener', 'node', '--client', 'undici'],
      label: 'bare Hono proxy Deno via node:http + undici',
      headers: { authorization: `Bearer ${UPSTREAM_KEY}` },
      model: 'mock-model',
    },
    {
      id: 'raw-node',
      kind: 'bare',
      runtime: 'node',
      bareArgs: ['--framework', 'none'],
      label: 'node:http + undici.request, no framework (Node)',
      headers: { authorization: `Bearer ${UPSTREAM_KEY}` },
      model: 'mock-model',
    },
    {
      id: 'tcp-relay',
      kind: 'bare',
      runtime: 'node',
      bareArgs: ['--framework', 'relay'],
      label: 'TCP relay, no HTTP (Node)',
      headers: { authorization: `Bearer ${UPSTREAM_KEY}` },
      model: 'mock-model',
    },
    // The contract's floor: the bare proxy doing what AISIX's per-request contract asks, on the pieces Sluice
    // runs on each runtime (on Deno node:http and undici), called as Sluice is.
    ...(['node', 'bun', 'deno'] as const).map((rt): Omit<Target, 'port' | 'peaks'> => ({
      id: `floor-${rt}`,
      kind: 'bare',
      runtime: rt,
      bareArgs: rt === 'deno' ? ['--contract', '--listener', 'node', '--client', 'undici'] : ['--contract'],
      sluiceFlags: true,
      label: `the contract's floor ${rt[0]!.toUpperCase()}${rt.slice(1)}`,
      headers: { authorization: `Bearer ${SLUICE_KEY}` },
      model: 'bench-route',
    })),
    {
      id: 'portkey',
      kind: 'portkey',
      label: `Portkey ${PORTKEY_VERSION} (Node)`,
      model: 'mock-model',
      headers: {
        authorization: `Bearer ${UPSTREAM_KEY}`,
        'x-portkey-provider': 'openai',
        'x-portkey-custom-host': upstreamBase,
      },
    },
    {
      id: 'portkey-bun',
      kind: 'portkey',
      portkeyRuntime: 'bun',
      label: `Portkey ${PORTKEY_VERSION} (Bun)`,
      model: 'mock-model',
      headers: {
        authorization: `Bearer ${UPSTREAM_KEY}`,
        'x-portkey-provider': 'openai',
        'x-portkey-custom-host': upstreamBase,
      },
    },
    sluice('node-nolog', 'node', false),
    sluice('bun-nolog', 'bun', false),
    sluice('deno-nolog', 'deno', false),
    // Caller rate limits on (`rpm` far above any load), counted in memory or in a local redis-server.
    ...(['memory', 'redis'] as const).map((rl): Omit<Target, 'port' | 'peaks'> => ({
      ...sluice(`node-rl-${rl}`, 'node', true),
      label: `Sluice Node, rate limit in ${rl}`,
      headers: { authorization: `Bearer ${SLUICE_RL_KEY}` },
      rateLimit: rl,
    })),
    // The response cache (bench/config/resources-cache.yaml, one memory policy for bench-route): every request
    // a hit; a miss that stores nothing (`no-store`); a refresh that stores every answer (`no-cache`).
    ...([['hit', undefined], ['miss', 'no-store'], ['refresh', 'no-cache']] as const).map(
      ([what, directive]): Omit<Target, 'port' | 'peaks'> => ({
        ...sluice(`node-cache-${what}`, 'node', true),
        label: `Sluice Node, cache ${what}`,
        headers: { authorization: `Bearer ${SLUICE_KEY}`, ...(directive ? { 'cache-control': directive } : {}) },
        env: { AISIX_RESOURCES_FILE: 'resources-cache.yaml' },
      }),
    ),
    // A keyword and a pii guardrail on input and output (bench/config/resources-guardrails.yaml).
    {
      ...sluice('node-guardrails', 'node', true),
      label: 'Sluice Node, keyword + pii guardrails',
      env: { AISIX_RESOURCES_FILE: 'resources-guardrails.yaml' },
    },
    // One OTLP exporter at sample ratio 1.0 to bench/otlp-sink.mjs (its endpoint is set at start).
    { ...sluice('node-otlp', 'node', true), label: 'Sluice Node, OTLP exporter (every request)' },
    // Responses translated to the mock's chat (bench/config/resources-responses.yaml): `store: false` touches no
    // store; `store: true` keeps every answer in the memory store.
    ...([['node-responses', false], ['node-responses-store', true]] as const).map(
      ([id, store]): Omit<Target, 'port' | 'peaks'> => ({
        ...sluice(id, 'node', true),
        label: `Sluice Node, /v1/responses translated, store: ${store}`,
        env: { AISIX_RESOURCES_FILE: 'resources-responses.yaml' },
        responsesStore: store,
      }),
    ),
    // A token budget on the key and one on the model, in memory (bench/config/resources-budgets.yaml).
    {
      ...sluice('node-budgets', 'node', true),
      label: 'Sluice Node, key + model budgets (memory)',
      env: { AISIX_RESOURCES_FILE: 'resources-budgets.yaml' },
    },
    // MCP servers configured, chat load (bench/config/resources-mcp.yaml).
    {
      ...sluice('node-mcp', 'node', true),
      label: 'Sluice Node, MCP servers configured (chat load)',
      env: { AISIX_RESOURCES_FILE: 'resources-mcp.yaml' },
    },
    // One Datadog-kind usage-event exporter to a local sink (bench/config/resources-usage.yaml).
    {
      ...sluice('node-usage', 'node', true),
      label: 'Sluice Node, usage events (Datadog exporter)',
      env: { AISIX_RESOURCES_FILE: 'resources-usage.yaml' },
    },
    // The Sluice of another tree (--baseline DIR), on the same configuration.
    ...(['node', 'bun', 'deno'] as const).map((rt): Omit<Target, 'port' | 'peaks'> => ({
      ...sluice(`${rt}-base`, rt, true),
      label: `Sluice ${rt[0]!.toUpperCase()}${rt.slice(1)} (baseline ${
        ctx.opt.baseline ? baselineRevision(ctx.opt.baseline) : ''
      })`,
      root: ctx.opt.baseline,
    })),
    {
      ...sluice('node-base-responses', 'node', true),
      label: `Sluice Node (baseline ${
        ctx.opt.baseline ? baselineRevision(ctx.opt.baseline) : ''
      }), /v1/responses translated, store: false`,
      env: { AISIX_RESOURCES_FILE: 'resources-responses.yaml' },
      responsesStore: false,
      root: ctx.opt.baseline,
    },
  ];
}

/** The short commit of the baseline tree. */
function baselineRevision(dir: string): string {
  const r = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dir, encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : path.basename(dir);
}

/**
 * bench/otlp-sink.mjs on a fresh port (it answers every POST 200): the collector of `node-otlp`, the usage-event
 * intake of `node-usage`; stopped with everything else. Resolves to its port.
 */
async function startSink(ctx: Ctx, name: string): Promise<number> {
  const port = await freePort();
  const logFile = path.join(ctx.runDir, `${name}.log`);
  launch(process.execPath, [path.join(BENCH, 'otlp-sink.mjs'), String(port)], { cwd: ROOT, env: baseEnv(), logFile });
  const deadline = performance.now() + 10_000;
  while (!(existsSync(logFile) && readFileSync(logFile, 'utf8').includes(`otlp-sink listening ${port}`))) {
    if (performance.now() > deadline) throw new Error(`${name} not listening after 10 s (log: ${logFile})`);
    await sleep(20);
  }
  return port;
}

/** A local redis-server for the `node-rl-redis` target (no persistence); stopped with everything else. */
async function startRedisServer(ctx: Ctx): Promise<number> {
  const port = await freePort();
  launch('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    cwd: ctx.runDir,
    logFile: path.join(ctx.runDir, 'redis.log'),
  });
  const deadline = performance.now() + 10_000;
  while (spawnSync('redis-cli', ['-p', String(port), 'PING'], { encoding: 'utf8' }).stdout?.trim() !== 'PONG') {
    if (performance.now() > deadline) {
      throw new Error('redis-server did not answer within 10 s (apt-get install -y redis-server)');
    }
    await sleep(20);
  }
  return port;
}

/** The process whose CPU and RSS a row reports: the gateway, or for direct rows the mock reached. */
const pidOf = (ctx: Ctx, t: Target) => (t.kind === 'direct' ? (t.proc ?? ctx.mock).pid : t.proc!.pid);
const chatUrl = (t: Target) =>
  `http://127.0.0.1:${t.port}/v1/${t.responsesStore === undefined ? 'chat/completions' : 'responses'}`;
const bodyFor = (t: Target, stream: boolean) =>
  JSON.stringify({
    model: t.model,
    ...(t.responsesStore === undefined
      ? { messages: [{ role: 'user', content: 'Say hello.' }] }
      : { input: 'Say hello.', store: t.responsesStore }),
    ...(stream ? { stream: true } : {}),
  });

// ----------------------------------------------------------------------------------------------- wrk

interface WrkResult {
  requests: number;
  duration_us: number;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  latency_us: { min: number; mean: number; p50: number; p90: number; p99: number; p999: number; max: number };
  rps: number;
}

async function wrk(
  o: {
    url: string;
    connections: number;
    durationS: number;
    body?: string;
    headers: Record<string, string>;
    timeoutS?: number;
    method?: 'GET' | 'POST';
  },
): Promise<WrkResult> {
  const script = path.join(BENCH, 'wrk', o.method === 'GET' ? 'get.lua' : 'post.lua');
  const env = {
    ...baseEnv(),
    BENCH_WRK_DIR: path.join(BENCH, 'wrk'),
    BENCH_HEADERS: Object.entries(o.headers).map(([k, v]) => `${k}: ${v}`).join('|'),
    BENCH_BODY: o.body ?? '',
  };
  const args = [
    '-t1',
    `-c${o.connections}`,
    `-d${o.durationS}s`,
    `--timeout`,
    `${o.timeoutS ?? 10}s`,
    '-s',
    script,
    o.url,
  ];
  const p = launch('wrk', args, { env, stdout: 'pipe' });
  let out = '';
  p.child.stdout!.setEncoding('utf8');
  p.child.stdout!.on('data', (d: string) => {
    out += d;
  });
  const code = await p.exited;
  const line = out.split('\n').find((l) => l.startsWith('BENCH_WRK '));
  if (code !== 0 || !line) throw new Error(`wrk failed (exit ${code}): ${out.slice(0, 500)}`);
  const r = JSON.parse(line.slice('BENCH_WRK '.length)) as Omit<WrkResult, 'rps'>;
  return { ...r, rps: r.requests / (r.duration_us / 1e6) };
}

// ------------------------------------------------------------------------------------------ measuring

/** One measured cell of one round. Latencies in ms. */
interface Sample {
  rps: number;
  p50: number;
  p99: number;
  cpuS: number;
  peakMb: number;
  errors: number;
  requests: number;
  extra: Record<string, number>;
  note?: string;
}

/** Warm-up, then the measured run with CPU and peak-RSS bookkeeping around it. */
async function measured(
  ctx: Ctx,
  t: Target,
  warm: () => Promise<unknown>,
  run: () => Promise<Omit<Sample, 'cpuS' | 'peakMb'>>,
): Promise<Sample> {
  if (ctx.opt.warmupS > 0) {
    await warm();
    await sleep(250); // let streams cut by the end of the warm-up wind down
  }
  await waitForQuiet(ctx);
  // The client-alone row starts its own process per run, which reports its CPU and RSS itself.
  const pid = t.kind === 'client' ? undefined : pidOf(ctx, t);
  if (pid !== undefined) resetPeakRss(pid);
  const cpu0 = pid === undefined ? 0 : cpuSeconds(pid);
  const mock0 = cpuSeconds(ctx.mock.pid);
  const own0 = selfAndReapedChildrenSeconds();
  const busy0 = machineBusySeconds();
  const s = await run();
  const busy = machineBusySeconds() - busy0;
  const own1 = selfAndReapedChildrenSeconds();
  const cpuS = pid === undefined ? s.extra.clientCpuS ?? NaN : cpuSeconds(pid) - cpu0;
  const mockCpuS = t.kind === 'direct' ? cpuS : cpuSeconds(ctx.mock.pid) - mock0;
  // What wrk (reaped child) and this harness (its clients) used; the rest of the machine's busy time is
  // other processes: noise from outside the benchmark. (The client-alone process is a reaped child too.)
  const loadCpuS = own1.children - own0.children + own1.self - own0.self;
  const otherCpuS = Math.max(
    0,
    busy - (pid === undefined ? 0 : cpuS) - (t.kind === 'direct' ? 0 : mockCpuS) - loadCpuS,
  );
  const peakMb = pid === undefined ? s.extra.clientMaxRssMb ?? NaN : peakRssMb(pid);
  t.peaks.push(peakMb);
  await sleep(250);
  return { ...s, cpuS, peakMb, extra: { ...s.extra, mockCpuS, loadCpuS, otherCpuS } };
}

/**
 * Wait (up to 5 s) until processes outside the benchmark use less than a quarter of a core, so that a
 * test suite running next door does not land in the middle of a measurement. The gateways are idle here.
 */
async function waitForQuiet(ctx: Ctx): Promise<void> {
  const deadline = performance.now() + 5000;
  for (;;) {
    const b0 = machineBusySeconds();
    const o0 = selfAndReapedChildrenSeconds();
    await sleep(300);
    const used = machineBusySeconds() - b0 - (selfAndReapedChildrenSeconds().self - o0.self);
    if (used < 0.3 * 0.25 || performance.now() > deadline) {
      if (used >= 0.3 * 0.25) ctx.noisyWaits++;
      return;
    }
  }
}

function wrkSample(r: WrkResult, extra: Record<string, number> = {}): Omit<Sample, 'cpuS' | 'peakMb'> {
  const e = r.errors;
  return {
    rps: r.rps,
    p50: r.latency_us.p50 / 1000,
    p99: r.latency_us.p99 / 1000,
    requests: r.requests,
    errors: e.connect + e.read + e.write + e.status + e.timeout,
    note: e.status ? `${e.status} non-2xx` : undefined,
    extra,
  };
}

/**
 * bench/undici-client.ts in its own process: `c` concurrent requests at the mock for the warm-up (untimed,
 * inside the same process so its JIT is warm) and then the measured seconds.
 */
async function undiciClient(ctx: Ctx, t: Target, c: number): Promise<Omit<Sample, 'cpuS' | 'peakMb'>> {
  const args = [
    '--import',
    'tsx',
    path.join(BENCH, 'undici-client.ts'),
    '--url',
    chatUrl(t),
    '--connections',
    String(c),
    '--warmup',
    String(ctx.opt.warmupS),
    '--duration',
    String(ctx.opt.durationS),
    '--authorization',
    t.headers.authorization!,
    '--body',
    bodyFor(t, false),
  ];
  const p = launch(process.execPath, args, { cwd: ROOT, env: baseEnv(), stdout: 'pipe' });
  let out = '';
  p.child.stdout!.setEncoding('utf8');
  p.child.stdout!.on('data', (d: string) => {
    out += d;
  });
  const code = await p.exited;
  const line = out.split('\n').find((l) => l.startsWith('BENCH_CLIENT '));
  if (code !== 0 || !line) throw new Error(`undici-client failed (exit ${code}): ${out.slice(0, 500)}`);
  const r = JSON.parse(line.slice('BENCH_CLIENT '.length)) as {
    requests: number;
    errors: number;
    elapsedMs: number;
    p50: number;
    p99: number;
    cpuS: number;
    maxRssMb: number;
  };
  return {
    rps: r.requests / (r.elapsedMs / 1000),
    p50: r.p50,
    p99: r.p99,
    requests: r.requests,
    errors: r.errors,
    extra: { clientCpuS: r.cpuS, clientMaxRssMb: r.maxRssMb },
  };
}

async function runScenario(ctx: Ctx, sc: ScenarioId, t: Target): Promise<Sample> {
  const { durationS, warmupS } = ctx.opt;
  const json = bodyFor(t, false);
  const sse = bodyFor(t, true);
  switch (sc) {
    case 'json50':
    case 'json1': {
      const c = sc === 'json50' ? 50 : 1;
      if (t.kind === 'client') return measured(ctx, t, async () => {}, () => undiciClient(ctx, t, c));
      return measured(
        ctx,
        t,
        () => wrk({ url: chatUrl(t), connections: c, durationS: warmupS, body: json, headers: t.headers }),
        async () =>
          wrkSample(await wrk({ url: chatUrl(t), connections: c, durationS, body: json, headers: t.headers })),
      );
    }
    case 'sse200':
      return measured(
        ctx,
        t,
        () => wrk({ url: chatUrl(t), connections: 200, durationS: warmupS, body: sse, headers: t.headers }),
        async () => {
          // wrk holds 200 streams open; alongside, 8 more streams from the first-byte client.
          const [w, tt] = await Promise.all([
            wrk({ url: chatUrl(t), connections: 200, durationS, body: sse, headers: t.headers }),
            runTtfb({
              url: chatUrl(t),
              headers: t.headers,
              body: sse,
              concurrency: 8,
              durationMs: durationS * 1000 - 300,
            }),
          ]);
          return withTtfb(wrkSample(w), tt);
        },
      );
    case 'sse4':
      return measured(
        ctx,
        t,
        () => runTtfb({ url: chatUrl(t), headers: t.headers, body: sse, concurrency: 4, durationMs: warmupS * 1000 }),
        async () => {
          const tt = await runTtfb({
            url: chatUrl(t),
            headers: t.headers,
            body: sse,
            concurrency: 4,
            durationMs: durationS * 1000,
          });
          return withTtfb({
            rps: tt.streams / (tt.elapsedMs / 1000),
            p50: tt.total.p50,
            p99: tt.total.p99,
            requests: tt.streams,
            errors: tt.errors + tt.incomplete,
            extra: {},
            note: tt.firstError,
          }, tt);
        },
      );
    case 'sse1': {
      // Streams of TTFT_CHUNKS chunks: only the first one is timed, and short streams put hundreds of samples
      // under the p99 instead of the fifty that 20-chunk streams give in 5 s. A proxy's streams alternate with
      // streams to the upstream directly, for twice the seconds: the added TTFT is the difference of two p99s
      // taken over the same seconds, not over two runs seconds apart that other load reaches differently.
      const short = scaleBody(t.model, ctx.opt.chunkDelayMs, TTFT_CHUNKS);
      const pair = t.kind === 'direct' ? undefined : {
        url: `http://127.0.0.1:${ctx.mockPort}/v1/chat/completions`,
        headers: { authorization: `Bearer ${UPSTREAM_KEY}` },
        body: scaleBody('mock-model', ctx.opt.chunkDelayMs, TTFT_CHUNKS),
      };
      return measured(
        ctx,
        t,
        () => runTtfb({ url: chatUrl(t), headers: t.headers, body: short, concurrency: 1, durationMs: warmupS * 1000 }),
        async () => {
          const tt = await runTtfb({
            url: chatUrl(t),
            headers: t.headers,
            body: short,
            concurrency: 1,
            durationMs: durationS * 1000 * (pair ? 2 : 1),
            pair,
          });
          const d = tt.paired;
          return withTtfb({
            rps: tt.streams / (tt.busyMs / 1000), // one caller: streams per second of its own turns
            p50: tt.ttfb.p50,
            p99: tt.ttfb.p99,
            requests: tt.streams,
            errors: tt.errors + tt.incomplete + (d ? d.errors + d.incomplete : 0),
            extra: d
              ? { pairedDirectP50: d.ttfb.p50, pairedDirectP99: d.ttfb.p99, pairedDirectStreams: d.streams }
              : {},
            note: tt.firstError ?? d?.firstError,
          }, tt);
        },
      );
    }
    case 'sse512':
      return measured(ctx, t, () => streamsWarmUp(ctx, t), () => streamsAtScale(ctx, t));
    case 'readyz':
      return measured(
        ctx,
        t,
        () => wrk({ url: chatUrl(t), connections: 50, durationS: warmupS, body: json, headers: t.headers }),
        async () => {
          const [w, pr] = await Promise.all([
            wrk({ url: chatUrl(t), connections: 50, durationS, body: json, headers: t.headers }),
            // Start a little after wrk and stop a little before it, so every probe meets a saturated proxy.
            sleep(300).then(() =>
              runProbe({ url: `http://127.0.0.1:${t.port}/readyz`, intervalMs: 10, durationMs: durationS * 1000 - 600 })
            ),
          ]);
          return withProbe(wrkSample(w), pr);
        },
      );
    case 'startup':
      throw new Error('startup is not a load scenario');
  }
}

/** The chunks of a `sse1` stream. */
const TTFT_CHUNKS = 2;

/** The bench-scale stream body for `model`: `chunks` chunks `delay` ms apart, each stamped by the mock. */
function scaleBody(model: string, delay: number, chunks: number): string {
  return JSON.stringify({
    model,
    messages: [{ role: 'user', content: 'Say hello.' }],
    stream: true,
    user: `bench-scale:${delay}:${chunks}`,
  });
}

/**
 * The warm-up of `sse512`: the same streams, shorter (1 ms apart) and 64 at a time, so the ramp-up of the
 * measured run meets code the runtime has compiled, as every other scenario's measured run does.
 */
async function streamsWarmUp(ctx: Ctx, t: Target): Promise<void> {
  const { streamChunks: chunks, warmupS } = ctx.opt;
  const concurrency = Math.min(ctx.opt.streams, 64);
  await runStreams({
    url: chatUrl(t),
    headers: t.headers,
    body: scaleBody(t.model, 1, chunks),
    concurrency,
    durationMs: warmupS * 1000,
  });
}

/**
 * `--streams` streams open at once for the measured seconds (bench/streams.ts), every chunk stamped by the
 * mock; the gateway's RSS sampled before and while they are all open gives its memory per open stream.
 * The streams ramp up together after the warm-up, and the first second of lags is part of the result.
 */
async function streamsAtScale(ctx: Ctx, t: Target): Promise<Omit<Sample, 'cpuS' | 'peakMb'>> {
  const { streams: n, streamChunkDelayMs: delay, streamChunks: chunks, durationS } = ctx.opt;
  const pid = pidOf(ctx, t);
  const idle = rssMb(pid);
  const open: number[] = [];
  const body = scaleBody(t.model, delay, chunks);
  // At least two whole streams per slot after the ramp-up.
  const durationMs = Math.max(durationS * 1000, 3 * delay * (chunks + 1));
  const r = await runStreams({
    url: chatUrl(t),
    headers: t.headers,
    body,
    concurrency: n,
    durationMs,
    onSteady: () => open.push(rssMb(pid)),
  });
  return {
    rps: r.streams / (r.elapsedMs / 1000),
    p50: r.lag.p50,
    p99: r.lag.p99,
    requests: r.streams,
    errors: r.errors + r.incomplete,
    note: r.firstError,
    extra: {
      lagMax: r.lagMax,
      late: r.late,
      lateAfterFirstS: r.lateAfterFirstS,
      chunks: r.chunks,
      maxOpen: r.maxOpen,
      ttfbP99: r.ttfb.p99,
      rssIdleMb: idle,
      rssOpenMb: median(open),
      kbPerStream: ((median(open) - idle) * 1024) / n,
    },
  };
}

function withTtfb(s: Omit<Sample, 'cpuS' | 'peakMb'>, tt: TtfbResult): Omit<Sample, 'cpuS' | 'peakMb'> {
  return {
    ...s,
    errors: s.errors + tt.errors + tt.incomplete,
    note: s.note ??
      (tt.errors || tt.incomplete
        ? `ttfb client: ${tt.errors} errors, ${tt.incomplete} incomplete${tt.firstError ? ` (${tt.firstError})` : ''}`
        : undefined),
    extra: {
      ...s.extra,
      ttfbP50: tt.ttfb.p50,
      ttfbP99: tt.ttfb.p99,
      fwdP50: tt.forward.p50,
      fwdP99: tt.forward.p99,
      streams: tt.streams,
    },
  };
}

function withProbe(s: Omit<Sample, 'cpuS' | 'peakMb'>, pr: ProbeResult): Omit<Sample, 'cpuS' | 'peakMb'> {
  return {
    ...s,
    note: s.note ?? (pr.failures ? `${pr.failures} probe failures (${pr.firstFailure})` : undefined),
    extra: {
      ...s.extra,
      probeP50: pr.latency.p50,
      probeP99: pr.latency.p99,
      probeMax: pr.latency.max,
      probes: pr.probes,
      probeFailures: pr.failures,
    },
  };
}

/** Which targets a scenario runs on. */
function scenarioTargets(sc: ScenarioId, all: TargetId[]): TargetId[] {
  switch (sc) {
    case 'json50':
    case 'json1':
      return all;
    // The bare proxies stream too (bench/bare-proxy.ts): under SSE/200 they are the streaming ceiling.
    case 'sse200':
      return all.filter((t) => !JSON_ONLY.includes(t) || SSE_CEILINGS.includes(t));
    // One caller's TTFT: the bare proxies give the floor any proxy on that runtime adds.
    case 'sse1':
      return all.filter((t) => !JSON_ONLY.includes(t) || SSE_CEILINGS.includes(t));
    case 'sse4':
      return all.filter((t) => !JSON_ONLY.includes(t));
    // At scale too: what any proxy on that runtime, listener and client delivers is the floor of goal 3.
    case 'sse512':
      return all.filter((t) => !JSON_ONLY.includes(t) || SSE_CEILINGS.includes(t));
    // The bare proxies answer GET /readyz too: under the same load they show what any proxy on that runtime,
    // listener and client gets.
    case 'readyz':
      return all.filter((t) =>
        t === 'node' || t === 'bun' || t === 'deno' || (SSE_CEILINGS.includes(t) && t !== 'tcp-relay')
      );
    case 'startup':
      return [];
  }
}

// ----------------------------------------------------------------------------------------- start-up

interface StartupResult {
  runtime: Runtime | 'portkey';
  trials: number[];
  idleRssMb: number;
}

async function startupPhase(ctx: Ctx): Promise<StartupResult[]> {
  const runtimes: (Runtime | 'portkey')[] = [];
  for (const r of ['node', 'bun', 'deno'] as const) if (ctx.opt.targets.includes(r)) runtimes.push(r);
  if (ctx.opt.targets.includes('portkey')) runtimes.push('portkey');
  const res = new Map(runtimes.map((r) => [r, { runtime: r, trials: [] as number[], idleRssMb: NaN }]));
  const once = async (
    r: Runtime | 'portkey',
    name: string,
  ) => (r === 'portkey' ? startPortkey(ctx, name) : startSluice(ctx, r, true, name));
  // One untimed start each (Deno and Bun fill their transpile caches), then timed trials, alternating.
  for (const r of runtimes) await stop((await once(r, `startup-${r}-warm`)).proc);
  for (let i = 0; i < ctx.opt.startupTrials; i++) {
    const order = i % 2 ? [...runtimes].reverse() : runtimes;
    for (const r of order) {
      const s = await once(r, `startup-${r}-${i}`);
      res.get(r)!.trials.push(s.startMs);
      if (i === ctx.opt.startupTrials - 1) {
        await sleep(2000); // settle: what an idle gateway holds, not its start-up transient
        res.get(r)!.idleRssMb = rssMb(s.proc.pid);
      }
      await stop(s.proc);
      await sleep(100);
    }
    log(
      `start-up trial ${i + 1}/${ctx.opt.startupTrials}: ${
        runtimes.map((r) => `${r} ${res.get(r)!.trials.at(-1)!.toFixed(0)} ms`).join(', ')
      }`,
    );
  }
  return [...res.values()];
}

// ------------------------------------------------------------------------------------------- report

const GOALS = {
  json50Ratio: { node: 0.25, bun: 0.45, deno: 0.25 } as Record<Runtime, number>,
  json50VsPortkey: 3,
  addedP50Us: { node: 250, bun: 150 } as Partial<Record<Runtime, number>>,
  sseRatio: 0.9,
  forwardMs: 1,
  addedTtftP99Ms: 1,
  readyzP99Ms: 10,
  nodeStartupMs: 300,
  idleRssMb: 80,
};

interface Cell {
  sc: ScenarioId;
  t: Target;
  samples: Sample[];
}

const fmtMs = (
  ms: number,
) => (!Number.isFinite(ms)
  ? '—'
  : ms < 1
  ? `${(ms * 1000).toFixed(0)} µs`
  : ms < 10
  ? `${ms.toFixed(2)} ms`
  : ms < 100
  ? `${ms.toFixed(1)} ms`
  : `${ms.toFixed(0)} ms`);
const fmtRps = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '—');
const fmtX = (x: number) => (Number.isFinite(x) ? `${x.toFixed(2)}×` : '—');
const fmtMb = (x: number) => (Number.isFinite(x) ? `${x.toFixed(0)} MB` : '—');
const med = (c: Cell | undefined, f: (s: Sample) => number) => (c ? median(c.samples.map(f)) : NaN);
/** `sse1`: a proxy's TTFT p99 minus the direct streams' measured alternately with it, median over rounds. */
const addedTtftP99 = (c: Cell | undefined) => med(c, (s) => s.p99 - (s.extra.pairedDirectP99 ?? NaN));
const spread = (c: Cell) => {
  const xs = c.samples.map((s) => s.rps);
  const m = median(xs);
  return xs.length > 1 && m > 0 ? (Math.max(...xs) - Math.min(...xs)) / m : NaN;
};

function report(ctx: Ctx, cells: Cell[], startup: StartupResult[], meta: string[]): string {
  const get = (sc: ScenarioId, id: TargetId) => cells.find((c) => c.sc === sc && c.t.id === id);
  const rows: string[][] = [];
  const SC_LABEL: Record<ScenarioId, string> = {
    startup: 'start-up + memory',
    json50: 'JSON, 50 conn',
    json1: 'JSON, 1 conn',
    sse200: 'SSE 20×5 ms, 200 conn',
    sse4: 'SSE, 4 streams (first chunk)',
    sse1: 'SSE, 1 caller (TTFT)',
    sse512: `SSE at scale, ${ctx.opt.streams} open (${ctx.opt.streamChunks}×${ctx.opt.streamChunkDelayMs} ms)`,
    readyz: '/readyz under JSON/50',
  };
  for (const sc of ctx.opt.scenarios) {
    if (sc === 'startup') continue;
    for (const id of TARGETS) {
      const c = get(sc, id);
      if (!c) continue;
      const t = c.t;
      const rt = t.runtime;
      const rps = med(c, (s) => s.rps);
      const direct = med(get(sc, 'direct'), (s) => s.rps);
      const portkey = med(get(sc, 'portkey'), (s) => s.rps);
      const xDirect = id === 'direct' ? NaN : rps / direct;
      const xPortkey = id === 'portkey' ? NaN : rps / portkey;
      // Sluice ÷ the bare Hono proxy of the same runtime: the share of that runtime's proxy ceiling it reaches.
      const xBare = t.kind === 'sluice' && rt ? rps / med(get(sc, `bare-${rt}` as TargetId), (s) => s.rps) : NaN;
      const errs = c.samples.reduce((a, s) => a + s.errors, 0);
      const reqs = c.samples.reduce((a, s) => a + s.requests, 0);
      let p50 = med(c, (s) => s.p50);
      let p99 = med(c, (s) => s.p99);
      const detail: string[] = [];
      let goal = '';
      let result = '';
      const sp = spread(c);
      if (Number.isFinite(sp) && sp > 0.15) detail.push(`rounds spread ±${((sp * 100) / 2).toFixed(0)}%`);
      const other = Math.max(...c.samples.map((s) => s.extra.otherCpuS ?? 0));
      if (other > 0.5) detail.push(`⚠ other processes used up to ${other.toFixed(1)} CPU s`);
      const directNode = med(get(sc, 'direct-node'), (s) => s.rps);
      if (
        (sc === 'json50' || sc === 'json1') && id !== 'direct' && id !== 'direct-node' && Number.isFinite(directNode)
      ) {
        detail.push(`${fmtX(rps / directNode)} direct (mock on node)`);
      }
      // Sluice listens through node:http on Bun and Deno (for its drain guarantees): its ceiling there.
      const bareNodeHttp = t.kind === 'sluice' && (rt === 'bun' || rt === 'deno')
        ? med(get(sc, `bare-${rt}-nodehttp` as TargetId), (s) => s.rps)
        : NaN;
      if (Number.isFinite(bareNodeHttp)) {
        detail.push(`${fmtX(rps / bareNodeHttp)} bare via node:http${rt === 'deno' ? ' + undici' : ''}`);
      }
      switch (sc) {
        case 'json50':
          if (t.kind === 'sluice' && rt) {
            goal = `≥${GOALS.json50Ratio[rt]}× direct, ≥${GOALS.json50VsPortkey}× Portkey`;
            const a = xDirect >= GOALS.json50Ratio[rt];
            const b = xPortkey >= GOALS.json50VsPortkey;
            result = !Number.isFinite(xDirect) || !Number.isFinite(xPortkey)
              ? '—'
              : a && b
              ? 'PASS'
              : `MISS${a ? '' : ' (×direct)'}${b ? '' : ' (×Portkey)'}`;
          }
          break;
        case 'json1': {
          const added = (p50 - med(get(sc, 'direct'), (s) => s.p50)) * 1000;
          if (t.kind !== 'direct' && t.kind !== 'client' && Number.isFinite(added)) {
            detail.push(`added p50 ${added.toFixed(0)} µs`);
          }
          const bare = t.kind === 'sluice' && rt ? med(get(sc, `bare-${rt}` as TargetId), (s) => s.p50) : NaN;
          if (Number.isFinite(bare)) detail.push(`${((p50 - bare) * 1000).toFixed(0)} µs over the bare proxy`);
          const g = rt && t.kind === 'sluice' ? GOALS.addedP50Us[rt] : undefined;
          if (g !== undefined) {
            goal = `added p50 ≤ ${g} µs`;
            result = Number.isFinite(added) ? (added <= g ? 'PASS' : 'MISS') : '—';
          }
          break;
        }
        case 'sse200': {
          const tp50 = med(c, (s) => s.extra.ttfbP50 ?? NaN);
          const tp99 = med(c, (s) => s.extra.ttfbP99 ?? NaN);
          const fwd = med(c, (s) => s.extra.fwdP50 ?? NaN) -
            (id === 'direct' ? 0 : med(get(sc, 'direct'), (s) => s.extra.fwdP50 ?? NaN));
          detail.push(`TTFB p50 ${fmtMs(tp50)}, p99 ${fmtMs(tp99)}`);
          detail.push(
            id === 'direct' ? `1st chunk transit p50 ${fmtMs(fwd)}` : `1st chunk held p50 ${fmtMs(fwd)} (under load)`,
          );
          if (t.kind === 'sluice') {
            goal = `≥${GOALS.sseRatio}× direct`;
            result = Number.isFinite(xDirect) ? (xDirect >= GOALS.sseRatio ? 'PASS' : 'MISS') : '—';
          }
          break;
        }
        case 'sse4': {
          const d50 = med(get(sc, 'direct'), (s) => s.extra.fwdP50 ?? NaN);
          const d99 = med(get(sc, 'direct'), (s) => s.extra.fwdP99 ?? NaN);
          const f50 = med(c, (s) => s.extra.fwdP50 ?? NaN);
          const f99 = med(c, (s) => s.extra.fwdP99 ?? NaN);
          // This scenario's p50/p99 columns are time to first byte; the whole stream goes in the detail.
          detail.push(`stream p50 ${fmtMs(p50)}`);
          p50 = med(c, (s) => s.extra.ttfbP50 ?? NaN);
          p99 = med(c, (s) => s.extra.ttfbP99 ?? NaN);
          // p99s of a few hundred streams on a shared machine are noise-dominated: not subtracted.
          if (id === 'direct') detail.push(`1st chunk transit p50 ${fmtMs(f50)}, p99 ${fmtMs(f99)}`);
          else detail.push(`1st chunk held p50 ${fmtMs(f50 - d50)}; transit p99 ${fmtMs(f99)} (direct ${fmtMs(d99)})`);
          if (t.kind === 'sluice') {
            goal = `1st chunk held p50 ≤ ${GOALS.forwardMs} ms`;
            result = Number.isFinite(f50 - d50) ? (f50 - d50 <= GOALS.forwardMs ? 'PASS' : 'MISS') : '—';
          }
          break;
        }
        case 'sse1': {
          // p50/p99 columns: time to first token (the first chunk's bytes) of one caller's streams.
          const added = addedTtftP99(c);
          if (id !== 'direct') {
            detail.push(
              `added TTFT p99 ${fmtMs(added)} (direct p99 ${
                fmtMs(med(c, (s) => s.extra.pairedDirectP99 ?? NaN))
              } in the same seconds)`,
            );
          }
          if (t.kind === 'sluice') {
            goal = `added TTFT p99 ≤ ${GOALS.addedTtftP99Ms} ms`;
            result = Number.isFinite(added) ? (added <= GOALS.addedTtftP99Ms ? 'PASS' : 'MISS') : '—';
          }
          break;
        }
        case 'sse512': {
          // p50/p99 columns: chunk lag (receipt − the upstream's send); req/s: streams completed per second.
          const x = (k: string) => med(c, (s) => s.extra[k] ?? NaN);
          const late = c.samples.reduce((a, s) => a + (s.extra.late ?? 0), 0);
          detail.push(
            `lag max ${fmtMs(x('lagMax'))}; ${late} of ${
              c.samples.reduce((a, s) => a + (s.extra.chunks ?? 0), 0)
            } chunks over ${STALL_MS} ms (${
              c.samples.reduce((a, s) => a + (s.extra.lateAfterFirstS ?? 0), 0)
            } after the first second); ${x('maxOpen')} open at most; TTFB p99 ${fmtMs(x('ttfbP99'))}`,
          );
          detail.push(
            `RSS ${fmtMb(x('rssIdleMb'))} idle → ${fmtMb(x('rssOpenMb'))} open: ${
              x('kbPerStream').toFixed(0)
            } KB/stream`,
          );
          if (t.kind === 'sluice' || t.kind === 'portkey') {
            // A stream held before it reaches the upstream (a client's queue) stalls as surely as a late chunk.
            const ttfbOver = x('ttfbP99') - med(get(sc, 'direct'), (s) => s.extra.ttfbP99 ?? NaN);
            goal = `every chunk ≤ ${STALL_MS} ms, TTFB p99 ≤ direct's + ${STALL_MS} ms`;
            result = late === 0 && !errs && !(ttfbOver > STALL_MS) ? 'PASS' : 'MISS';
          }
          break;
        }
        case 'readyz': {
          // This scenario's p50/p99 columns are the probe's; the proxy's own p99 goes in the detail.
          detail.push(
            `proxy p99 ${fmtMs(p99)}; /readyz max ${fmtMs(med(c, (s) => s.extra.probeMax ?? NaN))}, ${
              c.samples.reduce((a, s) => a + (s.extra.probes ?? 0), 0)
            } probes`,
          );
          const pf = c.samples.reduce((a, s) => a + (s.extra.probeFailures ?? 0), 0);
          if (pf) detail.push(`${pf} probe failures`);
          p50 = med(c, (s) => s.extra.probeP50 ?? NaN);
          p99 = med(c, (s) => s.extra.probeP99 ?? NaN);
          if (t.kind === 'sluice') {
            goal = `/readyz p99 ≤ ${GOALS.readyzP99Ms} ms`;
            result = Number.isFinite(p99) ? (p99 <= GOALS.readyzP99Ms && !pf ? 'PASS' : 'MISS') : '—';
          }
          break;
        }
        default:
          break;
      }
      if (errs) {
        detail.push(
          `⚠ ${errs} errors of ${reqs}${
            c.samples.find((s) => s.note)?.note ? ` (${c.samples.find((s) => s.note)!.note})` : ''
          }`,
        );
        if (errs > reqs * 0.001 && result) result = `ERR ${result}`;
      }
      const cpu = med(c, (s) => s.cpuS);
      rows.push([
        SC_LABEL[sc],
        t.label,
        fmtRps(rps),
        fmtMs(p50),
        fmtMs(p99),
        fmtX(xDirect),
        fmtX(xPortkey),
        fmtX(xBare),
        Number.isFinite(cpu)
          ? `${cpu.toFixed(2)}${t.kind === 'direct' ? ' (mock)' : t.kind === 'client' ? ' (client)' : ''}${
            sc === 'json50' || sc === 'json1' || sc === 'readyz'
              ? ` · ${med(c, (s) => (1e6 * s.cpuS) / Math.max(1, s.requests)).toFixed(0)} µs/req`
              : ''
          }`
          : '—',
        fmtMb(med(c, (s) => s.peakMb)),
        detail.join('; '),
        goal,
        result,
      ]);
    }
  }
  if (ctx.opt.scenarios.includes('startup')) {
    for (const s of startup) {
      const tid = s.runtime as TargetId;
      const t = ctx.targets.get(tid);
      const label = t?.label ?? (s.runtime === 'portkey' ? `Portkey ${PORTKEY_VERSION} (Node)` : `Sluice ${s.runtime}`);
      const start = median(s.trials);
      const mem = memAfter.get(tid);
      const detail = [
        `start-up median of ${s.trials.length}, max ${fmtMs(Math.max(...s.trials))}`,
        s.runtime === 'node' ? 'from the bundle (bin/sluice)' : '',
      ];
      if (mem) detail.push(`RSS after all load ${fmtMb(mem.after)}, peak under load ${fmtMb(mem.peak)}`);
      let goal = '';
      let result = '';
      if (s.runtime === 'node') {
        goal = `start ≤ ${GOALS.nodeStartupMs} ms, idle RSS ≤ ${GOALS.idleRssMb} MB`;
        const a = start <= GOALS.nodeStartupMs;
        const b = s.idleRssMb <= GOALS.idleRssMb;
        result = a && b ? 'PASS' : `MISS${a ? '' : ' (start)'}${b ? '' : ' (RSS)'}`;
      }
      rows.push([
        'start-up + memory',
        label,
        '—',
        `${fmtMs(start)} start`,
        '—',
        '—',
        '—',
        '—',
        '—',
        `${fmtMb(s.idleRssMb)} idle`,
        detail.filter(Boolean).join('; '),
        goal,
        result,
      ]);
    }
  }
  const head = [
    'scenario',
    'target',
    'req/s',
    'p50',
    'p99',
    '×direct',
    '×Portkey',
    '×bare',
    'CPU s',
    'peak RSS',
    'detail',
    'goal',
    'result',
  ];
  const table = [
    `| ${head.join(' | ')} |`,
    `|${
      head.map((
        h,
      ) => (['req/s', 'p50', 'p99', '×direct', '×Portkey', '×bare', 'CPU s', 'peak RSS'].includes(h) ? '---:' : '---'))
        .join('|')
    }|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
  return [
    `# Sluice benchmark — ${new Date().toISOString()}`,
    '',
    ...meta.map((m) => `- ${m}`),
    '',
    table,
    '',
    'Columns: bench/README.md. Ratios are medians over rounds from the same run; CPU s and peak RSS are the gateway process (for "direct": the mock) during the measured seconds only.',
    '',
  ].join('\n');
}

const memAfter = new Map<TargetId, { after: number; peak: number }>();

/** The bare proxy built from Sluice's own listener and client on each runtime. */
const SAME_PIECES_BARE: Record<Runtime, TargetId> = {
  node: 'bare-node',
  bun: 'bare-bun',
  deno: 'bare-deno-nodehttp',
};

/** The targets table's values (bench/README.md "The targets table"). */
const AIMS = {
  /** 1: Sluice's CPU per request at JSON/50 minus the same runtime's (native) bare proxy's, in µs. */
  ownCpuUs: { node: 35, bun: 20, deno: 50 } as Record<Runtime, number>,
  /** 2: Deno at one caller, p50 over the bare `Deno.serve` proxy's (µs), and JSON/50 req/s ÷ that proxy's. */
  denoP50OverBareUs: 100,
  denoXBare: 0.7,
  /** 4: configuration at scale (bench/config-scale.ts). */
  configReadyMs: 30_000,
  configPeakMiB: 1536,
  configChangeMs: 100,
  configStallMs: 100,
};

/**
 * Target 5's rows: a feature configured (`on`) against the same gateway without it (`off`); the newer four also
 * against the tree before them (`base`, with --baseline), where off must cost nothing.
 */
const FEATURE_ROWS: { on: TargetId; off: TargetId; base?: TargetId; what: string }[] = [
  { on: 'node-responses-store', off: 'node-responses', base: 'node-base-responses', what: 'Responses store (memory)' },
  { on: 'node-budgets', off: 'node', base: 'node-base', what: 'budgets (a key and a model budget, memory)' },
  { on: 'node-mcp', off: 'node', base: 'node-base', what: 'MCP servers configured (chat load)' },
  { on: 'node-usage', off: 'node', base: 'node-base', what: 'usage events (Datadog exporter, local intake)' },
  { on: 'node-rl-memory', off: 'node', what: 'rate limit (memory)' },
  { on: 'node-rl-redis', off: 'node', what: 'rate limit (redis)' },
  { on: 'node-guardrails', off: 'node', what: 'keyword + pii guardrails' },
  { on: 'node-cache-miss', off: 'node', what: 'exact cache, miss (no-store)' },
  { on: 'node-cache-hit', off: 'node', what: 'exact cache, hit' },
  { on: 'node-otlp', off: 'node', what: 'OTLP exporter, every request' },
];

/**
 * What bench/config-scale.ts leaves in bench/results/config-scale.json (target 4): its rows, one per runtime and
 * source. Absent until that script has run here.
 */
interface ConfigScaleRun {
  keys: number;
  date?: string;
  rows: {
    runtime: string;
    source: string;
    readyMs: number;
    peakMiB: number;
    /** etcd: one key's put or delete until served (median); file: a reload of the whole file. */
    changeMs: number;
    updateStallMs: number;
    /** The row's own run (a run of one runtime or source keeps the other rows of an earlier one). */
    date?: string;
    loadAverage?: number;
  }[];
}

function readConfigScale(): ConfigScaleRun | undefined {
  const file = path.join(BENCH, 'results', 'config-scale.json');
  if (!existsSync(file)) return undefined;
  try {
    const run = JSON.parse(readFileSync(file, 'utf8')) as ConfigScaleRun;
    return Array.isArray(run.rows) ? run : undefined;
  } catch {
    return undefined; // a half-written or foreign file: the row reads `—`
  }
}

/**
 * The targets table, one row each: the target, what this run measured, MET/MISS (`—` when a row it needs did
 * not run), then the side-by-side rows with Portkey as reports. Every figure compares cells of this run.
 */
function goalsReport(cells: Cell[]): string {
  const get = (sc: ScenarioId, id: TargetId) => cells.find((c) => c.sc === sc && c.t.id === id);
  const rps = (sc: ScenarioId, id: TargetId) => med(get(sc, id), (s) => s.rps);
  const usPerReq = (id: TargetId) => med(get('json50', id), (s) => (1e6 * s.cpuS) / Math.max(1, s.requests));
  // Per round, so that a round that other processes' load reached differently does not decide a difference.
  const perRound = (sc: ScenarioId, id: TargetId, f: (s: Sample) => number) => (get(sc, id)?.samples ?? []).map(f);
  const cpuOf = (s: Sample) => (1e6 * s.cpuS) / Math.max(1, s.requests);
  const roundDiffs = (sc: ScenarioId, a: TargetId, b: TargetId, f: (s: Sample) => number) => {
    const bs = perRound(sc, b, f);
    return perRound(sc, a, f).map((x, i) => x - (bs[i] ?? NaN)).filter(Number.isFinite);
  };
  const roundRatios = (a: TargetId, b: TargetId) => {
    const bs = perRound('json50', b, cpuOf);
    return perRound('json50', a, cpuOf).map((x, i) => x / (bs[i] ?? NaN)).filter(Number.isFinite);
  };
  const rows: string[][] = [];
  const verdict = (ok: boolean | undefined) => (ok === undefined ? '—' : ok ? 'MET' : 'MISS');
  const fin = (...xs: number[]) => xs.every(Number.isFinite);
  const us = (x: number) => (Number.isFinite(x) ? `${x.toFixed(0)} µs` : '—');
  const signed = (x: number) => (Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${x.toFixed(0)} µs` : '—');
  const name = (rt: string) => `${rt[0]!.toUpperCase()}${rt.slice(1)}`;
  const label = (sc: ScenarioId, id: TargetId) => get(sc, id)?.t.label ?? id;
  const runtimes = ['node', 'bun', 'deno'] as const;

  // 1. Sluice's own CPU per request over the bare proxy of the runtime's native pieces (what the targets were set on).
  for (const rt of runtimes) {
    const bare = `bare-${rt}` as TargetId;
    const own = median(roundDiffs('json50', rt, bare, cpuOf));
    const pieces = SAME_PIECES_BARE[rt] !== bare && get('json50', SAME_PIECES_BARE[rt])
      ? `; over ${label('json50', SAME_PIECES_BARE[rt])} ${signed(usPerReq(rt) - usPerReq(SAME_PIECES_BARE[rt]))}`
      : '';
    const floor = `floor-${rt}` as TargetId;
    const floorOwn = median(roundDiffs('json50', floor, bare, cpuOf));
    const floorText = fin(floorOwn) ? `; ${label('json50', floor)}'s own ${us(floorOwn)}` : '';
    rows.push([
      '1',
      `Sluice's own CPU per request at JSON/50, ${name(rt)}: Sluice's minus ${label('json50', bare)}'s`,
      `≤ ${AIMS.ownCpuUs[rt]} µs`,
      fin(own)
        ? `${us(own)} (median of per-round differences; ${us(usPerReq(rt))} against ${us(usPerReq(bare))}, ×bare ${
          fmtX(rps('json50', rt) / rps('json50', bare))
        }${pieces}${floorText})`
        : '—',
      verdict(fin(own) ? own <= AIMS.ownCpuUs[rt] : undefined),
    ]);
  }

  // 2. Deno on its own footing: one caller's p50 over the bare Deno.serve proxy's, and ×bare against it.
  const p50Over = median(roundDiffs('json1', 'deno', 'bare-deno', (s) => 1000 * s.p50));
  const directP50 = med(get('json1', 'direct'), (s) => 1000 * s.p50);
  rows.push([
    '2',
    `Deno, one caller (JSON/1): p50 over ${label('json1', 'bare-deno')}'s`,
    `≤ ${AIMS.denoP50OverBareUs} µs`,
    fin(p50Over)
      ? `${signed(p50Over)} (median of per-round differences${
        fin(directP50)
          ? `; added over direct: Sluice ${us(med(get('json1', 'deno'), (s) => 1000 * s.p50) - directP50)}, bare ${
            us(med(get('json1', 'bare-deno'), (s) => 1000 * s.p50) - directP50)
          }`
          : ''
      })`
      : '—',
    verdict(fin(p50Over) ? p50Over <= AIMS.denoP50OverBareUs : undefined),
  ]);
  const denoX = rps('json50', 'deno') / rps('json50', 'bare-deno');
  rows.push([
    '2',
    `Deno, JSON/50 req/s ÷ ${label('json50', 'bare-deno')}'s (×bare, native)`,
    `≥ ${AIMS.denoXBare}×`,
    fin(denoX)
      ? `${fmtX(denoX)} (${fmtRps(rps('json50', 'deno'))} against ${fmtRps(rps('json50', 'bare-deno'))} req/s${
        get('json50', 'bare-deno-nodehttp')
          ? `; ×bare via node:http + undici ${fmtX(rps('json50', 'deno') / rps('json50', 'bare-deno-nodehttp'))}`
          : ''
      })`
      : '—',
    verdict(fin(denoX) ? denoX >= AIMS.denoXBare : undefined),
  ]);

  // 3. No stall at 512 streams on any runtime, and memory per open stream; the bare proxies as the floor.
  const scale = (id: TargetId) => {
    const c = get('sse512', id);
    if (!c) return undefined;
    const x = (k: string) => med(c, (s) => s.extra[k] ?? NaN);
    return {
      late: c.samples.reduce((a, s) => a + (s.extra.late ?? 0), 0),
      chunks: c.samples.reduce((a, s) => a + (s.extra.chunks ?? 0), 0),
      errs: c.samples.reduce((a, s) => a + s.errors, 0),
      text: `lag max ${fmtMs(x('lagMax'))}, TTFB p99 ${fmtMs(x('ttfbP99'))}, ${x('maxOpen')} open, ${
        fmtRps(med(c, (s) => s.rps))
      } streams/s; ${x('kbPerStream').toFixed(0)} KB per open stream (RSS ${fmtMb(x('rssIdleMb'))} idle → ${
        fmtMb(x('rssOpenMb'))
      })`,
    };
  };
  for (const rt of runtimes) {
    const r = scale(rt);
    rows.push([
      '3',
      `${STALL_MS} ms stalls at ${get('sse512', rt)?.t.label ?? `Sluice ${name(rt)}`}'s streams at scale`,
      `0 chunks later than ${STALL_MS} ms, no error; memory per open stream reported`,
      r ? `${r.late} of ${r.chunks} chunks late, ${r.errs} errors; ${r.text}` : '—',
      verdict(r ? r.late === 0 && r.errs === 0 : undefined),
    ]);
  }
  for (const id of ['bare-node', 'bare-bun', 'bare-deno', 'bare-deno-nodehttp', 'tcp-relay', 'direct'] as const) {
    const r = scale(id);
    if (r) rows.push(['3', `streams at scale: ${label('sse512', id)}`, '(the floor)', `${r.late} late; ${r.text}`, '']);
  }

  // 4. Configuration at scale: bench/config-scale.ts's last run, when there is one.
  const config = readConfigScale();
  if (!config || config.rows.length === 0) {
    rows.push([
      '4',
      'configuration at scale: 1,000,000 api keys (bench/config-scale.ts → bench/results/config-scale.json)',
      `ready ≤ ${
        AIMS.configReadyMs / 1000
      } s, peak RSS ≤ ${AIMS.configPeakMiB} MiB, one key applied ≤ ${AIMS.configChangeMs} ms, no request over ${AIMS.configStallMs} ms`,
      '— (no run recorded)',
      '—',
    ]);
  }
  for (const r of config?.rows ?? []) {
    const ok = r.readyMs <= AIMS.configReadyMs && r.peakMiB <= AIMS.configPeakMiB &&
      r.updateStallMs <= AIMS.configStallMs && (r.source !== 'etcd' || r.changeMs <= AIMS.configChangeMs);
    rows.push([
      '4',
      `configuration at scale: ${config!.keys.toLocaleString('en-US')} api keys, ${r.runtime}, ${r.source}${
        (r.date ?? config!.date)
          ? ` (bench/config-scale.ts, ${r.date ?? config!.date}${
            r.loadAverage !== undefined ? `, load average ${r.loadAverage}` : ''
          })`
          : ''
      }`,
      `ready ≤ ${AIMS.configReadyMs / 1000} s, peak RSS ≤ ${AIMS.configPeakMiB} MiB, ${
        r.source === 'etcd' ? `one key applied ≤ ${AIMS.configChangeMs} ms, ` : ''
      }no request over ${AIMS.configStallMs} ms`,
      `ready ${(r.readyMs / 1000).toFixed(1)} s, peak ${r.peakMiB.toFixed(0)} MiB, ${
        r.source === 'etcd' ? 'one key' : 'reload'
      } ${r.changeMs.toFixed(1)} ms, slowest request ${r.updateStallMs.toFixed(1)} ms`,
      verdict(fin(r.readyMs, r.peakMiB, r.changeMs, r.updateStallMs) ? ok : undefined),
    ]);
  }

  // 5. Each new feature off (against the tree before it, --baseline) and on (against off, this tree). Off costs
  // nothing measurable when the rounds do not agree on a cost: at least one round measured it no dearer.
  const offRow = (a: TargetId, b: TargetId): [string, boolean | undefined] => {
    const rs = roundRatios(a, b);
    if (rs.length === 0) return ['—', undefined];
    return [
      `${fmtX(median(rs))} CPU per request (rounds ${rs.map((r) => r.toFixed(2)).join(', ')}; ${
        us(usPerReq(a))
      } against ${us(usPerReq(b))}), ${fmtX(rps('json50', a) / rps('json50', b))} req/s`,
      Math.min(...rs) <= 1,
    ];
  };
  const [noFeature, noFeatureOk] = offRow('node', 'node-base');
  rows.push([
    '5',
    `no feature configured: ${label('json50', 'node')} ÷ ${label('json50', 'node-base')}`,
    'nothing measurable: not every round dearer',
    noFeature,
    verdict(noFeatureOk),
  ]);
  for (const f of FEATURE_ROWS) {
    if (!get('json50', f.on) && !(f.base && f.off !== 'node' && get('json50', f.off))) continue;
    const on = median(roundDiffs('json50', f.on, f.off, cpuOf));
    const onText = get('json50', f.on)
      ? `on: ${signed(on)} CPU per request over off (median of per-round differences; ${us(usPerReq(f.on))} against ${
        us(usPerReq(f.off))
      }), ${fmtX(rps('json50', f.on) / rps('json50', f.off))} req/s`
      : 'on: —';
    if (!f.base) {
      rows.push(['5', `feature on: ${f.what}`, '(its cost, reported)', onText, '']);
      continue;
    }
    // Off for budgets, MCP and usage events is the no-feature gateway itself: the row above.
    const [offText, offOk] = f.off === 'node' ? [`the no-feature row above`, noFeatureOk] : offRow(f.off, f.base);
    rows.push([
      '5',
      `${f.what}: off ÷ the tree before it; on over off`,
      'off: nothing measurable; on: reported',
      `off: ${offText}; ${onText}`,
      `off: ${verdict(offOk)}`,
    ]);
  }
  for (const rt of ['bun', 'deno'] as const) {
    const base = get('json50', `${rt}-base`);
    if (!base) continue;
    rows.push([
      '5',
      `A/B: Sluice ${name(rt)} ÷ ${base.t.label}`,
      '(report)',
      `${fmtX(rps('json50', rt) / rps('json50', `${rt}-base`))} req/s, ${
        fmtX(usPerReq(rt) / usPerReq(`${rt}-base`))
      } CPU per request, peak RSS ${fmtMb(med(get('json50', rt), (s) => s.peakMb))} vs ${
        fmtMb(med(base, (s) => s.peakMb))
      }`,
      '',
    ]);
  }

  // Side by side with Portkey (reports): Sluice and each runtime's ceiling against Portkey on Node and on Bun.
  for (const rt of runtimes) {
    const xs = (['portkey', 'portkey-bun'] as const).filter((pk) => get('json50', pk) && get('json50', rt));
    if (xs.length === 0) continue;
    rows.push([
      'beside',
      `JSON/50 Sluice ${name(rt)} ÷ Portkey`,
      '(report)',
      xs.map((pk) => `on ${pk === 'portkey' ? 'Node' : 'Bun'} ${fmtX(rps('json50', rt) / rps('json50', pk))}`).join(
        '; ',
      ),
      '',
    ]);
  }
  for (const rt of runtimes) {
    const ceilings = [...new Set([SAME_PIECES_BARE[rt], `bare-${rt}` as TargetId])].filter((id) => get('json50', id));
    if (ceilings.length === 0 || !get('json50', 'portkey-bun')) continue;
    rows.push([
      'beside',
      `ceiling on ${name(rt)}: the bare proxy ÷ Portkey on Bun`,
      '(report)',
      ceilings.map((id) => `${label('json50', id)} ${fmtX(rps('json50', id) / rps('json50', 'portkey-bun'))}`).join(
        '; ',
      ),
      '',
    ]);
  }
  return [
    '| target | row | target value | this run | result |',
    '|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}

// ------------------------------------------------------------------------------------------- profile

async function profileMode(ctx: Ctx): Promise<void> {
  const { profileLoad: load, profileSeconds: secs, profileAccessLog: accessLog, profileBare: bare } = ctx.opt;
  const runtime = ctx.opt.profileRuntime;
  const dir = path.join(ctx.runDir, 'prof');
  mkdirSync(dir, { recursive: true });
  const inspectPort = runtime === 'deno' ? await freePort() : 0;
  const flags = runtime !== 'deno'
    ? ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--cpu-prof-interval=250']
    : [`--inspect=127.0.0.1:${inspectPort}`];
  // The bare proxy of Sluice's own pieces: on Deno its node:http listener and undici.
  const bareArgs = runtime === 'deno' ? ['--listener', 'node', '--client', 'undici'] : [];
  const s = bare
    ? await startBare(ctx, runtime, `profile-bare-${runtime}`, bareArgs, flags)
    : await startSluice(ctx, runtime, accessLog, `profile-${runtime}`, flags);
  const t = profileTarget(runtime, bare, accessLog, s);
  const connections = load === 'json50' ? 50 : load === 'json1' ? 1 : 200;
  const body = bodyFor(t, load === 'sse200');
  const what = `${load === 'json50' ? 'JSON/50' : load === 'json1' ? 'JSON/1' : 'SSE/200'}${
    bare ? '' : `, access log ${accessLog ? 'on' : 'off'}`
  }`;
  log(`profiling ${t.label} (pid ${s.proc.pid}) under ${what} for ${secs} s …`);
  await wrk({ url: chatUrl(t), connections, durationS: 2, body, headers: t.headers });
  const cpu0 = cpuSeconds(s.proc.pid);
  let cpu = 0;
  const measure = async () => {
    const r = await wrk({ url: chatUrl(t), connections, durationS: secs, body, headers: t.headers });
    cpu = cpuSeconds(s.proc.pid) - cpu0;
    return r;
  };
  let w: WrkResult;
  let profile: CpuProfile;
  if (runtime === 'deno') {
    const r = await profileOverInspector(inspectPort, 250, measure);
    w = r.result;
    profile = r.profile as CpuProfile; // the inspector's Profiler.stop answer: the same JSON `--cpu-prof` writes
    await stop(s.proc, 15_000);
  } else {
    w = await measure();
    await stop(s.proc, 15_000); // SIGTERM → drain → exit(0), which writes the profile
    const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
    if (files.length === 0) throw new Error(`no .cpuprofile written in ${dir}`);
    profile = JSON.parse(readFileSync(path.join(dir, files[0]!), 'utf8')) as CpuProfile;
  }
  const name = `${bare ? 'bare-' : ''}${runtime}-${load}${bare || accessLog ? '' : '-nolog'}`;
  const keep = path.join(BENCH, 'results', `${name}.cpuprofile`);
  mkdirSync(path.dirname(keep), { recursive: true });
  writeFileSync(keep, JSON.stringify(profile));
  const summary = summarizeProfile(profile, 15);
  const text = [
    `# ${t.label} CPU profile under ${what} — ${new Date().toISOString()}`,
    '',
    `- ${fmtRps(w.rps)} req/s while profiling (the profiler costs some throughput), p50 ${
      fmtMs(w.latency_us.p50 / 1000)
    }, p99 ${fmtMs(w.latency_us.p99 / 1000)}; gateway CPU ${cpu.toFixed(2)} s in ${secs} s (${
      (1e6 * cpu / Math.max(1, w.requests)).toFixed(0)
    } µs per request, every thread)`,
    `- profile: bench/results/${name}.cpuprofile (open in Chrome DevTools or speedscope)`,
    '',
    formatSummary(summary),
    '',
  ].join('\n');
  writeFileSync(path.join(BENCH, 'results', `profile-${name}.md`), text);
  process.stdout.write(`${text}\n`);
}

/** The target a profile run loads: Sluice, or the bare proxy of its pieces, on `runtime`. */
function profileTarget(
  runtime: 'node' | 'deno' | 'bun',
  bare: boolean,
  accessLog: boolean,
  s: { proc: Spawned; port: number },
): Target {
  const label = runtime === 'node' ? 'Node' : runtime === 'bun' ? 'Bun' : 'Deno';
  return bare
    ? {
      id: runtime === 'node' ? 'bare-node' : runtime === 'bun' ? 'bare-bun' : 'bare-deno-nodehttp',
      label: `bare Hono proxy ${label}${runtime === 'deno' ? ' via node:http + undici' : ''}`,
      kind: 'bare',
      runtime,
      accessLog: false,
      port: s.port,
      proc: s.proc,
      headers: { authorization: `Bearer ${UPSTREAM_KEY}` },
      model: 'mock-model',
      peaks: [],
    }
    : {
      id: runtime,
      label: `Sluice ${label}`,
      kind: 'sluice',
      runtime,
      accessLog,
      port: s.port,
      proc: s.proc,
      headers: { authorization: `Bearer ${SLUICE_KEY}` },
      model: 'bench-route',
      peaks: [],
    };
}

// ---------------------------------------------------------------------------------------------- main

/** The commit measured, with `+dirty` when src/ or runtimes/ have uncommitted changes. */
function gitRevision(): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' });
  if (head.status !== 0) return 'outside git';
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'src', 'runtimes', 'build.mjs', 'package.json'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  return `${head.stdout.trim()}${dirty.stdout.trim() ? ' + uncommitted changes in src/runtimes' : ''}`;
}

/** First line a tool prints for its version (wrk prints it and exits 1, so the exit code is ignored). */
function toolVersion(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return r.error ? `${path.basename(cmd)} unavailable` : `${r.stdout}${r.stderr}`.split('\n')[0]!.trim();
}

/** The machine's 1, 5 and 15 minute load averages, as `uptime` prints them. */
const loadAverage = () => os.loadavg().map((x) => x.toFixed(2)).join(', ');

async function main(): Promise<void> {
  const opt = parseOptions(process.argv.slice(2));
  if (spawnSync('wrk', ['--version']).error) throw new Error('wrk is not installed: apt-get install -y wrk');
  if (opt.build) {
    log('building dist/node.mjs (node build.mjs) …');
    execFileSync(process.execPath, ['build.mjs'], { cwd: ROOT, stdio: 'inherit' });
  }
  const revision = gitRevision();
  const loadAtStart = loadAverage();
  const runDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-'));
  if (!opt.keep) onInterrupt(() => rmSync(runDir, { recursive: true, force: true }));
  const started = performance.now();
  const { proc: mock, port: mockPort } = await startMock(runDir, opt.upstream, opt.chunkDelayMs);
  const ctx: Ctx = { opt, runDir, mock, mockPort, targets: new Map(), noisyWaits: 0 };
  log(`run directory ${runDir}; mock upstream (${opt.upstream}) on 127.0.0.1:${mockPort}`);
  try {
    if (opt.profile) {
      await profileMode(ctx);
      return;
    }
    if (opt.targets.includes('portkey')) ensurePortkey();

    const startup = opt.scenarios.includes('startup') ? await startupPhase(ctx) : [];

    // Long-lived targets for the load scenarios, all up at once (idle ones cost nothing) so the scenarios
    // can alternate between them.
    const loadScenarios = opt.scenarios.filter((s) => s !== 'startup');
    const needed = new Set(loadScenarios.flatMap((sc) => scenarioTargets(sc, opt.targets)));
    if (opt.upstream === 'node' && needed.delete('direct-node')) {
      log('--upstream node: "direct" already reaches the node:http mock; direct-node skipped');
    }
    for (const def of targetDefs(ctx)) {
      if (!needed.has(def.id)) continue;
      const t: Target = { ...def, port: mockPort, peaks: [] };
      if (def.id === 'direct-node') {
        const m = await startMock(runDir, 'node', opt.chunkDelayMs, 'mock-upstream-node');
        t.proc = m.proc;
        t.port = m.port;
      } else if (def.kind === 'bare') {
        const flags = def.sluiceFlags && def.runtime === 'deno'
          ? (await denoRunFlags(ROOT)).filter((f) => f !== '-A')
          : [];
        const s = await startBare(ctx, def.runtime!, def.id, def.bareArgs ?? [], flags);
        t.proc = s.proc;
        t.port = s.port;
      } else if (def.kind === 'sluice') {
        const rlEnv: Record<string, string> = def.rateLimit === 'redis'
          ? {
            AISIX_RATELIMIT__BACKEND: 'redis',
            AISIX_RATELIMIT__REDIS__URL: `redis://127.0.0.1:${await startRedisServer(ctx)}`,
          }
          : {};
        const otlpEnv: Record<string, string> = def.id === 'node-otlp'
          ? {
            AISIX_OBSERVABILITY__TRACING__OTLP__ENABLED: 'true',
            AISIX_OBSERVABILITY__TRACING__OTLP__ENDPOINT: `http://127.0.0.1:${await startSink(
              ctx,
              'otlp-sink',
            )}/v1/traces`,
          }
          : def.id === 'node-usage'
          // The Datadog exporter's intake (bench/config/resources-usage.yaml): the same sink, any path answered 200.
          ? { SLUICE_BENCH_DD_SITE: `127.0.0.1:${await startSink(ctx, 'usage-sink')}`, DD_CRED_BENCH_API_KEY: 'bench' }
          : {};
        const s = await startSluice(
          ctx,
          def.runtime!,
          def.accessLog!,
          def.id,
          [],
          { ...rlEnv, ...otlpEnv, ...def.env },
          def.root,
        );
        t.proc = s.proc;
        t.port = s.port;
      } else if (def.kind === 'portkey') {
        const s = await startPortkey(ctx, def.id, def.portkeyRuntime);
        t.proc = s.proc;
        t.port = s.port;
      }
      ctx.targets.set(def.id, t);
    }
    if (ctx.targets.size) log(`targets up: ${[...ctx.targets.values()].map((t) => `${t.id}:${t.port}`).join(' ')}`);
    if (opt.primeS > 0) {
      for (const t of ctx.targets.values()) {
        if (t.kind === 'direct' || t.kind === 'client') continue;
        const r = await wrk({
          url: chatUrl(t),
          connections: 50,
          durationS: opt.primeS,
          body: bodyFor(t, false),
          headers: t.headers,
        });
        log(`primed ${t.id}: ${fmtRps(r.rps)} req/s over ${opt.primeS} s (untimed)`);
      }
    }

    const cells: Cell[] = [];
    for (let round = 0; round < opt.rounds; round++) {
      for (const sc of loadScenarios) {
        let ids = scenarioTargets(sc, opt.targets).filter((id) => ctx.targets.has(id));
        if (round % 2) ids = [...ids].reverse();
        for (const id of ids) {
          const t = ctx.targets.get(id)!;
          const s = await runScenario(ctx, sc, t);
          let cell = cells.find((c) => c.sc === sc && c.t.id === id);
          if (!cell) cells.push(cell = { sc, t, samples: [] });
          cell.samples.push(s);
          log(
            `[round ${round + 1}/${opt.rounds}] ${sc.padEnd(6)} ${id.padEnd(10)} ${
              fmtRps(s.rps).padStart(7)
            } req/s  p50 ${fmtMs(s.p50)}  p99 ${fmtMs(s.p99)}  cpu ${s.cpuS.toFixed(2)} s${
              s.errors ? `  errors ${s.errors}` : ''
            }  (${((performance.now() - started) / 1000).toFixed(0)} s)`,
          );
        }
      }
    }

    // Resident memory after all that load (let timers and GC settle first).
    if (ctx.targets.size) await sleep(1500);
    for (const t of ctx.targets.values()) {
      if (t.kind !== 'sluice' && t.kind !== 'portkey') continue;
      const id = t.accessLog === false ? undefined : t.id;
      if (id) memAfter.set(id, { after: rssMb(t.proc!.pid), peak: t.peaks.length ? Math.max(...t.peaks) : NaN });
    }

    const meta = [
      `sluice ${revision} (as built at the start of the run)`,
      `machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${
        Math.round(os.totalmem() / 2 ** 30)
      } GiB; ${os.type()} ${os.release()}`,
      `node ${process.version}, bun ${toolVersion(path.join(BIN, 'bun'), ['--version'])}, ${
        toolVersion(path.join(BIN, 'deno'), ['--version'])
      }, ${toolVersion('wrk', ['--version']).replace(/ Copyright.*/, '')}`,
      `rounds ${opt.rounds} (targets alternate; cells are medians), ${opt.warmupS} s warm-up + ${opt.durationS} s measured per run, wrk -t1; mock upstream on ${opt.upstream}, SSE ${20} chunks ${opt.chunkDelayMs} ms apart`,
      `ceilings: "bare Hono proxy" rows are bench/bare-proxy.ts (one POST route forwarding to the same mock: @hono/node-server + undici.request on Node, Bun.serve/Deno.serve + fetch on Bun/Deno), ×bare = Sluice ÷ the bare proxy of its runtime; "via node:http" rows bind the bare proxy through the runtime's node:http layer, as Sluice does on Bun and Deno (on Deno with undici as Sluice's client there); "no framework" is a plain node:http handler with undici.request, the ceiling of any Node proxy made of those two; "undici.request client alone" is bench/undici-client.ts at the mock, no server in between; "direct (mock on node)" is a second mock on node:http`,
      `Sluice: bench/config (auth on, routing model bench-route → bench-direct, metrics listener on, access log to a file; "no access log" rows set observability.access_log=false); Portkey ${PORTKEY_VERSION} with @hono/node-server ${PORTKEY_NODE_SERVER}, x-portkey-provider: openai + x-portkey-custom-host`,
      `load average (uptime) at the start ${loadAtStart}, at the end ${loadAverage()}`,
      // The gateways inherit it, and it becomes `upstream.tls`'s CA: on Bun a cost on every upstream call.
      ...(process.env.SSL_CERT_FILE
        ? [`SSL_CERT_FILE=${process.env.SSL_CERT_FILE} reaches every gateway (docs/performance.md "Current figures")`]
        : []),
      `wall time ${((performance.now() - started) / 1000).toFixed(0)} s${
        ctx.noisyWaits
          ? `; ${ctx.noisyWaits} measurement(s) started while other processes were busy (see ⚠ in detail)`
          : ''
      }`,
    ];
    const md = `${report(ctx, cells, startup, meta)}\n## Targets (issue 51)\n\n${goalsReport(cells)}\n`;
    mkdirSync(path.join(BENCH, 'results'), { recursive: true });
    writeFileSync(path.join(BENCH, 'results', 'latest.md'), md);
    writeFileSync(
      path.join(BENCH, 'results', 'latest.json'),
      `${
        JSON.stringify(
          {
            options: opt,
            meta,
            startup,
            cells: cells.map((c) => ({ scenario: c.sc, target: c.t.id, samples: c.samples })),
            memory: Object.fromEntries(memAfter),
          },
          null,
          2,
        )
      }\n`,
    );
    process.stdout.write(`\n${md}\n`);
    log('written to bench/results/latest.md (raw samples: bench/results/latest.json)');
  } finally {
    await stopAll(5000);
    if (!opt.keep) rmSync(runDir, { recursive: true, force: true });
    else log(`kept ${runDir}`);
  }
}

main().catch(async (e: unknown) => {
  process.stderr.write(`bench: ${(e as Error)?.stack ?? String(e)}\n`);
  await stopAll(2000);
  process.exit(1);
});
