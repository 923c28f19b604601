// How much of what a gateway allocates outlives V8's young-generation collections (scavenges), and what
// those collections then cost: a gateway whose finished requests survive them copies and promotes them, so
// its scavenges take milliseconds and stall every stream in flight (docs/performance.md "Streams and the
// young generation"). Starts the mock upstream and one Sluice with V8's `--trace-gc-nvp`, puts one load on
// it, and reads the scavenges of the measured seconds from the gateway's output.
//
//   node --import tsx bench/young-gen.ts [--runtime node|deno] [--load stream|json] [--seconds 8]
//     [--concurrency 1] [--rounds 2] [--trees /path/a,/path/b]   # trees: built checkouts, alternating
//
// Prints one table row per tree (medians over rounds). Talks only to 127.0.0.1.
import { readFileSync, rmSync, statSync } from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { postChat } from './chat-post.ts';
import { denoRunFlags } from './deno-flags.ts';
import { flag } from './flags.ts';
import { freePort, launch, stop, waitFor200 } from './proc.ts';
import { median, percentile } from './stats.ts';
import { runTtfb } from './ttfb.ts';

const BENCH = path.dirname(new URL(import.meta.url).pathname);
const ROOT = path.dirname(BENCH);
const BIN = path.join(ROOT, 'node_modules', '.bin');
const RUNTIME = flag('runtime', 'node');
const LOAD = flag('load', 'stream');
const SECONDS = Number(flag('seconds', '8'));
const CONCURRENCY = Number(flag('concurrency', '1'));
const ROUNDS = Number(flag('rounds', '2'));
const TREES = flag('trees', ROOT).split(',').map((t) => path.resolve(t));
const WARMUP_S = 2;
const KEY = 'sk-sluice-bench';

/** One scavenge as V8 reports it (Node prints `key=value` pairs, Deno's V8 a JSON object). */
interface Scavenge {
  pauseMs: number;
  allocated: number;
  survived: number;
}

function scavenges(log: string): Scavenge[] {
  const out: Scavenge[] = [];
  for (const line of log.split('\n')) {
    if (!line.includes('gc=s ') && !line.includes('"gc":"s"')) continue;
    const num = (k: string) => Number(new RegExp(`"?${k}"?[=:]([\\d.]+)`).exec(line)?.[1] ?? NaN);
    const s = {
      pauseMs: num('pause'),
      allocated: num('allocated'),
      survived: num('new_space_survived'),
    };
    if (!Object.values(s).some(Number.isNaN)) out.push(s); // a line cut by the process's end
  }
  return out;
}

async function command(tree: string, config: string): Promise<[string, string[]]> {
  if (RUNTIME === 'deno') {
    // The tree's own Deno flags, V8's trace added to their `--v8-flags` (or as the only one).
    const own = await denoRunFlags(tree);
    const flags = own.some((f) => f.startsWith('--v8-flags='))
      ? own.map((f) => f.startsWith('--v8-flags=') ? `${f},--trace-gc-nvp` : f)
      : [...own, '--v8-flags=--trace-gc-nvp'];
    return [path.join(BIN, 'deno'), ['run', ...flags, path.join(tree, 'runtimes', 'deno.ts'), '--config', config]];
  }
  return [process.execPath, ['--trace-gc-nvp', path.join(tree, 'bin', 'sluice'), '--config', config]];
}

/** Back-to-back JSON chat requests on `CONCURRENCY` keep-alive connections for `ms`; how many completed. */
async function jsonLoad(port: number, ms: number): Promise<number> {
  const body = JSON.stringify({ model: 'bench-route', messages: [{ role: 'user', content: 'hi' }] });
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const headers = {
    authorization: `Bearer ${KEY}`,
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
  };
  const end = performance.now() + ms;
  let n = 0;
  const one = () => postChat(agent, port, body, headers);
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (performance.now() < end) {
      await one();
      n++;
    }
  }));
  agent.destroy();
  return n;
}

