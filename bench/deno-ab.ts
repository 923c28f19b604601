// A/B of V8 flags for Sluice on Deno, alternating in one run (docs/performance.md "Decisions on the hot path").
// Each variant is a Sluice Deno process under runtimes/deno-launch.ts's flags with V8 flags added or removed;
// beside them the mock reached directly and the bare `Deno.serve` proxy (bench/bare-proxy.ts). Every round:
//   1. each gateway idles `--idle` seconds since its last load (V8's memory reducer acts on an idle isolate),
//      then its RSS is read: the idle RSS after load;
//   2. one caller (JSON/1): 1 s warm-up, `--duration` s measured: p50 and CPU per request (every thread);
//   3. JSON/50: 1 s warm-up, `--duration` s measured: req/s, CPU per request, peak RSS, and the RSS right after.
// The order of the variants flips every round. Prints one line per measurement and a table of medians.
//
//   node --import tsx bench/deno-ab.ts --variant off= --variant on=--no-memory-reducer --rounds 3
//   … --variant 'without=!--no-memory-reducer' --variant with=   ('!' removes a flag of the launch flags)
//   … --trace on                                                  (stderr of the gateways kept in the run folder)
import { mkdtempSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  benchGatewayEnv,
  cpuSeconds,
  freePort,
  launch,
  peakRssMb,
  resetPeakRss,
  rssMb,
  sleep,
  type Spawned,
  stopAll,
  waitFor200,
  wrkPost,
  type WrkSummary,
} from './proc.ts';
import { DENO_RUN_FLAGS } from '../runtimes/deno-launch.ts';
import { median } from './stats.ts';

const BENCH = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(BENCH, '..');
const BIN = path.join(ROOT, 'node_modules', '.bin');

function opts(argv: string[]) {
  const variants: { name: string; v8: string[] }[] = [];
  const o = { rounds: 3, idleS: 60, durationS: 5, primeS: 10, variants, bare: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--variant') {
      const v = next();
      const eq = v.indexOf('=');
      if (eq < 1) throw new Error(`--variant ${v}: write name=flag,flag (or name= for the launch flags alone)`);
      variants.push({ name: v.slice(0, eq), v8: v.slice(eq + 1).split(',').filter(Boolean) });
    } else if (a === '--rounds') o.rounds = Number(next());
    else if (a === '--idle') o.idleS = Number(next());
    else if (a === '--duration') o.durationS = Number(next());
    else if (a === '--prime') o.primeS = Number(next());
    else if (a === '--no-bare') o.bare = false;
    else throw new Error(`unknown option ${a} (see the head of bench/deno-ab.ts)`);
  }
  if (variants.length < 1) throw new Error('give at least one --variant name=v8flags');
  return o;
}

/** The launch flags with `v8` applied: `--x` added to `--v8-flags`, `!--x` removed from it. */
export function variantFlags(v8: readonly string[]): string[] {
  const v8Arg = DENO_RUN_FLAGS.find((f) => f.startsWith('--v8-flags='));
  let list = v8Arg ? v8Arg.slice('--v8-flags='.length).split(',') : [];
  for (const f of v8) list = f.startsWith('!') ? list.filter((x) => x !== f.slice(1)) : [...list, f];
  const rest = DENO_RUN_FLAGS.filter((f) => !f.startsWith('--v8-flags='));
  return list.length ? [...rest, `--v8-flags=${list.join(',')}`] : rest;
}

interface Target {
  name: string;
  proc: Spawned;
  port: number;
  headers: Record<string, string>;
  model: string;
  lastLoad: number;
}

async function wrk(t: Target, connections: number, durationS: number): Promise<WrkSummary> {
  const r = await wrkPost(`http://127.0.0.1:${t.port}/v1/chat/completions`, {
    connections,
    seconds: durationS,
    timeoutS: 10,
    headers: Object.entries(t.headers).map(([k, v]) => `${k}: ${v}`).join('|'),
    body: JSON.stringify({ model: t.model, messages: [{ role: 'user', content: 'Say hello.' }] }),
  });
  t.lastLoad = performance.now();
  return r;
}

interface Sample {
  target: string;
  round: number;
  scenario: 'json1' | 'json50';
  rps: number;
  p50Us: number;
  cpuUsPerReq: number;
  peakMb: number;
  afterMb: number;
  idleMb: number;
}

async function measure(t: Target, scenario: Sample['scenario'], durationS: number, round: number): Promise<Sample> {
  const c = scenario === 'json1' ? 1 : 50;
  await wrk(t, c, 1);
  resetPeakRss(t.proc.pid);
  const cpu0 = cpuSeconds(t.proc.pid);
  const r = await wrk(t, c, durationS);
  const cpu = cpuSeconds(t.proc.pid) - cpu0;
  const errors = Object.values(r.errors).reduce((a, b) => a + b, 0);
  if (errors) throw new Error(`${t.name}: ${errors} errors under ${scenario}`);
  return {
    target: t.name,
    round,
    scenario,
    rps: r.requests / (r.duration_us / 1e6),
    p50Us: r.latency_us.p50,
    cpuUsPerReq: (cpu * 1e6) / r.requests,
    peakMb: peakRssMb(t.proc.pid),
    afterMb: rssMb(t.proc.pid),
    idleMb: NaN,
  };
}

