// Machine instructions per proxied request of the Node gateway, this tree against another built tree: each
// runs under valgrind's callgrind, which counts instructions rather than time, so the figure repeats within
// about 1% whatever else the machine does (docs/performance.md "How the figures are measured"). Per
// run: the bench configuration (bench/config), the mock upstream on Bun, `--warmup` requests uncounted (long
// enough for the optimising compiler to finish: its work counts too), then `--requests` counted, four in
// flight over keep-alive connections. The trees alternate run by run; the table gives every run and the
// ratio of the medians, of the total and of the work: the total less the optimising compiler's and the
// collector's functions (classed by name from `callgrind_annotate`), which move by far more than a change.
// `--stream` asks for streams instead: 20 chunks 1 ms apart each (the mock's `bench-scale` body), 16 in
// flight, so the count is per stream.
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
// `--cache-sim` also has callgrind simulate the caches (32 KiB 8-way L1s for code and data, a 512 KiB 8-way L2 as
// the last level: an EPYC core's, as this VM shows no cache sizes) and prints their misses per request, what an
// instruction count cannot show on a machine without hardware counters (bench/README.md "Instructions per request,
// against another tree"). `--gateway-flags "<flags>"` passes V8 or Node flags to the gateway's `node`.
// `--footprint` also counts the distinct 64-byte lines of machine code the work ran in the counted window (callgrind's
// `--dump-instr`): the code a request's path is spread over, which an instruction count does not show
// (docs/performance.md "The contract's floor").
// `--by-function [N]` (implies `--footprint`) names the hot lines: a binary's by callgrind's function, the JIT code's
// by V8's code map and the bundle's source map (bench/code-owners.ts). Per tree a table by whose code and the N
// functions with the most (30); with a second tree, the N functions whose lines differ most.
// `--runtime deno` runs Sluice (and with `--bare`, the bare proxy) on Deno instead, each thread counted apart
// (`--separate-threads`): Deno's binary carries no symbols to class the compiler's and the collector's functions
// by, so the work is the main thread's count, the other threads' (compilers, helpers) apart. `--bare-flags
// "<flags>"` passes bench/bare-proxy.ts its own (`--listener node --client undici`: Sluice's pieces on Deno). Bun
// does not run under Debian's valgrind 3.19, which lacks its event loop's `epoll_pwait2`.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../test/support/process.ts';
import { BENCH_CHAT, sendChats } from './chat-post.ts';
import { codeOwners, type HotLine, type OwnedFunction } from './code-owners.ts';
import { denoRunFlags } from './deno-flags.ts';
import { flag, has } from './flags.ts';
import { benchGatewayEnv, startBenchMock, startUntil } from './proc.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const BASELINE = flag('baseline', '');
const REQUESTS = Number(flag('requests', '3000'));
const WARMUP = Number(flag('warmup', '10000'));
const ROUNDS = Number(flag('rounds', '3'));
const STREAM = has('stream');
const KEEP = has('keep');
const PERF_MAP = has('perf-map') || has('by-function');
const BARE = has('bare');
const CACHE_SIM = has('cache-sim');
/** `--by-function [N]`: the hot lines named by function (bench/code-owners.ts); N functions printed (30). */
const BY_FUNCTION = has('by-function') ? Number(flag('by-function', '30')) || 30 : 0;
const FOOTPRINT = has('footprint') || BY_FUNCTION > 0;
/** V8 or Node flags for the gateway's `node` (not the bare proxy's), e.g. an inlining limit to try. */
const GATEWAY_FLAGS = flag('gateway-flags', '').split(' ').filter(Boolean);
/** bench/bare-proxy.ts's own flags, e.g. `--listener node --client undici`: Sluice's pieces on Deno. */
const BARE_FLAGS = flag('bare-flags', '').split(' ').filter(Boolean);
const RUNTIME = flag('runtime', 'node');
if (RUNTIME !== 'node' && RUNTIME !== 'deno') {
  console.error(
    `bench/instructions.ts: --runtime is node or deno, not "${RUNTIME}"` +
      (RUNTIME === 'bun' ? " (Bun's event loop needs epoll_pwait2, which valgrind 3.19 does not have)" : ''),
  );
  process.exit(2);
}
if (RUNTIME !== 'node' && GATEWAY_FLAGS.length) {
  console.error('bench/instructions.ts: --gateway-flags is for --runtime node');
  process.exit(2);
}
/** Node's binary has symbols: its compiler and collector are classed by function name; Deno's by thread. */
const BY_THREAD = RUNTIME === 'deno';
const BIN = path.join(ROOT, 'node_modules', '.bin');
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

