// Machine instructions per proxied request of the Node gateway, this tree against another built tree: each
// runs under valgrind's callgrind, which counts instructions rather than time, so the figure repeats within
// about 1% whatever else the machine does (docs/performance.md "How the figures are measured"). Per
// run: the bench configuration (bench/config), the mock upstream on Bun, `--warmup` requests uncounted (long
// enough for the optimising compiler to finish: its work counts too), then `--requests` counted, four in
// flight over keep-alive connections. The trees alternate run by run; the table gives every run and the
// ratio of the medians. `--stream` asks for streams instead: 20 chunks 1 ms apart each (the mock's
// `bench-scale` body), 16 in flight, so the count is per stream.
//
//   apt-get install -y valgrind
//   node --import tsx bench/instructions.ts --baseline /tmp/ab-old [--requests 3000] [--warmup 10000] [--rounds 3]
//     [--in-flight 4]
//   node --import tsx bench/instructions.ts --baseline /tmp/ab-old --stream --requests 1000 --warmup 3000
// `--keep` leaves callgrind's dumps in the run directory it names, for `callgrind_annotate` (docs/performance.md
// "How the figures are measured": the optimising compiler's and the collector's part, apart from the rest).
// `--perf-map` also has V8 write /tmp/perf-<pid>.map (`--perf-basic-prof`), whose addresses name the JIT code
// callgrind shows as `???:0x…` (bench/results/pipeline-2026-12-05.md "Naming the JIT code").
// `--bare` adds the bare Hono proxy on Node (bench/bare-proxy.ts) as one more tree: its count is the ceiling's, so
// this tree's less the bare proxy's is the work Sluice adds per request.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../test/support/process.ts';
import { BENCH_CHAT, sendChats } from './chat-post.ts';
import { flag, has } from './flags.ts';
import { startBenchMock, startUntil } from './proc.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const BASELINE = flag('baseline', '');
const REQUESTS = Number(flag('requests', '3000'));
const WARMUP = Number(flag('warmup', '10000'));
const ROUNDS = Number(flag('rounds', '3'));
const STREAM = has('stream');
const KEEP = has('keep');
const PERF_MAP = has('perf-map');
const BARE = has('bare');
const IN_FLIGHT = Number(flag('in-flight', STREAM ? '16' : '4'));
const UNIT = STREAM ? 'stream' : 'request';
const BODY = STREAM
  ? '{"model":"bench-route","stream":true,"user":"bench-scale:1:20","messages":[{"role":"user","content":"hi"}]}'
  : BENCH_CHAT;

if (spawnSync('valgrind', ['--version']).error) {
  console.error('bench/instructions.ts needs valgrind: apt-get install -y valgrind');
  process.exit(1);
}

const work = mkdtempSync(path.join(tmpdir(), 'sluice-instructions-'));
process.on('exit', () => {
  if (KEEP) console.error(`instructions: callgrind's dumps kept in ${work}`);
  else rmSync(work, { recursive: true, force: true });
});

/** The total of `summary:` lines of callgrind's dumps named `prefix*` (the exit dump after `-i off` is left out). */
function instructionsOf(prefix: string): number {
  let total = 0;
  for (const f of readdirSync(work).filter((f) => f.startsWith(prefix))) {
    const m = /^summary: (\d+)$/m.exec(readFileSync(path.join(work, f), 'utf8'));
    const n = m ? Number(m[1]) : 0;
    if (n < 1e15) total += n; // callgrind writes the exit dump as the negated last count
  }
  return total;
}

/** What runs under callgrind for `tree` (`bare`: the bare Hono proxy) on `port`. */
function gatewayArgs(tree: string, port: number, mockPort: number): string[] {
  if (tree === 'bare') {
    const up = `http://127.0.0.1:${mockPort}`;
    return ['--import', 'tsx', path.join(ROOT, 'bench/bare-proxy.ts'), '--port', String(port), '--upstream', up];
  }
  return [path.join(tree, 'bin/sluice'), '--config', path.join(ROOT, 'bench/config/config.yaml')];
}

/** One run: the tree's gateway under callgrind; instructions per counted request. */
async function run(tree: string, label: string, mockPort: number): Promise<number> {
  const port = await freePort();
  const out = `cg-${label}-${Date.now()}`;
  const env = {
    ...process.env,
    SLUICE_BENCH_UPSTREAM: `http://127.0.0.1:${mockPort}/v1`,
    AISIX_PROXY__ADDR: `127.0.0.1:${port}`,
    AISIX_OBSERVABILITY__METRICS__PROMETHEUS__ADDR: `127.0.0.1:${await freePort()}`,
  };
  const gw = await startUntil(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      '--smc-check=all-non-file', // V8 writes the code it runs
      `--callgrind-out-file=${path.join(work, out)}`,
      process.execPath,
      ...(PERF_MAP ? ['--perf-basic-prof'] : []),
      ...gatewayArgs(tree, port, mockPort),
    ],
    env,
    /"listening"|listening on|bare-proxy listening/,
  );
  await sendChats(port, WARMUP, IN_FLIGHT, BODY);
  const control = (...args: string[]) => spawnSync('callgrind_control', [...args, String(gw.pid)], { stdio: 'ignore' });
  control('-i', 'on');
  await sendChats(port, REQUESTS, IN_FLIGHT, BODY);
  control('-d');
  control('-i', 'off');
  const exited = new Promise((r) => gw.once('exit', r));
  gw.kill('SIGKILL');
  await exited;
  if (PERF_MAP) console.error(`instructions: ${label}: dump ${out}, V8's code map /tmp/perf-${gw.pid}.map`);
  return instructionsOf(out) / REQUESTS;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

const mockPort = await startBenchMock();
const trees: [string, string][] = [
  ['this tree', ROOT],
  ...(BASELINE ? [['baseline', path.resolve(BASELINE)] as [string, string]] : []),
  ...(BARE ? [['bare proxy', 'bare'] as [string, string]] : []),
];
const runs = new Map<string, number[]>(trees.map(([l]) => [l, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const [label, tree] of round % 2 ? [...trees].reverse() : trees) {
    const ir = await run(tree, label.replace(' ', '-'), mockPort);
    runs.get(label)!.push(ir);
    console.error(
      `instructions: round ${round + 1}/${ROUNDS} ${label}: ${Math.round(ir).toLocaleString('en')} per ${UNIT}`,
    );
  }
}
console.log(
  `\n${REQUESTS} counted ${UNIT}s per run after ${WARMUP} uncounted, ${IN_FLIGHT} in flight; Node gateway under callgrind\n`,
);
console.log(`| tree | instructions per ${UNIT}, by run | median |`);
console.log('| --- | --- | ---: |');
for (const [label, tree] of trees) {
  const xs = runs.get(label)!;
  const rev = tree === 'bare'
    ? 'bench/bare-proxy.ts'
    : spawnSync('git', ['-C', tree, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim();
  console.log(
    `| ${label} (${rev}) | ${xs.map((x) => Math.round(x).toLocaleString('en')).join(', ')} | ${
      Math.round(median(xs)).toLocaleString('en')
    } |`,
  );
}
if (BASELINE) {
  const ratio = median(runs.get('this tree')!) / median(runs.get('baseline')!);
  console.log(`\nthis tree ÷ baseline: ${ratio.toFixed(3)}× instructions per ${UNIT}`);
}
if (BARE) {
  const added = median(runs.get('this tree')!) - median(runs.get('bare proxy')!);
  console.log(`\nthis tree less the bare proxy: ${Math.round(added).toLocaleString('en')} instructions per ${UNIT}`);
}
process.exit(0);