async function main(): Promise<void> {
  const o = opts(process.argv.slice(2));
  const runDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-deno-ab-'));
  const mockPort = await freePort();
  const mock = launch(path.join(BIN, 'bun'), [path.join(BENCH, 'mock-upstream.mjs'), '--port', String(mockPort)], {
    cwd: ROOT,
    logFile: path.join(runDir, 'mock.log'),
  });
  await waitFor200(`http://127.0.0.1:${mockPort}/livez`, performance.now(), { exited: mock.exited });
  const upstream = { headers: { authorization: 'Bearer sk-bench-upstream' }, model: 'mock-model', lastLoad: 0 };
  const direct: Target = { name: 'direct', proc: mock, port: mockPort, ...upstream };
  const targets: Target[] = [];
  if (o.bare) {
    const port = await freePort();
    const logFile = path.join(runDir, 'bare.log');
    const args = [
      path.join(BENCH, 'bare-proxy.ts'),
      '--port',
      String(port),
      '--upstream',
      `http://127.0.0.1:${mockPort}`,
    ];
    const proc = launch(path.join(BIN, 'deno'), ['run', '-A', ...args], { cwd: ROOT, logFile });
    // The bare proxy has no GET route: any answer means it listens.
    for (let i = 0; i < 600; i++) {
      const ok = await fetch(`http://127.0.0.1:${port}/`).then(() => true, () => false);
      if (ok) break;
      await sleep(100);
    }
    targets.push({ name: 'bare Deno.serve', proc, port, ...upstream });
  }
  for (const v of o.variants) {
    const port = await freePort();
    const flags = variantFlags(v.v8);
    const env = await benchGatewayEnv(mockPort, port);
    const args = ['run', ...flags, 'runtimes/deno.ts', '--config', 'bench/config/config.yaml'];
    const proc = launch(path.join(BIN, 'deno'), args, { cwd: ROOT, env, logFile: path.join(runDir, `${v.name}.log`) });
    await waitFor200(`http://127.0.0.1:${port}/readyz`, performance.now(), { exited: proc.exited, timeoutMs: 60_000 });
    process.stderr.write(`deno-ab: ${v.name}: deno ${args.join(' ')} (pid ${proc.pid})\n`);
    targets.push({
      name: v.name,
      proc,
      port,
      headers: { authorization: 'Bearer sk-sluice-bench' },
      model: 'bench-route',
      lastLoad: 0,
    });
  }
  for (const t of targets) await wrk(t, 50, o.primeS);

  const samples: Sample[] = [];
  const print = (s: Sample) =>
    process.stdout.write(
      `round ${s.round} ${s.scenario} ${s.target}: ${Math.round(s.rps)} req/s, p50 ${s.p50Us} µs, ${
        s.cpuUsPerReq.toFixed(1)
      } µs CPU/req, peak ${s.peakMb.toFixed(1)} MB, after ${s.afterMb.toFixed(1)} MB, idle before ${
        s.idleMb.toFixed(1)
      } MB (load ${os.loadavg()[0]!.toFixed(2)})\n`,
    );
  for (let round = 1; round <= o.rounds; round++) {
    const order = round % 2 ? targets : [...targets].reverse();
    const idleMb = new Map<string, number>();
    for (const t of order) {
      const wait = t.lastLoad + o.idleS * 1000 - performance.now();
      if (wait > 0) await sleep(wait);
      idleMb.set(t.name, rssMb(t.proc.pid));
    }
    for (const t of [direct, ...order]) {
      const s = await measure(t, 'json1', o.durationS, round);
      s.idleMb = idleMb.get(t.name) ?? NaN;
      samples.push(s);
      print(s);
    }
    for (const t of order) {
      const s = await measure(t, 'json50', o.durationS, round);
      samples.push(s);
      print(s);
    }
  }
  // Medians over rounds; one caller's added p50 is over the direct p50 of the same round.
  const directP50 = new Map(samples.filter((s) => s.target === 'direct').map((s) => [s.round, s.p50Us]));
  const rows = [
    '| target | JSON/1 added p50 | JSON/1 CPU/req | JSON/50 req/s | JSON/50 CPU/req | peak RSS | RSS after | idle RSS |',
  ];
  rows.push('|---|---:|---:|---:|---:|---:|---:|---:|');
  const fmt = (xs: number[], d = 0) => `${median(xs).toFixed(d)} (${xs.map((x) => x.toFixed(d)).join(', ')})`;
  for (const t of targets) {
    const one = samples.filter((s) => s.target === t.name && s.scenario === 'json1');
    const fifty = samples.filter((s) => s.target === t.name && s.scenario === 'json50');
    rows.push(
      `| ${t.name} | ${fmt(one.map((s) => s.p50Us - directP50.get(s.round)!))} | ${
        fmt(one.map((s) => s.cpuUsPerReq))
      } | ${fmt(fifty.map((s) => s.rps))} | ${fmt(fifty.map((s) => s.cpuUsPerReq))} | ${
        fmt(fifty.map((s) => s.peakMb))
      } | ${fmt(fifty.map((s) => s.afterMb))} | ${fmt(one.map((s) => s.idleMb))} |`,
    );
  }
  process.stdout.write(
    `\n${rows.join('\n')}\n\nidle RSS: after ${o.idleS} s idle, before the round's load; gateways' logs: ${runDir}\n`,
  );
  writeFileSync(path.join(runDir, 'samples.json'), JSON.stringify(samples, null, 1));
}

main().then(() => stopAll(), async (e: Error) => {
  process.stderr.write(`deno-ab: ${e.message}\n`);
  await stopAll();
  process.exit(1);
});