/** One run's instructions: the total, and the optimising compiler's and the collector's parts of it. */
interface Count {
  total: number;
  /** The total less the optimising compiler and the collector (Node), or the main thread's count (Deno). */
  work: number;
  /** Node only: the compiler's and the collector's functions (on Deno the other threads are `total - work`). */
  compiler: number;
  gc: number;
  /** `--cache-sim`: misses per event name (`I1mr`, `D1mr`, `D1mw`, `ILmr`, `DLmr`, `DLmw`). */
  misses: Record<string, number>;
  /** `--footprint`: distinct 64-byte code lines the work ran in the window (not per request). */
  lines: number;
  /** `--footprint`: of those, the lines that ran at least as many instructions as requests were counted. */
  hotLines: number;
  /** `--by-function`: the hot lines, each with the function callgrind names its first address by. */
  hot: HotLine[];
  /** `--by-function`: the functions that hold the hot lines, most first. */
  owners?: OwnedFunction[];
}

/** The cache events `--cache-sim` adds to callgrind's `Ir`. */
const MISS_EVENTS = ['I1mr', 'D1mr', 'D1mw', 'ILmr', 'DLmr', 'DLmw'] as const;
/** The simulated caches: an EPYC core's L1s, and its L2 as callgrind's last level. */
const CACHES = ['--cache-sim=yes', '--I1=32768,8,64', '--D1=32768,8,64', '--LL=524288,8,64'];

/** Functions of V8's optimising compilers (TurboFan, Maglev, Turboshaft) and their zones, by callgrind's name. */
const COMPILER =
  /v8::internal::compiler::|maglev|Maglev|turboshaft|Turboshaft|RegisterAllocator|InstructionSelector|v8::internal::Zone/;
/** Functions of V8's collector: marking, scavenging, sweeping, compaction and the heap's own bookkeeping. */
const GC =
  /Heap|Marking|Marker|Scavenge|Sweep|Evacuat|MemoryChunk|ActiveSystemPages|SlotSet|RememberedSet|IterateObjectCache|Visitor|Compactor|GCTracer|MarkCompact|MinorMC|Worklist|CppHeap|cppgc|SizeFromMap/;

/**
 * The 64-byte code lines a dump ran, each with its instructions, into `into` (the dump written with
 * `--dump-instr=yes --compress-pos=no --compress-strings=no`: every position an address within its object `ob=`, every
 * name in full). `byName`: the compiler's and the collector's functions left out (Node); else all of them (the main
 * thread's dump on Deno). The line after `calls=` is a call's inclusive cost, not code run at its address: skipped.
 */
function codeLines(dump: string, into: Map<string, number>, byName: boolean, names?: Map<string, string>): void {
  let ob = '';
  let fn = '';
  let skipNext = false;
  for (const line of dump.split('\n')) {
    if (line.startsWith('ob=')) ob = line.slice(3);
    else if (line.startsWith('fn=')) fn = line.slice(3);
    else if (line.startsWith('calls=')) skipNext = true;
    else if (line.startsWith('0x')) {
      if (skipNext) skipNext = false;
      else if (!byName || !(COMPILER.test(fn) || GC.test(fn))) {
        const [addr, ir] = line.split(' ');
        const at = `${ob} ${Math.floor(Number.parseInt(addr!, 16) / 64)}`;
        if (Number(ir) > 0) into.set(at, (into.get(at) ?? 0) + Number(ir));
        if (names && !names.has(at)) names.set(at, fn);
      }
    }
  }
}