async function load(port: number, ms: number): Promise<number> {
  if (LOAD === 'json') return jsonLoad(port, ms);
  const body = JSON.stringify({
    model: 'bench-route',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
    user: 'bench-scale:5:2', // two chunks 5 ms apart (mock-upstream.mjs)
  });
  const r = await runTtfb({
    url: `http://127.0.0.1:${port}/v1/chat/completions`,
    headers: { authorization: `Bearer ${KEY}` },
    body,
    concurrency: CONCURRENCY,
    durationMs: ms,
  });
  if (r.errors > 0) throw new Error(`stream load: ${r.errors} errors (${r.firstError})`);
  return r.streams;
}

interface Round {
  requests: number;
  scavenges: Scavenge[];
}

async function round(tree: string, mockPort: number, dir: string): Promise<Round> {
  const [port, statusPort] = [await freePort(), await freePort()];
  const logFile = path.join(dir, `young-gen-${process.pid}-${port}.log`);
  const [cmd, args] = await command(tree, path.join(BENCH, 'config', 'config.yaml'));
  const env = {
    ...process.env,
    NODE_OPTIONS: '',
    SLUICE_BENCH_UPSTREAM: `http://127.0.0.1:${mockPort}/v1`,
    AISIX_PROXY__ADDR: `127.0.0.1:${port}`,
    AISIX_OBSERVABILITY__METRICS__PROMETHEUS__ADDR: `127.0.0.1:${statusPort}`,
    AISIX_OBSERVABILITY__ACCESS_LOG: 'true',
  };
  const gw = launch(cmd, args, { cwd: tree, env, logFile });
  try {
    await waitFor200(`http://127.0.0.1:${port}/readyz`, performance.now(), { exited: gw.exited, timeoutMs: 60_000 });
    await load(port, WARMUP_S * 1000);
    const before = statSync(logFile).size;
    const requests = await load(port, SECONDS * 1000);
    const after = statSync(logFile).size;
    const text = readFileSync(logFile).subarray(before, after).toString('utf8');
    return { requests, scavenges: scavenges(text) };
  } finally {
    await stop(gw);
    rmSync(logFile, { force: true });
  }
}

const kb = (bytes: number) => (bytes / 1024).toFixed(1);

async function main(): Promise<void> {
  const dir = process.env.TMPDIR ?? '/tmp';
  const mockPort = await freePort();
  // The mock on Node (node:http), whatever the gateway's runtime: one upstream for every tree and runtime.
  const mock = launch(process.execPath, [path.join(BENCH, 'mock-upstream.mjs'), '--port', String(mockPort)]);
  try {
    await waitFor200(`http://127.0.0.1:${mockPort}/livez`, performance.now(), { exited: mock.exited });
    const rounds = new Map<string, Round[]>(TREES.map((t) => [t, []]));
    for (let i = 0; i < ROUNDS; i++) {
      for (const tree of i % 2 === 0 ? TREES : [...TREES].reverse()) {
        const r = await round(tree, mockPort, dir);
        rounds.get(tree)!.push(r);
        console.error(
          `young-gen: round ${i + 1}/${ROUNDS} ${tree}: ${r.requests} requests, ${r.scavenges.length} scavenges`,
        );
      }
    }
    console.log(
      `| ${RUNTIME}, ${LOAD} load, ${CONCURRENCY} at a time, ${SECONDS} s × ${ROUNDS} | requests | scavenges | ` +
        'KB allocated / request | KB surviving a scavenge / request | survived % | scavenge pause p50 / max (ms) |',
    );
    console.log('|---|---:|---:|---:|---:|---:|---|');
    for (const [tree, rs] of rounds) {
      const per = (f: (s: Scavenge) => number) =>
        median(rs.map((r) => r.scavenges.reduce((a, s) => a + f(s), 0) / r.requests));
      const pauses = rs.flatMap((r) => r.scavenges.map((s) => s.pauseMs));
      const alloc = per((s) => s.allocated);
      const surv = per((s) => s.survived);
      console.log(
        `| ${tree} | ${median(rs.map((r) => r.requests))} | ${median(rs.map((r) => r.scavenges.length))} | ` +
          `${kb(alloc)} | ${kb(surv)} | ${(100 * surv / alloc).toFixed(1)} | ` +
          `${pauses.length ? `${percentile(pauses, 50).toFixed(2)} / ${Math.max(...pauses).toFixed(2)}` : '—'} |`,
      );
    }
  } finally {
    await stop(mock);
  }
}

await main();