/** A dump's self counts by function (`callgrind_annotate`): the compiler's and the collector's sums. */
function classed(file: string): Pick<Count, 'compiler' | 'gc'> {
  const r = spawnSync('callgrind_annotate', ['--threshold=100', '--inclusive=no', '--show=Ir', file], {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  const count = { compiler: 0, gc: 0 };
  for (const line of r.stdout.split('\n')) {
    const m = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.+)$/.exec(line);
    if (!m || m[2] === 'PROGRAM TOTALS') continue;
    const self = Number(m[1]!.replaceAll(',', ''));
    if (COMPILER.test(m[2]!)) count.compiler += self;
    else if (GC.test(m[2]!)) count.gc += self;
  }
  return count;
}

/**
 * The counts of callgrind's dumps named `prefix*`, each part summed (the exit dump after `-i off` is left out).
 * By thread (`--separate-threads`, dumps `prefix.1-01…`), thread 01 is the main thread: the work.
 */
function instructionsOf(prefix: string): Count {
  const sum: Count = { total: 0, work: 0, compiler: 0, gc: 0, misses: {}, lines: 0, hotLines: 0, hot: [] };
  const lines = new Map<string, number>();
  const names = BY_FUNCTION ? new Map<string, string>() : undefined;
  for (const f of readdirSync(work).filter((f) => f.startsWith(prefix))) {
    const dump = readFileSync(path.join(work, f), 'utf8');
    const events = summaryOf(dump);
    const total = events.Ir ?? 0;
    if (total === 0 || total >= 1e15) continue; // callgrind writes the exit dump as the negated last count
    sum.total += total;
    if (FOOTPRINT && (!BY_THREAD || f.endsWith('-01'))) codeLines(dump, lines, !BY_THREAD, names);
    if (BY_THREAD) {
      if (f.endsWith('-01')) sum.work += total;
    } else {
      const c = classed(path.join(work, f));
      sum.compiler += c.compiler;
      sum.gc += c.gc;
      sum.work += total - c.compiler - c.gc;
    }
    for (const e of MISS_EVENTS) if (events[e] !== undefined) sum.misses[e] = (sum.misses[e] ?? 0) + events[e];
  }
  sum.lines = lines.size;
  for (const [at, ir] of lines) {
    if (ir < REQUESTS) continue;
    sum.hotLines++;
    if (names) sum.hot.push({ at, fn: names.get(at)! });
  }
  return sum;
}

/** A dump's totals by event name, from its `events:` and `summary:` lines. */
function summaryOf(dump: string): Record<string, number> {
  const names = /^events: (.+)$/m.exec(dump)?.[1]?.trim().split(/\s+/) ?? [];
  const values = /^summary: (.+)$/m.exec(dump)?.[1]?.trim().split(/\s+/).map(Number) ?? [];
  return Object.fromEntries(names.map((n, i) => [n, values[i] ?? 0]));
}

/** Deno's launch flags with `--perf-map`'s V8 flag added to their one `--v8-flags` (Deno reads a single one). */
function withV8Flags(flags: readonly string[]): string[] {
  if (!PERF_MAP) return [...flags];
  const at = flags.findIndex((f) => f.startsWith('--v8-flags='));
  if (at < 0) return [...flags, '--v8-flags=--perf-basic-prof'];
  return flags.map((f, i) => (i === at ? `${f},--perf-basic-prof` : f));
}

/** What runs under callgrind for `tree` (`bare`: the bare Hono proxy) on `port`, on `RUNTIME`: command and arguments. */
async function gatewayCommand(tree: string, port: number, mockPort: number): Promise<[string, string[]]> {
  const up = `http://127.0.0.1:${mockPort}`;
  const bare = [path.join(ROOT, 'bench/bare-proxy.ts'), '--port', String(port), '--upstream', up, ...BARE_FLAGS];
  const config = ['--config', path.join(ROOT, 'bench/config/config.yaml')];
  switch (RUNTIME) {
    case 'deno':
      return [
        path.join(BIN, 'deno'),
        tree === 'bare'
          ? ['run', ...withV8Flags(['-A']), ...bare]
          : ['run', ...withV8Flags(await denoRunFlags(tree)), path.join(tree, 'runtimes/deno.ts'), ...config],
      ];
    default:
      return [
        process.execPath,
        [
          ...(PERF_MAP ? ['--perf-basic-prof'] : []),
          ...(tree === 'bare'
            ? ['--import', 'tsx', ...bare]
            : [...GATEWAY_FLAGS, path.join(tree, 'bin/sluice'), ...config]),
        ],
      ];
  }
}

/** One run: the tree's gateway under callgrind; its counts per counted request. */
async function run(tree: string, label: string, mockPort: number): Promise<Count> {
  const port = await freePort();
  const out = `cg-${label}-${Date.now()}`;
  const env = await benchGatewayEnv(mockPort, port);
  const [cmd, args] = await gatewayCommand(tree, port, mockPort);
  const gw = await startUntil(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      '--smc-check=all-non-file', // the JIT writes the code it runs
      ...(CACHE_SIM ? CACHES : []),
      ...(FOOTPRINT ? ['--dump-instr=yes', '--dump-line=no', '--compress-pos=no', '--compress-strings=no'] : []),
      ...(BY_THREAD ? ['--separate-threads=yes'] : []),
      `--callgrind-out-file=${path.join(work, out)}`,
      cmd,
      ...args,
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
  const perfMap = `/tmp/perf-${gw.pid}.map`;
  if (PERF_MAP) console.error(`instructions: ${label}: dump ${out}, V8's code map ${perfMap}`);
  const c = instructionsOf(out);
  const owners = BY_FUNCTION && existsSync(perfMap) ? codeOwners(c.hot, perfMap) : undefined;
  if (BY_FUNCTION && !has('perf-map')) rmSync(perfMap, { force: true });
  const misses = Object.fromEntries(Object.entries(c.misses).map(([e, n]) => [e, n / REQUESTS]));
  const per = (n: number) => n / REQUESTS;
  return {
    total: per(c.total),
    work: per(c.work),
    compiler: per(c.compiler),
    gc: per(c.gc),
    misses,
    lines: c.lines,
    hotLines: c.hotLines,
    hot: [],
    owners,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const fmt = (x: number) => Math.round(x).toLocaleString('en');

const mockPort = await startBenchMock();
const trees: [string, string][] = [
  ['this tree', ROOT],
  ...(BASELINE ? [['baseline', path.resolve(BASELINE)] as [string, string]] : []),
  ...(BARE ? [['bare proxy', 'bare'] as [string, string]] : []),
];
const runs = new Map<string, Count[]>(trees.map(([l]) => [l, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const [label, tree] of round % 2 ? [...trees].reverse() : trees) {
    const c = await run(tree, label.replace(' ', '-'), mockPort);
    runs.get(label)!.push(c);
    console.error(
      `instructions: round ${round + 1}/${ROUNDS} ${label}: ${fmt(c.total)} per ${UNIT}, work ${fmt(c.work)}`,
    );
  }
}
console.log(
  `\n${REQUESTS} counted ${UNIT}s per run after ${WARMUP} uncounted, ${IN_FLIGHT} in flight; ${
    RUNTIME === 'deno' ? 'Deno' : 'Node'
  } gateway under callgrind.`,
);
console.log(
  BY_THREAD
    ? "Work: the main thread's instructions; the other threads (the compilers, the collector's helpers) apart.\n"
    : 'Work: the total less the optimising compiler and the collector, which move by far more than a change does.\n',
);
console.log(
  `| tree | instructions per ${UNIT}, by run | median | work, by run | median | ${
    BY_THREAD ? 'other threads | — |' : 'compiler | collector |'
  }`,
);
console.log('| --- | --- | ---: | --- | ---: | ---: | ---: |');
for (const [label, tree] of trees) {
  const cs = runs.get(label)!;
  const rev = tree === 'bare'
    ? 'bench/bare-proxy.ts'
    : spawnSync('git', ['-C', tree, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim();
  const totals = cs.map((c) => c.total);
  const works = cs.map((c) => c.work);
  console.log(
    `| ${label} (${rev}) | ${totals.map(fmt).join(', ')} | ${fmt(median(totals))} | ${works.map(fmt).join(', ')} | ${
      fmt(median(works))
    } | ${
      BY_THREAD
        ? `${fmt(median(cs.map((c) => c.total - c.work)))} | —`
        : `${fmt(median(cs.map((c) => c.compiler)))} | ${fmt(median(cs.map((c) => c.gc)))}`
    } |`,
  );
}
if (CACHE_SIM) {
  console.log(`\nSimulated cache misses per ${UNIT} (medians of the runs): ${CACHES.slice(1).join(' ')}.\n`);
  console.log(`| tree | ${MISS_EVENTS.join(' | ')} |`);
  console.log(`| --- | ${MISS_EVENTS.map(() => '---:').join(' | ')} |`);
  for (const [label] of trees) {
    const cs = runs.get(label)!;
    console.log(`| ${label} | ${MISS_EVENTS.map((e) => fmt(median(cs.map((c) => c.misses[e] ?? 0)))).join(' | ')} |`);
  }
}
if (FOOTPRINT) {
  console.log(
    `\nCode the work ran in the ${REQUESTS} counted ${UNIT}s: distinct 64-byte lines, and of them the lines that ran ` +
      `at least ${REQUESTS} instructions (about once per ${UNIT} or more), by run; medians in KiB.\n`,
  );
  console.log('| tree | lines, by run | KiB | run about once per request or more, by run | KiB |');
  console.log('| --- | --- | ---: | --- | ---: |');
  const kib = (n: number) => fmt(n * 64 / 1024);
  for (const [label] of trees) {
    const all = runs.get(label)!.map((c) => c.lines);
    const hot = runs.get(label)!.map((c) => c.hotLines);
    console.log(
      `| ${label} | ${all.map(fmt).join(', ')} | ${kib(median(all))} | ${hot.map(fmt).join(', ')} | ${
        kib(median(hot))
      } |`,
    );
  }
}
if (BY_FUNCTION) {
  for (const [label] of trees) {
    const owners = runs.get(label)!.at(-1)!.owners;
    if (!owners) {
      console.log(`\n${label}: no code map to name its hot lines by (V8's /tmp/perf-<pid>.map)`);
      continue;
    }
    const groups = new Map<string, number>();
    for (const o of owners) groups.set(o.group, (groups.get(o.group) ?? 0) + o.lines);
    console.log(`\n${label}, its last run's hot lines by whose code they are:\n`);
    console.log('| code | hot lines |\n| --- | ---: |');
    for (const [g, n] of [...groups].sort((a, b) => b[1] - a[1])) console.log(`| ${g} | ${fmt(n)} |`);
    console.log(`\n${label}, the ${BY_FUNCTION} functions with the most hot lines:\n`);
    console.log('| function | code | hot lines |\n| --- | --- | ---: |');
    for (const o of owners.slice(0, BY_FUNCTION)) console.log(`| ${o.name} | ${o.group} | ${o.lines} |`);
  }
}
if (BY_FUNCTION && trees.length > 1) {
  const [mine, other] = [runs.get('this tree')!.at(-1)!.owners, runs.get(trees.at(-1)![0])!.at(-1)!.owners];
  if (mine && other) {
    const key = (o: OwnedFunction) => `${o.group}\0${o.name}`;
    const theirs = new Map(other.map((o) => [key(o), o.lines]));
    const rows = mine.map((o) => ({ o, d: o.lines - (theirs.get(key(o)) ?? 0) }));
    const ours = new Set(mine.map(key));
    for (const o of other) if (!ours.has(key(o))) rows.push({ o: { ...o, lines: 0 }, d: -o.lines });
    rows.sort((a, b) => Math.abs(b.d) - Math.abs(a.d));
    console.log(`\nthis tree against ${trees.at(-1)![0]}: the ${BY_FUNCTION} functions whose hot lines differ most:\n`);
    console.log(
      `| function | code | this tree | ${trees.at(-1)![0]} | difference |\n| --- | --- | ---: | ---: | ---: |`,
    );
    for (const { o, d } of rows.slice(0, BY_FUNCTION)) {
      console.log(`| ${o.name} | ${o.group} | ${o.lines} | ${o.lines - d} | ${d > 0 ? '+' : ''}${d} |`);
    }
  }
}
/** The medians of `label`'s totals and work. */
const medians = (label: string) => {
  const cs = runs.get(label)!;
  return { total: median(cs.map((c) => c.total)), work: median(cs.map((c) => c.work)) };
};
if (BASELINE) {
  const [a, b] = [medians('this tree'), medians('baseline')];
  console.log(
    `\nthis tree ÷ baseline: ${(a.total / b.total).toFixed(3)}× instructions per ${UNIT}, ${
      (a.work / b.work).toFixed(3)
    }× work`,
  );
}
if (BARE) {
  const [a, b] = [medians('this tree'), medians('bare proxy')];
  console.log(
    `\nthis tree less the bare proxy: ${fmt(a.total - b.total)} instructions per ${UNIT}, ${
      fmt(a.work - b.work)
    } of work`,
  );
}
process.exit(0);
